/* ocl_capture.c - capture and replay (clf_backend_api.capture_begin, ABI 10).
 *
 * While a capture is open, ocl_run records each launch instead of queueing it, and the
 * products CLBlast runs (which queues its kernels itself) are recorded as the call: a
 * recording is a list of entries, each one of
 *   - a launch (kernel, argument values, sizes): a replay sets the kernel's arguments and
 *     queues it, none of the op's host work again;
 *   - a command buffer of consecutive launches, where the device has cl_khr_command_buffer
 *     with simultaneous use (each command waiting on the one before, each with a kernel
 *     object of its own: PoCL 3.1 reads a command's arguments from its kernel object when the
 *     buffer runs): a replay is one clEnqueueCommandBufferKHR;
 *   - a gemm call (its arguments copied): a replay calls the op again.
 * Entries run in order on the backend's in-order queue. A recording holds a reference to
 * every buffer its launches name; a gemm call's buffers are the caller's to keep (the rule
 * of capture_free). Copies, fills and transfers cannot be recorded: the op fails
 * (ocl_capture_refuse), and capture_end after it. */
#include "ocl_internal.h"

#include <stdlib.h>
#include <string.h>

#include "clformer/fault.h"

typedef enum entry_kind { ENTRY_LAUNCH, ENTRY_CMDBUF, ENTRY_GEMM } entry_kind;

typedef struct entry {
    entry_kind kind;
    /* ENTRY_LAUNCH */
    cl_kernel k;
    ocl_kval *args;
    int nargs;
    cl_uint dims;
    size_t global[3], local[3];
    /* ENTRY_CMDBUF */
    cl_command_buffer_khr cmdbuf;
    /* ENTRY_GEMM */
    clf_gemm_args gemm;
    clf_status (*gemm_fn)(clf_backend *be, const clf_gemm_args *a);
} entry;

struct clf_capture {
    entry *entries;
    int n, cap;
    /* command-buffer mode: the buffer being recorded (NULL: none yet), its last command */
    cl_command_buffer_khr open;
    cl_sync_point_khr last;
    int has_last;
    cl_mem *held; /* buffers the launches name, one reference each */
    int n_held, held_cap;
    cl_kernel *kernels; /* the command buffers' own kernel objects (own_kernel) */
    int n_kernels, kernels_cap;
    int failed; /* an op could not be recorded: capture_end fails */
};

static void *grow(void *p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return p;
    int n = *cap ? 2 * *cap : 16;
    while (n < need)
        n *= 2;
    void *q = realloc(p, (size_t)n * elem);
    if (q)
        *cap = n;
    return q;
}

/* A new entry at the end of c, zeroed; NULL when out of host memory. */
static entry *add_entry(clf_capture *c)
{
    entry *e = grow(c->entries, &c->cap, c->n + 1, sizeof *e);
    if (!e)
        return NULL;
    c->entries = e;
    e = &c->entries[c->n++];
    memset(e, 0, sizeof *e);
    return e;
}

/* A reference to m, once per capture (m NULL: nothing). */
static clf_status hold(clf_capture *c, cl_mem m)
{
    if (!m)
        return CLF_OK;
    for (int i = 0; i < c->n_held; i++)
        if (c->held[i] == m)
            return CLF_OK;
    cl_mem *h = grow(c->held, &c->held_cap, c->n_held + 1, sizeof *h);
    if (!h)
        return clf_error(CLF_ERR_NOMEM, "opencl: capture: out of host memory");
    c->held = h;
    cl_int err = clRetainMemObject(m);
    if (err != CL_SUCCESS)
        return ocl_fail("capture", "clRetainMemObject", err);
    c->held[c->n_held++] = m;
    return CLF_OK;
}

/* A new kernel object for k's function, kept (and released) by c. */
static clf_status own_kernel(clf_capture *c, const char *op, cl_kernel k, cl_kernel *out)
{
    char name[128];
    cl_program prog;
    cl_int err = clGetKernelInfo(k, CL_KERNEL_PROGRAM, sizeof prog, &prog, NULL);
    if (err == CL_SUCCESS)
        err = clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
    if (err != CL_SUCCESS)
        return ocl_fail(op, "clGetKernelInfo", err);
    cl_kernel *ks = grow(c->kernels, &c->kernels_cap, c->n_kernels + 1, sizeof *ks);
    if (!ks)
        return clf_error(CLF_ERR_NOMEM, "opencl: %s: capture: out of host memory", op);
    c->kernels = ks;
    *out = clCreateKernel(prog, name, &err);
    if (err != CL_SUCCESS)
        return ocl_fail(op, "clCreateKernel", err);
    c->kernels[c->n_kernels++] = *out;
    return CLF_OK;
}

/* The command buffer being recorded, finalized into an entry of its own (none open: nothing
 * to do). */
