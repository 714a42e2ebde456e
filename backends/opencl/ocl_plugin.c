/* ocl_plugin.c - the plugin ops (ABI 3): activations, gated activations and norms whose
 * math a plugin supplies as OpenCL C source (clformer/plugin.h).
 *
 * plugin_prepare() builds, once per op pointer, one program: kernels/plugin_prelude.cl
 * (clf_group_sum), a #define block that maps CLF_PLUGIN_FORWARD etc. to the op's
 * clf_NAME_* functions, the op's source, and kernels/plugin.cl (the kernels that apply it:
 * view offsets, the gate product, alpha/beta and their gradients). The programs go
 * through the same disk cache as the kernel families; the built kernels live in a small
 * table on the backend, keyed by the op pointer, until close. An op used before it was
 * prepared is prepared then. Semantics of the ops: clformer/backend.h. */
#include "ocl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The sources, embedded by embed_cl.cmake. */
extern const char clf_ocl_src_plugin_prelude[], clf_ocl_src_plugin[];
extern const size_t clf_ocl_src_plugin_prelude_len, clf_ocl_src_plugin_len;

/* Norm kernels run one power-of-two work-group per row of at most this many work-items
 * (the kernel families' cap, OCL_ROW_WG in ocl_program.c): enough for a 512..8000-wide
 * row, while more would only add steps to clf_group_sum. */
#define PLUGIN_ROW_WG 256
/* Columns per work-group of clf_plugin_norm_params: 32 neighbouring floats are one
 * 128-byte line (coalesced loads), as in layernorm_backward_params. */
#define PLUGIN_PARAMS_COLS 32

typedef enum plugin_kernel {
    PK_ACT = 0, /* activation kinds */
    PK_ACT_BWD,
    PK_NORM, /* norm kind */
    PK_NORM_BWD,
    PK_NORM_PARAMS,
    PK_COUNT
} plugin_kernel;

static const char *const kernel_names[PK_COUNT] = {
    [PK_ACT] = "clf_plugin_act",
    [PK_ACT_BWD] = "clf_plugin_act_bwd",
    [PK_NORM] = "clf_plugin_norm",
    [PK_NORM_BWD] = "clf_plugin_norm_bwd",
    [PK_NORM_PARAMS] = "clf_plugin_norm_params",
};

/* One prepared op: its program and the kernels of its kind (the others NULL). */
struct ocl_plugin_prog {
    const clf_plugin_op *op;
    cl_program program;
    cl_kernel kernels[PK_COUNT];
    size_t wg[PK_COUNT]; /* power-of-two work-group size of each kernel */
};

/* A C identifier of at most CLF_PLUGIN_NAME_MAX - 1 characters: safe to paste into the
 * program's #defines and into the cache file's name. */
static int valid_name(const char *name)
{
    size_t n = 0;
    for (; name[n]; n++) {
        char ch = name[n];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
                 (n > 0 && ch >= '0' && ch <= '9');
        if (!ok)
            return 0;
    }
    return n > 0 && n < CLF_PLUGIN_NAME_MAX;
}

static void release_prog(struct ocl_plugin_prog *p)
{
    for (int k = 0; k < PK_COUNT; k++)
        if (p->kernels[k])
            clReleaseKernel(p->kernels[k]);
    if (p->program)
        clReleaseProgram(p->program);
    memset(p, 0, sizeof *p);
}

void ocl_plugin_release(clf_backend *be)
{
    for (int i = 0; i < be->n_plugin_progs; i++)
        release_prog(&be->plugin_progs[i]);
    free(be->plugin_progs);
    be->plugin_progs = NULL;
    be->n_plugin_progs = 0;
}

/* The largest power of two <= min(PLUGIN_ROW_WG, the device's and the kernel's limits). */
static clf_status pick_wg(clf_backend *be, const char *op, cl_kernel k, size_t *wg)
{
    size_t dev_wg = 1, kernel_wg = 1;
    cl_int err = clGetDeviceInfo(be->dev.device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof dev_wg,
                                 &dev_wg, NULL);
    if (err != CL_SUCCESS)
        return ocl_fail(op, "clGetDeviceInfo", err);
    err = clGetKernelWorkGroupInfo(k, be->dev.device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kernel_wg,
                                   &kernel_wg, NULL);
    if (err != CL_SUCCESS)
        return ocl_fail(op, "clGetKernelWorkGroupInfo", err);
    size_t cap = dev_wg < kernel_wg ? dev_wg : kernel_wg;
    if (cap > PLUGIN_ROW_WG)
        cap = PLUGIN_ROW_WG;
    size_t w = 1;
    while (w * 2 <= cap)
        w *= 2;
    *wg = w;
    return CLF_OK;
}

