/*
 * validity.c - VALID or INVALID, with the reasons (see validity.h).
 */
#include "validity.h"

#include <stdio.h>
#include <string.h>

/* "finished" is how rows stored before schema v12 said stop or length. */
int state_finished(const char *state) {
    return !strcmp(state, "stop") || !strcmp(state, "length") || !strcmp(state, "finished");
}

int state_truncated(const char *state, int gen_tokens, int max_tokens, int ignore_eos) {
    if (!state_finished(state) || max_tokens <= 0 || gen_tokens >= max_tokens) return 0;
    /* short by length: the context was full; short at a stop although asked to ignore end of text */
    return !strcmp(state, "length") || ignore_eos;
}

void validity_add(run_outcomes *o, const char *state, int gen_tokens, int max_tokens, int ignore_eos, int64_t server_cached) {
    o->requests++;
    if (state_finished(state)) {
        o->finished++;
        if (!strcmp(state, "stop")) o->by_stop++;
        else o->by_length++;
        o->truncated += state_truncated(state, gen_tokens, max_tokens, ignore_eos);
    } else if (!strcmp(state, "rejected")) o->rejected++;
    else if (!strcmp(state, "timeout")) o->timed_out++;
    else if (!strcmp(state, "cancelled")) o->cancelled++;
    else o->failed++; /* "failed", or a state nobody set: never counted as served */
    o->server_cached_tokens += server_cached;
}

int req_finished(const req_result *q) { return state_finished(q->state); }

int req_truncated(const req_result *q, int ignore_eos) {
    return state_truncated(q->state, q->gen_tokens, q->max_tokens, ignore_eos);
}

void validity_count(const rep_result *reps, int n_reps, int ignore_eos, run_outcomes *o) {
    memset(o, 0, sizeof *o);
    for (int r = 0; r < n_reps; r++)
        for (int i = 0; i < reps[r].n_req; i++) {
            const req_result *q = &reps[r].req[i];
            validity_add(o, q->state, q->gen_tokens, q->max_tokens, ignore_eos, reps[r].http ? q->cached_tokens : 0);
        }
}

/* The first request of the repetitions matching `want` (0: failed or
 * cancelled, 1: truncated), for a reason's example; NULL if none. */
static const req_result *example(const rep_result *reps, int n_reps, int ignore_eos, int want) {
    for (int r = 0; r < n_reps; r++)
        for (int i = 0; i < reps[r].n_req; i++) {
            const req_result *q = &reps[r].req[i];
            if (want ? req_truncated(q, ignore_eos) : !req_finished(q) && (!strcmp(q->state, "failed") ||
                                                                            !strcmp(q->state, "cancelled") || !q->state[0]))
                return q;
        }
    return NULL;
}

/* Append "; "-separated text to a fixed buffer. */
static void add(char *buf, size_t cap, const char *text) {
    size_t k = strlen(buf);
    if (k + 3 < cap) snprintf(buf + k, cap - k, "%s%s", k ? "; " : "", text);
}

void validity_judge(const rep_result *reps, int n_reps, const run_meta *m, run_verdict *v) {
    memset(v, 0, sizeof *v);
    run_outcomes *o = &v->o;
    validity_count(reps, n_reps, m->ignore_eos, o);
    char line[512];
    int bad = o->failed + o->cancelled + o->truncated;
    double share = o->requests ? (double)bad / o->requests : 0;
    if (bad && share > m->allow_failures) {
        const req_result *f = example(reps, n_reps, m->ignore_eos, 0);
        if (o->failed + o->cancelled) {
            snprintf(line, sizeof line, "%d of %d requests failed%s (%s: %.150s)", o->failed + o->cancelled, o->requests,
                     o->cancelled ? " or were cancelled" : "", f ? f->item : "?", f && f->error[0] ? f->error : "no reason given");
            add(v->reasons, sizeof v->reasons, line);
        }
        const req_result *t = example(reps, n_reps, m->ignore_eos, 1);
        if (o->truncated && t) {
            snprintf(line, sizeof line, "%d of %d requests were truncated (%s: %d of %d tokens, %s)", o->truncated,
                     o->requests, t->item, t->gen_tokens, t->max_tokens,
                     !strcmp(t->state, "length") ? "stopped by length: the context was full"
                                                 : "stopped at end of text although asked to ignore it; --respect-eos"
                                                   " measures what it generates");
            add(v->reasons, sizeof v->reasons, line);
        }
        if (m->allow_failures > 0) {
            snprintf(line, sizeof line, "%.1f%% is more than --allow-failures %g tolerates", 100 * share, m->allow_failures);
            add(v->reasons, sizeof v->reasons, line);
        }
    } else if (bad) {
        snprintf(v->note, sizeof v->note, "%d of %d requests failed or were truncated, within --allow-failures %g", bad,
                 o->requests, m->allow_failures);
    }
    if (!o->finished) {
        snprintf(line, sizeof line, "no request finished (%d rejected, %d timed out, %d failed)", o->rejected, o->timed_out,
                 o->failed + o->cancelled);
        add(v->reasons, sizeof v->reasons, line);
    }
    if (strcmp(m->server_cache, "on") && o->server_cached_tokens > 0) {
        snprintf(line, sizeof line, "the server served %lld prompt tokens from its cache although asked not to"
                 " (cache_prompt false): its figures are inflated by it (--server-cache on measures with the cache)",
                 (long long)o->server_cached_tokens);
        add(v->reasons, sizeof v->reasons, line);
    }
    v->valid = !v->reasons[0];
}
