/* clformer quantize: a weights file with its linear layers' matrices as int8 (and their
 * per-output-channel scales), BF16 or F16 (clf_weights_quantize_file), which translate,
 * forward and bench load directly. */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "clformer/weights.h"

int clf_cmd_quantize(int argc, char **argv)
{
    const char *in_path = NULL, *out_path = NULL;
    clf_weight_type type = CLF_WEIGHT_F32;
    int type_set = 0;
    unsigned flags = 0;
    static const struct option longopts[] = {
        {"weights", required_argument, NULL, 'w'}, {"output", required_argument, NULL, 'o'},
        {"type", required_argument, NULL, 'T'},    {"embeddings", no_argument, NULL, 'E'},
        {"help", no_argument, NULL, 'h'},          {0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "w:o:T:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'w':
            in_path = optarg;
            break;
        case 'o':
            out_path = optarg;
            break;
        case 'T':
            if (clf_weight_type_parse(optarg, &type) != CLF_OK || type == CLF_WEIGHT_F32)
                return cli_usage_error("quantize: --type: expected int8, bf16 or f16, got '%s'",
                                       optarg);
            type_set = 1;
            break;
        case 'E':
            flags |= CLF_QUANTIZE_EMBEDDINGS;
            break;
        case 'h':
            printf("usage: clformer quantize -w IN.safetensors -o OUT.safetensors --type "
                   "int8|bf16|f16 [--embeddings]\n"
                   "  The matrices linear layers multiply with (2-D weights but the embedding\n"
                   "  tables) become int8 with per-output-channel F32 scales '<name>.scale',\n"
                   "  BF16 or F16; other tensors are copied, optimizer state dropped. translate,\n"
                   "  forward and bench load the file and use its type (docs/ARCHITECTURE.md).\n"
                   "  --embeddings: the embedding tables too (a smaller file; read back as F32,\n"
                   "  so lookups see the rounded values).\n");
            return 0;
        default:
            return 2;
        }
    }
    if (!in_path || !out_path || !type_set)
        return cli_usage_error("quantize: -w IN, -o OUT and --type are all required");
    clf_status st = clf_weights_quantize_file(in_path, out_path, type, flags);
    return st == CLF_OK ? 0 : cli_fail(st);
}
