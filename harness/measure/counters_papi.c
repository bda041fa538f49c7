/*
 * counters_papi.c - the PAPI backend for the hardware events of counters.c,
 * built only with -DCORTEX_PAPI (`make PAPI=1`, `pkg-config --cflags --libs
 * papi`). Without CORTEX_PAPI this file compiles to nothing but a typedef, so
 * it can stay in the source list of every build.
 *
 * counters.c keeps the software and energy (RAPL) events on perf_event and
 * asks this file for the hardware ones, under the same stored names:
 *   cycles            PAPI_TOT_CYC
 *   instructions      PAPI_TOT_INS
 *   cache-references  PAPI_L3_TCA   (L3 total accesses)
 *   cache-misses      PAPI_L3_TCM   (L3 total misses)
 *   branch-misses     PAPI_BR_MSP   (conditional branches mispredicted)
 *   llc-load-misses   PAPI_L3_LDM   (L3 load misses)
 * Presets are not the same hardware events as perf's generic ones, which is
 * why the set reports mode "papi" and runs should only be compared within one
 * mode. A preset the CPU/VM lacks is recorded as missing with PAPI_strerror.
 * The event set is counted in the user domain with PAPI_INHERIT_ALL, so, like
 * the perf backend, it covers threads created after it is opened; if PAPI
 * cannot inherit, every hardware event is missing rather than undercounted.
 */
#ifdef CORTEX_PAPI

#include <papi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "counters.h"
#include "hx_err.h"

struct ctr_papi {
    int es;                        /* PAPI event set */
    int n;                         /* names asked for */
    int slot[CTR_MAX_EVENTS];      /* position of names[i] in the PAPI read, -1 if not added */
    int n_added;
    long long vals[CTR_MAX_EVENTS];
};

/* Stored name -> PAPI preset. */
static const struct {
    const char *name, *preset;
} ctr_papi_map[] = {
    {"cycles", "PAPI_TOT_CYC"},     {"instructions", "PAPI_TOT_INS"}, {"cache-references", "PAPI_L3_TCA"},
    {"cache-misses", "PAPI_L3_TCM"}, {"branch-misses", "PAPI_BR_MSP"}, {"llc-load-misses", "PAPI_L3_LDM"},
};

/* Symbolic name of a PAPI error code, for reasons. */
static const char *ctr_papi_errname(int rc) {
    switch (rc) {
    case PAPI_EINVAL: return "PAPI_EINVAL";
    case PAPI_ENOMEM: return "PAPI_ENOMEM";
    case PAPI_ESYS: return "PAPI_ESYS";
    case PAPI_ECMP: return "PAPI_ECMP";
    case PAPI_ENOEVNT: return "PAPI_ENOEVNT";
    case PAPI_ECNFLCT: return "PAPI_ECNFLCT";
    case PAPI_ENOTRUN: return "PAPI_ENOTRUN";
    case PAPI_EISRUN: return "PAPI_EISRUN";
    case PAPI_ENOEVST: return "PAPI_ENOEVST";
    case PAPI_ENOTPRESET: return "PAPI_ENOTPRESET";
    case PAPI_ENOCNTR: return "PAPI_ENOCNTR";
    case PAPI_EPERM: return "PAPI_EPERM";
    case PAPI_ENOINIT: return "PAPI_ENOINIT";
    case PAPI_ENOSUPP: return "PAPI_ENOSUPP";
    default: return "PAPI error";
    }
}

/* "WHAT: PAPI_strerror (PAPI_EXXX)" into buf. */
static void ctr_papi_reason(char *buf, size_t len, const char *what, int rc) {
    const char *msg = PAPI_strerror(rc);
    snprintf(buf, len, "%s: %s (%s)", what, msg ? msg : "unknown error", ctr_papi_errname(rc));
}

/* Give every name the same reason (PAPI could not start at all). */
static void ctr_papi_fail_all(int n, int *ok, char (*reasons)[CTR_REASON_LEN], const char *why) {
    for (int i = 0; i < n; i++) {
        ok[i] = 0;
        snprintf(reasons[i], CTR_REASON_LEN, "%s", why);
    }
}

