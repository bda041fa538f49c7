/*
 * test_sched_lora.c - the scheduler serving adapters (cortex.h, docs/lora.md):
 *   - requests naming different adapters (and none) run in the same steps
 *     and each generates the tokens it generates alone with its adapter;
 *   - the same with lora_split (one adapter per step, llama.cpp's way): the
 *     same tokens, in more steps;
 *   - a byte budget: idle adapters are unloaded least recently used first,
 *     resident memory never passes the budget, a running adapter is never
 *     unloaded (a request whose adapter does not fit waits for it to end);
 *   - removal of an adapter in use is deferred (new requests naming it are
 *     refused) and completes when its last request ends;
 *   - errors: an unregistered adapter id, a taken id or name, a bad file
 *     preloaded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

#define GEN 12
#define NREQ 6

typedef struct result { int32_t tok[GEN]; int n; int state; int64_t t_start, t_end; } result;

static void on_done(void *user, const cx_request_stats *st) {
    result *r = user;
    r->n = st->n_gen < GEN ? st->n_gen : GEN;
    memcpy(r->tok, st->tokens, sizeof(int32_t) * (size_t)r->n);
    r->state = st->state;
    r->t_start = st->t_start;
    r->t_end = st->t_end;
}

static int argmax(const float *l, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

/* Greedy tokens of prompt p alone with adapter file `path` (NULL: none) at scale. */
static void alone(cx_model *m, const char *path, float scale, const int32_t *p, int n, int32_t *out) {
    cx_err err = {0};
    cx_session *s = NULL;
    cx_lora *a = NULL;
    const float *l;
    int ok = cx_session_new(m, 0, 1, &s, &err) == 0;
    if (ok && path) {
        cx_lora_use u = {NULL, scale};
        ok = cx_lora_load(m, path, NULL, &a, &err) == 0;
        u.lora = a;
        ok = ok && cx_session_set_lora(s, &u, 1, &err) == 0;
    }
    ok = ok && cx_eval(s, p, n, &l, &err) == 0;
    for (int g = 0; ok && g < GEN; g++) {
        int32_t t = out[g] = argmax(l, cx_model_get_info(m)->n_vocab);
        if (g + 1 < GEN) ok = cx_eval(s, &t, 1, &l, &err) == 0;
    }
    CHECK(ok, "alone: %s", err.msg);
    cx_session_free(s);
    cx_lora_free(a);
}

/* Submit NREQ requests (adapter ids ids[i], scale scales[i]), run to the end; returns steps. */
static int64_t serve(cx_sched *s, const int *ids, const float *scales, int32_t (*prompts)[32], const int *plen,
                     result *res) {
    cx_err err = {0};
    for (int i = 0; i < NREQ; i++) {
        cx_request r = cx_request_defaults();
        r.prompt = prompts[i];
        r.n_prompt = plen[i];
        r.sampling.temperature = 0;
        r.max_tokens = GEN;
        r.ignore_eos = 1;
        r.adapter = ids[i];
        r.adapter_scale = scales[i];
        r.user = &res[i];
        r.on_done = on_done;
        CHECK(cx_sched_submit(s, &r, &err) > 0, "submit %d: %s", i, err.msg);
    }
    for (int i = 0; i < 10000 && cx_sched_step(s, &err) > 0; i++) {}
    cx_sched_stats st;
    cx_sched_get_stats(s, &st);
    return st.steps;
}

