/* clformer/fault.h - injected failures, for testing what cannot be provoked on demand (a
 * device that runs out of memory, a driver that fails a build, a full disk).
 *
 * The environment variable CLF_FAULT lists the calls to fail:
 *
 *     CLF_FAULT=<site>:<N>[,<site>:<N>...]      e.g. CLF_FAULT=opencl_alloc:3,write:2
 *
 * makes the Nth call (counted from 1, per process) at each named site fail as the real
 * failure would, with the message the real one gives:
 *
 *     opencl_alloc    OpenCL buffer creation: CL_MEM_OBJECT_ALLOCATION_FAILURE
 *     opencl_build    an OpenCL program build (cached or not): CL_BUILD_PROGRAM_FAILURE
 *     opencl_enqueue  a kernel launch (own kernels and CLBlast GEMMs): CL_OUT_OF_RESOURCES
 *     write           a clf_fs_write_atomic: the data does not reach the disk, ENOSPC
 *
 * and `write_slow:<ms>` makes every clf_fs_write_atomic pause ms milliseconds between
 * writing its temporary file and renaming it (a kill test's window into a checkpoint
 * write; at most 10000). Without CLF_FAULT nothing changes; the cost is one load per call.
 *
 * The variable is read once, at the first call, and the counts are the process's: this is
 * global mutable state, allowed (with the plugin and backend registries) because it is a
 * test hook that the process's environment fixes before anything runs, it is shared by
 * backends that have no handle to the caller's state, and it is changed only by atomic
 * increments. */
#ifndef CLFORMER_FAULT_H
#define CLFORMER_FAULT_H

#include "clformer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum clf_fault_site {
    CLF_FAULT_OPENCL_ALLOC,
    CLF_FAULT_OPENCL_BUILD,
    CLF_FAULT_OPENCL_ENQUEUE,
    CLF_FAULT_WRITE,
    CLF_FAULT_SITE_COUNT
} clf_fault_site;

/* Counts one call at site; 1 when CLF_FAULT asks this call to fail, 0 otherwise (always 0
 * when CLF_FAULT is unset or malformed). Thread-safe. */
CLF_API int clf_fault_hit(clf_fault_site site);

/* The site's name in CLF_FAULT ("opencl_alloc", ...), or "?" for a value out of range. */
CLF_API const char *clf_fault_site_name(clf_fault_site site);

/* CLF_OK when CLF_FAULT is unset or well-formed; else CLF_ERR_INPUT with one line naming
 * the entry and what is wrong (the CLI checks this first, so that a typo in a test's
 * CLF_FAULT is an error rather than a test that injects nothing). */
CLF_API clf_status clf_fault_check_env(void);

#ifdef __cplusplus
}
#endif
#endif
