/* clformer/tokenizer.h - tokenizers: one interface, two kinds.
 *
 * WORD LEVEL (CLF_TOKENIZER_WORD_LEVEL): the tokenizer of the pytorch-transformer tutorial,
 * read from and written to the tokenizers library's tokenizer.json (described below).
 *
 * SENTENCEPIECE (CLF_TOKENIZER_SENTENCEPIECE): a SentencePiece model (.model file, a
 * serialized ModelProto), handled entirely by the SentencePiece library (libsentencepiece):
 * encode is its Encode (normalization, pieces, unknown text -> its unk id), decode its
 * Decode (detokenization: pieces joined and U+2581 turned back into spaces), id/word are
 * its PieceToId/IdToPiece (id -1 for a piece the model lacks, although the library's
 * Encode maps such text to unk), size its GetPieceSize. Specials: unk = unk_id, sos =
 * bos_id, eos = eos_id, pad = pad_id of the model; a special the model disables is -1
 * there, exactly as for a word-level vocabulary lacking it, and the callers that need it
 * refuse with their usual message (training needs pad, sos and eos; translation sos and
 * eos). The special tokens (clf_tokenizer_is_special, dropped by decode's skip_specials)
 * are the unknown piece and the control pieces (<s>, </s>, <pad>, ...); decode without
 * skip_specials hands them to the library, which writes nothing for control pieces and
 * " \u2047 " for unk. Invalid UTF-8 is refused before the library sees it, with the word
 * level's message. Saving writes the model's bytes back (temporary name, fsync, rename).
 *
 * Which kind clf_tokenizer_load reads, by the file: content first, then the name. A file
 * whose first byte other than ASCII white space is '{' is tokenizer JSON; otherwise a file
 * whose first byte is 0x0A (field 1, the pieces, with which a ModelProto starts) or whose
 * name ends in ".model" or ".spm" is SentencePiece; anything else (or an unreadable file
 * with another name) is read as JSON and refused with the JSON messages.
 *
 * The word-level kind in detail:
 *
 * Compatible with the HuggingFace `tokenizers` library as the tutorial sets it up:
 *
 *     tok = Tokenizer(WordLevel(unk_token="[UNK]"))
 *     tok.pre_tokenizer = Whitespace()
 *     tok.train_from_iterator(lines, WordLevelTrainer(
 *         special_tokens=["[UNK]", "[PAD]", "[SOS]", "[EOS]"], min_frequency=2))
 *     tok.save("tokenizer.json")
 *
 * Words are what the library's Whitespace pre-tokenizer cuts (the regex \w+|[^\w\s]+):
 * maximal runs of word characters, or of characters that are neither word characters nor
 * white space; white space separates. "Hello, world!" is Hello , world ! and "ab.." is ab ..
 * Word characters are ASCII letters, digits and '_', and the non-ASCII code points the
 * library counts as \w (letters, marks, decimal digits, letter numbers, connector
 * punctuation, joiners: e.g. "Grüße", "Привет", "你好" are words; "，" "。" "€" "½" and
 * emoji are not). The table behind that was generated from the library itself (0.23.3) and
 * agrees with it on every code point. White space: tab..CR, space, U+0085, U+00A0,
 * U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
 *
 * Vocabulary (clf_tokenizer_build*): [UNK]=0 [PAD]=1 [SOS]=2 [EOS]=3, then every word seen
 * at least min_freq times, by count descending, ties by the word's UTF-8 bytes ascending
 * (the library's WordLevelTrainer sorts exactly so), cut at vocab_size entries in all (the
 * library's default is 30000, which the tutorial keeps).
 *
 * Encoding, as the library's Tokenizer.encode: first the added tokens (the four specials of
 * a built tokenizer; a loaded file's "added_tokens") are cut out of the raw text wherever
 * they occur, leftmost and longest first ("a [SOS]b" is a, [SOS], b); the rest is
 * pre-tokenized as above and every word not in the vocabulary becomes [UNK]. Decoding
 * joins the words by single spaces (the library with no decoder).
 *
 * Files are the library's tokenizer.json: written byte for byte as the library's
 * Tokenizer.save writes them (pretty-printed, non-ASCII as raw UTF-8, ids in order);
 * read in any key order, extra keys ignored. A file must describe this tokenizer: model
 * "WordLevel", pre_tokenizer "Whitespace", no normalizer, post_processor or decoder, and
 * added tokens without lstrip/rstrip/single_word; anything else is refused with a message
 * naming the file and the part, since encoding it here would silently differ. "truncation"
 * and "padding" are ignored (the runtime pads and cuts itself). The ids of model.vocab and
 * added_tokens together must be 0..n-1, each once.
 *
 * Every function that can fail returns a clf_status and has recorded the message
 * (clf_last_error()). A tokenizer is immutable after creation: share it across threads. */