static clf_status close_cmdbuf(clf_backend *be, clf_capture *c)
{
    if (!c->open)
        return CLF_OK;
    cl_command_buffer_khr cb = c->open;
    c->open = NULL;
    c->has_last = 0;
    entry *e = add_entry(c);
    if (!e) {
        be->cb.release(cb);
        return clf_error(CLF_ERR_NOMEM, "opencl: capture: out of host memory");
    }
    e->kind = ENTRY_CMDBUF;
    e->cmdbuf = cb;
    cl_int err = be->cb.finalize(cb);
    return err == CL_SUCCESS ? CLF_OK : ocl_fail("capture", "clFinalizeCommandBufferKHR", err);
}

void ocl_capture_free(clf_backend *be, clf_capture *c)
{
    if (!c)
        return;
    if (c->open)
        be->cb.release(c->open);
    for (int i = 0; i < c->n; i++) {
        free(c->entries[i].args);
        if (c->entries[i].cmdbuf)
            be->cb.release(c->entries[i].cmdbuf);
    }
    free(c->entries);
    for (int i = 0; i < c->n_held; i++)
        clReleaseMemObject(c->held[i]);
    free(c->held);
    for (int i = 0; i < c->n_kernels; i++)
        clReleaseKernel(c->kernels[i]);
    free(c->kernels);
    free(c);
}

clf_status ocl_capture_begin(clf_backend *be)
{
    if (be->recording)
        return clf_error(CLF_ERR_INPUT, "opencl: capture_begin: a capture is already open");
    if (!(be->recording = calloc(1, sizeof *be->recording)))
        return clf_error(CLF_ERR_NOMEM, "opencl: capture_begin: out of host memory");
    return CLF_OK;
}

clf_status ocl_capture_end(clf_backend *be, clf_capture **out)
{
    clf_capture *c = be->recording;
    if (!c)
        return clf_error(CLF_ERR_INPUT, "opencl: capture_end: no capture is open");
    be->recording = NULL;
    clf_status st = CLF_OK;
    if (!out) /* dropped: whatever failed has said so */
        ;
    else if (c->failed)
        st = clf_error(CLF_ERR_UNSUPPORTED,
                       "opencl: capture_end: an op of the capture could not be recorded");
    else if ((st = close_cmdbuf(be, c)) == CLF_OK) {
        *out = c;
        return CLF_OK;
    }
    ocl_capture_free(be, c);
    return st;
}

clf_status ocl_capture_refuse(clf_backend *be, const char *op, const char *what)
{
    be->recording->failed = 1;
    return clf_error(CLF_ERR_UNSUPPORTED, "opencl: %s: %s cannot be recorded (capture_begin)", op,
                     what);
}

clf_status ocl_capture_gemm(clf_backend *be, const char *op, const clf_gemm_args *g,
                            clf_status (*fn)(clf_backend *be, const clf_gemm_args *a))
{
    clf_capture *c = be->recording;
    clf_status st = close_cmdbuf(be, c); /* the launches before it, then the call */
    entry *e = st == CLF_OK ? add_entry(c) : NULL;
    if (st == CLF_OK && !e)
        st = clf_error(CLF_ERR_NOMEM, "opencl: %s: capture: out of host memory", op);
    if (st != CLF_OK) {
        c->failed = 1;
        return st;
    }
    e->kind = ENTRY_GEMM;
    e->gemm = *g;
    e->gemm_fn = fn;
    return CLF_OK;
}

/* One launch into the command buffer being recorded (opened first when none is). */
static clf_status record_command(clf_backend *be, clf_capture *c, const char *op, cl_kernel k,
                                 const ocl_kval *head, int nhead, const ocl_kval *tail, int ntail,
                                 cl_uint dims, const size_t *global, const size_t *local)
{
    cl_int err = CL_SUCCESS;
    if (!c->open) {
        const cl_command_buffer_properties_khr props[] = {
            CL_COMMAND_BUFFER_FLAGS_KHR, CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR, 0};
        c->open = be->cb.create(1, &be->queue, props, &err);
        if (err != CL_SUCCESS || !c->open) {
            c->open = NULL;
            return ocl_fail(op, "clCreateCommandBufferKHR", err);
        }
    }
    cl_kernel own = NULL;
    clf_status st = own_kernel(c, op, k, &own);
    if (st == CLF_OK)
        st = ocl_set_args(op, own, head, nhead, tail, ntail);
    if (st != CLF_OK)
        return st;
    cl_sync_point_khr sp;
    err = be->cb.ndrange(c->open, NULL, NULL, own, dims, NULL, global, local, c->has_last ? 1 : 0,
                         c->has_last ? &c->last : NULL, &sp, NULL);
    if (err != CL_SUCCESS)
        return ocl_fail(op, "clCommandNDRangeKernelKHR", err);
    c->last = sp;
    c->has_last = 1;
    return CLF_OK;
}

