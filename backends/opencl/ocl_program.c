/* ocl_program.c - building the kernel families (and, after open, the programs of plugin
 * ops), with a program cache on disk.
 *
 * Each kernels/<family>.cl is built as its own program, with kernels/group.cl and
 * kernels/common.cl prepended.
 * A built program's binary (CL_PROGRAM_BINARIES) is saved under the cache directory as
 * <family>-<key>.clbin, key = FNV-1a 64 of everything that can change the binary: the
 * sources, the build options, the platform, device and driver names and versions. Files
 * are written to a temporary name and renamed, so a reader never sees half a file; a file
 * whose header, length or checksum is wrong, or that the driver refuses, is ignored and
 * rebuilt from source (and then overwritten). The cache never makes open() fail. */
#include "ocl_internal.h"

#include "clformer/fault.h"
#include "clformer/fs.h"
#include "clformer/hash.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* The sources, embedded by embed_cl.cmake. */
extern const char clf_ocl_src_group[], clf_ocl_src_common[], clf_ocl_src_attention[],
    clf_ocl_src_layernorm[], clf_ocl_src_softmax[], clf_ocl_src_embed[], clf_ocl_src_elementwise[],
    clf_ocl_src_gemm[], clf_ocl_src_attention_backward[], clf_ocl_src_layernorm_backward[],
    clf_ocl_src_train[], clf_ocl_src_optim[];
extern const size_t clf_ocl_src_group_len, clf_ocl_src_common_len, clf_ocl_src_attention_len,
    clf_ocl_src_layernorm_len, clf_ocl_src_softmax_len, clf_ocl_src_embed_len,
    clf_ocl_src_elementwise_len, clf_ocl_src_gemm_len, clf_ocl_src_attention_backward_len,
    clf_ocl_src_layernorm_backward_len, clf_ocl_src_train_len, clf_ocl_src_optim_len;

/* Build options: full-precision math (no -cl-fast-relaxed-math: results must match the
 * CPU backend to 1e-5), the masked-score value the attention kernels use, and the most
 * rows gemm_rows_half and gemm_rows_float take (their private sums are sized by it). */
#define OCL_STR_(x) #x
#define OCL_STR(x)  OCL_STR_(x)
#define OCL_BUILD_OPTIONS                                                                          \
    "-DCLF_MASKED_SCORE=-1.0e9f -DCLF_GEMM_FEW_ROWS=" OCL_STR(OCL_GEMM_FEW_ROWS)

/* Bumped when the cache file layout changes. */
#define OCL_CACHE_MAGIC  "CLFOCLB1"
#define OCL_CACHE_HEADER 32 /* magic[8], key, payload bytes, payload checksum (u64 each) */

/* Row kernels reduce with a power-of-two work-group of at most this many work-items:
 * enough to keep a GPU compute unit busy on a 512..8000-wide row, while more would only
 * add barrier steps (and on PoCL, longer work-group loops). */
#define OCL_ROW_WG 256

typedef struct family_def {
    const char *name;
    const char *src;
    const size_t *len;
} family_def;

static const family_def families[OCL_F_COUNT] = {
    [OCL_F_ATTENTION] = {"attention", clf_ocl_src_attention, &clf_ocl_src_attention_len},
    [OCL_F_LAYERNORM] = {"layernorm", clf_ocl_src_layernorm, &clf_ocl_src_layernorm_len},
    [OCL_F_SOFTMAX] = {"softmax", clf_ocl_src_softmax, &clf_ocl_src_softmax_len},
    [OCL_F_EMBED] = {"embed", clf_ocl_src_embed, &clf_ocl_src_embed_len},
    [OCL_F_ELEMENTWISE] = {"elementwise", clf_ocl_src_elementwise, &clf_ocl_src_elementwise_len},
    [OCL_F_GEMM] = {"gemm", clf_ocl_src_gemm, &clf_ocl_src_gemm_len},
    [OCL_F_ATTENTION_BACKWARD] = {"attention_backward", clf_ocl_src_attention_backward,
                                  &clf_ocl_src_attention_backward_len},
    [OCL_F_LAYERNORM_BACKWARD] = {"layernorm_backward", clf_ocl_src_layernorm_backward,
                                  &clf_ocl_src_layernorm_backward_len},
    [OCL_F_TRAIN] = {"train", clf_ocl_src_train, &clf_ocl_src_train_len},
    [OCL_F_OPTIM] = {"optim", clf_ocl_src_optim, &clf_ocl_src_optim_len},
};