#ifndef CLFORMER_TOKENIZER_H
#define CLFORMER_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "clformer/config.h"
#include "clformer/export.h"
#include "clformer/framing.h"
#include "clformer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The tutorial's WordLevelTrainer(min_frequency=2). */
#define CLF_TOKENIZER_MIN_FREQUENCY 2
/* The library's WordLevelTrainer default vocab_size (the specials included). */
#define CLF_TOKENIZER_VOCAB_SIZE 30000

/* The readers' limits (README, "Limits"): a file that claims more is refused with one line
 * naming the file and the limit. File sizes are checked before the file is read. */
#define CLF_TOKENIZER_JSON_MAX   ((size_t)256 << 20) /* tokenizer.json bytes */
#define CLF_TOKENIZER_SPM_MAX    ((size_t)256 << 20) /* SentencePiece .model bytes */
#define CLF_TOKENIZER_VOCAB_MAX  (1 << 24)           /* ids of either kind (model.*_vocab's) */
#define CLF_TOKENIZER_CORPUS_MAX ((size_t)4 << 30)   /* clf_tokenizer_build_file's text */

typedef struct clf_tokenizer clf_tokenizer;

typedef enum clf_tokenizer_kind {
    CLF_TOKENIZER_WORD_LEVEL = 0,   /* tokenizers-library WordLevel JSON */
    CLF_TOKENIZER_SENTENCEPIECE = 1 /* SentencePiece .model */
} clf_tokenizer_kind;

/* Ids of the tutorial's specials, looked up by name ([UNK] is the model's unk_token);
 * -1 for one the vocabulary lacks. */
typedef struct clf_tokenizer_specials {
    int32_t unk, pad, sos, eos;
} clf_tokenizer_specials;

/* Builds a vocabulary from n NUL-terminated UTF-8 lines, keeping words seen at least
 * min_freq (>= 0; 0 and 1 keep every word) times, at most CLF_TOKENIZER_VOCAB_SIZE ids.
 * A line that is not valid UTF-8: CLF_ERR_INPUT "line 3 is not valid UTF-8 at byte 7"
 * (lines count from 1, bytes from 0). */
CLF_API clf_status clf_tokenizer_build(const char *const *lines, size_t n, int min_freq,
                                       clf_tokenizer **out);
/* The same with another size cap: vocab_size >= 4 ids in all, or 0 for no cap. */
CLF_API clf_status clf_tokenizer_build_sized(const char *const *lines, size_t n, int min_freq,
                                             int vocab_size, clf_tokenizer **out);
/* The same from a text file, one sentence per line ('\n'; a '\r' before it is white
 * space anyway). CLF_ERR_IO when it cannot be read; messages start with the path. */
CLF_API clf_status clf_tokenizer_build_file(const char *path, int min_freq, clf_tokenizer **out);

/* Trains a SentencePiece model with the library's trainer on the text files
 * paths[0..n_paths) (one sentence per line; several files make one joint vocabulary):
 * vocab_size pieces in all (>= 5; the trainer refuses a size the text cannot fill),
 * model_type "unigram" or "bpe", the library's defaults otherwise. Ids: <unk> 0, <pad> 1,
 * <s> 2, </s> 3 (those of the word level's [UNK] [PAD] [SOS] [EOS], so a model config's
 * default pad_id fits either kind), then the pieces. Save it with clf_tokenizer_save. CLF_ERR_IO
 * for an unreadable file, CLF_ERR_INPUT with the trainer's message when it refuses. */
CLF_API clf_status clf_tokenizer_train_sentencepiece(const char *const *paths, int n_paths,
                                                     int vocab_size, const char *model_type,
                                                     clf_tokenizer **out);

/* Reads a tokenizer file of either kind (which one: see above). Word level: CLF_ERR_IO
 * when unreadable, CLF_ERR_INPUT for invalid JSON or a file that is not this tokenizer.
 * SentencePiece: CLF_ERR_IO when unreadable, CLF_ERR_INPUT "<path>: not a valid
 * SentencePiece model: <the library's reason>" for an empty, truncated or corrupt one. */
CLF_API clf_status clf_tokenizer_load(const char *path, clf_tokenizer **out);
/* A SentencePiece model whose pieces take their ids from a separate piece vocabulary, as
 * Marian's tokenizer does (source.spm / target.spm with one shared vocab.json, a JSON
 * object {"piece": id} with ids 0..n-1): encode cuts the text into the model's pieces
 * (their text, as Python's encode(out_type=str)) and looks each up in the vocabulary,
 * unknown ones becoming <unk>; decode turns ids back into pieces, leaves out the specials
 * (<unk> <pad> <s> </s>) with skip_specials, joins them with the model's Decode and strips
 * leading and trailing spaces. Size, id/word lookups and the specials (by those names;
 * -1 when absent) are the vocabulary's. Moses punctuation normalization, which
 * transformers' MarianTokenizer applies when sacremoses is installed, is not done, nor are
 * >>lang<< codes split off. CLF_ERR_IO / CLF_ERR_INPUT naming the file that is unreadable
 * or invalid. Such a tokenizer cannot be saved (copy the two files). */
