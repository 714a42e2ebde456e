/* The products of a decoding step on an OpenCL device (issue 18, item 5), two questions:
 *
 * 1. Would int8 weights beat F16 weights in the OpenCL backend's few-row products ("int8
 *    on OpenCL if a kernel can beat f16 on a GPU")? Times the products C [m, n] =
 *    A [m, k] W^T of decoding (m = 1: greedy at batch 1; m = 4: beam 4 at batch 1) with
 *    W [n, k] read
 *   - as F16 by the backend's own kernel, gemm_rows_half (backends/opencl/kernels/gemm.cl,
 *     read from the repository at run time, built with the backend's row count), and
 *   - as int8 with one F32 scale per row of W by a candidate kernel written here in the
 *     same shape (lanes per column of C, 16-byte loads, a tree in local memory), which
 *     reads half the bytes.
 * Both results are checked against a double-precision product on the host first. Each
 * shape rotates over enough copies of W (256 MiB of F16) that every launch reads W from
 * device memory, not from the L2 cache. Times are the kernels' own (profiling events),
 * median of REPS launches; "step" adds them up over one decoder step of the base model
 * (6 layers of q, k, v, o, cross q, cross o, two feed-forward products, then the output
 * projection), to set beside the step time `clformer translate --backend opencl` reaches.
 *
 * 2. How much could CLBlast's HGEMM (F16 in, F16 out, on devices with cl_khr_fp16) save
 *    from 8 rows on, where the backend runs F32 SGEMM without it? Times CLBlastSgemm at the
 *    same shapes for m = 32 (greedy at batch 32) and 128 (beam 4 at batch 32) as the
 *    backend calls it (row-major, W transposed), wall time per call over back-to-back
 *    calls, so that every kernel CLBlast launches and the launches themselves are counted;
 *    on a device with cl_khr_fp16, CLBlastHgemm the same way, shape by shape after SGEMM
 *    (the bare call: the backend adds two elementwise launches, A to F16 and the product
 *    back to F32 with the epilogue). HGEMM can at best halve the bytes and double the rate,
 *    so half the step's SGEMM time bounds what it could save.
 *
 *   cc -O2 -o /tmp/opencl_decode_products bench/opencl_decode_products.c -lclblast -lOpenCL -lm
 *   /tmp/opencl_decode_products [device] [gemm.cl]   (device: a piece of "platform / name",
 *                                                     default the first device)
 */
#define _GNU_SOURCE              /* strcasestr */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <clblast_c.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define ROWS     7 /* the backend's OCL_GEMM_FEW_ROWS */
#define REPS     51
#define ROTATE_B ((size_t)256 << 20)

static const char *int8_src =
    "__kernel void gemm_rows_i8(__global const float *a, ulong lda, __global const char *w,\n"
    "    ulong w_off, ulong ldw, __global const float *scale, __global float *c, ulong ldc,\n"
    "    int m, int n, int k, int lanes, __local float *red)\n"
    "{\n"
    "  const uint lid = get_local_id(0), wg = get_local_size(0);\n"
    "  const int lane = (int)(lid & (uint)(lanes - 1));\n"
    "  const ulong j = get_group_id(0) * (ulong)(wg / (uint)lanes) + lid / (uint)lanes;\n"
    "  float acc[CLF_GEMM_FEW_ROWS];\n"
    "  for (int r = 0; r < CLF_GEMM_FEW_ROWS; r++) acc[r] = 0.0f;\n"
    "  if (j < (ulong)n) {\n"
    "    __global const char *b = w + w_off + j * ldw; /* k % 16 == 0, rows 16-aligned */\n"
    "    for (int q = lane; q < k / 16; q += lanes) {\n"
    "      const int p = q * 16;\n"
    "      const float16 bv = convert_float16(vload16(0, b + p));\n"
    "      for (int r = 0; r < CLF_GEMM_FEW_ROWS; r++)\n"
    "        if (r < m) {\n"
    "          const float16 av = vload16(0, a + r * lda + p);\n"
    "          acc[r] += dot(av.s0123, bv.s0123) + dot(av.s4567, bv.s4567) +\n"
    "                    dot(av.s89ab, bv.s89ab) + dot(av.scdef, bv.scdef);\n"
    "        }\n"
    "    }\n"
    "  }\n"
    "  for (int r = 0; r < CLF_GEMM_FEW_ROWS; r++)\n"
    "    if (r < m) red[r * wg + lid] = acc[r];\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  for (int s = lanes / 2; s > 0; s /= 2) {\n"
    "    if (lane < s)\n"
    "      for (int r = 0; r < m; r++) red[r * wg + lid] += red[r * wg + lid + s];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n"
    "  if (j >= (ulong)n) return;\n"
    "  for (int r = lane; r < m; r += lanes)\n"
    "    c[r * ldc + j] = red[r * wg + lid - lane] * scale[j];\n"
    "}\n";

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cl_int e_ = (call);                                                                        \
        if (e_ != CL_SUCCESS) {                                                                    \
            fprintf(stderr, "opencl_decode_products: %s failed: %d (line %d)\n", #call, e_,        \
                    __LINE__);                                                                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static cl_context ctx;
static cl_command_queue queue;
static cl_device_id dev;

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "opencl_decode_products: cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "opencl_decode_products: cannot read %s\n", path);
        exit(1);
    }
    s[n] = 0;
    fclose(f);
    return s;
}

