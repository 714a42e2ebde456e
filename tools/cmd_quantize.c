/* clformer quantize: a weights file with its linear layers' matrices as int8 (and their
 * per-output-channel scales), BF16 or F16 (clf_weights_quantize_file), which translate,
 * forward and bench load directly. */
#include <stdio.h>

#include "cli.h"
#include "clformer/weights.h"

static void usage(void)
{
    printf("usage: clformer quantize -w IN.safetensors -o OUT.safetensors --type "
           "int8|bf16|f16 [--embeddings]\n"
           "  The matrices linear layers multiply with (2-D weights but the embedding\n"
           "  tables) become int8 with per-output-channel F32 scales '<name>.scale',\n"
           "  BF16 or F16; other tensors are copied, optimizer state dropped. translate,\n"
           "  forward and bench load the file and use its type (docs/ARCHITECTURE.md).\n"
           "  --embeddings: the embedding tables too (a smaller file; read back as F32,\n"
           "  so lookups see the rounded values).\n");
}

/* --type: a stored type other than F32 */
static int take_type(const char *value, void *to)
{
    clf_weight_type *type = to;
    if (clf_weight_type_parse(value, type) != CLF_OK || *type == CLF_WEIGHT_F32)
        return !cli_usage_error("quantize: --type: expected int8, bf16 or f16, got '%s'", value);
    return 1;
}

int clf_cmd_quantize(int argc, char **argv)
{
    const char *in_path = NULL, *out_path = NULL;
    clf_weight_type type = CLF_WEIGHT_F32;
    int type_set = 0, embeddings = 0;
    const cli_opt opts[] = {
        CLI_STRING("weights", 'w', &in_path),
        CLI_STRING("output", 'o', &out_path),
        {"type", 'T', CLI_OPT_STRING, &type, .set = &type_set, .take = take_type},
        CLI_FLAG("embeddings", 256, &embeddings), /* long only */
        {0}};
    int rc = cli_parse_options(argc, argv, opts, usage);
    if (rc >= 0)
        return rc;
    const unsigned flags = embeddings ? CLF_QUANTIZE_EMBEDDINGS : 0;
    if (!in_path || !out_path || !type_set)
        return cli_usage_error("quantize: -w IN, -o OUT and --type are all required");
    clf_status st = clf_weights_quantize_file(in_path, out_path, type, flags);
    return st == CLF_OK ? 0 : cli_fail(st);
}