/* A kernel: its family, its name, and the bytes of __local scratch it is given per
 * work-item (ocl_pick_wg keeps the work-group within the local memory). */
typedef struct kernel_def {
    ocl_family_id family;
    const char *name;
    size_t local_per_item;
} kernel_def;

/* One float (a reduction's slot), two (two reductions or tiles), or the gemm_rows kernels'
 * one float per row of A. */
#define L1 sizeof(cl_float)
#define L2 (2 * sizeof(cl_float))

static const kernel_def kernels[OCL_K_COUNT] = {
    [OCL_K_ATTENTION] = {OCL_F_ATTENTION, "attention", L2},
    [OCL_K_ATTENTION_PROBS] = {OCL_F_ATTENTION, "attention_probs", L1},
    [OCL_K_LAYERNORM] = {OCL_F_LAYERNORM, "layernorm", L1},
    [OCL_K_SOFTMAX] = {OCL_F_SOFTMAX, "softmax", L1},
    [OCL_K_ARGMAX] = {OCL_F_SOFTMAX, "argmax", L1 + sizeof(cl_int)},
    [OCL_K_TOPK] = {OCL_F_SOFTMAX, "topk", L1 + sizeof(cl_int)},
    [OCL_K_BEAM_CHOOSE] = {OCL_F_SOFTMAX, "beam_choose", 0},
    [OCL_K_EMBED] = {OCL_F_EMBED, "embed", 0},
    [OCL_K_ADD] = {OCL_F_ELEMENTWISE, "add", 0},
    [OCL_K_BIAS_RELU] = {OCL_F_ELEMENTWISE, "bias_relu", 0},
    [OCL_K_GEMM_ROWS_HALF] = {OCL_F_GEMM, "gemm_rows_half", OCL_GEMM_FEW_ROWS *L1},
    [OCL_K_GEMM_ROWS_FLOAT] = {OCL_F_GEMM, "gemm_rows_float", OCL_GEMM_FEW_ROWS *L1},
    [OCL_K_GEMM_ROWS_HALF_LN] = {OCL_F_GEMM, "gemm_rows_half_ln", OCL_GEMM_FEW_ROWS *L1},
    [OCL_K_GEMM_ROWS_FLOAT_LN] = {OCL_F_GEMM, "gemm_rows_float_ln", OCL_GEMM_FEW_ROWS *L1},
    [OCL_K_HALF_PACK] = {OCL_F_GEMM, "half_pack", 0},
    [OCL_K_HALF_UNPACK] = {OCL_F_GEMM, "half_unpack", 0},
    [OCL_K_ATTENTION_BACKWARD_QUERY] = {OCL_F_ATTENTION_BACKWARD, "attention_backward_query", L2},
    [OCL_K_ATTENTION_BACKWARD_KEY] = {OCL_F_ATTENTION_BACKWARD, "attention_backward_key", L2},
    [OCL_K_LAYERNORM_BACKWARD] = {OCL_F_LAYERNORM_BACKWARD, "layernorm_backward", L1},
    [OCL_K_LAYERNORM_BACKWARD_PARAMS] = {OCL_F_LAYERNORM_BACKWARD, "layernorm_backward_params", L2},
    [OCL_K_RELU_BACKWARD] = {OCL_F_TRAIN, "relu_backward", 0},
    [OCL_K_DROPOUT] = {OCL_F_TRAIN, "dropout", 0},
    [OCL_K_EMBED_BACKWARD] = {OCL_F_TRAIN, "embed_backward", 0},
    [OCL_K_CROSS_ENTROPY] = {OCL_F_TRAIN, "cross_entropy", L1},
    [OCL_K_ADAM] = {OCL_F_OPTIM, "adam", 0},
    [OCL_K_SUM_SQUARES_PARTIAL] = {OCL_F_OPTIM, "sum_squares_partial", L1},
    [OCL_K_SUM_SQUARES_FINAL] = {OCL_F_OPTIM, "sum_squares_final", L1},
};
#undef L1
#undef L2

