/*
 * show_server.c - the "Server" section of `cortex-bench run`, `show` and
 * `report` for a run measured over HTTP (run --endpoint): which server, and
 * what its /metrics said changed while the repetitions ran (a NaN value, as
 * Prometheus allows, prints as "-").
 */
#include <math.h>
#include <stdlib.h>

#include "show.h"
#include "store_read.h"

/* See show.h. */
void show_server(store *s, int64_t id, FILE *out) {
    store_run r;
    if (store_run_load(s, id, &r) != 1 || !r.endpoint[0]) return;
    fprintf(out, "### Server\n\n`%s`: ", r.endpoint);
    show_md_inline(out, r.server);
    fprintf(out, "\n\n");
    store_server_metric *m;
    int n;
    if (store_server_metrics_load(s, id, &m, &n)) return;
    if (!n) fprintf(out, "No server metrics (the server has no /metrics, or nothing in it changed).\n\n");
    else fprintf(out, "| /metrics series | change per repetition (mean) | repetitions | value after |\n"
                      "| --- | ---: | ---: | ---: |\n");
    for (int i = 0; i < n; i++) {
        fprintf(out, "| ");
        show_md_inline(out, m[i].series);
        char delta[32], after[32]; /* "-": a value the server gave as NaN (a gauge with nothing observed) */
        fprintf(out, " | %s | %d | %s |\n", show_num(delta, sizeof delta, "%.6g", m[i].delta_mean), m[i].reps,
                show_num(after, sizeof after, "%.6g", m[i].after_last));
    }
    if (n) fprintf(out, "\n");
    free(m);
}