static cl_kernel build(const char *src, const char *name)
{
    cl_int e;
    cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &e);
    CHECK(e);
    char opts[64];
    snprintf(opts, sizeof opts, "-DCLF_GEMM_FEW_ROWS=%d", ROWS);
    if (clBuildProgram(p, 1, &dev, opts, NULL, NULL) != CL_SUCCESS) {
        char log[8192] = "";
        clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
        fprintf(stderr, "opencl_decode_products: %s does not build:\n%s\n", name, log);
        exit(1);
    }
    cl_kernel k = clCreateKernel(p, name, &e);
    CHECK(e);
    clReleaseProgram(p);
    return k;
}

static void pick_device(const char *want)
{
    cl_platform_id plats[16];
    cl_uint np = 0;
    CHECK(clGetPlatformIDs(16, plats, &np));
    for (cl_uint i = 0; i < np; i++) {
        cl_device_id devs[16];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 16, devs, &nd) != CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < nd; d++) {
            char pn[256] = "", dn[256] = "", full[520];
            clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof pn, pn, NULL);
            clGetDeviceInfo(devs[d], CL_DEVICE_NAME, sizeof dn, dn, NULL);
            snprintf(full, sizeof full, "%s / %s", pn, dn);
            if (!want || strcasestr(full, want)) {
                dev = devs[d];
                printf("device: %s\n", full);
                return;
            }
        }
    }
    fprintf(stderr, "opencl_decode_products: no OpenCL device matches '%s'\n", want ? want : "");
    exit(1);
}

/* IEEE binary16 from a float, round to nearest even (finite, normal range here) */
static uint16_t to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int exp = (int)((x >> 23) & 0xff) - 127 + 15;
    if (exp <= 0)
        return (uint16_t)sign; /* tiny: zero is close enough for random weights */
    uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13), rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1)))
        h++;
    return (uint16_t)h;
}

static float from_half(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
    uint32_t x = exp ? sign | ((exp - 15 + 127) << 23) | (mant << 13) : sign;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_us(cl_event *ev, int n)
{
    double t[REPS];
    for (int i = 0; i < n; i++) {
        cl_ulong s, e;
        CHECK(clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_START, sizeof s, &s, NULL));
        CHECK(clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_END, sizeof e, &e, NULL));
        t[i] = (double)(e - s) * 1e-3;
        clReleaseEvent(ev[i]);
    }
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return t[n / 2];
}

static size_t pow2_lanes(size_t chunks, size_t wg)
{
    size_t lanes = 1;
    while (lanes < chunks && lanes * 2 <= 32 && lanes * 2 <= wg)
        lanes *= 2;
    return lanes;
}

typedef struct {
    double half_us, int8_us;
} timing;