/* Builds op's program and kernels into p (all or nothing). */
static clf_status build_prog(clf_backend *be, const char *opname, const clf_plugin_op *op,
                             struct ocl_plugin_prog *p)
{
    clf_status st = CLF_OK;
    const int norm = op->kind == CLF_PLUGIN_NORM;
    const int first = norm ? PK_NORM : PK_ACT, nk = norm ? 3 : 2;
    char defines[512], what[128], cache_name[64];
    snprintf(defines, sizeof defines,
             "\n#define CLF_PLUGIN_NORM %d\n#define CLF_PLUGIN_GATED %d\n"
             "#define CLF_PLUGIN_FORWARD clf_%s_forward\n#define CLF_PLUGIN_GRAD clf_%s_grad\n"
             "#define CLF_PLUGIN_BACKWARD clf_%s_backward\n#line 1 \"plugin op %s\"\n",
             norm, op->kind == CLF_PLUGIN_GATED_ACTIVATION, op->name, op->name, op->name, op->name);
    snprintf(what, sizeof what, "plugin op '%s' (%s)", op->name, clf_plugin_kind_name(op->kind));
    snprintf(cache_name, sizeof cache_name, "plugin-%s", op->name);
    static const char after[] = "\n#line 1 \"plugin.cl\"\n";
    const char *srcs[5] = {clf_ocl_src_plugin_prelude, defines, op->opencl_source, after,
                           clf_ocl_src_plugin};
    const size_t lens[5] = {clf_ocl_src_plugin_prelude_len, strlen(defines),
                            strlen(op->opencl_source), sizeof after - 1, clf_ocl_src_plugin_len};

    memset(p, 0, sizeof *p);
    p->op = op;
    if ((st = ocl_build_program(be, opname, what, cache_name, srcs, lens, 5, kernel_names + first,
                                p->kernels + first, nk, &p->program)) != CLF_OK)
        goto fail;
    for (int k = first; k < first + nk; k++)
        if ((st = pick_wg(be, opname, p->kernels[k], &p->wg[k])) != CLF_OK)
            goto fail;
    return CLF_OK;
fail:
    release_prog(p);
    return st;
}

/* The prepared op (built now if it was not yet), or an error naming op and why. */
static clf_status get_prog(clf_backend *be, const char *opname, const clf_plugin_op *op,
                           const struct ocl_plugin_prog **out)
{
    *out = NULL;
    if (!op || !op->name)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no plugin op (or an op without a name)",
                         opname);
    for (int i = 0; i < be->n_plugin_progs; i++) {
        if (be->plugin_progs[i].op == op) {
            *out = &be->plugin_progs[i];
            return CLF_OK;
        }
    }
    if (op->kind != CLF_PLUGIN_ACTIVATION && op->kind != CLF_PLUGIN_GATED_ACTIVATION &&
        op->kind != CLF_PLUGIN_NORM)
        return clf_error(CLF_ERR_INPUT, "opencl: plugin op '%s' has an unknown kind %d", op->name,
                         (int)op->kind);
    if (!valid_name(op->name))
        return clf_error(CLF_ERR_INPUT,
                         "opencl: plugin op '%s': the name is not a C identifier of at most %d "
                         "characters",
                         op->name, CLF_PLUGIN_NAME_MAX - 1);
    if (!op->opencl_source)
        return clf_error(CLF_ERR_UNSUPPORTED, "opencl: plugin op '%s' (%s) has no OpenCL form",
                         op->name, clf_plugin_kind_name(op->kind));
    /* room first, so a built program is never dropped for want of a table slot */
    struct ocl_plugin_prog *grown =
        realloc(be->plugin_progs, sizeof *grown * ((size_t)be->n_plugin_progs + 1));
    if (!grown)
        return clf_error(CLF_ERR_NOMEM, "opencl: %s: out of host memory for plugin op '%s'", opname,
                         op->name);
    be->plugin_progs = grown;
    struct ocl_plugin_prog *p = &be->plugin_progs[be->n_plugin_progs];
    clf_status st = build_prog(be, opname, op, p);
    if (st != CLF_OK)
        return st;
    be->n_plugin_progs++;
    *out = p;
    return CLF_OK;
}

