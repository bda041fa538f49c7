/*
 * test_roofline.c - the bandwidth roofline: bytes read per decoded token
 * (weights with the embedding as one row unless tied, plus the f32 KV cache
 * at the mean attended position) against hand-computed numbers, the metrics
 * a run gets, the hw row a run is held against (thread-count preference), and
 * the sentence shown under results (stored, worked out after the run, or the
 * hint when the machine has no hw row); a mixture of experts counts only the
 * experts a token uses; arithmetic per token.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "fixture.h"
#include "hw_store.h"
#include "roofline.h"
#include "store.h"
#include "validity.h"

/* Every run here is a measurement. */
static const run_verdict valid = {.valid = 1};


/* Untied and tied models described by numbers, worked by hand. */
static void test_arithmetic(void) {
    roof_model rm;
    /* 1,000,000 weight bytes of which the embedding is 256,000 over 1000 rows
     * (256 B a row); 4 layers x 2 KV heads x 64 dims: 2*4*2*64*4 = 4096 B a position. */
    roof_model_from_numbers(&rm, 1e6, 256000, 1000, 0, 4, 2, 64);
    CHECK_NEAR(rm.weight_bytes, 744256, 1e-9, "untied: 1e6 - 256000 + 256");
    CHECK_NEAR(rm.kv_bytes_per_pos, 4096, 1e-9, "KV bytes per position");
    double bpt = roof_bytes_per_token(&rm, 100, 1);
    CHECK_NEAR(bpt, 744256 + 409600, 1e-9, "bytes per token at 100 positions");
    CHECK_NEAR(roof_tps(20, bpt), 20e9 / 1153856, 1e-9, "roofline at 20 GB/s");
    CHECK_NEAR(roof_tps(20, bpt), 17333.1854, 1e-3, "roofline at 20 GB/s, by hand");
    roof_model_from_numbers(&rm, 1e6, 256000, 1000, 1, 4, 2, 64);
    CHECK_NEAR(rm.weight_bytes, 1000256, 1e-9, "tied: the classifier reads the embedding whole, plus the looked-up row");
    CHECK(isnan(roof_tps(0, bpt)) && isnan(roof_tps(20, 0)), "no bandwidth or no bytes: no roofline");
    /* a batched pass of 4 sequences: each token carries a quarter of the weights */
    CHECK_NEAR(roof_bytes_per_token(&rm, 100, 4), 1000256.0 / 4 + 409600, 1e-9, "batched: weights shared by 4 tokens");
}

/* The metrics added to repetitions: only to those that decoded, the
 * roofline only with a bandwidth. */
static void test_apply(void) {
    roof_model rm;
    roof_model_from_numbers(&rm, 1e6, 256000, 1000, 0, 4, 2, 64);
    rep_result reps[3];
    memset(reps, 0, sizeof reps);
    rep_set_metric(&reps[0], "decode_tps", 15000);
    rep_set_metric(&reps[0], "decode_ctx_mean", 100);
    rep_set_metric(&reps[1], "decode_tps", 16000);
    rep_set_metric(&reps[1], "decode_ctx_mean", 100);
    rep_set_metric(&reps[2], "prefill_tps", 900); /* a pp test: no decode */
    roof_apply(reps, 3, &rm, 20, 1);
    CHECK_NEAR(rep_get_metric(&reps[0], "bytes_per_token"), 1153856, 1e-9, "bytes per token stored");
    CHECK_NEAR(rep_get_metric(&reps[0], "roofline_tps"), 17333.1854, 1e-3, "roofline stored");
    CHECK_NEAR(rep_get_metric(&reps[0], "roofline_frac"), 15000 / (20e9 / 1153856), 1e-12, "fraction stored");
    CHECK_NEAR(rep_get_metric(&reps[0], "roofline_frac"), 0.865393, 1e-6, "fraction, by hand");
    CHECK_NEAR(rep_get_metric(&reps[1], "roofline_frac"), 0.9230848, 1e-6, "second repetition, by hand");
    CHECK(isnan(rep_get_metric(&reps[2], "bytes_per_token")), "no decode, no bytes per token");
    rep_result r;
    memset(&r, 0, sizeof r);
    rep_set_metric(&r, "decode_tps", 15000);
    rep_set_metric(&r, "decode_ctx_mean", 100);
    roof_apply(&r, 1, &rm, 0, 1);
    CHECK(!isnan(rep_get_metric(&r, "bytes_per_token")) && isnan(rep_get_metric(&r, "roofline_tps")) &&
              isnan(rep_get_metric(&r, "roofline_frac")),
          "without a hw row: bytes per token, no made-up roofline");
}