/* one shape: W [n, k] in F16 and int8, `copies` of each, rotated through */
static timing time_shape(cl_kernel kh, cl_kernel k8, size_t wg, int m, int n, int k)
{
    const size_t nk = (size_t)n * (size_t)k;
    size_t copies = ROTATE_B / (nk * 2);
    if (copies < 2)
        copies = 2;
    float *w = malloc(nk * sizeof *w), *a = malloc((size_t)ROWS * k * sizeof *a);
    float *scale = malloc((size_t)n * sizeof *scale), *c = malloc((size_t)ROWS * n * sizeof *c);
    uint16_t *wh = malloc(nk * 2);
    int8_t *w8 = malloc(nk);
    srand(7);
    for (size_t i = 0; i < nk; i++)
        w[i] = ((float)((double)rand() / RAND_MAX) - 0.5f) * 0.1f;
    for (int i = 0; i < ROWS * k; i++)
        a[i] = (float)((double)rand() / RAND_MAX) - 0.5f;
    for (int j = 0; j < n; j++) { /* symmetric per-row int8, as clformer quantize writes */
        float mx = 0;
        for (int p = 0; p < k; p++)
            mx = fmaxf(mx, fabsf(w[(size_t)j * k + p]));
        scale[j] = mx > 0 ? mx / 127.0f : 1.0f;
        for (int p = 0; p < k; p++)
            w8[(size_t)j * k + p] = (int8_t)lrintf(w[(size_t)j * k + p] / scale[j]);
    }
    for (size_t i = 0; i < nk; i++)
        wh[i] = to_half(w[i]);

    cl_int e;
    cl_mem bh = clCreateBuffer(ctx, CL_MEM_READ_ONLY, nk * 2 * copies, NULL, &e);
    CHECK(e);
    cl_mem b8 = clCreateBuffer(ctx, CL_MEM_READ_ONLY, nk * copies, NULL, &e);
    CHECK(e);
    cl_mem ba = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                               (size_t)ROWS * k * sizeof *a, a, &e);
    CHECK(e);
    cl_mem bs =
        clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)n * 4, scale, &e);
    CHECK(e);
    cl_mem bc = clCreateBuffer(ctx, CL_MEM_READ_WRITE, (size_t)ROWS * n * 4, NULL, &e);
    CHECK(e);
    for (size_t r = 0; r < copies; r++) {
        CHECK(clEnqueueWriteBuffer(queue, bh, CL_FALSE, r * nk * 2, nk * 2, wh, 0, NULL, NULL));
        CHECK(clEnqueueWriteBuffer(queue, b8, CL_FALSE, r * nk, nk, w8, 0, NULL, NULL));
    }
    CHECK(clFinish(queue));

    const size_t lh = pow2_lanes(((size_t)k + 7) / 8, wg), l8 = pow2_lanes((size_t)k / 16, wg);
    const size_t gh = ((size_t)n + wg / lh - 1) / (wg / lh) * wg;
    const size_t g8 = ((size_t)n + wg / l8 - 1) / (wg / l8) * wg;
    const cl_ulong lda = (cl_ulong)k, ldc = (cl_ulong)n, zero = 0, ldb = (cl_ulong)k;
    const cl_int cm = m, cn = n, ck = k, has_bias = 0, relu = 0, clh = (cl_int)lh, cl8 = (cl_int)l8;
    const float alpha = 1.0f, beta = 0.0f;
    /* gemm_rows_half(a, a_off, lda, bh, bh_off, ldb, c, c_off, ldc, bias, bias_off, has_bias,
     *                relu, m, n, k, alpha, beta, lanes, red) */
    CHECK(clSetKernelArg(kh, 0, sizeof ba, &ba));
    CHECK(clSetKernelArg(kh, 1, 8, &zero));
    CHECK(clSetKernelArg(kh, 2, 8, &lda));
    CHECK(clSetKernelArg(kh, 3, sizeof bh, &bh));
    CHECK(clSetKernelArg(kh, 5, 8, &ldb));
    CHECK(clSetKernelArg(kh, 6, sizeof bc, &bc));
    CHECK(clSetKernelArg(kh, 7, 8, &zero));
    CHECK(clSetKernelArg(kh, 8, 8, &ldc));
    CHECK(clSetKernelArg(kh, 9, sizeof bs, &bs)); /* not read: has_bias = 0 */
    CHECK(clSetKernelArg(kh, 10, 8, &zero));
    CHECK(clSetKernelArg(kh, 11, 4, &has_bias));
    CHECK(clSetKernelArg(kh, 12, 4, &relu));
    CHECK(clSetKernelArg(kh, 13, 4, &cm));
    CHECK(clSetKernelArg(kh, 14, 4, &cn));
    CHECK(clSetKernelArg(kh, 15, 4, &ck));
    CHECK(clSetKernelArg(kh, 16, 4, &alpha));
    CHECK(clSetKernelArg(kh, 17, 4, &beta));
    CHECK(clSetKernelArg(kh, 18, 4, &clh));
    CHECK(clSetKernelArg(kh, 19, (size_t)m * wg * 4, NULL));
    /* gemm_rows_i8(a, lda, w, w_off, ldw, scale, c, ldc, m, n, k, lanes, red) */
    CHECK(clSetKernelArg(k8, 0, sizeof ba, &ba));
    CHECK(clSetKernelArg(k8, 1, 8, &lda));
    CHECK(clSetKernelArg(k8, 2, sizeof b8, &b8));
    CHECK(clSetKernelArg(k8, 4, 8, &ldb));
    CHECK(clSetKernelArg(k8, 5, sizeof bs, &bs));
    CHECK(clSetKernelArg(k8, 6, sizeof bc, &bc));
    CHECK(clSetKernelArg(k8, 7, 8, &ldc));
    CHECK(clSetKernelArg(k8, 8, 4, &cm));
    CHECK(clSetKernelArg(k8, 9, 4, &cn));
    CHECK(clSetKernelArg(k8, 10, 4, &ck));
    CHECK(clSetKernelArg(k8, 11, 4, &cl8));
    CHECK(clSetKernelArg(k8, 12, (size_t)m * wg * 4, NULL));

    /* correctness: each kernel against the double product of what it reads */
    for (int which = 0; which < 2; which++) {
        cl_ulong off = 0;
        CHECK(clSetKernelArg(which ? k8 : kh, which ? 3 : 4, 8, &off));
        CHECK(clEnqueueNDRangeKernel(queue, which ? k8 : kh, 1, NULL, which ? &g8 : &gh, &wg, 0,
                                     NULL, NULL));
        CHECK(clEnqueueReadBuffer(queue, bc, CL_TRUE, 0, (size_t)m * n * 4, c, 0, NULL, NULL));
        double worst = 0;
        for (int r = 0; r < m; r++)
            for (int j = 0; j < n; j++) {
                double ref = 0;
                for (int p = 0; p < k; p++)
                    ref += (double)a[(size_t)r * k + p] *
                           (which ? (double)w8[(size_t)j * k + p] * scale[j]
                                  : (double)from_half(wh[(size_t)j * k + p]));
                worst = fmax(worst, fabs(ref - c[(size_t)r * n + j]));
            }
        if (worst > 1e-3) {
            fprintf(stderr, "opencl_decode_products: %s wrong at m %d n %d k %d: max error %g\n",
                    which ? "int8" : "f16", m, n, k, worst);
            exit(1);
        }
    }

    timing t;
    cl_event ev[REPS];
    for (int which = 0; which < 2; which++) {
        for (int i = -5; i < REPS; i++) { /* 5 untimed */
            cl_ulong off = (cl_ulong)(((size_t)(i + 5) % copies) * nk);
            CHECK(clSetKernelArg(which ? k8 : kh, which ? 3 : 4, 8, &off));
            CHECK(clEnqueueNDRangeKernel(queue, which ? k8 : kh, 1, NULL, which ? &g8 : &gh, &wg, 0,
                                         NULL, i >= 0 ? &ev[i] : NULL));
        }
        CHECK(clFinish(queue));
        double us = median_us(ev, REPS);
        if (which)
            t.int8_us = us;
        else
            t.half_us = us;
    }
    clReleaseMemObject(bh);
    clReleaseMemObject(b8);
    clReleaseMemObject(ba);
    clReleaseMemObject(bs);
    clReleaseMemObject(bc);
    free(w);
    free(a);
    free(scale);
    free(c);
    free(wh);
    free(w8);
    return t;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