clf_status ocl_plugin_prepare(clf_backend *be, const clf_plugin_op *op)
{
    const struct ocl_plugin_prog *p;
    return get_prog(be, "plugin_prepare", op, &p);
}

/* The op's program, after checking that the op is of the kind the entry takes. label gets
 * "<entry> '<op name>'" for the messages that follow. */
static clf_status get_kind(clf_backend *be, const char *opname, const clf_plugin_op *op,
                           int want_norm, const struct ocl_plugin_prog **out, char *label,
                           size_t label_size)
{
    clf_status st = get_prog(be, opname, op, out);
    if (st != CLF_OK)
        return st;
    return clf_plugin_check_entry_kind("opencl", opname, op, want_norm, label, label_size);
}

/* CLF_ERR_INPUT when a and b overlap anywhere or, with same_ok, when they overlap without
 * being the same span (an elementwise op may run in place). */
static clf_status check_no_overlap(const char *op, const char *na, clf_ptr a, const char *nb,
                                   clf_ptr b, uint64_t bytes, int same_ok)
{
    if (ocl_overlap(a, bytes, b, bytes) && !(same_ok && a.off == b.off))
        return clf_error(CLF_ERR_INPUT, "opencl: %s: '%s' %s '%s'", op, na,
                         same_ok ? "partly overlaps" : "may not overlap", nb);
    return CLF_OK;
}

/* Grid-stride launch of a plugin elementwise kernel over n items. */
static clf_status launch_elementwise(clf_backend *be, const char *op,
                                     const struct ocl_plugin_prog *p, plugin_kernel k,
                                     const ocl_arg *args, int nargs, uint64_t n)
{
    size_t wg = p->wg[k];
    uint64_t groups = (n + wg - 1) / wg;
    if (groups > be->max_groups)
        groups = be->max_groups;
    size_t global = (size_t)groups * wg;
    return ocl_launch_kernel(be, op, p->kernels[k], args, nargs, 1, &global, &wg);
}

/* ---- activations ---- */

/* out, x, gate: [n]. out[i] = f(x[i]) * (gate ? gate[i] : 1); out may be x, not gate. */
clf_status ocl_plugin_activation(clf_backend *be, const clf_activation_args *a)
{
    const struct ocl_plugin_prog *p;
    char op[96];
    clf_status st;
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: activation: no arguments");
    if ((st = get_kind(be, "activation", a->op, 0, &p, op, sizeof op)) != CLF_OK)
        return st;
    const int gated = a->op->kind == CLF_PLUGIN_GATED_ACTIVATION;
    if (gated != (a->gate.buf != NULL))
        return clf_error(CLF_ERR_INPUT, "opencl: %s: plugin op '%s' (%s) %s", op, a->op->name,
                         clf_plugin_kind_name(a->op->kind),
                         gated ? "needs a gate" : "takes no gate");
    const uint64_t n = a->n, bytes = 4 * n;
    if ((st = ocl_check_operand(be, op, "out", a->out, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "x", a->x, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "gate", a->gate, n, gated)) != CLF_OK ||
        (st = check_no_overlap(op, "out", a->out, "x", a->x, bytes, 1)) != CLF_OK ||
        (st = check_no_overlap(op, "out", a->out, "gate", a->gate, bytes, 0)) != CLF_OK)
        return st;
    if (n == 0)
        return CLF_OK;
    cl_mem out = ocl_mem(a->out), x = ocl_mem(a->x), gate = ocl_mem(a->gate);
    cl_ulong out_off = ocl_elems(a->out), x_off = ocl_elems(a->x), gate_off = ocl_elems(a->gate),
             count = n;
    const ocl_arg args[] = {
        {sizeof out, &out},     {sizeof out_off, &out_off}, {sizeof x, &x},
        {sizeof x_off, &x_off}, {sizeof gate, &gate},       {sizeof gate_off, &gate_off},
        {sizeof count, &count},
    };
    return launch_elementwise(be, op, p, PK_ACT, args, sizeof args / sizeof args[0], n);
}