CLF_API clf_status clf_tokenizer_load_mapped(const char *spm_path, const char *vocab_path,
                                             clf_tokenizer **out);
/* Writes tok to path (path.tmp.<pid>, fsync, rename: never a half file): word level as the
 * tokenizers library would write it, SentencePiece as the model's bytes. */
CLF_API clf_status clf_tokenizer_save(const clf_tokenizer *tok, const char *path);
CLF_API void clf_tokenizer_free(clf_tokenizer *tok); /* NULL is fine */

/* Token ids of text[0..len) (UTF-8, no NUL needed; NULs inside are ordinary characters).
 * *ids is malloc'd (free() it; NULL when *n is 0, e.g. for an empty or all-blank line).
 * Invalid UTF-8: CLF_ERR_INPUT "line is not valid UTF-8 at byte N" (N from 0). A word not
 * in the vocabulary when the vocabulary has no unk_token: CLF_ERR_INPUT naming it. */
CLF_API clf_status clf_tokenizer_encode(const clf_tokenizer *tok, const char *text, size_t len,
                                        int32_t **ids, int *n);
/* The words of ids[0..n) joined by single spaces, as a malloc'd NUL-terminated string
 * (free() it). skip_specials drops the special tokens (the library's
 * skip_special_tokens=True). An id outside [0, size): CLF_ERR_INPUT naming it. */
CLF_API clf_status clf_tokenizer_decode(const clf_tokenizer *tok, const int32_t *ids, int n,
                                        int skip_specials, char **text);

/* Id of a word (NUL-terminated), or -1 when absent. Hash lookup: O(length). */
CLF_API int32_t clf_tokenizer_id(const clf_tokenizer *tok, const char *word);
/* The same for word[0..len). */
CLF_API int32_t clf_tokenizer_id_n(const clf_tokenizer *tok, const char *word, size_t len);
/* The word of an id (NUL-terminated, owned by tok), or NULL when out of range. */
CLF_API const char *clf_tokenizer_word(const clf_tokenizer *tok, int32_t id);
/* Which kind tok is. */
CLF_API clf_tokenizer_kind clf_tokenizer_get_kind(const clf_tokenizer *tok);
/* Whether path's name says SentencePiece (ends in ".model" or ".spm"): the rule
 * clf_tokenizer_load falls back on when the content does not decide, for callers that
 * must choose before the file exists. */
CLF_API int clf_tokenizer_name_is_sentencepiece(const char *path);
/* Number of ids (specials included). */
CLF_API int clf_tokenizer_size(const clf_tokenizer *tok);
CLF_API clf_tokenizer_specials clf_tokenizer_special_ids(const clf_tokenizer *tok);
/* The framing two vocabularies alone give (see clf_model_framing, which resolves the
 * model's keys over it): src [SOS] x [EOS], tgt_in [SOS] y, labels y [EOS], each side padded
 * with its own [PAD]; -1 for a token the vocabulary lacks, and for a NULL tokenizer's. */
CLF_API clf_framing clf_tokenizer_framing(const clf_tokenizer *src, const clf_tokenizer *tgt);
/* 1 when id is a special token (an added token marked "special"), else 0. */
CLF_API int clf_tokenizer_is_special(const clf_tokenizer *tok, int32_t id);

/* transformers' clean_up_tokenization, which its decode() applies to the text of a tokenizer
 * whose clean_up_tokenization_spaces is true (the default of transformers 4.40, and
 * model.clean_up_spaces of an imported model): " ." " ?" " !" " ," lose their space, " ' "
 * becomes "'", and " n't" " 'm" " 's" " 've" " 're" lose theirs, replacement after
 * replacement in that order, each over the whole text, left to right and not overlapping
 * (Python's str.replace). In place (the text only shrinks); NULL is fine. */
CLF_API void clf_text_clean_up_spaces(char *text);

/* The id in tok of the token of a many-language model's language code (M2M-100's "de",
 * NLLB's "deu_Latn", mBART-50's "de_DE"), the one lookup of translate's --source-lang /
 * --target-lang and train's source_lang / target_lang. side 0 is the source, 1 the
 * target: the model (cfg's model: section) must place that side's language token
 * (model.source_language / target_language), code must be one of the languages: section's
 * codes of that side, and its token, languages.token_prefix code languages.token_suffix,
 * must be in tok (vocab: tok's file, for the message). CLF_ERR_INPUT otherwise, one line
 * without a caller's prefix ("target language 'xx' is not one of the model's 100
 * (`clformer info -m DIR` lists them)"); *id is then -1. */
CLF_API clf_status clf_tokenizer_language_id(const clf_tokenizer *tok, const clf_config *cfg,
                                             int side, const char *code, const char *vocab,
                                             int32_t *id);

#ifdef __cplusplus
}
#endif
#endif
