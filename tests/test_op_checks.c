/* The core's op checks (clformer/ops.h) on a mock backend table whose entries only count
 * their calls: every bad argument is refused by the core, before the backend is reached,
 * with CLF_ERR_INPUT and one line "mock: <op>: ..." naming the argument; an empty call
 * returns CLF_OK without reaching it; a good call reaches it once. The refusals asserted on
 * the real backends (test_ops, test_train_ops, test_plugin_ops, test_opencl_errors) go
 * through the same functions; these are the rules no other suite covers. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "clformer/ops.h"
#include "testutil.h"

/* A mock buffer: only a size (the core asks buffer_size, never the contents). */
struct clf_buffer {
    size_t size;
};

static int reached; /* calls that got past the core */

static clf_status mock_buffer_size(clf_backend *be, const clf_buffer *buf, size_t *bytes)
{
    (void)be;
    *bytes = buf->size;
    return CLF_OK;
}

/* One stub per entry signature: each only counts. */
static clf_status ptr3(clf_backend *be, clf_ptr a, clf_ptr b, clf_ptr c, size_t n)
{
    (void)be, (void)a, (void)b, (void)c, (void)n;
    return reached++, CLF_OK;
}
static clf_status rows2(clf_backend *be, clf_ptr a, clf_ptr b, int rows, int cols)
{
    (void)be, (void)a, (void)b, (void)rows, (void)cols;
    return reached++, CLF_OK;
}
static clf_status softmax_stub(clf_backend *be, clf_ptr a, clf_ptr b, int rows, int cols, int log)
{
    (void)log;
    return rows2(be, a, b, rows, cols);
}
static clf_status ptr2(clf_backend *be, clf_ptr a, clf_ptr b, size_t n)
{
    (void)be, (void)a, (void)b, (void)n;
    return reached++, CLF_OK;
}
static clf_status fill_stub(clf_backend *be, clf_ptr out, float value, size_t n)
{
    (void)value;
    return ptr2(be, out, out, n);
}
static clf_status upload_stub(clf_backend *be, clf_ptr dst, const void *src, size_t n)
{
    (void)src;
    return ptr2(be, dst, dst, n);
}
static clf_status download_stub(clf_backend *be, void *dst, clf_ptr src, size_t n)
{
    (void)dst;
    return ptr2(be, src, src, n);
}
#define ARGS_STUB(name, type)                                                                      \
    static clf_status name(clf_backend *be, const type *a)                                         \
    {                                                                                              \
        (void)be, (void)a;                                                                         \
        return reached++, CLF_OK;                                                                  \
    }
ARGS_STUB(embed_stub, clf_embed_args)
ARGS_STUB(embed_backward_stub, clf_embed_backward_args)
ARGS_STUB(dropout_stub, clf_dropout_args)
ARGS_STUB(cross_entropy_stub, clf_cross_entropy_args)
ARGS_STUB(adam_stub, clf_adam_args)
ARGS_STUB(activation_stub, clf_activation_args)
ARGS_STUB(norm_stub, clf_norm_args)
ARGS_STUB(norm_backward_stub, clf_norm_backward_args)
ARGS_STUB(topk_stub, clf_topk_args)
ARGS_STUB(beam_stub, clf_beam_args)

static const clf_backend_api mock = {
    .abi_version = CLF_BACKEND_ABI,
    .name = "mock",
    .buffer_size = mock_buffer_size,
    .upload = upload_stub,
    .download = download_stub,
    .copy = ptr2,
    .embed = embed_stub,
    .add = ptr3,
    .softmax = softmax_stub,
    .argmax = rows2,
    .relu_backward = ptr3,
    .embed_backward = embed_backward_stub,
    .dropout = dropout_stub,
    .cross_entropy = cross_entropy_stub,
    .adam = adam_stub,
    .sum_squares = ptr2,
    .fill = fill_stub,
    .activation = activation_stub,
    .norm = norm_stub,
    .norm_backward = norm_backward_stub,
    .topk = topk_stub,
    .beam_choose = beam_stub,
};