/* dx, dgate, dy, x, gate: [n]. dx = (dy * gate) * f'(x) (gate read as 1 without one),
 * dgate = dy * f(x) (with a gate). dx may be dy only without a gate, dgate may be dy;
 * nothing else may overlap an output. */
clf_status ocl_plugin_activation_backward(clf_backend *be, const clf_activation_backward_args *a)
{
    const struct ocl_plugin_prog *p;
    char op[96];
    clf_status st;
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: activation_backward: no arguments");
    if ((st = get_kind(be, "activation_backward", a->op, 0, &p, op, sizeof op)) != CLF_OK)
        return st;
    const int gated = a->op->kind == CLF_PLUGIN_GATED_ACTIVATION;
    if (gated != (a->gate.buf != NULL) || gated != (a->dgate.buf != NULL))
        return clf_error(CLF_ERR_INPUT, "opencl: %s: plugin op '%s' (%s) %s", op, a->op->name,
                         clf_plugin_kind_name(a->op->kind),
                         gated ? "needs gate and dgate" : "takes no gate or dgate");
    const uint64_t n = a->n, bytes = 4 * n;
    if ((st = ocl_check_operand(be, op, "dx", a->dx, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "dy", a->dy, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "x", a->x, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "gate", a->gate, n, gated)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "dgate", a->dgate, n, gated)) != CLF_OK ||
        (st = check_no_overlap(op, "dx", a->dx, "dy", a->dy, bytes, !gated)) != CLF_OK ||
        (st = check_no_overlap(op, "dx", a->dx, "x", a->x, bytes, 0)) != CLF_OK ||
        (st = check_no_overlap(op, "dx", a->dx, "gate", a->gate, bytes, 0)) != CLF_OK ||
        (st = check_no_overlap(op, "dx", a->dx, "dgate", a->dgate, bytes, 0)) != CLF_OK ||
        (st = check_no_overlap(op, "dgate", a->dgate, "dy", a->dy, bytes, 1)) != CLF_OK ||
        (st = check_no_overlap(op, "dgate", a->dgate, "x", a->x, bytes, 0)) != CLF_OK ||
        (st = check_no_overlap(op, "dgate", a->dgate, "gate", a->gate, bytes, 0)) != CLF_OK)
        return st;
    if (n == 0)
        return CLF_OK;
    cl_mem dx = ocl_mem(a->dx), dgate = ocl_mem(a->dgate), dy = ocl_mem(a->dy), x = ocl_mem(a->x),
           gate = ocl_mem(a->gate);
    cl_ulong dx_off = ocl_elems(a->dx), dgate_off = ocl_elems(a->dgate), dy_off = ocl_elems(a->dy),
             x_off = ocl_elems(a->x), gate_off = ocl_elems(a->gate), count = n;
    const ocl_arg args[] = {
        {sizeof dx, &dx},       {sizeof dx_off, &dx_off},
        {sizeof dgate, &dgate}, {sizeof dgate_off, &dgate_off},
        {sizeof dy, &dy},       {sizeof dy_off, &dy_off},
        {sizeof x, &x},         {sizeof x_off, &x_off},
        {sizeof gate, &gate},   {sizeof gate_off, &gate_off},
        {sizeof count, &count},
    };
    return launch_elementwise(be, op, p, PK_ACT_BWD, args, sizeof args / sizeof args[0], n);
}

/* ---- norms ---- */

/* One work-group per row of clf_plugin_norm: out[r,:] = n(x[r,:]), then, with affine,
 * alpha * out + beta (beta optional). */
