/*
 * validity.h - is a run a measurement at all? MLPerf LoadGen's rule: a
 * result is VALID or INVALID, with its reasons, and nothing INVALID is shown,
 * stored or gated as a measurement (docs/harness.md, "VALID and INVALID").
 *
 * Every request ends in one outcome (req_result.state):
 *
 *   stop       finished: the model's end of text, a stop token or string
 *   length     finished: max_tokens generated
 *   failed     an error (the prompt does not fit, the server answered 404, ...)
 *   rejected   refused at once because the queue was full (a server's 429)
 *   timeout    its deadline passed (a trace's deadline_ms)
 *   cancelled  ended by someone else
 *
 * and is *truncated* when it finished with fewer tokens than it asked for
 * while the run asked for the full length: stopped by length early (the
 * context was full), or stopped at all under ignore_eos (a server that does
 * not honour it). A run is INVALID when
 *
 *   - failed, cancelled and truncated requests together exceed the share
 *     --allow-failures tolerates (default 0: any one),
 *   - no request finished,
 *   - over HTTP with the server's prompt cache off (the default), the server
 *     still reported prompt tokens served from its cache (the figures would
 *     be inflated by it).
 *
 * Rejected and timed-out requests do not invalidate a run: an open loop
 * past saturation and deadlines are what a rate sweep and goodput measure;
 * they are counted and printed.
 */
#ifndef CB_VALIDITY_H
#define CB_VALIDITY_H

#include "results.h"

/* The outcomes of a run's counted repetitions. */
typedef struct run_outcomes {
    int requests, finished, by_stop, by_length, truncated, failed, rejected, timed_out, cancelled;
    int64_t server_cached_tokens; /* over HTTP with the server cache off: prompt tokens it served from its cache */
} run_outcomes;

/* A run's verdict: valid or not, with every reason (one line, "; " between them). */
typedef struct run_verdict {
    int valid;
    run_outcomes o;
    char reasons[1024]; /* INVALID: why; VALID: "" */
    char note[256];     /* VALID with tolerated failures: what was tolerated; else "" */
} run_verdict;

/* 1 if a request that ended in `state` finished (stop or length). */
int state_finished(const char *state);
/* 1 if it finished short of its max_tokens when the run asked for the full length (see above). */
int state_truncated(const char *state, int gen_tokens, int max_tokens, int ignore_eos);
/* Count one request's outcome into o (server_cached: prompt tokens a server's cache served it, over HTTP). */
void validity_add(run_outcomes *o, const char *state, int gen_tokens, int max_tokens, int ignore_eos, int64_t server_cached);
/* The same for an in-memory request. */
int req_finished(const req_result *q);
int req_truncated(const req_result *q, int ignore_eos);
/* The outcome counts of n_reps repetitions. */
void validity_count(const rep_result *reps, int n_reps, int ignore_eos, run_outcomes *o);
/* Judge a run's counted repetitions by the rules above; m gives ignore_eos,
 * allow_failures, and (over HTTP) whether the server's cache was allowed. */
void validity_judge(const rep_result *reps, int n_reps, const run_meta *m, run_verdict *v);

#endif