static struct clf_buffer big = {4096}, small = {16}; /* 1024 and 4 floats */
#define BIG(off) ((clf_ptr){&big, (off)})
#define SMALL    ((clf_ptr){&small, 0})
#define NONE     ((clf_ptr){NULL, 0})

/* A good beam_choose of 2 sentences of 2 beams, top_k 4, tables 4 wide: val and idx [4, 4],
 * base and ids [4], choices [2, 4, 3], the tables [4, 4]. */
static clf_beam_args good_beam(void)
{
    return (clf_beam_args){.val = BIG(0),
                           .idx = BIG(64),
                           .base = BIG(128),
                           .choices = BIG(256),
                           .ids = BIG(384),
                           .rows_in = BIG(512),
                           .rows_out = BIG(640),
                           .n = 2,
                           .K = 2,
                           .top_k = 4,
                           .ld = 4,
                           .pos = 1};
}

/* st is CLF_ERR_INPUT (or want) with one line that starts "mock: <op>: " and contains
 * every needle, and the backend was not reached. */
static void expect(clf_status st, clf_status want, const char *op, const char *n1, const char *n2)
{
    const char *msg = clf_last_error();
    char head[64];
    snprintf(head, sizeof head, "mock: %s: ", op);
    ck_assert_msg(st == want, "%s: status %d, not %d (%s)", op, (int)st, (int)want, msg);
    ck_assert_msg(strncmp(msg, head, strlen(head)) == 0, "want '%s...', got '%s'", head, msg);
    ck_assert_msg(!strchr(msg, '\n'), "not one line: '%s'", msg);
    ck_assert_msg(strstr(msg, n1) && (!n2 || strstr(msg, n2)), "want '%s' and '%s' in '%s'", n1,
                  n2 ? n2 : "", msg);
    ck_assert_msg(reached == 0, "%s: the backend was reached after a refusal", op);
}
#define REFUSED(call, op, n1, n2) expect(call, CLF_ERR_INPUT, op, n1, n2)
/* a good (or empty) call: CLF_OK, and the backend reached `times` times */
#define PASSES(call, times)                                                                        \
    do {                                                                                           \
        reached = 0;                                                                               \
        CLF_ASSERT_OK(call);                                                                       \
        ck_assert_int_eq(reached, (times));                                                        \
        reached = 0;                                                                               \
    } while (0)