static clf_status launch_norm(clf_backend *be, const char *op, const struct ocl_plugin_prog *p,
                              cl_mem out, cl_ulong out_off, clf_ptr x, int affine, clf_ptr alpha,
                              clf_ptr beta, int rows, int cols, float eps)
{
    cl_mem xm = ocl_mem(x), am = ocl_mem(alpha), bm = ocl_mem(beta);
    cl_ulong x_off = ocl_elems(x), alpha_off = ocl_elems(alpha), beta_off = ocl_elems(beta);
    cl_int has_affine = affine != 0, has_beta = beta.buf != NULL, ncols = cols;
    cl_float e = eps;
    size_t wg = p->wg[PK_NORM];
    const ocl_arg args[] = {
        {sizeof out, &out},
        {sizeof out_off, &out_off},
        {sizeof xm, &xm},
        {sizeof x_off, &x_off},
        {sizeof has_affine, &has_affine},
        {sizeof am, &am},
        {sizeof alpha_off, &alpha_off},
        {sizeof bm, &bm},
        {sizeof beta_off, &beta_off},
        {sizeof has_beta, &has_beta},
        {sizeof ncols, &ncols},
        {sizeof e, &e},
        {wg * sizeof(cl_float), NULL},
    };
    size_t global = (size_t)rows * wg;
    return ocl_launch_kernel(be, op, p->kernels[PK_NORM], args, sizeof args / sizeof args[0], 1,
                             &global, &wg);
}

/* out, x: [rows, cols]; alpha, beta: [cols] (beta optional).
 * out[r,:] = alpha * n(x[r,:]) + beta; one work-group per row. out may not overlap x,
 * alpha or beta (the plugin writes n(x) into out before alpha and beta are read). */
clf_status ocl_plugin_norm(clf_backend *be, const clf_norm_args *a)
{
    const struct ocl_plugin_prog *p;
    char op[96];
    clf_status st;
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: norm: no arguments");
    if ((st = get_kind(be, "norm", a->op, 1, &p, op, sizeof op)) != CLF_OK)
        return st;
    if (a->rows < 0 || a->cols <= 0)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: bad shape rows=%d cols=%d", op, a->rows,
                         a->cols);
    const uint64_t n = (uint64_t)a->rows * (uint64_t)a->cols, c = (uint64_t)a->cols;
    if ((st = ocl_check_operand(be, op, "out", a->out, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "x", a->x, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "alpha", a->alpha, c, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "beta", a->beta, c, 0)) != CLF_OK)
        return st;
    if (ocl_overlap(a->out, 4 * n, a->x, 4 * n) || ocl_overlap(a->out, 4 * n, a->alpha, 4 * c) ||
        ocl_overlap(a->out, 4 * n, a->beta, 4 * c))
        return clf_error(CLF_ERR_INPUT, "opencl: %s: out may not overlap x, alpha or beta", op);
    if (a->rows == 0)
        return CLF_OK;
    return launch_norm(be, op, p, ocl_mem(a->out), ocl_elems(a->out), a->x, 1, a->alpha, a->beta,
                       a->rows, a->cols, a->eps);
}

/* dx, dy, x: [rows, cols]; alpha, dalpha, dbeta: [cols] (dalpha, dbeta optional).
 *   dx[r,:] (= or, with accumulate, +=) J_n(x[r,:])^T (alpha * dy[r,:])
 *   dalpha[c] += sum_r dy[r,c] * n(x[r,:])[c];  dbeta[c] += sum_r dy[r,c]
 * Up to three kernels on the backend's scratch buffer ([rows, cols] for the accumulated
 * rows, then [rows, cols] for n(x)): the rows' dx, n(x) again (for dalpha), the column
 * sums in a fixed order. dx may not overlap dy, x or alpha. */
