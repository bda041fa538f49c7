/*
 * sampler.c - turn logits into the next token.
 *
 * The chain, in llama.cpp's order: repetition penalty -> top-k -> top-p ->
 * min-p -> temperature -> draw. top-p and min-p see the untempered distribution
 * (as in llama.cpp), temperature only reshapes what survives. Temperature <= 0
 * is greedy. All buffers are allocated once; the RNG is seeded explicitly, so
 * the same seed and logits give the same token on every machine.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"
#include "util.h"

typedef struct cand { float logit; int id; } cand;

struct cx_sampler {
    cx_sampler_params p;
    int n_vocab;
    cand *c;
    int *recent;       /* ring buffer of the last repeat_last_n tokens */
    int n_recent, head;
    uint32_t *stamp;   /* dedupes penalised tokens without clearing a table */
    uint32_t epoch;
    uint64_t rng;
};

cx_sampler_params cx_sampler_defaults(void) {
    cx_sampler_params p = {0.8f, 40, 0.95f, 0.05f, 1.1f, 64, 42};
    return p;
}

int cx_sampler_new(int n_vocab, const cx_sampler_params *p, cx_sampler **out, cx_err *err) {
    *out = NULL;
    if (n_vocab < 1) return cx_fail(err, CX_EINVAL, "sampler needs a vocabulary (got %d tokens)", n_vocab);
    if (!(p->temperature == p->temperature) || p->top_p < 0 || p->min_p < 0 || p->min_p > 1 ||
        !(p->repeat_penalty > 0) || p->repeat_last_n < 0)
        return cx_fail(err, CX_EINVAL, "sampler parameters out of range (top-p >= 0, min-p in [0,1], penalty > 0)");
    cx_sampler *s = calloc(1, sizeof *s);
    if (!s) return cx_fail(err, CX_ENOMEM, "out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->c = malloc(sizeof(cand) * (size_t)n_vocab);
    s->stamp = calloc((size_t)n_vocab, sizeof(uint32_t));
    s->recent = malloc(sizeof(int) * (size_t)(p->repeat_last_n ? p->repeat_last_n : 1));
    if (!s->c || !s->stamp || !s->recent) {
        cx_sampler_free(s);
        return cx_fail(err, CX_ENOMEM, "out of memory for a sampler over %d tokens", n_vocab);
    }
    s->rng = p->seed ^ 0x9E3779B97F4A7C15ull;
    *out = s;
    return 0;
}

void cx_sampler_free(cx_sampler *s) {
    if (!s) return;
    free(s->c);
    free(s->stamp);
    free(s->recent);
    free(s);
}

void cx_sampler_accept(cx_sampler *s, int token) {
    if (s->p.repeat_last_n <= 0) return;
    s->recent[s->head] = token;
    s->head = (s->head + 1) % s->p.repeat_last_n;
    if (s->n_recent < s->p.repeat_last_n) s->n_recent++;
}

/* splitmix64: tiny, fast, well distributed, identical everywhere. */
static uint64_t next_u64(cx_sampler *s) {
    uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 random bits. */
static double next_unit(cx_sampler *s) { return (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0); }

/* Descending logit, ascending id: a total order, so sorting is deterministic. */
static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id - y->id;
}

/* Move the k best candidates to the front (Hoare quickselect, deterministic pivots). */
static void select_top_k(cand *c, int n, int k) {
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

int cx_sampler_sample(cx_sampler *s, const float *logits) {
    int n = s->n_vocab;
    for (int i = 0; i < n; i++) {
        s->c[i].logit = logits[i];
        s->c[i].id = i;
    }
    /* Repetition penalty, once per distinct recent token (as llama.cpp). */
    if (s->p.repeat_penalty != 1.0f && s->n_recent) {
        if (++s->epoch == 0) { memset(s->stamp, 0, sizeof(uint32_t) * (size_t)n); s->epoch = 1; }
        for (int i = 0; i < s->n_recent; i++) {
            int t = s->recent[i];
            if (t < 0 || t >= n || s->stamp[t] == s->epoch) continue;
            s->stamp[t] = s->epoch;
            float *l = &s->c[t].logit;
            *l = *l > 0 ? *l / s->p.repeat_penalty : *l * s->p.repeat_penalty;
        }
    }
    if (s->p.temperature <= 0.0f) { /* greedy */
        int best = 0;
        for (int i = 1; i < n; i++)
            if (s->c[i].logit > s->c[best].logit) best = i;
        return best;
    }
    int m = n;
    if (s->p.top_k > 0 && s->p.top_k < n) {
        select_top_k(s->c, n, s->p.top_k);
        m = s->p.top_k;
    }
    float max = s->c[0].logit;
    for (int i = 1; i < m; i++) max = fmaxf(max, s->c[i].logit);
    double z = 0; /* untempered normaliser over the survivors of top-k */
    for (int i = 0; i < m; i++) z += exp((double)s->c[i].logit - max);
    if (s->p.min_p > 0.0f) { /* keep p >= min_p * p_max, i.e. logit >= max + ln(min_p) */
        float cut = max + logf(s->p.min_p);
        int k = 0;
        for (int i = 0; i < m; i++)
            if (s->c[i].logit >= cut) s->c[k++] = s->c[i];
        m = k; /* never empty: the max itself passes */
    }
    qsort(s->c, (size_t)m, sizeof(cand), cand_cmp);
    if (s->p.top_p < 1.0f) { /* smallest prefix whose probability reaches top_p */
        double cum = 0;
        for (int i = 0; i < m; i++) {
            cum += exp((double)s->c[i].logit - max) / z;
            if (cum >= s->p.top_p) { m = i + 1; break; }
        }
    }
    double total = 0;
    for (int i = 0; i < m; i++) total += exp(((double)s->c[i].logit - max) / s->p.temperature);
    double r = next_unit(s) * total, acc = 0;
    for (int i = 0; i < m; i++) {
        acc += exp(((double)s->c[i].logit - max) / s->p.temperature);
        if (r < acc) return s->c[i].id;
    }
    return s->c[m - 1].id;
}