/* ---- hashing ---- */

/* The start value of the cache keys and payload checksums (clf_hash_fnv1a64 from it). It is
 * FNV-1a's offset basis 14695981039346656037 a digit short; kept, because the cache files
 * already on disk are named and checksummed with it (any 64-bit start value hashes equally
 * well). */
#define CACHE_HASH_START 1469598103934665603ULL

/* Hashes s and its terminating NUL, so that ("ab","c") and ("a","bc") differ. */
static uint64_t fnv1a_str(uint64_t h, const char *s)
{
    return clf_hash_fnv1a64(h, s, strlen(s) + 1);
}

/* Hashes what identifies be's device and driver (platform, device, driver and their
 * versions) into h. */
static uint64_t hash_device(const clf_backend *be, uint64_t h)
{
    char plat_ver[256], dev_ver[256], driver[256];
    cl_platform_id p = be->dev.platform;
    cl_device_id d = be->dev.device;
    if (clGetPlatformInfo(p, CL_PLATFORM_VERSION, sizeof plat_ver, plat_ver, NULL) != CL_SUCCESS)
        plat_ver[0] = '\0';
    if (clGetDeviceInfo(d, CL_DEVICE_VERSION, sizeof dev_ver, dev_ver, NULL) != CL_SUCCESS)
        dev_ver[0] = '\0';
    if (clGetDeviceInfo(d, CL_DRIVER_VERSION, sizeof driver, driver, NULL) != CL_SUCCESS)
        driver[0] = '\0';
    plat_ver[sizeof plat_ver - 1] = dev_ver[sizeof dev_ver - 1] = driver[sizeof driver - 1] = 0;
    h = fnv1a_str(h, be->dev.info.platform);
    h = fnv1a_str(h, plat_ver);
    h = fnv1a_str(h, be->dev.info.name);
    h = fnv1a_str(h, dev_ver);
    return fnv1a_str(h, driver);
}

/* The cache key of family f on be's device. */
static uint64_t cache_key(const clf_backend *be, ocl_family_id f)
{
    uint64_t h = fnv1a_str(CACHE_HASH_START, OCL_CACHE_MAGIC);
    h = fnv1a_str(h, families[f].name);
    h = fnv1a_str(h, OCL_BUILD_OPTIONS);
    h = clf_hash_fnv1a64(h, clf_ocl_src_group, clf_ocl_src_group_len);
    h = clf_hash_fnv1a64(h, clf_ocl_src_common, clf_ocl_src_common_len);
    h = clf_hash_fnv1a64(h, families[f].src, *families[f].len);
    return hash_device(be, h);
}

/* ---- cache directory and files ---- */

