/*
 * test_sampler.c - each sampling stage on small hand-made distributions, and
 * determinism: the same seed gives the same tokens.
 */
#include <string.h>

#include "cortex.h"
#include "testing.h"

enum { V = 8 };
static const float LOGITS[V] = {1.0f, 3.0f, 2.5f, -1.0f, 0.0f, 2.9f, -5.0f, 0.5f};

static cx_sampler *make(float temp, int top_k, float top_p, float min_p, float pen, uint64_t seed) {
    cx_sampler_params p = {temp, top_k, top_p, min_p, pen, 64, seed};
    cx_sampler *s = NULL;
    cx_err err = {0};
    CHECK(cx_sampler_new(V, &p, &s, &err) == 0, "sampler_new: %s", err.msg);
    return s;
}

/* Draw n tokens, counting how often each id comes up. */
static void draw(cx_sampler *s, int n, int *count) {
    memset(count, 0, sizeof(int) * V);
    for (int i = 0; i < n; i++) count[cx_sampler_sample(s, LOGITS)]++;
}

static void test_greedy(void) {
    cx_sampler *s = make(0, 0, 1, 0, 1, 1);
    CHECK(cx_sampler_sample(s, LOGITS) == 1, "greedy picks the argmax");
    cx_sampler_free(s);
    /* Ties resolve to the lowest id. */
    float tie[V] = {0, 2, 2, 0, 0, 0, 0, 0};
    s = make(0, 0, 1, 0, 1, 1);
    CHECK(cx_sampler_sample(s, tie) == 1, "tie -> lowest id");
    cx_sampler_free(s);
}

static void test_filters(void) {
    int count[V];
    cx_sampler *s = make(1.0f, 2, 1, 0, 1, 7); /* top-k 2: only ids 1 and 5 */
    draw(s, 2000, count);
    CHECK(count[1] + count[5] == 2000 && count[1] > 0 && count[5] > 0, "top-k 2 keeps ids 1 and 5 (%d, %d)", count[1], count[5]);
    cx_sampler_free(s);
    s = make(1.0f, 1, 1, 0, 1, 7); /* top-k 1 is greedy */
    draw(s, 200, count);
    CHECK(count[1] == 200, "top-k 1 is greedy");
    cx_sampler_free(s);
    /* top-p 0.5: probabilities (temp 1) sorted: id1 .305, id5 .276, id2 .185 ... so {1, 5}. */
    s = make(1.0f, 0, 0.5f, 0, 1, 7);
    draw(s, 2000, count);
    CHECK(count[1] + count[5] == 2000 && count[5] > 0, "top-p 0.5 keeps ids 1 and 5");
    cx_sampler_free(s);
    /* min-p 0.6: keep p >= 0.6 p_max: id5 (ratio e^-0.1=.905), id2 (e^-.5=.607); not id0 (e^-2). */
    s = make(1.0f, 0, 1, 0.6f, 1, 7);
    draw(s, 3000, count);
    CHECK(count[1] + count[5] + count[2] == 3000 && count[2] > 0, "min-p 0.6 keeps ids 1, 5, 2");
    cx_sampler_free(s);
}

/* With no filters the draw frequencies follow softmax(logits / T). */
static void test_distribution(void) {
    int count[V];
    const int N = 40000;
    for (int t = 0; t < 2; t++) {
        float temp = t ? 2.0f : 1.0f;
        cx_sampler *s = make(temp, 0, 1, 0, 1, 99);
        draw(s, N, count);
        double z = 0, p[V], chi2 = 0;
        for (int i = 0; i < V; i++) z += exp(LOGITS[i] / temp);
        for (int i = 0; i < V; i++) {
            p[i] = exp(LOGITS[i] / temp) / z;
            double e = N * p[i];
            chi2 += (count[i] - e) * (count[i] - e) / e;
        }
        /* 7 degrees of freedom: P(chi2 > 24.3) = 0.001; fixed seed, so no flakiness. */
        CHECK(chi2 < 24.3, "temperature %g: chi-square %.2f vs softmax", temp, chi2);
        cx_sampler_free(s);
    }
}

static void test_repeat_penalty(void) {
    cx_sampler *s = make(0, 0, 1, 0, 2.0f, 1);
    CHECK(cx_sampler_sample(s, LOGITS) == 1, "before penalty: id 1");
    cx_sampler_accept(s, 1); /* 3.0 / 2 = 1.5 < 2.9 */
    cx_sampler_accept(s, 1); /* penalised once per distinct token, not twice */
    CHECK(cx_sampler_sample(s, LOGITS) == 5, "penalised id 1 loses to id 5");
    cx_sampler_accept(s, 5);
    cx_sampler_accept(s, 2); /* now 1.5, 1.45, 1.25: id 1 wins again */
    CHECK(cx_sampler_sample(s, LOGITS) == 1, "penalty applies to each seen token once");
    cx_sampler_free(s);
    /* Negative logits are multiplied: -1 * 2 = -2. */
    float neg[V] = {-1, -1.5f, -9, -9, -9, -9, -9, -9};
    s = make(0, 0, 1, 0, 2.0f, 1);
    cx_sampler_accept(s, 0);
    CHECK(cx_sampler_sample(s, neg) == 1, "negative logit penalised by multiplying");
    cx_sampler_free(s);
}

static void test_determinism(void) {
    int a[64], b[64], c[64];
    cx_sampler *s1 = make(1.0f, 0, 1, 0, 1, 5), *s2 = make(1.0f, 0, 1, 0, 1, 5), *s3 = make(1.0f, 0, 1, 0, 1, 6);
    for (int i = 0; i < 64; i++) {
        a[i] = cx_sampler_sample(s1, LOGITS);
        b[i] = cx_sampler_sample(s2, LOGITS);
        c[i] = cx_sampler_sample(s3, LOGITS);
    }
    CHECK(!memcmp(a, b, sizeof a), "same seed, same tokens");
    CHECK(memcmp(a, c, sizeof a) != 0, "different seed, different tokens");
    cx_sampler_free(s1);
    cx_sampler_free(s2);
    cx_sampler_free(s3);
    cx_sampler_params bad = {1, 0, -1, 0, 1, 64, 1};
    cx_sampler *s = NULL;
    cx_err err = {0};
    CHECK(cx_sampler_new(V, &bad, &s, &err) == CX_EINVAL && s == NULL, "bad parameters rejected: %s", err.msg);
}

TEST_MAIN({
    test_greedy();
    test_filters();
    test_distribution();
    test_repeat_penalty();
    test_determinism();
})
