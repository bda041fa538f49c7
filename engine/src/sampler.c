/*
 * sampler.c - turn logits into the next token.
 *
 * llama.cpp's chain, semantics and defaults (common_params_sampling):
 * penalties -> top-k -> top-p -> min-p -> temperature -> draw.
 *   penalties  over the last repeat_last_n accepted tokens, each distinct token
 *              once: logit / repeat_penalty (logit * repeat_penalty if <= 0),
 *              then - count * frequency_penalty - presence_penalty;
 *   top-k      the k largest logits;
 *   top-p      the smallest prefix (by probability, descending) reaching top_p;
 *   min-p      tokens with p >= min_p * p_max;
 *   temperature reshapes what survives (top-p and min-p see the untempered
 *              distribution, as in llama.cpp); <= 0 is greedy: the argmax of
 *              the penalised logits, lowest id on ties.
 *   draw       Gumbel-max: the survivor with the largest logit / T + g, g a
 *              standard Gumbel number of this draw and this token (exactly a
 *              draw from the survivors' softmax at temperature T).
 * The noise is counter-based, not a stream: draw n (the sampler's n-th) of
 * token t reads g(seed, n, t), a hash. So a speculative draft can look at
 * the very noise the target's draw n + j will read (sampler_draft_pick) and
 * propose the token the target will draw when the two models agree: the
 * draws are shared, the tokens are the target's own (docs/speculative.md).
 * All buffers are allocated in cx_sampler_new; sampling and accepting
 * allocate nothing. The seed is explicit, so the same seed and logits give
 * the same token on every machine.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"
#include "cortex_tools.h"
#include "spec/spec.h"
#include "util.h"

typedef struct cand { float logit; int id; } cand;

struct cx_sampler {
    cx_sampler_params p;
    int n_vocab;
    cand *c;           /* candidates, n_vocab */
    int32_t *dist_id;  /* cx_sampler_dist's answer: the survivors' ids and probabilities, n_vocab each */
    float *dist_p;
    int penalties;     /* 1 if any penalty is on (window > 0 and some penalty not neutral) */
    int *recent;       /* ring of the last repeat_last_n accepted tokens; next write at head */
    int n_recent, head;
    int *count;        /* count[t]: occurrences of t in the ring (llama.cpp's token_count) */
    uint32_t *stamp;   /* dedupes penalised tokens without clearing a table */
    uint32_t epoch;
    uint64_t key;      /* the seed, mixed: the noise's key */
    uint64_t draws;    /* draws so far: the next one is draw `draws` */
};

/* See cortex.h: llama.cpp's common_params_sampling defaults, a fixed seed. */
cx_sampler_params cx_sampler_defaults(void) {
    cx_sampler_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 0.80f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.00f;
    p.repeat_last_n = 64;
    p.presence_penalty = 0.00f;
    p.frequency_penalty = 0.00f;
    p.seed = 42;
    return p;
}

