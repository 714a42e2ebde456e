/* clformer/status.h - status codes and the error message of the calling thread.
 *
 * Every fallible clformer function returns a clf_status. On failure it has already
 * recorded one line that says what failed and why (file:line for YAML, the tensor name
 * for weights, the OpenCL error name for device failures); clf_last_error() returns it.
 * The message lives in thread-local storage, like errno: no global mutable state. */
#ifndef CLFORMER_STATUS_H
#define CLFORMER_STATUS_H

#include <stdarg.h>

#include "clformer/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum clf_status {
    CLF_OK = 0,
    CLF_ERR_INPUT = 1,       /* bad config, weights, arguments or data: CLI exit 2 */
    CLF_ERR_IO = 2,          /* a file could not be read or written: CLI exit 2 */
    CLF_ERR_BACKEND = 3,     /* backend/device failure (OpenCL error, no device): exit 3 */
    CLF_ERR_UNSUPPORTED = 4, /* the backend lacks an op: exit 3 */
    CLF_ERR_NOMEM = 5,       /* host or device allocation failed: exit 3 */
    CLF_ERR_INTERNAL = 6     /* a bug in clformer: exit 1 */
} clf_status;

/* Records the message (printf format) for this thread and returns st, so that a caller
 * writes `return clf_error(CLF_ERR_INPUT, "%s: tensor '%s' missing", path, name);`. */
CLF_API clf_status clf_error(clf_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
CLF_API clf_status clf_verror(clf_status st, const char *fmt, va_list ap);

/* Prepends "<prefix>: " to the current message (adds context on the way up). */
CLF_API clf_status clf_error_context(clf_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The last message recorded on this thread ("" if none). */
CLF_API const char *clf_last_error(void);
CLF_API void clf_clear_error(void);

/* The process exit code the CLI uses for a status: 0, 2 (bad input), 3 (backend), 1. */
CLF_API int clf_status_exit_code(clf_status st);
CLF_API const char *clf_status_name(clf_status st);

#ifdef __cplusplus
}
#endif
#endif
