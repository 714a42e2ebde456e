/* ocl_device.c - finding OpenCL devices and choosing one.
 *
 * Devices are numbered in one flat list over all platforms, in the order the ICD loader
 * reports them; that index is what `clformer devices` prints and backend.device accepts. */
#include "ocl_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* What a user without any OpenCL driver should do. */
#define OCL_INSTALL_HINT                                                                           \
    "install an OpenCL driver: apt-get install pocl-opencl-icd (runs on the CPU), or your "        \
    "GPU vendor's OpenCL driver (it registers itself in /etc/OpenCL/vendors)"

/* Copies s into dst (size bytes), dropping the spaces some drivers pad names with. */
static void copy_trimmed(char *dst, size_t size, const char *s)
{
    while (*s && isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    if (n >= size)
        n = size - 1;
    memcpy(dst, s, n);
    dst[n] = '\0';
}

/* A string property of a platform (dev == NULL) or a device into dst, truncated to size.
 * A property the driver cannot report leaves "?" rather than failing the listing. */
static void info_string(cl_platform_id plat, cl_device_id dev, cl_uint param, char *dst,
                        size_t size)
{
    size_t n = 0;
    cl_int err = dev ? clGetDeviceInfo(dev, param, 0, NULL, &n)
                     : clGetPlatformInfo(plat, param, 0, NULL, &n);
    char *tmp = err == CL_SUCCESS && n > 0 ? malloc(n + 1) : NULL;
    if (tmp) {
        err = dev ? clGetDeviceInfo(dev, param, n, tmp, NULL)
                  : clGetPlatformInfo(plat, param, n, tmp, NULL);
        tmp[n] = '\0';
    }
    copy_trimmed(dst, size, tmp && err == CL_SUCCESS ? tmp : "?");
    free(tmp);
}

static const char *type_name(cl_device_type t)
{
    if (t & CL_DEVICE_TYPE_GPU)
        return "GPU";
    if (t & CL_DEVICE_TYPE_CPU)
        return "CPU";
    if (t & CL_DEVICE_TYPE_ACCELERATOR)
        return "ACCELERATOR";
#ifdef CL_DEVICE_TYPE_CUSTOM
    if (t & CL_DEVICE_TYPE_CUSTOM)
        return "CUSTOM";
#endif
    return "OTHER";
}

/* Whether the device's extension list names cl_khr_fp16. */
static int has_fp16(cl_device_id dev)
{
    size_t n = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, 0, NULL, &n) != CL_SUCCESS || n == 0)
        return 0;
    char *ext = malloc(n + 1);
    int yes = 0;
    if (ext && clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, n, ext, NULL) == CL_SUCCESS) {
        ext[n] = '\0';
        yes = strstr(ext, "cl_khr_fp16") != NULL;
    }
    free(ext);
    return yes;
}

static void fill_info(ocl_device *d, int index)
{
    clf_device_info *in = &d->info;
    memset(in, 0, sizeof *in);
    in->index = index;
    info_string(d->platform, NULL, CL_PLATFORM_NAME, in->platform, sizeof in->platform);
    info_string(d->platform, d->device, CL_DEVICE_NAME, in->name, sizeof in->name);
    info_string(d->platform, d->device, CL_DEVICE_OPENCL_C_VERSION, in->version,
                sizeof in->version);
    d->type = 0;
    clGetDeviceInfo(d->device, CL_DEVICE_TYPE, sizeof d->type, &d->type, NULL);
    copy_trimmed(in->type, sizeof in->type, type_name(d->type));
    cl_uint cu = 0;
    cl_ulong gmem = 0, maxalloc = 0;
    clGetDeviceInfo(d->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    clGetDeviceInfo(d->device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gmem, &gmem, NULL);
    clGetDeviceInfo(d->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof maxalloc, &maxalloc, NULL);
    in->compute_units = (int)cu;
    in->global_mem_bytes = gmem;
    in->max_alloc_bytes = maxalloc;
    in->fp16 = has_fp16(d->device);
    ocl_cap_device_info(in);
}

clf_status ocl_enumerate(ocl_device **out, int *count)
{
    clf_status st = CLF_OK;
    cl_platform_id *plats = NULL;
    cl_device_id *ids = NULL;
    ocl_device *devs = NULL;
    int n = 0;
    cl_uint np = 0;

    *out = NULL;
    *count = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &np);
    /* the ICD loader says CL_PLATFORM_NOT_FOUND_KHR when no driver is registered */
    if (err == -1001 || (err == CL_SUCCESS && np == 0)) {
        st = clf_error(
            CLF_ERR_BACKEND, "opencl: no OpenCL platform found (clGetPlatformIDs: %s (%d)): %s",
            err == CL_SUCCESS ? "0 platforms" : ocl_error_name(err), (int)err, OCL_INSTALL_HINT);
        goto fail;
    }
    if (err != CL_SUCCESS) {
        st = ocl_fail("devices", "clGetPlatformIDs", err);
        goto fail;
    }
    plats = calloc(np, sizeof *plats);
    if (!plats) {
        st = clf_error(CLF_ERR_NOMEM, "opencl: devices: out of host memory");
        goto fail;
    }
    if ((err = clGetPlatformIDs(np, plats, NULL)) != CL_SUCCESS) {
        st = ocl_fail("devices", "clGetPlatformIDs", err);
        goto fail;
    }
    for (cl_uint p = 0; p < np; p++) {
        cl_uint nd = 0;
        /* a platform without devices (or a broken one) must not hide the others */
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || nd == 0)
            continue;
        cl_device_id *nids = realloc(ids, nd * sizeof *ids);
        ocl_device *ndevs = realloc(devs, (size_t)(n + (int)nd) * sizeof *devs);
        if (nids)
            ids = nids;
        if (ndevs)
            devs = ndevs;
        if (!nids || !ndevs) {
            st = clf_error(CLF_ERR_NOMEM, "opencl: devices: out of host memory");
            goto fail;
        }
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, ids, NULL) != CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < nd; d++) {
            devs[n].platform = plats[p];
            devs[n].device = ids[d];
            fill_info(&devs[n], n);
            n++;
        }
    }
    if (n == 0) {
        st = clf_error(CLF_ERR_BACKEND, "opencl: %u OpenCL platform(s) but no device: %s",
                       (unsigned)np, OCL_INSTALL_HINT);
        goto fail;
    }
    *out = devs;
    *count = n;
    devs = NULL;