/* See cortex.h. Refuses NaN/infinite parameters and a penalty <= 0. */
int cx_sampler_new(int n_vocab, const cx_sampler_params *p, cx_sampler **out, cx_err *err) {
    *out = NULL;
    if (n_vocab < 1) return cx_fail(err, CX_EINVAL, "sampler needs a vocabulary (got %d tokens)", n_vocab);
    if (!(p->temperature == p->temperature) || !(p->top_p >= 0) || !(p->min_p >= 0 && p->min_p <= 1) ||
        !(p->repeat_penalty > 0 && isfinite(p->repeat_penalty)) || p->repeat_last_n < 0 ||
        !isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
        return cx_fail(err, CX_EINVAL, "sampler parameters out of range (top-p >= 0, min-p in [0,1], repeat penalty "
                       "> 0, repeat-last-n >= 0, finite presence and frequency penalties)");
    cx_sampler *s = calloc(1, sizeof *s);
    if (!s) return cx_fail(err, CX_ENOMEM, "out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->penalties = p->repeat_last_n > 0 &&
                   (p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f);
    s->c = malloc(sizeof(cand) * (size_t)n_vocab);
    s->dist_id = malloc(sizeof(int32_t) * (size_t)n_vocab);
    s->dist_p = malloc(sizeof(float) * (size_t)n_vocab);
    int ok = s->c && s->dist_id && s->dist_p;
    if (s->penalties) {
        s->stamp = calloc((size_t)n_vocab, sizeof(uint32_t));
        s->count = calloc((size_t)n_vocab, sizeof(int));
        s->recent = malloc(sizeof(int) * (size_t)p->repeat_last_n);
        ok = ok && s->stamp && s->count && s->recent;
    }
    if (!ok) {
        cx_sampler_free(s);
        return cx_fail(err, CX_ENOMEM, "out of memory for a sampler over %d tokens", n_vocab);
    }
    s->key = cx_mix64(p->seed ^ 0x9E3779B97F4A7C15ull);
    *out = s;
    return 0;
}

/* See cortex.h. */
void cx_sampler_free(cx_sampler *s) {
    if (!s) return;
    free(s->c);
    free(s->dist_id);
    free(s->dist_p);
    free(s->stamp);
    free(s->count);
    free(s->recent);
    free(s);
}

/* See cortex.h: push into the ring, dropping the oldest token (and its count)
 * when the window is full, as llama.cpp's penalties sampler does. */
void cx_sampler_accept(cx_sampler *s, int token) {
    if (!s->penalties || token < 0 || token >= s->n_vocab) return;
    int n = s->p.repeat_last_n;
    if (s->n_recent == n) {
        int old = s->recent[s->head];
        assert(s->count[old] > 0);
        s->count[old]--;
    } else {
        s->n_recent++;
    }
    s->recent[s->head] = token;
    s->count[token]++;
    s->head = (s->head + 1) % n;
    assert(s->n_recent <= n && s->count[token] <= s->n_recent);
}

/* Apply the penalties to the candidates (still in id order), once per
 * distinct token in the window. */
static void apply_penalties(cx_sampler *s) {
    if (!s->penalties || !s->n_recent) return;
    if (++s->epoch == 0) { memset(s->stamp, 0, sizeof(uint32_t) * (size_t)s->n_vocab); s->epoch = 1; }
    const cx_sampler_params *p = &s->p;
    for (int i = 0; i < s->n_recent; i++) {
        int t = s->recent[i];
        assert(t >= 0 && t < s->n_vocab && s->c[t].id == t);
        if (s->stamp[t] == s->epoch) continue;
        s->stamp[t] = s->epoch;
        int k = s->count[t];
        assert(k > 0 && k <= s->n_recent);
        float *l = &s->c[t].logit;
        *l = *l <= 0 ? *l * p->repeat_penalty : *l / p->repeat_penalty;
        *l -= (float)k * p->frequency_penalty + p->presence_penalty;
    }
}

/* The Gumbel number of draw n for token t: a uniform in (0, 1) with 53
 * bits from a hash of (key, n, t) (cx_mix64: identical everywhere, so seeded
 * runs repeat), then -log(-log(u)). */
static double gumbel(const cx_sampler *s, uint64_t n, int t) {
    uint64_t h = cx_mix64(cx_mix64(s->key + n * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(uint32_t)t * 0xD1B54A32D192ED03ull));
    double u = ((double)(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    return -log(-log(u));
}

/* Draw n among the survivors c[0..m) (in any order, max their largest
 * logit): the largest logit / T + gumbel, the lowest id on ties, so the
 * order of the survivors does not matter. */
static int gumbel_max(const cx_sampler *s, int m, float max, uint64_t n) {
    double best = -INFINITY, T = s->p.temperature;
    int id = s->c[0].id;
    for (int i = 0; i < m; i++) {
        double v = ((double)s->c[i].logit - max) / T + gumbel(s, n, s->c[i].id);
        if (v > best || (v == best && s->c[i].id < id)) {
            best = v;
            id = s->c[i].id;
        }
    }
    return id;
}

/* Descending logit, ascending id: a total order, so sorting is deterministic. */
static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id - y->id;
}

/* Restore the heap below node i of c[0..n) (the root is the candidate that
 * sorts last). */
static void sift_down(cand *c, int n, int i) {
    for (;;) {
        int child = 2 * i + 1;
        if (child >= n) return;
        if (child + 1 < n && cand_cmp(&c[child + 1], &c[child]) > 0) child++;
        if (cand_cmp(&c[child], &c[i]) <= 0) return;
        cand t = c[i]; c[i] = c[child]; c[child] = t;
        i = child;
    }
}

/* Sort c[0..n) by cand_cmp in place: heapsort, because glibc's qsort may
 * malloc a buffer and sampling allocates nothing. */
static void sort_cands(cand *c, int n) {
    for (int i = n / 2 - 1; i >= 0; i--) sift_down(c, n, i);
    for (int end = n - 1; end > 0; end--) {
        cand t = c[0]; c[0] = c[end]; c[end] = t;
        sift_down(c, end, 0);
    }
}

/* Move the k best candidates to the front (Hoare quickselect, deterministic pivots). */
static void select_top_k(cand *c, int n, int k) {
    assert(k >= 1 && k <= n);
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        cand pivot = c[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (cand_cmp(&c[i], &pivot) < 0) i++;
            while (cand_cmp(&c[j], &pivot) > 0) j--;
            if (i <= j) {
                cand t = c[i]; c[i] = c[j]; c[j] = t;
                i++; j--;
            }
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
}

/* The chain in the file comment's order, up to the draw: the survivors are
 * s->c[0..m) (returned), with *max the largest logit; sorted best first
 * when `sorted` (a draw needs no order; top-p sorts them anyway). Greedy
 * (temperature <= 0) leaves the argmax alone in c[0] (m = 1). penalties 0:
 * without them (a draft's logits: the window is the target's). */
static int chain(cx_sampler *s, const float *logits, int penalties, int sorted, float *max_out) {
    int n = s->n_vocab;
    if (s->p.temperature <= 0.0f && !(penalties && s->penalties && s->n_recent)) { /* greedy, logits as given */
        int best = 0;
        for (int i = 1; i < n; i++)
            if (logits[i] > logits[best]) best = i;
        s->c[0].logit = logits[best];
        s->c[0].id = best;
        *max_out = logits[best];
        return 1;
    }
    for (int i = 0; i < n; i++) {
        s->c[i].logit = logits[i];
        s->c[i].id = i;
    }
    if (penalties) apply_penalties(s);
    if (s->p.temperature <= 0.0f) { /* greedy */
        int best = 0;
        for (int i = 1; i < n; i++)
            if (s->c[i].logit > s->c[best].logit) best = i;
        s->c[0] = s->c[best];
        *max_out = s->c[0].logit;
        return 1;
    }
    int m = n;
    if (s->p.top_k > 0 && s->p.top_k < n) {
        select_top_k(s->c, n, s->p.top_k);
        m = s->p.top_k;
    }
    float max = s->c[0].logit;
    for (int i = 1; i < m; i++) max = fmaxf(max, s->c[i].logit);
    double z = 0; /* normaliser of the survivors of top-k: what top-p sees */
    for (int i = 0; i < m; i++) z += exp((double)s->c[i].logit - max);
    /* min-p keeps logit >= max + ln(min_p), relative to the max, so applying
     * it before top-p's prefix (with top-p's z from before) keeps the same
     * set as llama.cpp's top-p then min-p, and leaves fewer to sort. */
    if (s->p.min_p > 0.0f) {
        float cut = max + logf(s->p.min_p);
        int k = 0;
        for (int i = 0; i < m; i++)
            if (s->c[i].logit >= cut) s->c[k++] = s->c[i];
        m = k; /* never empty: the max itself passes */
    }
    if (sorted || s->p.top_p < 1.0f) sort_cands(s->c, m); /* a full vocabulary's heapsort: milliseconds */
    if (s->p.top_p < 1.0f) { /* smallest prefix whose probability reaches top_p */
        double cum = 0;
        for (int i = 0; i < m; i++) {
            cum += exp((double)s->c[i].logit - max) / z;
            if (cum >= s->p.top_p) { m = i + 1; break; }
        }
    }
    assert(m >= 1 && m <= n);
    *max_out = max;
    return m;
}

/* See cortex.h. */
int cx_sampler_sample(cx_sampler *s, const float *logits) {
    float max;
    int m = chain(s, logits, 1, 0, &max);
    if (s->p.temperature <= 0.0f) return s->c[0].id; /* greedy: no draw */
    return gumbel_max(s, m, max, s->draws++);
}

/* spec.h: the draft's proposal for the target's draw `ahead` draws from now:
 * the same chain without penalties over the draft's logits, and the same
 * noise; *q the draft's probability of it (greedy: its softmax's top). */
int sampler_draft_pick(cx_sampler *s, const float *logits, int ahead, float *q) {
    double z = 0, T = s->p.temperature;
    if (T <= 0.0f) { /* greedy: the argmax (lowest id on ties), and how sure the draft is of it */
        int x = 0;
        for (int i = 1; i < s->n_vocab; i++)
            if (logits[i] > logits[x]) x = i;
        for (int i = 0; q && i < s->n_vocab; i++) z += exp((double)logits[i] - logits[x]);
        if (q) *q = (float)(1.0 / z);
        return x;
    }
    float max;
    int m = chain(s, logits, 0, 0, &max);
    int x = gumbel_max(s, m, max, s->draws + (uint64_t)ahead);
    double px = 0;
    for (int i = 0; q && i < m; i++) {
        double e = exp(((double)s->c[i].logit - max) / T);
        z += e;
        if (s->c[i].id == x) px = e;
    }
    if (q) *q = (float)(px / z);
    return x;
}

/* See cortex.h: the same chain as cx_sampler_sample, the draw's weights
 * normalised instead of drawn from (no random number is used). */
int cx_sampler_dist(cx_sampler *s, const float *logits, const int32_t **ids, const float **probs) {
    float max;
    int m = chain(s, logits, 1, 1, &max);
    if (s->p.temperature <= 0.0f) {
        s->dist_id[0] = s->c[0].id;
        s->dist_p[0] = 1.0f;
    } else {
        double total = 0;
        for (int i = 0; i < m; i++) total += exp(((double)s->c[i].logit - max) / s->p.temperature);
        for (int i = 0; i < m; i++) {
            s->dist_id[i] = s->c[i].id;
            s->dist_p[i] = (float)(exp(((double)s->c[i].logit - max) / s->p.temperature) / total);
        }
    }
    *ids = s->dist_id;
    *probs = s->dist_p;
    return m;
}