START_TEST(shapes_and_ranges)
{
    clf_embed_args em = {.out = BIG(0), .ids = BIG(0), .table = BIG(0), .rows = 2, .dim = 4};
    em.vocab = 8, em.seq_len = 2, em.pos0 = -1;
    REFUSED(clf_op_embed(&mock, NULL, &em), "embed", "bad shape", "pos0=-1");
    em.pos0 = 0;
    PASSES(clf_op_embed(&mock, NULL, &em), 1);
    REFUSED(clf_op_softmax(&mock, NULL, BIG(0), BIG(512), 2, 0, 1), "log_softmax", "bad shape",
            "cols=0");
    REFUSED(clf_op_argmax(&mock, NULL, BIG(0), BIG(512), -1, 4), "argmax", "bad shape", "rows=-1");
    clf_embed_backward_args eb = {.dtable = BIG(0), .dout = BIG(0), .ids = BIG(0), .rows = 2};
    eb.dim = 4;
    REFUSED(clf_op_embed_backward(&mock, NULL, &eb), "embed_backward", "bad shape", "vocab=0");
    clf_cross_entropy_args ce = {.loss = BIG(0), .logits = BIG(64), .targets = BIG(0), .rows = 2};
    REFUSED(clf_op_cross_entropy(&mock, NULL, &ce), "cross_entropy", "bad shape", "cols=0");
    ce.cols = 4, ce.label_smoothing = -0.5f;
    REFUSED(clf_op_cross_entropy(&mock, NULL, &ce), "cross_entropy", "label_smoothing", "[0, 1]");
    clf_dropout_args dr = {.out = BIG(0), .x = BIG(0), .n = 4, .p = 1.0f};
    REFUSED(clf_op_dropout(&mock, NULL, &dr), "dropout", "p = 1", "[0, 1)");
    clf_adam_args ad = {.param = BIG(0), .grad = BIG(64), .m = BIG(128), .v = BIG(192), .n = 4};
    ad.bias_correction1 = 0.1f;
    REFUSED(clf_op_adam(&mock, NULL, &ad), "adam", "bias corrections", "positive");
    ad.sqrt_bias_correction2 = 0.1f;
    PASSES(clf_op_adam(&mock, NULL, &ad), 1);
    clf_topk_args tk = {.val = BIG(0), .idx = BIG(512), .x = BIG(1024), .rows = 2, .cols = 8};
    REFUSED(clf_op_topk(&mock, NULL, &tk), "topk", "k=0", "[1, 8]");
    tk.k = 9;
    REFUSED(clf_op_topk(&mock, NULL, &tk), "topk", "k=9", "[1, 8]");
    tk.cols = 100, tk.k = CLF_TOPK_MAX + 1;
    REFUSED(clf_op_topk(&mock, NULL, &tk), "topk", "k=65", "at most 64");
    tk.k = 3, tk.rows = -1;
    REFUSED(clf_op_topk(&mock, NULL, &tk), "topk", "bad shape", "rows=-1");
    tk.rows = 0;
    PASSES(clf_op_topk(&mock, NULL, &tk), 0);
    tk.rows = 2;
    PASSES(clf_op_topk(&mock, NULL, &tk), 1);
    REFUSED(clf_op_topk(&mock, NULL, NULL), "topk", "no arguments", NULL);
    clf_beam_args bc = good_beam();
    bc.K = 0;
    REFUSED(clf_op_beam_choose(&mock, NULL, &bc), "beam_choose", "bad shape", "K=0");
    bc.K = CLF_TOPK_MAX / 2 + 1;
    REFUSED(clf_op_beam_choose(&mock, NULL, &bc), "beam_choose", "K=33", "2K <= 64");
    bc.K = 2, bc.top_k = CLF_TOPK_MAX + 1;
    REFUSED(clf_op_beam_choose(&mock, NULL, &bc), "beam_choose", "top_k=65", NULL);
    bc.top_k = 4, bc.pos = -1;
    REFUSED(clf_op_beam_choose(&mock, NULL, &bc), "beam_choose", "pos=-1", NULL);
    bc.pos = 3, bc.n = 0; /* pos + 1 past the table: nothing written there, not an error */
    PASSES(clf_op_beam_choose(&mock, NULL, &bc), 0);
    bc.n = 2;
    PASSES(clf_op_beam_choose(&mock, NULL, &bc), 1);
    REFUSED(clf_op_beam_choose(&mock, NULL, NULL), "beam_choose", "no arguments", NULL);
}
END_TEST

