/* clformer/dataset.h - parallel training data: sentence pairs, tokenized, cut into batches.
 *
 * Files. Either one TSV file, "source<TAB>target" per line, or two line-aligned files
 * (line i of the target file translates line i of the source file). UTF-8,
 * lines end with '\n' (a '\r' before it is dropped: CRLF files read the same), the last
 * line may lack it. Lines count from 1 in every message.
 *
 * Which lines become pairs, in file order:
 *   - a line that is not valid UTF-8, holds a NUL byte or is longer than
 *     CLF_DATASET_LINE_MAX bytes: error "<path>:<line>: ..."
 *   - a TSV line with no TAB or more than one: error, unless it is blank (white space
 *     only), which is an empty pair (below)
 *   - two files with different line counts: error naming both counts
 *   - an empty pair (either side has no tokens: a blank line, "text<TAB>", ...): skipped,
 *     counted in clf_dataset_skipped_empty()
 *   - a pair longer than max_len (src ids + 2 > max_len for [SOS] x [EOS], or tgt ids + 1 >
 *     max_len for [SOS] y and y [EOS]; with a framing that leaves out the source's bos or
 *     eos, src ids + 1 or + 0): skipped, counted in clf_dataset_skipped_long()
 *   - no pair left at all: error (training or validating on nothing is never meant)
 * Vocabularies (clf_dataset_build_vocabs) count the words of every line, long or not, so
 * that changing max_len does not change the ids of a vocabulary built from the same data.
 *
 * Batches. Every batch is framed as the tutorial's BilingualDataset frames one sentence:
 *     src    [SOS] x [EOS] [PAD]...   encoder input
 *     tgt_in [SOS] y [PAD]...         decoder input
 *     labels y [EOS] [PAD]...         what the decoder predicts at each position
 * padded to the longest of the batch on each side (not to max_len). [PAD]/[SOS]/[EOS] ids
 * are the tokenizers' own (src side from src_tok, target side from tgt_tok), or those of
 * the framing given to clf_dataset_load_framed (clf_model_framing: the model's special-
 * token keys, the ones `clformer translate` frames with), where the source's [SOS] or
 * [EOS] may be left out and the decoder may start from another id (Marian: src x </s>,
 * tgt_in <pad> y, labels y </s>). Token counts and max_len count the ids actually there.
 *
 * An epoch's plan is a pure function of (dataset, batch options, seed, epoch): a run resumed
 * at epoch e sees the batches it would have seen, in the same order, and nothing else (no
 * other random draw, no thread count) moves it. Every kept pair is in exactly one batch of
 * every epoch; no pair is dropped for not filling a batch.
 *   batch_size mode (batch_tokens 0): shuffle on, a random permutation of the pairs cut into
 *     batches of batch_size (the last one smaller); shuffle off, the same in file order.
 *   token mode (batch_tokens > 0): a batch of n pairs whose longest side is L tokens keeps
 *     n * L <= batch_tokens (that is the padded size of its larger tensor). Shuffle on: the
 *     pairs in random order, stably sorted by length (max of src and target length), cut
 *     greedily, and the batches put in random order (similar lengths share a batch, so
 *     little padding; ties fall differently each epoch). Shuffle off: file order, cut
 *     greedily (exactly reproducible against a reference that reads the file in order).
 *     A pair longer than batch_tokens alone becomes a batch of one, over the budget: it is
 *     never silently dropped, and clf_batcher_oversized() counts such pairs so that the
 *     caller can warn (raise batch_tokens to at least max_len to have none).
 *
 * Every fallible function returns a clf_status with the message recorded
 * (clf_last_error()). A dataset is immutable after loading; a batcher belongs to one thread
 * at a time and must not outlive its dataset. */
#ifndef CLFORMER_DATASET_H
#define CLFORMER_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "clformer/export.h"
#include "clformer/status.h"
#include "clformer/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The reader's limits (README, "Limits"): a file is read whole, and one of more than
 * CLF_DATASET_FILE_MAX bytes is refused before it is read; a line of more than
 * CLF_DATASET_LINE_MAX bytes (a sentence is < 1 KB: such a line is a binary or a file
 * without line breaks) is an error naming the file and line. */
#define CLF_DATASET_FILE_MAX ((size_t)4 << 30)
#define CLF_DATASET_LINE_MAX (1 << 20)

typedef struct clf_dataset clf_dataset;

typedef struct clf_dataset_opts {
    const char *src_path; /* TSV "source<TAB>target" per line when tgt_path is NULL or "" */
    const char *tgt_path; /* else: two line-aligned files, src_path the source side */
    /* need [PAD] [SOS] [EOS] (without a framing); must outlive load only */
    const clf_tokenizer *src_tok, *tgt_tok;
    int max_len; /* longest framed side kept (see above), >= 2; 0 = no limit */
} clf_dataset_opts;