fail:
    free(devs);
    free(ids);
    free(plats);
    return st;
}

clf_status ocl_list_devices(clf_device_fn fn, void *user)
{
    ocl_device *devs = NULL;
    int n = 0;
    clf_status st = ocl_enumerate(&devs, &n);
    if (st != CLF_OK)
        return st;
    for (int i = 0; i < n; i++)
        fn(user, &devs[i].info);
    free(devs);
    return CLF_OK;
}

static int all_digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

/* "0: Portable Computing Language / pthread-... (CPU), 1: ..." for error messages. */
static void device_list_text(const ocl_device *devs, int n, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used + 1 < size; i++) {
        int m = snprintf(buf + used, size - used, "%s%d: %s / %s (%s)", i ? ", " : "", i,
                         devs[i].info.platform, devs[i].info.name, devs[i].info.type);
        if (m < 0)
            break;
        used += (size_t)m;
    }
}

clf_status ocl_choose_device(const char *spec, ocl_device *out)
{
    clf_status st = CLF_OK;
    ocl_device *devs = NULL;
    int n = 0, pick = -1;
    const char *from = "the device option";
    const char *env = getenv("CLF_OPENCL_DEVICE");
    char list[512];

    if (env && *env) {
        spec = env;
        from = "CLF_OPENCL_DEVICE";
    }
    if ((st = ocl_enumerate(&devs, &n)) != CLF_OK)
        goto fail;
    if (!spec || !*spec) {
        pick = 0;
        for (int i = 0; i < n; i++) {
            if (devs[i].type & CL_DEVICE_TYPE_GPU) {
                pick = i;
                break;
            }
        }
    } else if (all_digits(spec)) {
        long idx = strtol(spec, NULL, 10);
        if (idx >= n) {
            device_list_text(devs, n, list, sizeof list);
            st = clf_error(CLF_ERR_INPUT,
                           "opencl: device %s (from %s) does not exist: there are %d "
                           "device(s): %s",
                           spec, from, n, list);
            goto fail;
        }
        pick = (int)idx;
    } else {
        for (int i = 0; i < n && pick < 0; i++) {
            char full[300];
            snprintf(full, sizeof full, "%s / %s", devs[i].info.platform, devs[i].info.name);
            if (strcasestr(full, spec))
                pick = i;
        }
        if (pick < 0) {
            device_list_text(devs, n, list, sizeof list);
            st = clf_error(CLF_ERR_INPUT,
                           "opencl: no OpenCL device matches '%s' (from %s); the devices "
                           "are %s",
                           spec, from, list);
            goto fail;
        }
    }
    *out = devs[pick];
fail:
    free(devs);
    return st;
}

/* ---- device limits ---- */

/* "OpenCL C 1.2 PoCL" -> 12; 0 when it cannot be read. */
static int parse_c_version(const char *s)
{
    unsigned major = 0, minor = 0;
    if (sscanf(s, "OpenCL C %u.%u", &major, &minor) != 2 || minor > 9)
        return 0;
    return (int)(major * 10 + minor);
}