clf_status ocl_capture_record(clf_backend *be, const char *op, cl_kernel k, const ocl_kval *head,
                              int nhead, const ocl_kval *tail, int ntail, cl_uint dims,
                              const size_t *global, const size_t *local)
{
    clf_capture *c = be->recording;
    clf_status st = CLF_OK;
    const int nargs = nhead + ntail;
    for (int i = 0; i < nargs && st == CLF_OK; i++) {
        const ocl_kval *v = i < nhead ? &head[i] : &tail[i - nhead];
        if (v->is_mem)
            st = hold(c, v->v.mem);
    }
    if (st == CLF_OK && be->capture_mode == OCL_CAPTURE_CMDBUF)
        st = record_command(be, c, op, k, head, nhead, tail, ntail, dims, global, local);
    else if (st == CLF_OK) {
        ocl_kval *args = malloc(sizeof *args * (size_t)(nargs ? nargs : 1));
        entry *e = args ? add_entry(c) : NULL;
        if (!e) {
            free(args);
            st = clf_error(CLF_ERR_NOMEM, "opencl: %s: capture: out of host memory", op);
        } else {
            *e = (entry){.kind = ENTRY_LAUNCH, .k = k, .args = args, .nargs = nargs, .dims = dims};
            for (int i = 0; i < nargs; i++)
                e->args[i] = i < nhead ? head[i] : tail[i - nhead];
            for (cl_uint d = 0; d < dims; d++) {
                e->global[d] = global[d];
                e->local[d] = local ? local[d] : 0;
            }
        }
    }
    if (st != CLF_OK)
        c->failed = 1;
    return st;
}

clf_status ocl_replay(clf_backend *be, clf_capture *c)
{
    if (be->recording)
        return clf_error(CLF_ERR_INPUT, "opencl: replay: a capture is open");
    clf_status st = CLF_OK;
    for (int i = 0; i < c->n && st == CLF_OK; i++) {
        const entry *e = &c->entries[i];
        if (e->kind == ENTRY_GEMM) {
            st = e->gemm_fn(be, &e->gemm);
        } else if (e->kind == ENTRY_LAUNCH) {
            st = ocl_run(be, "replay", e->k, e->args, e->nargs, NULL, 0, e->dims, e->global,
                         e->local[0] ? e->local : NULL);
        } else {
            cl_int err = clf_fault_hit(CLF_FAULT_OPENCL_ENQUEUE)
                             ? CL_OUT_OF_RESOURCES
                             : be->cb.enqueue(0, NULL, e->cmdbuf, 0, NULL, NULL);
            if (err != CL_SUCCESS)
                st = ocl_fail("replay", "clEnqueueCommandBufferKHR", err);
        }
    }
    return st;
}

/* The command-buffer entry points of the device's platform, when the device has
 * cl_khr_command_buffer with simultaneous use; 0 otherwise. */
static int load_cmdbuf(clf_backend *be)
{
    char ext[8192] = "";
    cl_device_command_buffer_capabilities_khr caps = 0;
    if (clGetDeviceInfo(be->dev.device, CL_DEVICE_EXTENSIONS, sizeof ext - 1, ext, NULL) !=
            CL_SUCCESS ||
        !strstr(ext, "cl_khr_command_buffer ") ||
        clGetDeviceInfo(be->dev.device, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR, sizeof caps,
                        &caps, NULL) != CL_SUCCESS ||
        !(caps & CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR))
        return 0;
    cl_platform_id p = be->dev.platform;
#define OCL_CB_FN(field, name)                                                                     \
    be->cb.field = (name##_fn)clGetExtensionFunctionAddressForPlatform(p, #name)
    OCL_CB_FN(create, clCreateCommandBufferKHR);
    OCL_CB_FN(finalize, clFinalizeCommandBufferKHR);
    OCL_CB_FN(release, clReleaseCommandBufferKHR);
    OCL_CB_FN(enqueue, clEnqueueCommandBufferKHR);
    OCL_CB_FN(ndrange, clCommandNDRangeKernelKHR);
#undef OCL_CB_FN
    return be->cb.create && be->cb.finalize && be->cb.release && be->cb.enqueue && be->cb.ndrange;
}

clf_status ocl_capture_mode(clf_backend *be)
{
    const char *v = getenv("CLF_OPENCL_CAPTURE");
    if (v && strcmp(v, "off") == 0)
        be->capture_mode = OCL_CAPTURE_OFF;
    else if (v && strcmp(v, "list") == 0)
        be->capture_mode = OCL_CAPTURE_LIST;
    else if (!v || !*v || strcmp(v, "auto") == 0)
        be->capture_mode = load_cmdbuf(be) ? OCL_CAPTURE_CMDBUF : OCL_CAPTURE_LIST;
    else
        return clf_error(CLF_ERR_INPUT,
                         "opencl: open: CLF_OPENCL_CAPTURE='%s' is not auto, list or off", v);
    return CLF_OK;
}