/* Reads, checks and tokenizes the pairs. CLF_ERR_IO when a file cannot be read,
 * CLF_ERR_INPUT for bad lines (messages "<path>:<line>: <why>") and missing specials. */
CLF_API clf_status clf_dataset_load(const clf_dataset_opts *o, clf_dataset **out);
/* The same with the batches framed by *framing (clf_model_framing's; NULL: the
 * tokenizers' own, as clf_dataset_load). Every id but src_bos and src_eos must be set
 * (>= 0), and the language of a placed source or forced target language token; the
 * tokenizers need no specials of their own. */
CLF_API clf_status clf_dataset_load_framed(const clf_dataset_opts *o, const clf_framing *framing,
                                           clf_dataset **out);
CLF_API void clf_dataset_free(clf_dataset *d); /* NULL is fine */

CLF_API size_t clf_dataset_size(const clf_dataset *d);          /* pairs kept */
CLF_API size_t clf_dataset_skipped(const clf_dataset *d);       /* lines skipped: long + empty */
CLF_API size_t clf_dataset_skipped_long(const clf_dataset *d);  /* pairs over max_len */
CLF_API size_t clf_dataset_skipped_empty(const clf_dataset *d); /* pairs with an empty side */

/* Raw text of pair i < size (NUL-terminated, owned by d; no '\r', no '\n'), for validation
 * BLEU and sample translations. */
CLF_API void clf_dataset_text(const clf_dataset *d, size_t i, const char **src, const char **tgt);
/* Token ids of pair i without specials (owned by d), and their counts (> 0). */
CLF_API void clf_dataset_ids(const clf_dataset *d, size_t i, const int32_t **src, int *src_n,
                             const int32_t **tgt, int *tgt_n);
/* The line (from 1) pair i came from, for messages. */
CLF_API size_t clf_dataset_line(const clf_dataset *d, size_t i);

/* Builds the source and target vocabularies from a training file (or pair of files) as
 * clf_tokenizer_build does, with the same line checks and messages as clf_dataset_load.
 * *src and *tgt are both set on success, both NULL on failure. */
CLF_API clf_status clf_dataset_build_vocabs(const char *src_path, const char *tgt_path,
                                            int min_freq, clf_tokenizer **src, clf_tokenizer **tgt);

typedef struct clf_batch {
    int batch, src_len, tgt_len;
    /* with a framing (clformer/framing.h's clf_framing): the ids named there, language
     * tokens included */
    int32_t *src;    /* [batch, src_len]  [SOS] x [EOS] [PAD]...  */
    int32_t *tgt_in; /* [batch, tgt_len]  [SOS] y [PAD]...        (decoder input) */
    int32_t *labels; /* [batch, tgt_len]  y [EOS] [PAD]...        (what the decoder predicts) */
    long long src_tokens, tgt_tokens; /* non-pad counts (tgt_tokens = non-pad labels) */
    size_t *index;                    /* [batch] dataset indices of the pairs */
} clf_batch;
/* Frees the arrays and zeroes *b (a zeroed or freed batch is fine). */
CLF_API void clf_batch_free(clf_batch *b);

typedef struct clf_batcher clf_batcher;

/* batch_size >= 1 pairs per batch when batch_tokens is 0; batch_tokens > 0: token mode
 * (batch_size then unused). The plan of epoch 0 is made here. */
CLF_API clf_status clf_batcher_create(const clf_dataset *d, int batch_size, int batch_tokens,
                                      int shuffle, uint64_t seed, clf_batcher **out);
CLF_API void clf_batcher_free(clf_batcher *b); /* NULL is fine */
/* Plans epoch (>= 0); a pure function of (seed, epoch), so a resumed run sees the same
 * batches. */
CLF_API clf_status clf_batcher_plan_epoch(clf_batcher *b, int epoch);
CLF_API int clf_batcher_count(const clf_batcher *b); /* batches in the planned epoch */
CLF_API int clf_batcher_epoch(const clf_batcher *b); /* the planned epoch */
/* Pairs of the planned epoch that alone exceed batch_tokens (each a batch of one). */
CLF_API size_t clf_batcher_oversized(const clf_batcher *b);
/* The i-th batch (0 <= i < count) of the planned epoch into *out, freshly allocated:
 * *out is not read, release it with clf_batch_free. On failure *out is zeroed. */
CLF_API clf_status clf_batcher_get(const clf_batcher *b, int i, clf_batch *out);

#ifdef __cplusplus
}
#endif
#endif
