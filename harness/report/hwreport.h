/*
 * hwreport.h - the hardware-evaluation report (`cortex-bench hwreport`):
 * for the machines in a store, the same model and workloads side by side.
 * Machines (and one machine under another kernel table, pinning or NUMA
 * policy) are columns, never a baseline and a candidate: nothing here is a
 * regression verdict. Per workload: tokens/s at each machine's best thread
 * count; thread scaling with its efficiency, warning where more threads were
 * slower; the share of the machine's measured read and compute roofs; peak
 * memory; energy per token where the kernel exposed RAPL (else missing with
 * the reason, never 0); cost per million tokens from a price per hour; and,
 * given the challenge machine's read bandwidth, a projection of decode
 * speed there (docs/metrics.md, "Hardware evaluation"). Written as markdown
 * with gnuplot charts and an HTML page of the same tables.
 */
#ifndef CB_HWREPORT_H
#define CB_HWREPORT_H

#include <stddef.h>

#include "cli_util.h"
#include "store.h"

#define HWR_MAX_PRICES 32

typedef struct {
    const char *model;       /* a model name or sha256 prefix; NULL: the one the most configurations measured */
    const char *out_dir;     /* where hwreport.md, index.html and the charts go */
    const char *price;       /* --price: "USD" for every machine, or "TESTBED=USD,..." (per hour) */
    double target_read_gbs;  /* --target-read-gbs: the challenge machine's read bandwidth; 0: no projection */
} hwreport_params;

typedef struct hwreport_opts {
    const char *db;
    hwreport_params p;
} hwreport_opts;

/* Write the report; the markdown's path into md_path. 0 or -1 with err. */
int hwreport_write(store *s, const hwreport_params *p, char *md_path, size_t n, char *err, size_t errlen);

void hwreport_opts_init(void *o);
int cmd_hwreport(void *opts, const cli_args *a);

#endif
