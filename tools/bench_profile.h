/* The profiling backend of `clformer bench --train [--profile]`.
 *
 * The trainer's step is one graph run inside the library, so per-op times cannot come from
 * the graph API (as the forward's SGEMM rate does). Instead bench hands the model a backend
 * of its own: a table whose entries call the real backend's, and a handle (the profiler
 * itself) that holds the real handle and every count; nothing is global, so two profilers
 * can run side by side. alloc/free keep a tally of live device bytes (the peak of weights +
 * gradients + Adam moments + activation arena, which the public API does not report for a
 * trainer), and, while timing is on, every op is followed by synchronize() and its wall
 * time is added to its row. On the CPU backend ops are synchronous, so this measures them
 * as they run; on a queued backend it measures them serialised.
 *
 * Rows: one per op (clf_op_name), the GEMMs split by the role their transpose flags give
 * them in the training graph (core/src/graph/autodiff.c: A.W^T a forward Linear, dY.W an
 * input gradient, dY^T.X a weight gradient, 1^T.dY (one row) a bias gradient), one per
 * plugin op and direction ("activation gelu", "norm_backward rmsnorm"), and the transfers
 * (upload, download, copy).
 *
 * Every entry of clf_backend_api that takes the handle is wrapped, from two lists in
 * bench_profile.c (PROF_TIMED, PROF_FORWARDED); a build fails while an entry of the table
 * is in neither. */
#ifndef CLF_BENCH_PROFILE_H
#define CLF_BENCH_PROFILE_H

#include <jansson.h>
#include <stddef.h>

#include "clformer/backend.h"

typedef struct cli_profiler cli_profiler;

/* A profiler over the open backend (real, real_be), which it does not own: close it after
 * cli_profiler_free. Timing is off until cli_profiler_timing. */
clf_status cli_profiler_create(const clf_backend_api *real, clf_backend *real_be,
                               cli_profiler **out);
void cli_profiler_free(cli_profiler *p);

/* The table and the handle to give the model in place of the real ones. An entry the real
 * backend leaves NULL stays NULL; supports() answers as the real one does. */
const clf_backend_api *cli_profiler_api(cli_profiler *p);
clf_backend *cli_profiler_backend(cli_profiler *p);

/* on = 1: ops from now on are synchronized and timed; 0: only counted as memory. */
void cli_profiler_timing(cli_profiler *p, int on);
/* The most device bytes that were allocated at once. */
size_t cli_profiler_peak_bytes(const cli_profiler *p);

/* The per-op table of `steps` profiled steps of step_s seconds each, on stderr, and as
 * members of report (profile_steps, profile_ms_per_step, profile, profile_host_ms_per_step). */
void cli_profiler_report(const cli_profiler *p, double step_s, int steps, json_t *report);

#endif