void ocl_cache_dir(const char *opt, char *dir, size_t size)
{
    const char *v = opt && *opt ? opt : getenv("CLF_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n = -1;
    dir[0] = '\0';
    if (v && *v) {
        if (strcasecmp(v, "off") != 0)
            n = snprintf(dir, size, "%s", v);
    } else if (xdg && *xdg) {
        n = snprintf(dir, size, "%s/clformer", xdg);
    } else if (home && *home) {
        n = snprintf(dir, size, "%s/.cache/clformer", home);
    }
    if (n < 0 || (size_t)n >= size)
        dir[0] = '\0'; /* too long for a path: run without a cache */
}

/* mkdir -p; returns 0 when dir exists afterwards. */
static int make_dirs(const char *dir)
{
    char tmp[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, dir, n + 1);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return -1;
    struct stat sb;
    return stat(tmp, &sb) == 0 && S_ISDIR(sb.st_mode) ? 0 : -1;
}

static void cache_path(const char *dir, ocl_family_id f, uint64_t key, char *path, size_t size)
{
    snprintf(path, size, "%s/%s-%016llx.clbin", dir, families[f].name, (unsigned long long)key);
}

/* Reads and checks a cache file; returns its payload (malloc'd) or NULL for any defect. */
static unsigned char *read_cache_file(const char *path, uint64_t key, size_t *len)
{
    int fd;
    uint64_t size;
    /* a FIFO or a device under the cache's name is passed over, never waited on */
    FILE *f = clf_fs_open_regular(path, UINT64_MAX, &fd, &size) == CLF_OK ? fdopen(fd, "rb") : NULL;
    if (!f && fd >= 0)
        close(fd);
    unsigned char *payload = NULL;
    unsigned char hdr[OCL_CACHE_HEADER];
    uint64_t fkey, flen, fsum;
    long end;
    if (!f)
        return NULL;
    if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr || memcmp(hdr, OCL_CACHE_MAGIC, 8) != 0)
        goto fail;
    memcpy(&fkey, hdr + 8, 8);
    memcpy(&flen, hdr + 16, 8);
    memcpy(&fsum, hdr + 24, 8);
    if (fkey != key || flen == 0 || fseek(f, 0, SEEK_END) != 0 || (end = ftell(f)) < 0 ||
        (uint64_t)end != OCL_CACHE_HEADER + flen || fseek(f, OCL_CACHE_HEADER, SEEK_SET) != 0)
        goto fail;
    payload = malloc(flen);
    if (!payload || fread(payload, 1, flen, f) != flen ||
        clf_hash_fnv1a64(CACHE_HASH_START, payload, flen) != fsum)
        goto fail;
    fclose(f);
    *len = flen;
    return payload;
fail:
    free(payload);
    fclose(f);
    return NULL;
}

/* A cache file: the magic, the header {key, payload length, payload checksum}, the payload
 * (the program binary). */
typedef struct cache_file {
    uint64_t key;
    const unsigned char *bin;
    size_t len;
} cache_file;

static clf_status put_cache_file(FILE *f, void *ctx)
{
    const cache_file *c = ctx;
    uint64_t hdr[3] = {c->key, c->len, clf_hash_fnv1a64(CACHE_HASH_START, c->bin, c->len)};
    fwrite(OCL_CACHE_MAGIC, 1, 8, f);
    fwrite(hdr, 8, 3, f);
    fwrite(c->bin, 1, c->len, f);
    return CLF_OK;
}

/* Saves prog's binary; any failure just leaves no (or the old) cache file. Two threads of
 * one process saving the same file at once share its temporary name: a mixed file then
 * fails its checksum when read, and is rebuilt. */
static void write_cache_file(cl_program prog, const char *path, uint64_t key)
{
    size_t len = 0;
    unsigned char *bin = NULL;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof len, &len, NULL) != CL_SUCCESS ||
        len == 0 || !(bin = malloc(len)))
        goto done;
    unsigned char *bins[1] = {bin};
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) != CL_SUCCESS)
        goto done;
    cache_file c = {key, bin, len};
    (void)clf_fs_write_atomic(path, put_cache_file, &c); /* failure: the cache is optional */
done:
    free(bin);
}

/* ---- building ---- */

/* The build log as one line (newlines folded), for the error message. */
static void build_log(cl_program prog, cl_device_id dev, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    if (clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) != CL_SUCCESS)
        return;
    char *log = malloc(n + 1);
    if (log && clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, n, log, NULL) == CL_SUCCESS) {
        log[n] = '\0';
        size_t j = 0;
        for (size_t i = 0; log[i] && j + 1 < size; i++)
            buf[j++] = log[i] == '\n' || log[i] == '\r' ? ' ' : log[i];
        buf[j] = '\0';
    }
    free(log);
}

/* Creates prog's kernels of family f and picks their work-group sizes. On failure the
 * kernels created so far are released again. */
