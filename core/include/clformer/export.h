/* clformer/export.h - CLF_API, the mark of the public API.
 *
 * libclformer is compiled with -fvisibility=hidden: a function or variable leaves the .so
 * only when its declaration in core/include/clformer/ starts with CLF_API. Everything else
 * (the layers' private helpers in core/src, even when not static) stays inside the
 * library, so programs and backends can bind to nothing but this API and the internals can
 * change without an ABI break. tests/test_symbols.sh checks that the exported symbols are
 * exactly the clf_ functions and variables these headers declare.
 *
 * Why a macro rather than a linker version script: the mark sits on the declaration a
 * reader (and the compiler) already sees, a version script would be a second list to keep
 * in step with the headers, and the compiler knows at each call inside the library that a
 * hidden function cannot be interposed, so it calls it directly instead of through the PLT. */
#ifndef CLFORMER_EXPORT_H
#define CLFORMER_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define CLF_API __attribute__((visibility("default")))
#else
#define CLF_API
#endif

#endif
