/*
 * test_validity.c - VALID or INVALID (harness/run/validity.c) on hand-made
 * repetitions: each outcome counted, truncation by length and by an early
 * stop under ignore_eos, the --allow-failures share, "no request finished",
 * a server's cache when it was asked off; and the other-load measure
 * (harness/measure/cpuload.c) on /proc/stat lines, and the window a short
 * repetition's other work is measured over.
 */
#include <string.h>

#include "cpuload.h"
#include "testing.h"
#include "validity.h"

static req_result req(const char *item, const char *state, int gen, int max) {
    req_result q;
    memset(&q, 0, sizeof q);
    snprintf(q.item, sizeof q.item, "%s", item);
    snprintf(q.state, sizeof q.state, "%s", state);
    q.gen_tokens = gen;
    q.max_tokens = max;
    if (!strcmp(state, "failed")) snprintf(q.error, sizeof q.error, "prompt of 900 tokens does not fit the context");
    return q;
}

static void judge(req_result *q, int n, int http, double allow, int ignore_eos, const char *cache, run_verdict *v) {
    rep_result r;
    memset(&r, 0, sizeof r);
    r.req = q;
    r.n_req = n;
    r.http = http;
    run_meta m;
    memset(&m, 0, sizeof m);
    m.ignore_eos = ignore_eos;
    m.allow_failures = allow;
    snprintf(m.server_cache, sizeof m.server_cache, "%s", cache);
    validity_judge(&r, 1, &m, v);
}

static void test_outcomes(void) {
    run_verdict v;
    req_result ok[2] = {req("a", "length", 8, 8), req("b", "stop", 3, 8)};
    judge(ok, 2, 0, 0, 0, "", &v);
    CHECK(v.valid && !v.reasons[0] && v.o.finished == 2 && v.o.by_length == 1 && v.o.by_stop == 1 && !v.o.truncated,
          "finished by length and at a stop (end of text respected): VALID (%s)", v.reasons);
    judge(ok, 2, 0, 0, 1, "", &v);
    CHECK(!v.valid && v.o.truncated == 1 && strstr(v.reasons, "1 of 2 requests were truncated (b: 3 of 8 tokens, stopped at"
          " end of text although asked to ignore it"), "a stop short of max_tokens under ignore_eos is truncated: %s",
          v.reasons);
    req_result cut[2] = {req("a", "length", 8, 8), req("c", "length", 5, 8)};
    judge(cut, 2, 0, 0, 1, "", &v);
    CHECK(!v.valid && strstr(v.reasons, "(c: 5 of 8 tokens, stopped by length: the context was full)"),
          "length short of max_tokens: truncated by the full context: %s", v.reasons);
    req_result mixed[5] = {req("a", "length", 8, 8), req("f", "failed", 0, 8), req("r", "rejected", 0, 8),
                           req("t", "timeout", 2, 8), req("x", "cancelled", 1, 8)};
    judge(mixed, 5, 0, 0, 1, "", &v);
    CHECK(v.o.requests == 5 && v.o.finished == 1 && v.o.failed == 1 && v.o.rejected == 1 && v.o.timed_out == 1 &&
          v.o.cancelled == 1, "each outcome counted once");
    CHECK(!v.valid && strstr(v.reasons, "2 of 5 requests failed or were cancelled (f: prompt of 900 tokens"),
          "failed and cancelled invalidate, rejected and timed out do not: %s", v.reasons);
    judge(mixed, 5, 0, 0.4, 1, "", &v);
    CHECK(v.valid && strstr(v.note, "2 of 5 requests failed or were truncated, within --allow-failures 0.4"),
          "--allow-failures 0.4 tolerates 2 of 5: VALID with a note (%s)", v.note);
    judge(mixed, 5, 0, 0.3, 1, "", &v);
    CHECK(!v.valid && strstr(v.reasons, "40.0% is more than --allow-failures 0.3 tolerates"), "0.3 does not: %s",
          v.reasons);
    req_result none[2] = {req("r", "rejected", 0, 8), req("t", "timeout", 0, 8)};
    judge(none, 2, 0, 0, 1, "", &v);
    CHECK(!v.valid && strstr(v.reasons, "no request finished (1 rejected, 1 timed out, 0 failed)"),
          "nothing finished: INVALID though nothing failed: %s", v.reasons);
    req_result unset[1] = {req("u", "", 0, 8)};
    judge(unset, 1, 0, 0, 1, "", &v);
    CHECK(!v.valid && v.o.failed == 1, "a request nobody gave an outcome counts as failed, never as served");
}