clf_status ocl_plugin_norm_backward(clf_backend *be, const clf_norm_backward_args *a)
{
    const struct ocl_plugin_prog *p;
    char op[96];
    clf_status st;
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: norm_backward: no arguments");
    if ((st = get_kind(be, "norm_backward", a->op, 1, &p, op, sizeof op)) != CLF_OK)
        return st;
    if (a->rows < 0 || a->cols <= 0)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: bad shape rows=%d cols=%d", op, a->rows,
                         a->cols);
    const uint64_t n = (uint64_t)a->rows * (uint64_t)a->cols, c = (uint64_t)a->cols;
    if ((st = ocl_check_operand(be, op, "dx", a->dx, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "dy", a->dy, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "x", a->x, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "alpha", a->alpha, c, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "dalpha", a->dalpha, c, 0)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "dbeta", a->dbeta, c, 0)) != CLF_OK)
        return st;
    if (ocl_overlap(a->dx, 4 * n, a->dy, 4 * n) || ocl_overlap(a->dx, 4 * n, a->x, 4 * n) ||
        ocl_overlap(a->dx, 4 * n, a->alpha, 4 * c))
        return clf_error(CLF_ERR_INPUT, "opencl: %s: dx may not overlap dy, x or alpha", op);
    if (a->rows == 0)
        return CLF_OK;

    const int accumulate = a->accumulate != 0, has_dalpha = a->dalpha.buf != NULL,
              has_dbeta = a->dbeta.buf != NULL;
    const uint64_t scratch_elems = (accumulate ? n : 0) + (has_dalpha ? n : 0);
    cl_mem scratch = NULL;
    if (scratch_elems &&
        (st = ocl_scratch(be, op, (size_t)(scratch_elems * sizeof(cl_float)), &scratch)) != CLF_OK)
        return st;
    cl_ulong tmp_off = 0, xhat_off = accumulate ? n : 0;

    cl_mem dx = ocl_mem(a->dx), dy = ocl_mem(a->dy), x = ocl_mem(a->x), alpha = ocl_mem(a->alpha);
    cl_ulong dx_off = ocl_elems(a->dx), dy_off = ocl_elems(a->dy), x_off = ocl_elems(a->x),
             alpha_off = ocl_elems(a->alpha);
    cl_int acc = accumulate, cols = a->cols, rows = a->rows;
    cl_float eps = a->eps;
    size_t wg = p->wg[PK_NORM_BWD];
    const ocl_arg args[] = {
        {sizeof dx, &dx},
        {sizeof dx_off, &dx_off},
        {sizeof scratch, &scratch},
        {sizeof tmp_off, &tmp_off},
        {sizeof acc, &acc},
        {sizeof dy, &dy},
        {sizeof dy_off, &dy_off},
        {sizeof alpha, &alpha},
        {sizeof alpha_off, &alpha_off},
        {sizeof x, &x},
        {sizeof x_off, &x_off},
        {sizeof cols, &cols},
        {sizeof eps, &eps},
        {wg * sizeof(cl_float), NULL},
    };
    size_t global = (size_t)a->rows * wg;
    if ((st = ocl_launch_kernel(be, op, p->kernels[PK_NORM_BWD], args, sizeof args / sizeof args[0],
                                1, &global, &wg)) != CLF_OK)
        return st;
    if (!has_dalpha && !has_dbeta)
        return CLF_OK;
    if (has_dalpha && (st = launch_norm(be, op, p, scratch, xhat_off, a->x, 0, a->alpha,
                                        (clf_ptr){NULL, 0}, a->rows, a->cols, a->eps)) != CLF_OK)
        return st;

    cl_mem xhat = has_dalpha ? scratch : NULL, dalpha = ocl_mem(a->dalpha),
           dbeta = ocl_mem(a->dbeta);
    cl_ulong dalpha_off = ocl_elems(a->dalpha), dbeta_off = ocl_elems(a->dbeta);
    cl_int with_dalpha = has_dalpha, with_dbeta = has_dbeta;
    size_t pwg = p->wg[PK_NORM_PARAMS];
    size_t lx = pwg < PLUGIN_PARAMS_COLS ? pwg : PLUGIN_PARAMS_COLS, ly = pwg / lx;
    const ocl_arg pargs[] = {
        {sizeof dy, &dy},
        {sizeof dy_off, &dy_off},
        {sizeof xhat, &xhat},
        {sizeof xhat_off, &xhat_off},
        {sizeof dalpha, &dalpha},
        {sizeof dalpha_off, &dalpha_off},
        {sizeof with_dalpha, &with_dalpha},
        {sizeof dbeta, &dbeta},
        {sizeof dbeta_off, &dbeta_off},
        {sizeof with_dbeta, &with_dbeta},
        {sizeof rows, &rows},
        {sizeof cols, &cols},
        {pwg * sizeof(cl_float), NULL},
        {pwg * sizeof(cl_float), NULL},
    };
    size_t pglobal[2] = {((size_t)a->cols + lx - 1) / lx * lx, ly}, plocal[2] = {lx, ly};
    return ocl_launch_kernel(be, op, p->kernels[PK_NORM_PARAMS], pargs,
                             sizeof pargs / sizeof pargs[0], 2, pglobal, plocal);
}