/* CLBlastSgemm (half: CLBlastHgemm) C [m, n] = A [m, k] W^T as the backend calls it; W
 * rotated as above. Wall microseconds per call: the median of 5 batches of 20 back-to-back
 * calls. */
static double time_gemm(int m, int n, int k, int half)
{
    const size_t nk = (size_t)n * (size_t)k, mk = (size_t)m * (size_t)k, es = half ? 2 : 4;
    size_t copies = ROTATE_B / (nk * 2);
    if (copies < 2)
        copies = 2;
    float *w = malloc(nk * sizeof *w), *a = malloc(mk * sizeof *a);
    uint16_t *wh = malloc(nk * sizeof *wh), *ah = malloc(mk * sizeof *ah);
    for (size_t i = 0; i < nk; i++)
        wh[i] = to_half(w[i] = ((float)((double)rand() / RAND_MAX) - 0.5f) * 0.1f);
    for (size_t i = 0; i < mk; i++)
        ah[i] = to_half(a[i] = (float)((double)rand() / RAND_MAX) - 0.5f);
    cl_int e;
    cl_mem bw = clCreateBuffer(ctx, CL_MEM_READ_ONLY, nk * es * copies, NULL, &e);
    CHECK(e);
    cl_mem ba = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, mk * es,
                               half ? (void *)ah : (void *)a, &e);
    CHECK(e);
    cl_mem bc = clCreateBuffer(ctx, CL_MEM_READ_WRITE, (size_t)m * n * es, NULL, &e);
    CHECK(e);
    for (size_t r = 0; r < copies; r++)
        CHECK(clEnqueueWriteBuffer(queue, bw, CL_FALSE, r * nk * es, nk * es,
                                   half ? (void *)wh : (void *)w, 0, NULL, NULL));
    CHECK(clFinish(queue));
    double t[5];
    size_t call = 0;
    for (int b = -1; b < 5; b++) { /* batch -1: untimed (CLBlast compiles its kernels) */
        const double t0 = now_us();
        for (int i = 0; i < 20; i++, call++) {
            CLBlastStatusCode cs =
                half ? CLBlastHgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes,
                                    (size_t)m, (size_t)n, (size_t)k, 0x3c00 /* 1.0 */, ba, 0,
                                    (size_t)k, bw, (call % copies) * nk, (size_t)k, 0, bc, 0,
                                    (size_t)n, &queue, NULL)
                     : CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes,
                                    (size_t)m, (size_t)n, (size_t)k, 1.0f, ba, 0, (size_t)k, bw,
                                    (call % copies) * nk, (size_t)k, 0.0f, bc, 0, (size_t)n, &queue,
                                    NULL);
            if (cs != CLBlastSuccess) {
                fprintf(stderr, "opencl_decode_products: %s failed: %d\n",
                        half ? "CLBlastHgemm" : "CLBlastSgemm", (int)cs);
                exit(1);
            }
        }
        CHECK(clFinish(queue));
        if (b >= 0)
            t[b] = (now_us() - t0) / 20;
    }
    qsort(t, 5, sizeof *t, cmp_double);
    clReleaseMemObject(bw);
    clReleaseMemObject(ba);
    clReleaseMemObject(bc);
    free(w);
    free(a);
    free(wh);
    free(ah);
    return t[2];
}

