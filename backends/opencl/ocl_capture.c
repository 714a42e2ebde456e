/* ocl_capture.c - capture and replay (clf_backend_api.capture_begin, ABI 10).
 *
 * While a capture is open, ocl_run records each launch instead of queueing it. Where the
 * device has cl_khr_command_buffer with simultaneous use, the launches go into one command
 * buffer (each waiting on the one before: the op order), finalized by capture_end, and a
 * replay is one clEnqueueCommandBufferKHR. Elsewhere, or with CLF_OPENCL_CAPTURE=list, the
 * capture keeps the list of launches (kernel, argument values, sizes), and a replay sets
 * each kernel's arguments and queues it: none of the ops' host work runs again. Both hold a
 * reference to every buffer they name. What ocl_run does not launch (CLBlast's products,
 * copies and fills) cannot be recorded: the op fails (ocl_capture_refuse), and capture_end
 * after it. */
#include "ocl_internal.h"

#include <stdlib.h>
#include <string.h>

#include "clformer/fault.h"

/* One recorded launch (the list) */
typedef struct ocl_launch {
    cl_kernel k;
    ocl_kval *args;
    int nargs;
    cl_uint dims;
    size_t global[3], local[3];
} ocl_launch;

struct clf_capture {
    cl_command_buffer_khr cmdbuf; /* NULL: the list */
    cl_sync_point_khr last;       /* the command buffer's last command, once has_last */
    int has_last;
    ocl_launch *launches;
    int n, cap;
    cl_mem *held; /* buffers the recording names, one reference each */
    int n_held, held_cap;
    cl_kernel *kernels; /* the command buffer's own kernel objects (own_kernel) */
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

void ocl_capture_free(clf_backend *be, clf_capture *c)
{
    (void)be;
    if (!c)
        return;
    if (c->cmdbuf)
        be->cb.release(c->cmdbuf);
    for (int i = 0; i < c->n; i++)
        free(c->launches[i].args);
    free(c->launches);
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
    clf_capture *c = calloc(1, sizeof *c);
    if (!c)
        return clf_error(CLF_ERR_NOMEM, "opencl: capture_begin: out of host memory");
    if (be->capture_mode == OCL_CAPTURE_CMDBUF) {
        const cl_command_buffer_properties_khr props[] = {
            CL_COMMAND_BUFFER_FLAGS_KHR, CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR, 0};
        cl_int err;
        c->cmdbuf = be->cb.create(1, &be->queue, props, &err);
        if (err != CL_SUCCESS || !c->cmdbuf) {
            c->cmdbuf = NULL;
            ocl_capture_free(be, c);
            return ocl_fail("capture_begin", "clCreateCommandBufferKHR", err);
        }
    }
    be->recording = c;
    return CLF_OK;
}

clf_status ocl_capture_end(clf_backend *be, clf_capture **out)
{
    clf_capture *c = be->recording;
    clf_status st = CLF_OK;
    if (!c)
        return clf_error(CLF_ERR_INPUT, "opencl: capture_end: no capture is open");
    be->recording = NULL;
    if (!out) { /* dropped: whatever failed has said so */
        ocl_capture_free(be, c);
        return CLF_OK;
    }
    if (c->failed)
        st = clf_error(CLF_ERR_UNSUPPORTED,
                       "opencl: capture_end: an op of the capture could not be recorded");
    else if (c->cmdbuf) {
        cl_int err = be->cb.finalize(c->cmdbuf);
        if (err != CL_SUCCESS)
            st = ocl_fail("capture_end", "clFinalizeCommandBufferKHR", err);
    }
    if (st != CLF_OK) {
        ocl_capture_free(be, c);
        return st;
    }
    *out = c;
    return CLF_OK;
}

clf_status ocl_capture_refuse(clf_backend *be, const char *op, const char *what)
{
    be->recording->failed = 1;
    return clf_error(CLF_ERR_UNSUPPORTED, "opencl: %s: %s cannot be recorded (capture_begin)", op,
                     what);
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
    if (st != CLF_OK)
        goto fail;
    if (c->cmdbuf) {
        /* a kernel object of the command's own, its arguments set once: a command may read
         * its kernel's arguments when it runs (PoCL 3.1 does), and the ops set theirs anew
         * at every launch */
        cl_kernel own = NULL;
        if ((st = own_kernel(c, op, k, &own)) != CLF_OK)
            goto fail;
        for (int i = 0; i < nargs; i++) {
            const ocl_kval *v = i < nhead ? &head[i] : &tail[i - nhead];
            cl_int err = clSetKernelArg(own, (cl_uint)i, v->size, v->local ? NULL : &v->v);
            if (err != CL_SUCCESS) {
                st = ocl_fail(op, "clSetKernelArg", err);
                goto fail;
            }
        }
        cl_sync_point_khr sp;
        cl_int err = be->cb.ndrange(c->cmdbuf, NULL, NULL, own, dims, NULL, global, local,
                                    c->has_last ? 1 : 0, c->has_last ? &c->last : NULL, &sp, NULL);
        if (err != CL_SUCCESS) {
            st = ocl_fail(op, "clCommandNDRangeKernelKHR", err);
            goto fail;
        }
        c->last = sp;
        c->has_last = 1;
        return CLF_OK;
    }
    ocl_launch *l = grow(c->launches, &c->cap, c->n + 1, sizeof *l);
    if (!l) {
        st = clf_error(CLF_ERR_NOMEM, "opencl: %s: capture: out of host memory", op);
        goto fail;
    }
    c->launches = l;
    l = &c->launches[c->n];
    *l = (ocl_launch){.k = k, .nargs = nargs, .dims = dims};
    if (!(l->args = malloc(sizeof *l->args * (size_t)(nargs ? nargs : 1)))) {
        st = clf_error(CLF_ERR_NOMEM, "opencl: %s: capture: out of host memory", op);
        goto fail;
    }
    for (int i = 0; i < nargs; i++)
        l->args[i] = i < nhead ? head[i] : tail[i - nhead];
    for (cl_uint d = 0; d < dims; d++) {
        l->global[d] = global[d];
        l->local[d] = local ? local[d] : 0;
    }
    c->n++;
    return CLF_OK;
fail:
    c->failed = 1;
    return st;
}

clf_status ocl_replay(clf_backend *be, clf_capture *c)
{
    if (be->recording)
        return clf_error(CLF_ERR_INPUT, "opencl: replay: a capture is open");
    if (c->cmdbuf) {
        cl_int err = clf_fault_hit(CLF_FAULT_OPENCL_ENQUEUE)
                         ? CL_OUT_OF_RESOURCES
                         : be->cb.enqueue(0, NULL, c->cmdbuf, 0, NULL, NULL);
        return err == CL_SUCCESS ? CLF_OK : ocl_fail("replay", "clEnqueueCommandBufferKHR", err);
    }
    for (int i = 0; i < c->n; i++) {
        const ocl_launch *l = &c->launches[i];
        clf_status st = ocl_run(be, "replay", l->k, l->args, l->nargs, NULL, 0, l->dims, l->global,
                                l->local[0] ? l->local : NULL);
        if (st != CLF_OK)
            return st;
    }
    return CLF_OK;
}

/* The command-buffer entry points of the device's platform, when the device has
 * cl_khr_command_buffer with simultaneous use; 0 otherwise. */
static int load_cmdbuf(clf_backend *be)
{
    char ext[8192] = "";
    cl_device_command_buffer_capabilities_khr caps = 0;
    size_t n = 0;
    if (clGetDeviceInfo(be->dev.device, CL_DEVICE_EXTENSIONS, sizeof ext - 1, ext, &n) !=
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