/* One cap of $CLF_OPENCL_LIMITS: value from "key=value" into limits' field, lowering it. */
static clf_status apply_cap(ocl_limits *l, const char *item, size_t len)
{
    char buf[64], *end = NULL;
    if (len == 0 || len >= sizeof buf)
        goto bad;
    memcpy(buf, item, len);
    buf[len] = '\0';
    char *eq = strchr(buf, '=');
    if (!eq || !eq[1] || !isdigit((unsigned char)eq[1]))
        goto bad;
    *eq = '\0';
    const char *key = buf, *val = eq + 1;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 10);
    if (strcmp(key, "c_version") == 0) { /* "1.1": major.minor, one digit each */
        if (v > 9 || end[0] != '.' || !isdigit((unsigned char)end[1]) || end[2] != '\0')
            goto bad;
        int c = (int)v * 10 + (end[1] - '0');
        if (c < l->c_version)
            l->c_version = c;
        return CLF_OK;
    }
    if (errno || *end != '\0')
        goto bad;
    if (strcmp(key, "max_alloc") == 0) {
        if (v < l->max_alloc)
            l->max_alloc = v;
    } else if (strcmp(key, "local_mem") == 0) {
        if (v < l->local_mem)
            l->local_mem = v;
    } else if (strcmp(key, "max_wg") == 0) {
        if (v < l->max_wg)
            l->max_wg = (size_t)v;
    } else if (strcmp(key, "fp16") == 0) {
        if (v > 1)
            goto bad;
        l->fp16 = l->fp16 && v;
    } else if (strcmp(key, "compute_units") == 0) {
        if (v < l->compute_units)
            l->compute_units = (cl_uint)v;
    } else {
        goto bad;
    }
    return CLF_OK;
bad:
    return clf_error(CLF_ERR_INPUT,
                     "opencl: CLF_OPENCL_LIMITS: '%.*s' is not one of max_alloc=BYTES, "
                     "local_mem=BYTES, max_wg=N, fp16=0|1, c_version=M.m, compute_units=N",
                     (int)len, item);
}

/* Lowers l's limits to the caps of $CLF_OPENCL_LIMITS (comma-separated key=value). */
static clf_status apply_caps(ocl_limits *l)
{
    const char *env = getenv("CLF_OPENCL_LIMITS");
    if (!env)
        return CLF_OK;
    while (*env) {
        size_t len = strcspn(env, ",");
        clf_status st = apply_cap(l, env, len);
        if (st != CLF_OK)
            return st;
        env += len;
        if (*env == ',')
            env++;
    }
    return CLF_OK;
}

void ocl_cap_device_info(clf_device_info *info)
{
    ocl_limits l = {.max_alloc = info->max_alloc_bytes,
                    .local_mem = UINT64_MAX,
                    .max_wg = SIZE_MAX,
                    .fp16 = info->fp16,
                    .c_version = 99,
                    .compute_units = (cl_uint)info->compute_units};
    if (apply_caps(&l) != CLF_OK)
        return;
    info->max_alloc_bytes = l.max_alloc;
    info->fp16 = l.fp16;
    info->compute_units = (int)l.compute_units;
}

clf_status ocl_query_limits(const ocl_device *d, ocl_limits *out)
{
    cl_ulong max_alloc = 0, local_mem = 0;
    size_t max_wg = 0;
    cl_uint cus = 0;
    cl_int err;
    if ((err = clGetDeviceInfo(d->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc,
                               &max_alloc, NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(d->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local_mem, &local_mem,
                               NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(d->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg,
                               NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(d->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, NULL)) !=
            CL_SUCCESS)
        return ocl_fail("open", "clGetDeviceInfo", err);
    *out = (ocl_limits){.max_alloc = max_alloc,
                        .local_mem = local_mem,
                        .max_wg = max_wg ? max_wg : 1,
                        .fp16 = has_fp16(d->device),
                        .c_version = parse_c_version(d->info.version),
                        .compute_units = cus ? cus : 1};
    /* a zero cap of the work-group or compute units would leave nothing to run on */
    clf_status st = apply_caps(out);
    if (out->max_wg == 0)
        out->max_wg = 1;
    if (out->compute_units == 0)
        out->compute_units = 1;
    return st;
}

clf_status ocl_half_arith_mode(const ocl_device *d, const ocl_limits *l, int *out)
{
    const char *env = getenv("CLF_OPENCL_HGEMM");
    *out = 0;
    if (!env || !*env || strcmp(env, "auto") == 0)
        *out = l->fp16 && (d->type & CL_DEVICE_TYPE_GPU);
    else if (strcmp(env, "on") == 0)
        *out = l->fp16;
    else if (strcmp(env, "off") != 0)
        return clf_error(CLF_ERR_INPUT, "opencl: CLF_OPENCL_HGEMM is '%s', not on, off or auto",
                         env);
    return CLF_OK;
}

clf_status ocl_local_size_mode(ocl_local_size *out)
{
    const char *env = getenv("CLF_OPENCL_LOCAL_SIZE");
    *out = OCL_LOCAL_AUTO;
    if (!env || !*env || strcmp(env, "auto") == 0)
        return CLF_OK;
    if (strcmp(env, "min") == 0)
        *out = OCL_LOCAL_MIN;
    else if (strcmp(env, "max") == 0)
        *out = OCL_LOCAL_MAX;
    else
        return clf_error(CLF_ERR_INPUT,
                         "opencl: CLF_OPENCL_LOCAL_SIZE is '%s', not min, max or auto", env);
    return CLF_OK;
}
