/* clformer vocab: vocabularies from text, word-level (tokenizers-library WordLevel JSON)
 * or SentencePiece (.model, trained by the library's trainer).
 *
 *   clformer vocab -o vocab.json [--min-frequency N] FILE
 *       one sentence per line (the tutorial's build_tokenizer on one language);
 *   clformer vocab --src-out s.json --tgt-out t.json [--min-frequency N] TRAIN.tsv | SRC TGT
 *       both sides of training data, exactly as `clformer train` builds them;
 *   clformer vocab --sentencepiece --vocab-size N [--model-type unigram|bpe] -o spm.model DATA...
 *       one joint SentencePiece model from text files, one sentence per line;
 *   clformer vocab --sentencepiece --vocab-size N [--model-type T] --src-out s.model
 *                  --tgt-out t.model SRC TGT
 *       one model per side.
 * Files are written under a temporary name and renamed. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clformer/dataset.h"
#include "clformer/tokenizer.h"

enum { OPT_MIN_FREQ = 256, OPT_SRC_OUT, OPT_TGT_OUT, OPT_SPM, OPT_VOCAB_SIZE, OPT_MODEL_TYPE };

static void usage(void)
{
    printf("usage: clformer vocab -o vocab.json [--min-frequency N] FILE\n"
           "       clformer vocab --src-out s.json --tgt-out t.json [--min-frequency N] "
           "TRAIN.tsv | SRC TGT\n"
           "Word-level vocabularies ([UNK] [PAD] [SOS] [EOS] = 0..3, then the words seen at\n"
           "least --min-frequency times, default %d) as tokenizers-library JSON.\n"
           "       clformer vocab --sentencepiece --vocab-size N [--model-type unigram|bpe]\n"
           "                      -o spm.model DATA... | --src-out s.model --tgt-out t.model "
           "SRC TGT\n"
           "SentencePiece models trained by the library (<unk> <pad> <s> </s> = 0..3, then\n"
           "the pieces; model type default unigram): one joint model from all DATA files,\n"
           "or one per side.\n",
           CLF_TOKENIZER_MIN_FREQUENCY);
}

/* Trains one SentencePiece model per output (n_out 1: on all files; 2: on file i for
 * output i), then writes them: a refused training writes nothing. */
static clf_status train_spm(char *const *files, int n_files, const char *const *outs, int n_out,
                            int vocab_size, const char *type)
{
    clf_tokenizer *tok[2] = {NULL, NULL};
    clf_status st = CLF_OK;
    for (int i = 0; i < n_out && st == CLF_OK; i++)
        st = clf_tokenizer_train_sentencepiece((const char *const *)files + (n_out == 1 ? 0 : i),
                                               n_out == 1 ? n_files : 1, vocab_size, type, &tok[i]);
    for (int i = 0; i < n_out && st == CLF_OK; i++)
        st = clf_tokenizer_save(tok[i], outs[i]);
    for (int i = 0; i < n_out; i++) {
        if (st == CLF_OK)
            fprintf(stderr, "clformer: %s: %d pieces (SentencePiece %s)\n", outs[i],
                    clf_tokenizer_size(tok[i]), type);
        clf_tokenizer_free(tok[i]);
    }
    return st;
}

static int cmd_sentencepiece(int argc, char **argv, const char *out, const char *src_out,
                             const char *tgt_out, int vocab_size, const char *type)
{
    const int files = argc - optind;
    clf_status st;
    if (vocab_size <= 0)
        return cli_usage_error("vocab: --sentencepiece needs --vocab-size N");
    if (out && !src_out && !tgt_out) {
        if (files < 1)
            return cli_usage_error("vocab: --sentencepiece -o takes one or more text files");
        st = train_spm(argv + optind, files, &out, 1, vocab_size, type);
    } else if (!out && src_out && tgt_out) {
        if (files != 2)
            return cli_usage_error("vocab: --sentencepiece --src-out/--tgt-out take two "
                                   "files (SRC TGT), got %d",
                                   files);
        const char *outs[2] = {src_out, tgt_out};
        st = train_spm(argv + optind, files, outs, 2, vocab_size, type);
    } else {
        return cli_usage_error("vocab: give either -o FILE, or both --src-out and --tgt-out");
    }
    return st == CLF_OK ? 0 : cli_fail(st);
}