static void check_serving(cx_model *m, const char *a1, const char *a2, int64_t one_bytes) {
    int V = cx_model_get_info(m)->n_vocab;
    static const int ids[NREQ] = {1, 0, 2, 1, 2, 1};
    static const float scales[NREQ] = {1, 1, 1, 0.5f, 1, 1};
    int32_t prompts[NREQ][32];
    int plen[NREQ];
    int32_t ref[NREQ][GEN];
    for (int i = 0; i < NREQ; i++) {
        plen[i] = 4 + 3 * i;
        for (int j = 0; j < plen[i]; j++) prompts[i][j] = (int32_t)((j * 31 + i * 17 + 5) % (V - 3)) + 3;
        alone(m, ids[i] == 0 ? NULL : ids[i] == 1 ? a1 : a2, scales[i], prompts[i], plen[i], ref[i]);
    }
    int differ = 0;
    for (int j = 0; j < GEN; j++) differ |= ref[1][j] != ref[0][j] || ref[2][j] != ref[0][j];
    CHECK(differ, "the adapters change the tokens");
    int64_t steps[2] = {0};
    for (int split = 0; split < 2; split++) {
        cx_sched_params p = cx_sched_defaults();
        p.max_seqs = NREQ;
        p.lora_split = split;
        p.lora_type = CX_TYPE_F32;
        cx_sched *s = NULL;
        cx_err err = {0};
        if (cx_sched_new(m, &p, &s, &err)) {
            CHECK(0, "sched: %s", err.msg);
            return;
        }
        CHECK(cx_sched_adapter_add(s, 1, "one", a1, 0, &err) == 0 && cx_sched_adapter_add(s, 2, NULL, a2, 1, &err) == 0,
              "add: %s", err.msg);
        CHECK(cx_sched_adapter_find(s, "one") == 1 && cx_sched_adapter_find(s, "adapter-2") == 2 &&
                  cx_sched_adapter_find(s, "nope") == 0, "find by name");
        result res[NREQ];
        memset(res, 0, sizeof res);
        steps[split] = serve(s, ids, scales, prompts, plen, res);
        int same = 1;
        for (int i = 0; i < NREQ; i++) {
            same &= res[i].n == GEN && res[i].state == CX_REQ_FINISHED;
            for (int j = 0; j < res[i].n; j++) same &= res[i].tok[j] == ref[i][j];
        }
        CHECK(same, "%s: every request gets its tokens alone with its adapter", split ? "split" : "mixed");
        cx_sched_stats st;
        cx_sched_get_stats(s, &st);
        CHECK(st.lora_registered == 2 && st.lora_resident == 2 && st.lora_loads == 2 && st.lora_evictions == 0,
              "stats: %d registered, %d resident, %lld loads", st.lora_registered, st.lora_resident,
              (long long)st.lora_loads);
        cx_sched_free(s);
    }
    CHECK(steps[1] > steps[0], "one adapter per step takes more steps (%lld) than mixed batches (%lld)",
          (long long)steps[1], (long long)steps[0]);

    /* a budget for one adapter: two slots, adapters alternate */
    cx_sched_params p = cx_sched_defaults();
    p.max_seqs = 2;
    p.lora_type = CX_TYPE_F32;
    p.lora_budget = one_bytes + one_bytes / 2;
    cx_sched *s = NULL;
    cx_err err = {0};
    if (cx_sched_new(m, &p, &s, &err)) {
        CHECK(0, "sched: %s", err.msg);
        return;
    }
    cx_sched_adapter_add(s, 1, NULL, a1, 0, &err);
    cx_sched_adapter_add(s, 2, NULL, a2, 0, &err);
    static const int alt[NREQ] = {1, 2, 1, 2, 1, 2};
    result res[NREQ];
    memset(res, 0, sizeof res);
    for (int i = 0; i < NREQ; i++) {
        cx_request r = cx_request_defaults();
        r.prompt = prompts[i];
        r.n_prompt = plen[i];
        r.sampling.temperature = 0;
        r.max_tokens = GEN;
        r.ignore_eos = 1;
        r.adapter = alt[i];
        r.user = &res[i];
        r.on_done = on_done;
        cx_sched_submit(s, &r, &err);
    }
    int over = 0, overlap = 0;
    cx_sched_stats st;
    for (int i = 0; i < 10000 && cx_sched_step(s, &err) > 0; i++) {
        cx_sched_get_stats(s, &st);
        over |= st.lora_bytes > p.lora_budget;
        overlap |= st.running > 1; /* two adapters never both fit, so never two running */
    }
    cx_sched_get_stats(s, &st);
    CHECK(!over, "resident adapters never pass the budget");
    CHECK(!overlap, "a request whose adapter does not fit waits for the running one");
    /* NREQ loads, plus one: adapter 2's size is learned by loading it, and it did not fit beside the running 1 */
    CHECK(st.finished == NREQ && st.lora_loads == NREQ + 1 && st.lora_evictions == NREQ - 1,
          "budget: %lld finished, %lld loads, %lld evictions", (long long)st.finished, (long long)st.lora_loads,
          (long long)st.lora_evictions);
    int same = 1;
    for (int i = 0; i < NREQ; i++) {
        int32_t want[GEN];
        alone(m, alt[i] == 1 ? a1 : a2, 1.0f, prompts[i], plen[i], want);
        same &= res[i].n == GEN;
        for (int j = 0; j < res[i].n; j++) same &= res[i].tok[j] == want[j];
    }
    CHECK(same, "budget: every request gets its tokens alone, across unloads and reloads");
    cx_sched_free(s);
}

