/*
 * hw_store.h - the `hw` table (schema v5): writing one `cortex-bench hw`
 * measurement, and finding the one a run's roofline is judged against.
 */
#ifndef CB_HW_STORE_H
#define CB_HW_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "env.h"
#include "hw.h"
#include "store.h"

/* Insert the measurement (and its environments row) in one transaction.
 * 0 and the row id, or -1 with a message. */
int hw_store_insert(store *s, const hw_result *r, const env_info *e, int64_t *id, char *err, size_t errlen);

/* The read bandwidth a run at `threads` threads is held against. */
typedef struct hw_ref {
    int64_t id;            /* hw row */
    double read_gbs;       /* best read GB/s at the chosen thread count */
    int threads;           /* the thread count that figure was measured with */
    int hw_threads;        /* the row's N */
    char measured_at[40];
} hw_ref;

/*
 * Pick the row for a machine: the environment with fingerprint `fingerprint`
 * (or, when NULL, the environments row `env_id`). For threads == 1 the newest
 * row's 1-thread figure; otherwise the newest row measured at exactly
 * `threads` threads, else the newest row's all-threads figure. 1 when found,
 * 0 when the machine has no hw row (or no such table), -1 on a query error.
 */
int hw_store_lookup(store *s, const char *fingerprint, int64_t env_id, int threads, hw_ref *out);

/* The figures of one hw row a projection needs; NAN where not measured. */
typedef struct hw_peaks {
    int64_t id;
    int threads;              /* the row's N */
    double read_gbs_1t, read_gbs; /* best read GB/s at 1 and N threads */
    double fp32_scalar_1t, fp32_avx2_1t, int8_avx2_1t; /* one core's peak arithmetic, G operations/s */
    /* the same for AVX-512 F FMA and AVX-512 VNNI: schema v5 stores these only in the avx512 and vnni text
     * columns ("measured: FMA 123.4 GFLOP/s (1 thread), ..."), so they are read back from that text
     * (hw_store_text_peak_1t; 0.1 G op/s resolution); NAN where not measured */
    double fp32_avx512_1t, int8_vnni_1t;
    double llc_bytes;         /* last-level cache, NAN when sysfs did not say */
    char measured_at[40];
} hw_peaks;

/* The one-thread peak in an hw row's avx512 or vnni text, as hw.c writes it:
 * "measured: FMA 123.4 GFLOP/s (1 thread), 456.7 (4 threads)" or
 * "measured: AVX-512 VNNI 123.4 GOP/s (1 thread), ..." -> 123.4. NAN for any
 * other text ("available", "not available on this CPU", NULL, malformed). */
double hw_store_text_peak_1t(const char *text);

/* hw row `id` into *out: 1 found, 0 missing, -1 on a query error. */
int hw_store_peaks(store *s, int64_t id, hw_peaks *out);

#endif
