/*
 * show_spec.c - the "Speculative decoding" section of `cortex-bench run` and
 * `show`: how the run speculated (runs.spec_config, the drafter, the time
 * making it took) and its spec_* metrics (medians over repetitions) with
 * their meaning and unit; over HTTP what the server reported, or that it
 * reported nothing. Definitions: docs/metrics.md, "Speculative decoding".
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "show.h"
#include "store_read.h"

/* The spec_* metrics in display order; `local`: measured in-process only (a server reports draft_n and
 * draft_n_accepted, not its passes or times). */
static const struct { const char *name, *label, *unit; int local; } SPEC_ROWS[] = {
    {"spec_acceptance", "acceptance rate (accepted / drafted)", "fraction", 0},
    {"spec_accepted_mean", "mean accepted length (accepted per checked draft)", "tokens", 1},
    {"spec_tokens_per_pass", "tokens per target pass (decode tokens / passes)", "tokens", 1},
    {"spec_draft_tokens", "draft tokens checked", "tokens", 0},
    {"spec_accepted_tokens", "draft tokens accepted", "tokens", 0},
    {"spec_passes", "target passes of the decodes", "passes", 1},
    {"spec_draft_ms", "time drafting", "ms", 1},
    {"spec_verify_ms", "time in the target's passes (verify)", "ms", 1},
};
#define N_SPEC_ROWS (sizeof SPEC_ROWS / sizeof SPEC_ROWS[0])

/* See show.h. */
void show_spec(store *s, int64_t id, FILE *out) {
    store_run r;
    if (store_run_load(s, id, &r) != 1) return;
    int http = r.endpoint[0] != 0, have = !isnan(store_metric_median(s, id, "spec_draft_tokens"));
    if (!r.spec_config[0] && !http) return; /* in-process without --spec: nothing to say */
    fprintf(out, "### Speculative decoding\n\n");
    if (http && !have) {
        fprintf(out, "Not reported by the server (its replies' `timings` carry no `draft_n`/`draft_n_accepted`).\n\n");
        return;
    }
    if (http) fprintf(out, "The server's own (its replies' `timings.draft_n` and `draft_n_accepted`).\n\n");
    else {
        char setup[32];
        fprintf(out, "`%s`: drafter ", r.spec_config);
        show_md_inline(out, r.spec_drafter[0] ? r.spec_drafter : "unknown");
        fprintf(out, ", made in %s ms before the run (part of no request's time)\n\n",
                show_num(setup, sizeof setup, "%.1f", r.spec_setup_ms));
    }
    fprintf(out, "| metric | median | unit |\n| --- | ---: | --- |\n");
    for (size_t i = 0; i < N_SPEC_ROWS; i++) {
        double v = store_metric_median(s, id, SPEC_ROWS[i].name);
        if (http && SPEC_ROWS[i].local) {
            fprintf(out, "| %s | missing | not reported by the server |\n", SPEC_ROWS[i].label);
            continue;
        }
        if (isnan(v)) { /* a ratio over nothing: no draft made, none checked */
            fprintf(out, "| %s | - | nothing %s |\n", SPEC_ROWS[i].label,
                    !strcmp(SPEC_ROWS[i].name, "spec_accepted_mean") ? "checked" : "drafted");
            continue;
        }
        if (!strcmp(SPEC_ROWS[i].unit, "fraction")) fprintf(out, "| %s | %.3f (%.1f%%) | |\n", SPEC_ROWS[i].label, v, 100 * v);
        else if (v == (double)(long long)v) fprintf(out, "| %s | %lld | %s |\n", SPEC_ROWS[i].label, (long long)v, SPEC_ROWS[i].unit);
        else fprintf(out, "| %s | %.3f | %s |\n", SPEC_ROWS[i].label, v, SPEC_ROWS[i].unit);
    }
    if (!http)
        fprintf(out, "\nThe tokens one pass chose share its end time: their inter-token gaps after the first are 0"
                     " (ITL percentiles count them).\n");
    fprintf(out, "\n");
}