static clf_status create_kernels(clf_backend *be, ocl_family_id f, cl_program prog)
{
    clf_status st = CLF_OK;
    for (int k = 0; k < OCL_K_COUNT; k++) {
        if (kernels[k].family != f)
            continue;
        cl_int err;
        be->kernels[k] = clCreateKernel(prog, kernels[k].name, &err);
        if (err != CL_SUCCESS) {
            be->kernels[k] = NULL;
            st = ocl_fail("open", "clCreateKernel", err);
            goto fail;
        }
        if ((st = ocl_pick_wg(be, kernels[k].name, be->kernels[k], kernels[k].local_per_item,
                              OCL_ROW_WG, &be->wg[k])) != CLF_OK)
            goto fail;
    }
    return CLF_OK;
fail:
    for (int k = 0; k < OCL_K_COUNT; k++) {
        if (kernels[k].family == f && be->kernels[k]) {
            clReleaseKernel(be->kernels[k]);
            be->kernels[k] = NULL;
        }
    }
    return st;
}

/* A program built from a cache file, or NULL (then: from source). */
static cl_program load_binary(clf_backend *be, const char *path, uint64_t key)
{
    size_t len = 0;
    unsigned char *bin = read_cache_file(path, key, &len);
    if (!bin)
        return NULL;
    const unsigned char *bins[1] = {bin};
    cl_int bin_status = CL_SUCCESS, err;
    cl_program prog =
        clCreateProgramWithBinary(be->ctx, 1, &be->dev.device, &len, bins, &bin_status, &err);
    free(bin);
    if (err != CL_SUCCESS || bin_status != CL_SUCCESS)
        goto fail;
    if (clBuildProgram(prog, 1, &be->dev.device, OCL_BUILD_OPTIONS, NULL, NULL) != CL_SUCCESS)
        goto fail;
    return prog;
fail:
    if (prog)
        clReleaseProgram(prog);
    return NULL;
}

/* A program from a cache file, built and with its kernels, or NULL (then: from source). */
static cl_program load_cached(clf_backend *be, ocl_family_id f, const char *path, uint64_t key)
{
    cl_program prog = load_binary(be, path, key);
    if (prog && create_kernels(be, f, prog) != CLF_OK) {
        clReleaseProgram(prog);
        prog = NULL;
    }
    return prog;
}

static clf_status build_family(clf_backend *be, ocl_family_id f, const char *dir)
{
    clf_status st = CLF_OK;
    char path[4200] = "";
    uint64_t key = 0;
    cl_program prog = NULL;
    cl_int err;
    /* CLF_FAULT=opencl_build:N counts programs, cached or not; the Nth is built from source
     * and its build fails as a driver's would */
    const int fault = clf_fault_hit(CLF_FAULT_OPENCL_BUILD);

    if (dir[0] && !fault) {
        key = cache_key(be, f);
        cache_path(dir, f, key, path, sizeof path);
        if ((prog = load_cached(be, f, path, key)) != NULL) {
            be->programs[f] = prog;
            be->cache_hits++;
            return CLF_OK;
        }
    }
    const char *srcs[3] = {clf_ocl_src_group, clf_ocl_src_common, families[f].src};
    const size_t lens[3] = {clf_ocl_src_group_len, clf_ocl_src_common_len, *families[f].len};
    prog = clCreateProgramWithSource(be->ctx, 3, srcs, lens, &err);
    if (err != CL_SUCCESS) {
        prog = NULL;
        st = ocl_fail("open", "clCreateProgramWithSource", err);
        goto fail;
    }
    err = fault ? CL_BUILD_PROGRAM_FAILURE
                : clBuildProgram(prog, 1, &be->dev.device, OCL_BUILD_OPTIONS, NULL, NULL);
    if (err != CL_SUCCESS) {
        char log[600] = "(injected: CLF_FAULT)";
        if (!fault)
            build_log(prog, be->dev.device, log, sizeof log);
        st = clf_error(CLF_ERR_BACKEND,
                       "opencl: open: clBuildProgram failed: %s (%d) for "
                       "kernels/%s.cl: %s",
                       ocl_error_name(err), (int)err, families[f].name, log);
        goto fail;
    }
    if ((st = create_kernels(be, f, prog)) != CLF_OK)
        goto fail;
    if (dir[0] && make_dirs(dir) == 0)
        write_cache_file(prog, path, key);
    be->programs[f] = prog;
    return CLF_OK;
fail:
    if (prog)
        clReleaseProgram(prog);
    return st;
}