static void check_remove_and_errors(cx_model *m, const char *a1) {
    cx_sched_params p = cx_sched_defaults();
    cx_sched *s = NULL;
    cx_err err = {0};
    if (cx_sched_new(m, &p, &s, &err)) {
        CHECK(0, "sched: %s", err.msg);
        return;
    }
    CHECK(cx_sched_adapter_add(s, 1, "a", a1, 0, &err) == 0, "add: %s", err.msg);
    CHECK(cx_sched_adapter_add(s, 1, "b", a1, 0, &err) == CX_EINVAL && strstr(err.msg, "already registered"),
          "taken id: %s", err.msg);
    CHECK(cx_sched_adapter_add(s, 2, "a", a1, 0, &err) == CX_EINVAL && strstr(err.msg, "already taken"),
          "taken name: %s", err.msg);
    const char *bad = fx_write("bad.gguf", "not a gguf", 10);
    CHECK(cx_sched_adapter_add(s, 3, "bad", bad, 1, &err) != 0 && strstr(err.msg, bad), "bad file: %s", err.msg);
    CHECK(cx_sched_adapter_add(s, 4, "gone", "/nonexistent.gguf", 0, &err) == CX_EIO, "missing file: %s", err.msg);
    cx_request r = cx_request_defaults();
    int32_t prompt[4] = {1, 5, 9, 13};
    r.prompt = prompt;
    r.n_prompt = 4;
    r.max_tokens = 8;
    r.ignore_eos = 1;
    r.adapter = 7;
    CHECK(cx_sched_submit(s, &r, &err) == CX_EINVAL && strstr(err.msg, "adapter 7 is not registered"), "unknown id: %s",
          err.msg);
    r.adapter = 1;
    CHECK(cx_sched_submit(s, &r, &err) > 0, "submit: %s", err.msg);
    cx_sched_step(s, &err); /* running now */
    CHECK(cx_sched_adapter_remove(s, 1, &err) == 1, "removal of an adapter in use is deferred");
    CHECK(cx_sched_submit(s, &r, &err) == CX_EINVAL && strstr(err.msg, "being unloaded"), "refused while removing: %s",
          err.msg);
    cx_adapter_info in;
    CHECK(cx_sched_adapter_info(s, 0, &in) == 0 && in.removing && in.running == 1 && in.resident, "info while removing");
    for (int i = 0; i < 100 && cx_sched_step(s, &err) > 0; i++) {}
    cx_sched_stats st;
    cx_sched_get_stats(s, &st);
    CHECK(st.finished == 1 && st.lora_registered == 0 && st.lora_bytes == 0 && cx_sched_adapter_find(s, "a") == 0,
          "the removal completes when its request ends (%d registered)", st.lora_registered);
    CHECK(cx_sched_adapter_remove(s, 1, &err) == CX_EINVAL, "remove unknown: %s", err.msg);
    CHECK(cx_sched_adapter_add(s, 1, "a", a1, 0, &err) == 0 && cx_sched_adapter_remove(s, 1, &err) == 0,
          "an idle adapter is removed at once");
    cx_sched_free(s);
}

static void run_all(void) {
    cx_model *m = fx_synth_model(cx_shape_find("gate-micro"), CX_TYPE_F32, 5, "micro.gguf", NULL);
    if (!m) return;
    cx_lora_synth_params sp = {.rank = 8, .alpha = 16, .targets = CX_LORA_ALL, .seed = 1, .type = CX_TYPE_F32};
    const char *a1 = fx_synth_adapter(m, &sp, "a1.gguf");
    sp.seed = 2;
    const char *a2 = fx_synth_adapter(m, &sp, "a2.gguf");
    cx_err err = {0};
    cx_lora *probe = NULL;
    cx_lora_params lp = cx_lora_defaults();
    lp.type = CX_TYPE_F32;
    int64_t bytes = 0;
    if (!cx_lora_load(m, a1, &lp, &probe, &err)) {
        cx_lora_info in;
        cx_lora_get_info(probe, &in);
        bytes = (int64_t)in.bytes;
        cx_lora_free(probe);
    }
    check_serving(m, a1, a2, bytes);
    check_remove_and_errors(m, a1);
    cx_model_free(m);
    fx_cleanup();
}

TEST_MAIN(run_all())
