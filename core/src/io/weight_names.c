/* The weight-name table: which parts of a state_dict() name mark it as what (see
 * weight_names.h). A pattern matches when every part it gives is in the name at its place:
 * the whole name, its start, somewhere inside, its end. */
#include "io/weight_names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct name_pattern {
    const char *whole, *start, *inside, *end; /* NULL: no condition there */
    unsigned kinds;
} name_pattern;

static const name_pattern patterns[] = {
    {.end = ".embedding.weight", .kinds = CLF_WK_EMBEDDING_TABLE},
    {.start = "src_pos.embedding.", .kinds = CLF_WK_POSITIONAL},
    {.start = "tgt_pos.embedding.", .kinds = CLF_WK_POSITIONAL},
    {.start = "src_embed.", .kinds = CLF_WK_SRC_EMBED},
    {.start = "tgt_embed.", .kinds = CLF_WK_TGT_VOCAB},
    {.start = "projection_layer.", .kinds = CLF_WK_TGT_VOCAB},
    {.start = "encoder.norm.", .kinds = CLF_WK_FINAL_NORM},
    {.start = "decoder.norm.", .kinds = CLF_WK_FINAL_NORM},
    {.inside = "attention_block.w_", .end = ".bias", .kinds = CLF_WK_ATTENTION_BIAS},
    {.end = ".w_q.weight", .kinds = CLF_WK_ATTENTION_Q},
    {.end = ".w_q.bias", .kinds = CLF_WK_ATTENTION_Q},
    {.end = ".w_k.weight", .kinds = CLF_WK_ATTENTION_KV},
    {.end = ".w_k.bias", .kinds = CLF_WK_ATTENTION_KV},
    {.end = ".w_v.weight", .kinds = CLF_WK_ATTENTION_KV},
    {.end = ".w_v.bias", .kinds = CLF_WK_ATTENTION_KV},
    {.inside = "feed_forward_block.", .kinds = CLF_WK_FEED_FORWARD},
    {.inside = "feed_forward_block.linear_3.", .kinds = CLF_WK_FFN_GATE},
    {.inside = ".norm.bias", .kinds = CLF_WK_NORM_BIAS},
    {.start = "module.", .kinds = CLF_WK_DATA_PARALLEL},
    {.start = "optim.", .kinds = CLF_WK_NOT_PARAMETER},
    {.whole = "src_pos.pe", .kinds = CLF_WK_NOT_PARAMETER},
    {.whole = "tgt_pos.pe", .kinds = CLF_WK_NOT_PARAMETER},
};

#define N_PATTERNS (sizeof patterns / sizeof patterns[0])

static int matches(const name_pattern *p, const char *name)
{
    const size_t len = strlen(name);
    if (p->whole && strcmp(name, p->whole) != 0)
        return 0;
    if (p->start && strncmp(name, p->start, strlen(p->start)) != 0)
        return 0;
    if (p->inside && !strstr(name, p->inside))
        return 0;
    if (p->end && (len < strlen(p->end) || strcmp(name + len - strlen(p->end), p->end) != 0))
        return 0;
    return 1;
}

unsigned clf_weight_name_kinds(const char *name)
{
    unsigned kinds = 0;
    for (size_t i = 0; i < N_PATTERNS; i++)
        if (matches(&patterns[i], name))
            kinds |= patterns[i].kinds;
    return kinds;
}

int clf_weight_name_qkv(const char *name, char p, char *out, size_t size)
{
    const unsigned projections = CLF_WK_ATTENTION_Q | CLF_WK_ATTENTION_KV;
    for (size_t i = 0; i < N_PATTERNS; i++) {
        if (!(patterns[i].kinds & projections) || !matches(&patterns[i], name))
            continue;
        /* the projection letter: the 'q' of ".w_q.weight" */
        const size_t letter = strlen(name) - strlen(patterns[i].end) + strlen(".w_");
        if ((size_t)snprintf(out, size, "%s", name) >= size)
            return 0;
        out[letter] = p;
        return 1;
    }
    return 0;
}

int clf_weight_name_layer(const char *name, const char *stack)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s.layers.", stack);
    if (strncmp(name, prefix, strlen(prefix)) != 0)
        return -1;
    const char *p = name + strlen(prefix);
    char *end;
    long i = strtol(p, &end, 10);
    if (end == p || *end != '.' || i < 0 || i > 1000000)
        return -1;
    return (int)i;
}
