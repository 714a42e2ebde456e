/* ocl_plugin.c - the plugin ops (ABI 3): activations, gated activations and norms whose
 * math a plugin supplies as OpenCL C source (clformer/plugin.h).
 *
 * plugin_prepare() builds, once per op pointer, one program: kernels/group.cl
 * (clf_group_sum), kernels/plugin_prelude.cl, a #define block that maps CLF_PLUGIN_FORWARD
 * etc. to the op's clf_NAME_* functions, the op's source, and kernels/plugin.cl (the
 * kernels that apply it: view offsets, the gate product, alpha/beta and their
 * gradients). The programs go through the same disk cache as the kernel families; the
 * built kernels live in a small table on the backend, keyed by the op pointer, until
 * close. An op used before it was prepared is prepared then. Semantics of the ops:
 * clformer/backend.h. */
#include "ocl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The sources, embedded by embed_cl.cmake. */
extern const char clf_ocl_src_group[], clf_ocl_src_plugin_prelude[], clf_ocl_src_plugin[];
extern const size_t clf_ocl_src_group_len, clf_ocl_src_plugin_prelude_len, clf_ocl_src_plugin_len;

/* Norm kernels run one power-of-two work-group per row of at most this many work-items
 * (the kernel families' cap, OCL_ROW_WG in ocl_program.c): enough for a 512..8000-wide
 * row, while more would only add steps to clf_group_sum. */
#define PLUGIN_ROW_WG 256

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

/* ocl_pick_wg with at most PLUGIN_ROW_WG in auto mode; every plugin kernel is given at
 * most two floats of __local scratch per work-item (clf_plugin_norm_params: reda, redb). */
static clf_status pick_wg(clf_backend *be, const char *op, cl_kernel k, size_t *wg)
{
    return ocl_pick_wg(be, op, k, 2 * sizeof(cl_float), PLUGIN_ROW_WG, wg);
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
    const char *srcs[6] = {
        clf_ocl_src_group, clf_ocl_src_plugin_prelude, defines, op->opencl_source, after,
        clf_ocl_src_plugin};
    const size_t lens[6] = {clf_ocl_src_group_len, clf_ocl_src_plugin_prelude_len,
                            strlen(defines),       strlen(op->opencl_source),
                            sizeof after - 1,      clf_ocl_src_plugin_len};

    memset(p, 0, sizeof *p);
    p->op = op;
    if ((st = ocl_build_program(be, opname, what, cache_name, srcs, lens, 6, kernel_names + first,
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

/* The op's program (get_prog). The core (clformer/ops.h) has checked the rest: the op's
 * kind against the entry, the gates, the shape, the operands' bounds and aliasing. label
 * gets "<entry> '<op name>'" for the messages that follow. */
static clf_status get_kind(clf_backend *be, const char *opname, const clf_plugin_op *op,
                           const struct ocl_plugin_prog **out, char *label, size_t label_size)
{
    clf_status st = get_prog(be, opname, op, out);
    if (st == CLF_OK)
        snprintf(label, label_size, "%s '%s'", opname, op->name);
    return st;
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
    if ((st = get_kind(be, "activation", a->op, &p, op, sizeof op)) != CLF_OK)
        return st;
    const uint64_t n = a->n;
    const ocl_kval args[] = {OCL_KBUF(a->out), OCL_KBUF(a->x), OCL_KBUF(a->gate), ocl_kulong(n)};
    return ocl_run_elementwise(be, op, p->kernels[PK_ACT], p->wg[PK_ACT], args, OCL_COUNT(args), n);
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
    if ((st = get_kind(be, "activation_backward", a->op, &p, op, sizeof op)) != CLF_OK)
        return st;
    const uint64_t n = a->n;
    const ocl_kval args[] = {OCL_KBUF(a->dx), OCL_KBUF(a->dgate), OCL_KBUF(a->dy),
                             OCL_KBUF(a->x),  OCL_KBUF(a->gate),  ocl_kulong(n)};
    return ocl_run_elementwise(be, op, p->kernels[PK_ACT_BWD], p->wg[PK_ACT_BWD], args,
                               OCL_COUNT(args), n);
}

/* ---- norms ---- */

/* One work-group per row of clf_plugin_norm: out[r,:] = n(x[r,:]), then, with affine,
 * alpha * out + beta (beta optional). */
static clf_status launch_norm(clf_backend *be, const char *op, const struct ocl_plugin_prog *p,
                              cl_mem out, cl_ulong out_off, clf_ptr x, int affine, clf_ptr alpha,
                              clf_ptr beta, int rows, int cols, float eps)
{
    size_t wg = p->wg[PK_NORM];
    const ocl_kval args[] = {
        ocl_kmem(out),  ocl_kulong(out_off), OCL_KBUF(x),    ocl_kbool(affine), OCL_KBUF(alpha),
        OCL_KBUF(beta), ocl_khas(beta),      ocl_kint(cols), ocl_kfloat(eps),   ocl_kfloats(wg)};
    return ocl_run_rows(be, op, p->kernels[PK_NORM], wg, args, OCL_COUNT(args), rows);
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
    if ((st = get_kind(be, "norm", a->op, &p, op, sizeof op)) != CLF_OK)
        return st;
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
    if ((st = get_kind(be, "norm_backward", a->op, &p, op, sizeof op)) != CLF_OK)
        return st;
    const uint64_t n = (uint64_t)a->rows * (uint64_t)a->cols;

    const int accumulate = a->accumulate != 0, has_dalpha = a->dalpha.buf != NULL;
    const uint64_t scratch_elems = (accumulate ? n : 0) + (has_dalpha ? n : 0);
    cl_mem scratch = NULL;
    if (scratch_elems &&
        (st = ocl_scratch(be, op, (size_t)(scratch_elems * sizeof(cl_float)), &scratch)) != CLF_OK)
        return st;
    /* scratch: the accumulated rows' temporary at offset 0, then n(x) at xhat_off */
    const cl_ulong xhat_off = accumulate ? n : 0;
    size_t wg = p->wg[PK_NORM_BWD];
    const ocl_kval args[] = {OCL_KBUF(a->dx),       ocl_kmem(scratch), ocl_kulong(0),
                             ocl_kbool(accumulate), OCL_KBUF(a->dy),   OCL_KBUF(a->alpha),
                             OCL_KBUF(a->x),        ocl_kint(a->cols), ocl_kfloat(a->eps),
                             ocl_kfloats(wg)};
    if ((st = ocl_run_rows(be, op, p->kernels[PK_NORM_BWD], wg, args, OCL_COUNT(args), a->rows)) !=
        CLF_OK)
        return st;
    if (!has_dalpha && a->dbeta.buf == NULL)
        return CLF_OK;
    if (has_dalpha && (st = launch_norm(be, op, p, scratch, xhat_off, a->x, 0, a->alpha,
                                        (clf_ptr){NULL, 0}, a->rows, a->cols, a->eps)) != CLF_OK)
        return st;
    const ocl_kval head[] = {OCL_KBUF(a->dy), ocl_kmem(has_dalpha ? scratch : NULL),
                             ocl_kulong(xhat_off)};
    return ocl_run_param_grads(be, op, p->kernels[PK_NORM_PARAMS], p->wg[PK_NORM_PARAMS], head,
                               OCL_COUNT(head), a->dalpha, a->dbeta, a->rows, a->cols);
}