/* Open the hardware events through PAPI; see counters.h. */
ctr_papi *ctr_papi_open(const char *const *names, int n, int *ok, char (*reasons)[CTR_REASON_LEN], char *err,
                        size_t errlen) {
    char why[CTR_REASON_LEN];
    if (n > CTR_MAX_EVENTS) n = CTR_MAX_EVENTS;
    if (PAPI_is_initialized() == PAPI_NOT_INITED) {
        int v = PAPI_library_init(PAPI_VER_CURRENT);
        if (v != PAPI_VER_CURRENT) {
            if (v < 0)
                ctr_papi_reason(why, sizeof why, "PAPI_library_init", v);
            else
                snprintf(why, sizeof why, "PAPI_library_init: library version %#x, built against %#x", (unsigned)v,
                         (unsigned)PAPI_VER_CURRENT);
            ctr_papi_fail_all(n, ok, reasons, why);
            hx_fail(err, errlen, "%s", why);
            return NULL;
        }
    }
    ctr_papi *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(why, sizeof why, "PAPI backend: out of memory");
        ctr_papi_fail_all(n, ok, reasons, why);
        hx_fail(err, errlen, "%s", why);
        return NULL;
    }
    p->es = PAPI_NULL;
    p->n = n;
    int rc = PAPI_create_eventset(&p->es);
    if (rc == PAPI_OK) rc = PAPI_assign_eventset_component(p->es, 0);
    if (rc != PAPI_OK) {
        ctr_papi_reason(why, sizeof why, "PAPI event set", rc);
        goto fail;
    }
    PAPI_option_t opt;
    memset(&opt, 0, sizeof opt);
    opt.inherit.eventset = p->es;
    opt.inherit.inherit = PAPI_INHERIT_ALL;
    rc = PAPI_set_opt(PAPI_INHERIT, &opt);
    if (rc != PAPI_OK) {
        ctr_papi_reason(why, sizeof why, "PAPI_INHERIT (needed to count the engine's threads)", rc);
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        const char *preset = NULL;
        p->slot[i] = -1;
        ok[i] = 0;
        for (size_t k = 0; k < sizeof ctr_papi_map / sizeof ctr_papi_map[0]; k++)
            if (!strcmp(ctr_papi_map[k].name, names[i])) preset = ctr_papi_map[k].preset;
        if (!preset) {
            snprintf(reasons[i], CTR_REASON_LEN, "PAPI: no preset stands for %s", names[i]);
            continue;
        }
        int code = 0;
        rc = PAPI_event_name_to_code(preset, &code);
        if (rc == PAPI_OK) rc = PAPI_query_event(code);
        if (rc == PAPI_OK) rc = PAPI_add_event(p->es, code);
        if (rc != PAPI_OK) {
            ctr_papi_reason(reasons[i], CTR_REASON_LEN, preset, rc);
            continue;
        }
        p->slot[i] = p->n_added++;
        ok[i] = 1;
        reasons[i][0] = 0;
    }
    if (p->n_added == 0) {
        hx_fail(err, errlen, "PAPI: none of the presets is available");
        return p; /* per-name reasons already say why; reads are no-ops */
    }
    rc = PAPI_start(p->es);
    if (rc != PAPI_OK) {
        ctr_papi_reason(why, sizeof why, "PAPI_start", rc);
        goto fail;
    }
    return p;
fail:
    ctr_papi_fail_all(n, ok, reasons, why);
    hx_fail(err, errlen, "%s", why);
    ctr_papi_close(p);
    return NULL;
}

/* Cumulative values, in the order of the names given to ctr_papi_open. */
int ctr_papi_read(ctr_papi *p, uint64_t *values) {
    if (!p || p->n_added == 0) return -1;
    if (PAPI_read(p->es, p->vals) != PAPI_OK) return -1;
    for (int i = 0; i < p->n; i++)
        if (p->slot[i] >= 0) values[i] = p->vals[p->slot[i]] < 0 ? 0 : (uint64_t)p->vals[p->slot[i]];
    return 0;
}

/* Stop and destroy the event set (the library stays initialised). */
void ctr_papi_close(ctr_papi *p) {
    if (!p) return;
    if (p->es != PAPI_NULL) {
        if (p->n_added) PAPI_stop(p->es, NULL);
        PAPI_cleanup_eventset(p->es);
        PAPI_destroy_eventset(&p->es);
    }
    free(p);
}

#else

/* Without CORTEX_PAPI: nothing (ISO C wants at least one declaration). */
typedef int ctr_papi_disabled;

#endif