/* A real (synthetic) model: tied test-tiny and untied stories-like numbers from its tensors. */
static void test_model(void) {
    cx_model *m = fx_synth_model(cx_shape_find("test-tiny"), CX_TYPE_Q8_0, 1, "tiny.gguf", NULL);
    if (!m) return;
    const cx_model_info *mi = cx_model_get_info(m);
    double embd = 0;
    for (int i = 0; i < mi->n_tensors; i++) {
        cx_tensor_info t;
        cx_model_tensor(m, i, &t);
        if (!strcmp(t.name, "token_embd.weight")) embd = (double)t.nbytes;
    }
    roof_model rm;
    char why[256];
    CHECK(roof_model_of(m, CX_KV_F32, &rm, why, sizeof why) == 0, "roof_model_of");
    /* test-tiny: 2 layers, 2 KV heads of 16, q8_0 embedding 512 x 64 (34 B per 32 values: 68 B a row), tied. */
    CHECK(mi->tied_output, "test-tiny ties its output");
    CHECK_NEAR(embd, 512 * 68, 0, "q8_0 embedding bytes");
    CHECK_NEAR(rm.weight_bytes, (double)mi->weight_bytes + 68, 0, "tied: all weights + one row");
    CHECK_NEAR(rm.kv_bytes_per_pos, 2 * 2 * 2 * 16 * 4, 0, "KV: 2 x 2 layers x 2 heads x 16 x 4 B");
    roof_model r16, r8;
    CHECK(roof_model_of(m, CX_KV_F16, &r16, why, sizeof why) == 0 && roof_model_of(m, CX_KV_Q8, &r8, why, sizeof why) == 0,
          "f16 and q8 KV");
    /* arithmetic: 2 per weight of every matrix but the looked-up embedding (tied: the classifier's), and
     * q.k plus the weighted v per position: 2 x 2 x 2 layers x 4 heads x 16 */
    CHECK(rm.weight_flops > 2.0 * 512 * 64 && rm.flops_per_pos == 2 * 2 * 2 * mi->n_head * 16,
          "flops: %g per step, %g per position", rm.weight_flops, rm.flops_per_pos);
    CHECK_NEAR(roof_flops_per_token(&rm, 10), rm.weight_flops + 10 * rm.flops_per_pos, 0, "flops at 10 positions");
    CHECK_NEAR(r16.kv_bytes_per_pos, 2 * 2 * 2 * 16 * 2, 0, "f16 KV: 2 B a value");
    /* q8 rows: one int8 code per value and one f32 scale per row (32 values) */
    CHECK_NEAR(r8.kv_bytes_per_pos, 2 * 2 * (32 + 4), 0, "q8 KV: 32 codes + a 4-byte scale per row");
    CHECK(roof_model_of(m, CX_KV_Q4, &r8, why, sizeof why) == -1, "q4 is not a hot KV type");
    cx_model_free(m);
}

/* A mixture-of-experts layer described as tensors: only n_expert_used of
 * n_expert experts are read per token; everything else whole; bad counts refused. */