START_TEST(operands_bounds_and_alignment)
{
    clf_embed_args em = {.out = BIG(0), .ids = BIG(0), .table = SMALL, .rows = 2, .dim = 4};
    em.vocab = 8, em.seq_len = 2;
    REFUSED(clf_op_embed(&mock, NULL, &em), "embed", "'table'", "out of bounds");
    REFUSED(clf_op_add(&mock, NULL, BIG(0), NONE, BIG(64), 4), "add", "'a'", "missing");
    REFUSED(clf_op_relu_backward(&mock, NULL, BIG(2), BIG(64), BIG(128), 4), "relu_backward",
            "'dx'", "misaligned");
    REFUSED(clf_op_sum_squares(&mock, NULL, BIG(0), NONE, 4), "sum_squares", "'x'", "missing");
    REFUSED(clf_op_fill(&mock, NULL, BIG(4092), 1.0f, 2), "fill", "'out'", "needs 8 bytes");
    REFUSED(clf_op_copy(&mock, NULL, BIG(0), SMALL, 17), "copy", "'src'", "holds 16 bytes");
    REFUSED(clf_op_upload(&mock, NULL, SMALL, "", 17), "upload", "'dst'", "out of bounds");
    REFUSED(clf_op_download(&mock, NULL, (char[32]){0}, BIG(4090), 7), "download", "'src'", NULL);
    /* byte copies take any offset */
    PASSES(clf_op_copy(&mock, NULL, BIG(1), BIG(3003), 5), 1);
    PASSES(clf_op_upload(&mock, NULL, BIG(4095), "x", 1), 1);
    clf_beam_args bc = good_beam();
    bc.n_banned = 2;
    REFUSED(clf_op_beam_choose(&mock, NULL, &bc), "beam_choose", "'banned'", "missing");
    bc.n_banned = 0, bc.rows_out = BIG(4064);
    REFUSED(clf_op_beam_choose(&mock, NULL, &bc), "beam_choose", "'rows_out'", "out of bounds");
}
END_TEST

START_TEST(aliasing)
{
    REFUSED(clf_op_add(&mock, NULL, BIG(4), BIG(0), BIG(512), 8), "add",
            "'out' partly overlaps 'a'", NULL);
    PASSES(clf_op_add(&mock, NULL, BIG(512), BIG(0), BIG(512), 8), 1); /* out = b: in place */
    REFUSED(clf_op_softmax(&mock, NULL, BIG(4), BIG(0), 2, 4, 0), "softmax",
            "'out' partly overlaps 'x'", NULL);
    PASSES(clf_op_softmax(&mock, NULL, BIG(0), BIG(0), 2, 4, 0), 1);
    REFUSED(clf_op_argmax(&mock, NULL, BIG(0), BIG(0), 2, 4), "argmax", "'out' may not overlap 'x'",
            NULL);
    clf_topk_args tk = {.val = BIG(0), .idx = BIG(8), .x = BIG(1024), .rows = 2, .cols = 8, .k = 2};
    REFUSED(clf_op_topk(&mock, NULL, &tk), "topk", "'val' may not overlap 'idx'", NULL);
    tk.idx = BIG(512), tk.base = BIG(4);
    REFUSED(clf_op_topk(&mock, NULL, &tk), "topk", "'val' may not overlap 'base'", NULL);
    tk.base = BIG(1028); /* inputs may overlap each other */
    PASSES(clf_op_topk(&mock, NULL, &tk), 1);
    tk.x = BIG(516);
    REFUSED(clf_op_topk(&mock, NULL, &tk), "topk", "'idx' may not overlap 'x'", NULL);
    clf_beam_args bc = good_beam();
    bc.idx = BIG(32); /* inputs may overlap each other */
    PASSES(clf_op_beam_choose(&mock, NULL, &bc), 1);
    bc.ids = BIG(300);
    REFUSED(clf_op_beam_choose(&mock, NULL, &bc), "beam_choose", "'choices' overlaps 'ids'", NULL);
    bc = good_beam(), bc.rows_out = BIG(560);
    REFUSED(clf_op_beam_choose(&mock, NULL, &bc), "beam_choose", "'rows_out' overlaps 'rows_in'",
            NULL);
    bc = good_beam(), bc.base = BIG(60);
    REFUSED(clf_op_beam_choose(&mock, NULL, &bc), "beam_choose", "'base' overlaps 'val'", NULL);
    REFUSED(clf_op_relu_backward(&mock, NULL, BIG(0), BIG(0), BIG(8), 4), "relu_backward",
            "'dx' partly overlaps 'y'", NULL);
    clf_cross_entropy_args ce = {
        .loss = BIG(512), .dlogits = BIG(4), .logits = BIG(0), .targets = BIG(768), .rows = 2};
    ce.cols = 4;
    REFUSED(clf_op_cross_entropy(&mock, NULL, &ce), "cross_entropy",
            "'dlogits' partly overlaps 'logits'", NULL);
    ce.dlogits = BIG(0);
    PASSES(clf_op_cross_entropy(&mock, NULL, &ce), 1);
    clf_adam_args ad = {.param = BIG(0), .grad = BIG(64), .m = BIG(128), .v = BIG(60), .n = 4};
    ad.bias_correction1 = ad.sqrt_bias_correction2 = 0.5f;
    REFUSED(clf_op_adam(&mock, NULL, &ad), "adam", "may not overlap", NULL);
}
END_TEST