/* Whether the device lists cl_khr_fp16 (CLBlast's HGEMM needs it). */
static int device_fp16(void)
{
    char ext[8192] = "";
    if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, sizeof ext - 1, ext, NULL) != CL_SUCCESS)
        return 0;
    return strstr(ext, "cl_khr_fp16") != NULL;
}

int main(int argc, char **argv)
{
    pick_device(argc > 1 ? argv[1] : NULL);
    const char *cl_path = argc > 2 ? argv[2] : "backends/opencl/kernels/gemm.cl";
    cl_int e;
    ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
    CHECK(e);
    queue = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &e);
    CHECK(e);
    char *half_src = read_file(cl_path);
    cl_kernel kh = build(half_src, "gemm_rows_half"), k8 = build(int8_src, "gemm_rows_i8");
    free(half_src);
    size_t wh = 0, w8 = 0;
    CHECK(clGetKernelWorkGroupInfo(kh, dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof wh, &wh, NULL));
    CHECK(clGetKernelWorkGroupInfo(k8, dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof w8, &w8, NULL));
    size_t wg = 256;
    while (wg > wh || wg > w8)
        wg /= 2;
    printf("work-group %zu; times are kernel times (profiling events), median of %d launches,\n"
           "W rotated over 256 MiB of F16 copies so that it comes from device memory\n\n",
           wg, REPS);

    /* one decoder step of the base model (d 512, d_ff 2048, vocab 8000, 6 layers) */
    static const struct {
        int n, k, per_step;
    } shapes[] = {{512, 512, 6 * 6}, {2048, 512, 6}, {512, 2048, 6}, {8000, 512, 1}};
    static const int ms[] = {1, 4};
    printf("| m | n x k | f16 us | f16 GB/s | int8 us | int8 GB/s | f16 / int8 |\n"
           "|---:|---|---:|---:|---:|---:|---:|\n");
    for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++) {
        double step_h = 0, step_8 = 0;
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            const int n = shapes[s].n, k = shapes[s].k;
            timing t = time_shape(kh, k8, wg, ms[mi], n, k);
            const double nk = (double)n * k;
            printf("| %d | %d x %d | %.2f | %.1f | %.2f | %.1f | %.2f |\n", ms[mi], n, k, t.half_us,
                   nk * 2 / t.half_us * 1e-3, t.int8_us, nk / t.int8_us * 1e-3,
                   t.half_us / t.int8_us);
            step_h += shapes[s].per_step * t.half_us;
            step_8 += shapes[s].per_step * t.int8_us;
        }
        printf("| %d | one decoder step (%d products) | %.1f | | %.1f | | %.2f |\n", ms[mi],
               6 * 8 + 1, step_h, step_8, step_h / step_8);
    }

    const int fp16 = device_fp16();
    printf("\nCLBlast SGEMM from 8 rows (what the backend runs there for F32 weights, and for\n"
           "F16 weights without cl_khr_fp16)%s, wall time per call over back-to-back calls:\n\n"
           "| m | n x k | SGEMM us | GFLOP/s |%s\n|---:|---|---:|---:|%s\n",
           fp16 ? " and CLBlast HGEMM (F16 weights with it)" : "",
           fp16 ? " HGEMM us | GFLOP/s | SGEMM / HGEMM |" : "", fp16 ? "---:|---:|---:|" : "");
    static const int big[] = {32, 128};
    for (size_t mi = 0; mi < sizeof big / sizeof *big; mi++) {
        double step = 0, step_h = 0;
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            const int n = shapes[s].n, k = shapes[s].k;
            const double flop = 2.0 * big[mi] * n * k;
            const double us = time_gemm(big[mi], n, k, 0);
            printf("| %d | %d x %d | %.2f | %.0f |", big[mi], n, k, us, flop / us * 1e-3);
            if (fp16) {
                const double hus = time_gemm(big[mi], n, k, 1);
                printf(" %.2f | %.0f | %.2f |", hus, flop / hus * 1e-3, us / hus);
                step_h += shapes[s].per_step * hus;
            }
            printf("\n");
            step += shapes[s].per_step * us;
        }
        printf("| %d | one decoder step (%d products) | %.1f | |", big[mi], 6 * 8 + 1, step);
        if (fp16)
            printf(" %.1f | | %.2f |", step_h, step / step_h);
        printf("\n");
    }
    clReleaseKernel(kh);
    clReleaseKernel(k8);
    clReleaseCommandQueue(queue);
    clReleaseContext(ctx);
    return 0;
}