static void test_experts(void) {
    /* 8 experts of a 64 x 32 up and gate, 32 x 64 down (f32: 4 B a value), biases [32, 8]; router [64, 8];
     * attention 64 x 64; an untied 100 x 64 embedding and output. */
    const cx_tensor_info t[] = {
        {"token_embd.weight", 0, 2, {64, 100, 1, 1}, 0, 100 * 64 * 4},
        {"output.weight", 0, 2, {64, 100, 1, 1}, 0, 100 * 64 * 4},
        {"blk.0.attn_q.weight", 0, 2, {64, 64, 1, 1}, 0, 64 * 64 * 4},
        {"blk.0.ffn_gate_inp.weight", 0, 2, {64, 8, 1, 1}, 0, 64 * 8 * 4},
        {"blk.0.ffn_up_exps.weight", 0, 3, {64, 32, 8, 1}, 0, 64 * 32 * 8 * 4},
        {"blk.0.ffn_gate_exps.weight", 0, 3, {64, 32, 8, 1}, 0, 64 * 32 * 8 * 4},
        {"blk.0.ffn_down_exps.weight", 0, 3, {32, 64, 8, 1}, 0, 32 * 64 * 8 * 4},
        {"blk.0.ffn_up_exps.bias", 0, 2, {32, 8, 1, 1}, 0, 32 * 8 * 4},
        {"blk.0.attn_norm.weight", 0, 1, {64, 1, 1, 1}, 0, 64 * 4},
    };
    int n = (int)(sizeof t / sizeof t[0]);
    roof_model rm;
    char why[256];
    CHECK(roof_weights(t, n, 0, 2, &rm, why, sizeof why) == 0, "2 of 8 experts: %s", why);
    double experts = 3.0 * 64 * 32 * 8 * 4 + 32 * 8 * 4, dense = 100 * 64 * 4 + 64 * 64 * 4 + 64 * 8 * 4 + 64 * 4;
    CHECK_NEAR(rm.weight_bytes, 64 * 4 + dense + experts * 2 / 8, 1e-9, "embedding row + dense + a quarter of the experts");
    CHECK_NEAR(rm.weight_flops, 2.0 * (100 * 64 + 64 * 64 + 64 * 8 + (3.0 * 64 * 32 * 8 + 32 * 8) * 2 / 8), 1e-9,
               "flops of the matrices read, experts a quarter, no lookup");
    CHECK(roof_weights(t, n, 0, 8, &rm, why, sizeof why) == 0 &&
              fabs(rm.weight_bytes - (64 * 4 + dense + experts)) < 1e-9,
          "every expert used: all of them read");
    CHECK(roof_weights(t, n, 0, 0, &rm, why, sizeof why) == -1 && strstr(why, "blk.0.ffn_up_exps.weight holds 8 experts"),
          "experts without a used count refused: %s", why);
    CHECK(roof_weights(t, n, 0, 9, &rm, why, sizeof why) == -1, "more experts used than held refused");
    CHECK(roof_weights(t + 1, n - 1, 0, 2, &rm, why, sizeof why) == -1 && strstr(why, "token_embd"),
          "no embedding refused: %s", why);
}