START_TEST(plugin_ops)
{
    static const clf_plugin_op odd = {.name = "odd", .kind = (clf_plugin_kind)7};
    static const clf_plugin_op act = {.name = "act", .kind = CLF_PLUGIN_ACTIVATION};
    static const clf_plugin_op rms = {.name = "rms", .kind = CLF_PLUGIN_NORM};
    clf_activation_args fa = {.op = NULL, .out = BIG(0), .x = BIG(512), .n = 4};
    REFUSED(clf_op_activation(&mock, NULL, &fa), "activation", "no plugin op", NULL);
    fa.op = &odd;
    REFUSED(clf_op_activation(&mock, NULL, &fa), "activation", "'odd'", "unknown kind 7");
    fa.op = &act;
    PASSES(clf_op_activation(&mock, NULL, &fa), 1);
    clf_norm_args na = {.op = &rms, .out = BIG(0), .x = BIG(512), .alpha = BIG(1024), .rows = 2};
    na.cols = 4, na.beta = BIG(28); /* the last float of out's 8 */
    REFUSED(clf_op_norm(&mock, NULL, &na), "norm 'rms'", "out may not overlap x, alpha or beta",
            NULL);
    na.beta = SMALL, na.cols = 8, na.rows = 1;
    REFUSED(clf_op_norm(&mock, NULL, &na), "norm 'rms'", "'beta'", "out of bounds");
    clf_norm_backward_args nb = {.op = &rms, .dx = BIG(0), .dy = BIG(512), .x = BIG(1024)};
    nb.alpha = BIG(2048), nb.dbeta = BIG(6), nb.rows = 2, nb.cols = 4;
    REFUSED(clf_op_norm_backward(&mock, NULL, &nb), "norm_backward 'rms'", "'dbeta'", "misaligned");
}
END_TEST

START_TEST(empty_missing_and_unsupported)
{
    /* empty: nothing read or written, the operands not even looked at */
    PASSES(clf_op_add(&mock, NULL, NONE, NONE, NONE, 0), 0);
    PASSES(clf_op_fill(&mock, NULL, NONE, 1.0f, 0), 0);
    PASSES(clf_op_copy(&mock, NULL, BIG(0), BIG(8), 0), 0); /* its operands must still be given */
    REFUSED(clf_op_upload(&mock, NULL, NONE, "", 0), "upload", "'dst'", "missing");
    PASSES(clf_op_softmax(&mock, NULL, NONE, NONE, 0, 4, 0), 0);
    /* sum_squares of nothing still writes its 0 */
    PASSES(clf_op_sum_squares(&mock, NULL, BIG(0), NONE, 0), 1);
    REFUSED(clf_op_dropout(&mock, NULL, NULL), "dropout", "no arguments", NULL);
    /* an entry the table leaves NULL */
    expect(
        clf_op_relu_backward(&(clf_backend_api){.name = "mock"}, NULL, BIG(0), BIG(0), BIG(0), 4),
        CLF_ERR_UNSUPPORTED, "relu_backward", "not supported", NULL);
    expect(clf_op_activation_backward(&mock, NULL, &(clf_activation_backward_args){0}),
           CLF_ERR_UNSUPPORTED, "activation_backward", "not supported", NULL);
}
END_TEST

CLF_TEST_MAIN(clf_test_run, "op_checks", "core", shapes_and_ranges, operands_bounds_and_alignment,
              aliasing, plugin_ops, empty_missing_and_unsupported)