static void test_server_cache(void) {
    run_verdict v;
    req_result q[2] = {req("a", "length", 8, 8), req("b", "length", 8, 8)};
    q[1].cached_tokens = 120;
    judge(q, 2, 1, 0, 1, "off", &v);
    CHECK(!v.valid && strstr(v.reasons, "the server served 120 prompt tokens from its cache although asked not to"),
          "over HTTP, cache asked off but used: INVALID: %s", v.reasons);
    judge(q, 2, 1, 0, 1, "on", &v);
    CHECK(v.valid, "--server-cache on: the cache is part of what is measured: VALID");
    judge(q, 2, 0, 0, 1, "", &v);
    CHECK(v.valid, "in process the prefix cache is a configuration (--prefix-cache), not a server's cache: VALID");
}

static void test_cpuload(void) {
    double busy, steal;
    CHECK(cpuload_parse_stat("cpu  100 5 50 1000 9 1 2 7 3 0\n", &busy, &steal) == 0 && busy == 165 && steal == 7,
          "busy = user+nice+system+irq+softirq+steal: %g, steal %g", busy, steal);
    CHECK(cpuload_parse_stat("cpu0 1 2 3 4 5 6 7 8\n", &busy, &steal) != 0 && cpuload_parse_stat("cpu  1 2 3\n", &busy, &steal) != 0,
          "a per-CPU line or a short one is refused");
    cpuload_snap a = {.busy_s = 100, .steal_s = 1, .self_s = 10, .wall_s = 50, .ok = 1};
    cpuload_snap b = {.busy_s = 103, .steal_s = 1.5, .self_s = 12, .wall_s = 52, .ok = 1};
    double other, st;
    cpuload_between(&a, &b, &other, &st);
    CHECK_NEAR(other, 0.5, 1e-12, "(3 s busy - 2 s ours) over 2 s: 0.5 CPUs of other work");
    CHECK_NEAR(st, 0.25, 1e-12, "steal 0.5 s over 2 s");
    b.busy_s = 101.9; /* tick rounding below our own time */
    cpuload_between(&a, &b, &other, &st);
    CHECK(other == 0, "never negative");
    b.ok = 0;
    cpuload_between(&a, &b, &other, &st);
    CHECK(other == -1 && st == -1, "an unreadable /proc/stat: unknown (-1), not 0");
    cpuload_snap now;
    cpuload_snapshot(&now);
    CHECK(now.ok && now.busy_s > 0 && now.wall_s > 0, "a snapshot of this machine");
}

/* cpuload_settle: a repetition of a millisecond is measured over a window of
 * CPULOAD_MIN_S; the first waits for one, the ones after reuse the history;
 * a window that is long enough is left alone. */
static void test_cpuload_window(void) {
    cpuload_snap a, b;
    cpuload_snapshot(&a);
    cpuload_snapshot(&b);
    cpuload_settle(&a, &b);
    CHECK(b.wall_s - a.wall_s >= CPULOAD_MIN_S, "the first short window was widened to %.3f s", b.wall_s - a.wall_s);
    int ok = 1;
    double waited = 0;
    for (int i = 0; i < 5; i++) {
        cpuload_snapshot(&a);
        cpuload_snapshot(&b);
        double t0 = b.wall_s;
        cpuload_settle(&a, &b);
        waited += b.wall_s - t0;
        ok &= b.wall_s - a.wall_s >= CPULOAD_MIN_S;
    }
    CHECK(ok && waited < CPULOAD_MIN_S, "the next five short windows widened from the history (waited %.3f s)", waited);
    cpuload_snap c = {.busy_s = 1, .wall_s = 10, .ok = 1}, d = {.busy_s = 2, .wall_s = 11, .ok = 1};
    cpuload_settle(&c, &d);
    CHECK(c.wall_s == 10 && d.wall_s == 11, "a window of 1 s is kept as it is");
}

TEST_MAIN({
    test_outcomes();
    test_server_cache();
    test_cpuload();
    test_cpuload_window();
})
