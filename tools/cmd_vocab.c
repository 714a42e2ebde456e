/* clformer vocab: word-level vocabularies (tokenizers-library WordLevel JSON) from text.
 *
 *   clformer vocab -o vocab.json [--min-frequency N] FILE
 *       one sentence per line (the tutorial's build_tokenizer on one language);
 *   clformer vocab --src-out s.json --tgt-out t.json [--min-frequency N] TRAIN.tsv | SRC TGT
 *       both sides of training data, exactly as `clformer train` builds them.
 * Files are written under a temporary name and renamed. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "clformer/dataset.h"
#include "clformer/tokenizer.h"

enum { OPT_MIN_FREQ = 256, OPT_SRC_OUT, OPT_TGT_OUT };

static void usage(void)
{
    printf("usage: clformer vocab -o vocab.json [--min-frequency N] FILE\n"
           "       clformer vocab --src-out s.json --tgt-out t.json [--min-frequency N] "
           "TRAIN.tsv | SRC TGT\n"
           "Word-level vocabularies ([UNK] [PAD] [SOS] [EOS] = 0..3, then the words seen at\n"
           "least --min-frequency times, default %d) as tokenizers-library JSON.\n",
           CLF_TOKENIZER_MIN_FREQUENCY);
}

int clf_cmd_vocab(int argc, char **argv)
{
    const char *out = NULL, *src_out = NULL, *tgt_out = NULL;
    int min_freq = CLF_TOKENIZER_MIN_FREQUENCY;
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"min-frequency", required_argument, NULL, OPT_MIN_FREQ},
        {"src-out", required_argument, NULL, OPT_SRC_OUT},
        {"tgt-out", required_argument, NULL, OPT_TGT_OUT},
        {"help", no_argument, NULL, 'h'},
        {0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            out = optarg;
            break;
        case OPT_MIN_FREQ:
            if (!cli_parse_int("--min-frequency", optarg, 0, &min_freq))
                return 2;
            break;
        case OPT_SRC_OUT:
            src_out = optarg;
            break;
        case OPT_TGT_OUT:
            tgt_out = optarg;
            break;
        case 'h':
            usage();
            return 0;
        default:
            return 2;
        }
    }
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
