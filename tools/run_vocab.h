/* The vocabularies of a training run (train.vocab.src / train.vocab.tgt of the YAML).
 *
 * Loaded when both exist; else built from the training data (word-level, min_frequency)
 * and saved, each with its provenance beside it, <vocabulary>.provenance: a JSON object
 * naming the data file(s) it was built from with their sizes and FNV-1a 64 hashes
 * (clformer/hash.h) and the min_frequency. A vocabulary that has a provenance file is
 * checked against this run's data and options before it is used, and refused when they
 * differ (a run that failed after writing its vocabularies, then run again on other data,
 * would otherwise read every word as [UNK]); one without (made by `clformer vocab`, by
 * Python, SentencePiece, or a run of an older clformer) is used as given.
 *
 * No vocabulary without words is written: data with no word on a side (an empty file, only
 * blank or tab-only lines) is refused before anything is saved. */
#ifndef CLF_RUN_VOCAB_H
#define CLF_RUN_VOCAB_H

#include "clformer/config.h"
#include "clformer/status.h"
#include "clformer/tokenizer.h"

/* Suffix of a vocabulary's provenance file. */
#define RUN_VOCAB_PROVENANCE ".provenance"

/* *src and *tgt from tc's vocabularies as above. On failure both are NULL and the message
 * names the file and what is wrong with it. */
clf_status run_vocabs_load_or_build(const clf_train_config *tc, clf_tokenizer **src,
                                    clf_tokenizer **tgt);

#endif