clf_status ocl_build_programs(clf_backend *be, const char *cache_dir)
{
    for (int f = 0; f < OCL_F_COUNT; f++) {
        clf_status st = build_family(be, (ocl_family_id)f, cache_dir ? cache_dir : "");
        if (st != CLF_OK)
            return st; /* the caller's close() releases what was built */
    }
    return CLF_OK;
}

/* ---- programs built after open (plugin ops) ---- */

/* Creates the kernels names[0..nk) of prog into kernels[]: all of them, or (on failure)
 * none, with the error recorded for op. */
static clf_status create_named_kernels(const char *op, cl_program prog, const char *const *names,
                                       cl_kernel *kernels, int nk)
{
    for (int k = 0; k < nk; k++) {
        cl_int err;
        kernels[k] = clCreateKernel(prog, names[k], &err);
        if (err != CL_SUCCESS) {
            kernels[k] = NULL;
            for (int j = 0; j < k; j++) {
                clReleaseKernel(kernels[j]);
                kernels[j] = NULL;
            }
            return ocl_fail(op, "clCreateKernel", err);
        }
    }
    return CLF_OK;
}

clf_status ocl_build_program(clf_backend *be, const char *op, const char *what,
                             const char *cache_name, const char *const *srcs, const size_t *lens,
                             int nsrc, const char *const *names, cl_kernel *kernels, int nk,
                             cl_program *out)
{
    clf_status st = CLF_OK;
    char path[4200] = "";
    uint64_t key = 0;
    cl_program prog = NULL;
    cl_int err;
    *out = NULL;
    for (int k = 0; k < nk; k++)
        kernels[k] = NULL;
    const int fault = clf_fault_hit(CLF_FAULT_OPENCL_BUILD); /* as in build_family */

    if (be->cache_dir[0] && !fault) {
        key = fnv1a_str(CACHE_HASH_START, OCL_CACHE_MAGIC);
        key = fnv1a_str(key, cache_name);
        key = fnv1a_str(key, OCL_BUILD_OPTIONS);
        for (int i = 0; i < nsrc; i++) {
            key = clf_hash_fnv1a64(key, &lens[i], sizeof lens[i]); /* where one piece ends */
            key = clf_hash_fnv1a64(key, srcs[i], lens[i]);
        }
        key = hash_device(be, key);
        snprintf(path, sizeof path, "%s/%s-%016llx.clbin", be->cache_dir, cache_name,
                 (unsigned long long)key);
        if ((prog = load_binary(be, path, key)) != NULL) {
            if (create_named_kernels(op, prog, names, kernels, nk) == CLF_OK) {
                *out = prog;
                return CLF_OK;
            }
            clReleaseProgram(prog); /* a binary the driver half accepts: rebuild */
            prog = NULL;
        }
    }
    prog = clCreateProgramWithSource(be->ctx, (cl_uint)nsrc, (const char **)srcs, lens, &err);
    if (err != CL_SUCCESS) {
        prog = NULL;
        st = ocl_fail(op, "clCreateProgramWithSource", err);
        goto fail;
    }
    err = fault ? CL_BUILD_PROGRAM_FAILURE
                : clBuildProgram(prog, 1, &be->dev.device, OCL_BUILD_OPTIONS, NULL, NULL);
    if (err != CL_SUCCESS) {
        char log[800] = "(injected: CLF_FAULT)";
        if (!fault)
            build_log(prog, be->dev.device, log, sizeof log);
        st = clf_error(CLF_ERR_BACKEND, "opencl: %s: clBuildProgram failed: %s (%d) for %s: %s", op,
                       ocl_error_name(err), (int)err, what, log);
        goto fail;
    }
    if ((st = create_named_kernels(op, prog, names, kernels, nk)) != CLF_OK)
        goto fail;
    if (be->cache_dir[0] && make_dirs(be->cache_dir) == 0)
        write_cache_file(prog, path, key);
    *out = prog;
    return CLF_OK;
fail:
    if (prog)
        clReleaseProgram(prog);
    return st;
}
