/* fault.c - CLF_FAULT, failures injected for tests (see clformer/fault.h). */
#include "clformer/fault.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault_internal.h"

/* Entries of CLF_FAULT at most (a test names one or two). */
#define MAX_ENTRIES 16
/* The longest write_slow pause, so that a typo cannot hang a run for hours. */
#define MAX_PAUSE_MS 10000
/* Room for the one-line message about a malformed CLF_FAULT. */
#define MESSAGE_MAX 512

static const char *const site_names[CLF_FAULT_SITE_COUNT] = {"opencl_alloc", "opencl_build",
                                                             "opencl_enqueue", "write"};

typedef struct entry {
    clf_fault_site site;
    long n; /* the call, counted from 1, that fails */
} entry;

/* The parsed CLF_FAULT: written once under pthread_once, read-only afterwards; only the
 * call counts change, atomically (the header says why this global state is allowed). */
static pthread_once_t parse_once = PTHREAD_ONCE_INIT;
static entry entries[MAX_ENTRIES];
static int n_entries;
static unsigned pause_ms;
static char bad[MESSAGE_MAX]; /* "" when CLF_FAULT is unset or well-formed */
static atomic_long calls[CLF_FAULT_SITE_COUNT];

/* One "name:value" of the list (len bytes at item); records what is wrong in bad. */
static int parse_entry(const char *item, size_t len, const char *spec)
{
    const char *colon = memchr(item, ':', len);
    char name[32], value[32];
    size_t nlen = colon ? (size_t)(colon - item) : len;
    size_t vlen = colon ? len - nlen - 1 : 0;
    if (!colon || nlen == 0 || nlen >= sizeof name || vlen == 0 || vlen >= sizeof value) {
        snprintf(bad, sizeof bad, "CLF_FAULT='%s': '%.*s' is not <site>:<N>", spec, (int)len, item);
        return 0;
    }
    memcpy(name, item, nlen);
    name[nlen] = '\0';
    memcpy(value, colon + 1, vlen);
    value[vlen] = '\0';
    char *end;
    long v = value[0] >= '0' && value[0] <= '9' ? strtol(value, &end, 10) : -1;
    if (v < 0 || *end) {
        snprintf(bad, sizeof bad, "CLF_FAULT='%s': '%s' in '%s' is not a whole number", spec, value,
                 name);
        return 0;
    }
    if (strcmp(name, "write_slow") == 0) {
        if (v > MAX_PAUSE_MS) {
            snprintf(bad, sizeof bad, "CLF_FAULT='%s': write_slow:%ld is over %d ms", spec, v,
                     MAX_PAUSE_MS);
            return 0;
        }
        pause_ms = (unsigned)v;
        return 1;
    }
    for (int s = 0; s < CLF_FAULT_SITE_COUNT; s++) {
        if (strcmp(name, site_names[s]) != 0)
            continue;
        if (v < 1) {
            snprintf(bad, sizeof bad, "CLF_FAULT='%s': %s:%ld: calls are counted from 1", spec,
                     name, v);
            return 0;
        }
        if (n_entries == MAX_ENTRIES) {
            snprintf(bad, sizeof bad, "CLF_FAULT='%s': more than %d entries", spec, MAX_ENTRIES);
            return 0;
        }
        entries[n_entries++] = (entry){(clf_fault_site)s, v};
        return 1;
    }
    snprintf(bad, sizeof bad,
             "CLF_FAULT='%s': unknown site '%s' (opencl_alloc, opencl_build, opencl_enqueue, "
             "write, write_slow)",
             spec, name);
    return 0;
}

static void parse_env(void)
{
    const char *spec = getenv("CLF_FAULT");
    if (!spec || !*spec)
        return;
    for (const char *p = spec;;) {
        size_t len = strcspn(p, ",");
        if (!parse_entry(p, len, spec)) {
            n_entries = 0; /* a malformed list injects nothing */
            pause_ms = 0;
            return;
        }
        if (!p[len])
            break;
        p += len + 1;
    }
}

int clf_fault_hit(clf_fault_site site)
{
    pthread_once(&parse_once, parse_env);
    if (n_entries == 0 || (unsigned)site >= CLF_FAULT_SITE_COUNT)
        return 0;
    long call = atomic_fetch_add(&calls[site], 1) + 1;
    for (int i = 0; i < n_entries; i++)
        if (entries[i].site == site && entries[i].n == call)
            return 1;
    return 0;
}

const char *clf_fault_site_name(clf_fault_site site)
{
    return (unsigned)site < CLF_FAULT_SITE_COUNT ? site_names[site] : "?";
}

clf_status clf_fault_check_env(void)
{
    pthread_once(&parse_once, parse_env);
    return bad[0] ? clf_error(CLF_ERR_INPUT, "%s", bad) : CLF_OK;
}

unsigned clf_fault_write_pause_ms(void)
{
    pthread_once(&parse_once, parse_env);
    return pause_ms;
}