/* hw rows: which one a run at t threads uses; the sentences shown. */
static void test_lookup_and_describe(void) {
    const char *path = fx_path("r.db");
    char err[512], buf[512];
    store *s;
    CHECK(store_open(path, &s, err, sizeof err) == 0, "open: %s", err);
    if (!s) return;
    env_info env;
    env_collect(&env);
    char fp[65];
    env_fingerprint(&env, fp);
    hw_ref h;
    CHECK(hw_store_lookup(s, fp, 0, 2, &h) == 0, "no hw row yet");
    /* A run that decoded, recorded before any hw row: the hint. */
    run_meta meta;
    memset(&meta, 0, sizeof meta);
    snprintf(meta.workload, sizeof meta.workload, "tg8");
    meta.threads = 2;
    meta.reps = 1;
    int64_t id = 0;
    CHECK(store_begin_run(s, &meta, &env, &id, err, sizeof err) == 0, "begin: %s", err);
    rep_result r;
    memset(&r, 0, sizeof r);
    rep_set_metric(&r, "decode_tps", 15000);
    rep_set_metric(&r, "decode_ctx_mean", 100);
    roof_model rm;
    roof_model_from_numbers(&rm, 1e6, 256000, 1000, 0, 4, 2, 64);
    roof_apply(&r, 1, &rm, 0, 1);
    CHECK(store_finish_run(s, id, &r, 1, &valid, NULL, err, sizeof err) == 0, "finish: %s", err);
    CHECK(roof_describe(s, id, buf, sizeof buf) == -1, "decoded, no hw row: the caller prints the hint");
    double dec, frac;
    roof_fraction(s, id, &dec, &frac);
    CHECK(dec == 15000 && isnan(frac), "fraction unknown, decode known");

    /* Two rows: N = 2 at 20 GB/s (1 thread 12), then newer N = 1 at 11. */
    hw_result hr;
    memset(&hr, 0, sizeof hr);
    hr.threads = 2;
    hr.reps = 1;
    hr.buffer_bytes = 1 << 20;
    hr.read[0].best = 12;
    hr.read[1].best = 20;
    for (int t = 0; t < 2; t++) hr.fp32_avx2[t].best = hr.int8_avx2[t].best = NAN;
    int64_t h1, h2;
    CHECK(hw_store_insert(s, &hr, &env, &h1, err, sizeof err) == 0, "insert: %s", err);
    hr.threads = 1;
    hr.read[0].best = hr.read[1].best = 11;
    CHECK(hw_store_insert(s, &hr, &env, &h2, err, sizeof err) == 0 && h2 > h1, "insert 2: %s", err);
    CHECK(hw_store_lookup(s, fp, 0, 2, &h) == 1 && h.id == h1 && h.read_gbs == 20 && h.threads == 2,
          "2 threads: the row measured at 2 threads (row %lld, %.1f GB/s)", (long long)h.id, h.read_gbs);
    CHECK(hw_store_lookup(s, fp, 0, 1, &h) == 1 && h.id == h2 && h.read_gbs == 11 && h.threads == 1,
          "1 thread: the newest row's 1-thread figure");
    CHECK(hw_store_lookup(s, fp, 0, 4, &h) == 1 && h.id == h2 && h.read_gbs == 11,
          "4 threads, never measured: the newest row's all-threads figure");
    CHECK(hw_store_lookup(s, "not-this-machine", 0, 2, &h) == 0, "another machine has no row");

    /* The run recorded before the hw rows is now judged against row 1 (2 threads). */
    CHECK(roof_describe(s, id, buf, sizeof buf) == 1, "described after hw ran");
    CHECK(strstr(buf, "decode 15000.00 tok/s = 87% of roofline 17333.19 tok/s") && strstr(buf, "measured after this run") &&
              strstr(buf, "1.154 MB read per token at 20.00 GB/s"),
          "late sentence: %s", buf);
    /* A run stored with its roofline. */
    rep_result r2;
    memset(&r2, 0, sizeof r2);
    rep_set_metric(&r2, "decode_tps", 16000);
    rep_set_metric(&r2, "decode_ctx_mean", 100);
    roof_apply(&r2, 1, &rm, 20, 1);
    meta.hw_id = h1;
    int64_t id2 = 0;
    CHECK(store_begin_run(s, &meta, &env, &id2, err, sizeof err) == 0 &&
              store_finish_run(s, id2, &r2, 1, &valid, NULL, err, sizeof err) == 0,
          "second run: %s", err);
    CHECK(roof_describe(s, id2, buf, sizeof buf) == 1 && strstr(buf, "= 92% of roofline 17333.19 tok/s") &&
              strstr(buf, "hw row 1)"),
          "stored sentence: %s", buf);
    roof_fraction(s, id2, &dec, &frac);
    CHECK_NEAR(frac, 0.9230848, 1e-6, "stored fraction");
    /* A run that never decoded (pp test): nothing to say. */
    int64_t id3 = 0;
    rep_result r3;
    memset(&r3, 0, sizeof r3);
    rep_set_metric(&r3, "prefill_tps", 900);
    store_begin_run(s, &meta, &env, &id3, err, sizeof err);
    store_finish_run(s, id3, &r3, 1, &valid, NULL, err, sizeof err);
    CHECK(roof_describe(s, id3, buf, sizeof buf) == 0, "no decode: no sentence, no hint");
    store_close(s);
}

TEST_MAIN({
    test_arithmetic();
    test_apply();
    test_model();
    test_experts();
    test_lookup_and_describe();
    fx_cleanup();
})