/* --model-type: unigram or bpe */
static int take_model_type(const char *value, void *to)
{
    if (strcmp(value, "unigram") != 0 && strcmp(value, "bpe") != 0)
        return !cli_usage_error("--model-type: expected unigram or bpe, got '%s'", value);
    *(const char **)to = value;
    return 1;
}

int clf_cmd_vocab(int argc, char **argv)
{
    const char *out = NULL, *src_out = NULL, *tgt_out = NULL;
    const char *model_type = "unigram";
    int min_freq = CLF_TOKENIZER_MIN_FREQUENCY, min_freq_given = 0;
    int sentencepiece = 0, vocab_size = 0;
    const cli_opt opts[] = {
        CLI_STRING("output", 'o', &out),
        {"min-frequency", OPT_MIN_FREQ, CLI_OPT_INT, &min_freq, .set = &min_freq_given},
        CLI_STRING("src-out", OPT_SRC_OUT, &src_out),
        CLI_STRING("tgt-out", OPT_TGT_OUT, &tgt_out),
        CLI_FLAG("sentencepiece", OPT_SPM, &sentencepiece),
        CLI_INT("vocab-size", OPT_VOCAB_SIZE, &vocab_size, 5),
        {"model-type", OPT_MODEL_TYPE, CLI_OPT_STRING, &model_type, .take = take_model_type},
        {0}};
    int rc = cli_parse_options(argc, argv, opts, usage);
    if (rc >= 0)
        return rc;
    if (sentencepiece) {
        if (min_freq_given)
            return cli_usage_error("vocab: --min-frequency is for word-level vocabularies, "
                                   "not --sentencepiece");
        return cmd_sentencepiece(argc, argv, out, src_out, tgt_out, vocab_size, model_type);
    }
    if (vocab_size || strcmp(model_type, "unigram") != 0)
        return cli_usage_error("vocab: --vocab-size and --model-type need --sentencepiece");
    const int files = argc - optind;
    clf_tokenizer *a = NULL, *b = NULL;
    clf_status st;
    if (out && !src_out && !tgt_out) {
        if (files != 1)
            return cli_usage_error("vocab: -o takes exactly one text file, got %d", files);
        st = clf_tokenizer_build_file(argv[optind], min_freq, &a);
        if (st == CLF_OK)
            st = clf_tokenizer_save(a, out);
        if (st == CLF_OK)
            fprintf(stderr, "clformer: %s: %d ids\n", out, clf_tokenizer_size(a));
    } else if (!out && src_out && tgt_out) {
        if (files < 1 || files > 2)
            return cli_usage_error("vocab: --src-out/--tgt-out take a TSV file or two "
                                   "line-aligned files, got %d files",
                                   files);
        st = clf_dataset_build_vocabs(argv[optind], files == 2 ? argv[optind + 1] : NULL, min_freq,
                                      &a, &b);
        if (st == CLF_OK && (st = clf_tokenizer_save(a, src_out)) == CLF_OK)
            st = clf_tokenizer_save(b, tgt_out);
        if (st == CLF_OK)
            fprintf(stderr, "clformer: %s: %d ids, %s: %d ids\n", src_out, clf_tokenizer_size(a),
                    tgt_out, clf_tokenizer_size(b));
    } else {
        return cli_usage_error("vocab: give either -o FILE, or both --src-out and --tgt-out");
    }
    clf_tokenizer_free(a);
    clf_tokenizer_free(b);
    return st == CLF_OK ? 0 : cli_fail(st);
}
