/*
 * trace_gen.c - synthetic request traces: RNG, Zipf table, length
 * distributions, English-like prompt text, and the writer of the JSONL
 * file and its sidecar.
 *
 * Everything that reaches the file is computed with IEEE-754 basic
 * operations (+ - * / sqrt, exact floor/frexp/ldexp) and this file's rng_log
 * and rng_exp, and is printed with integer formatting, so the same parameters
 * give the same bytes with any compiler and C library. Floating-point
 * contraction (fused multiply-add) would change low bits, so it is off:
 * GCC in ISO C mode (-std=c11) never contracts; clang is told below.
 */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#include "trace_gen.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"
#include "jsonx.h"
#include "sha256.h"
#include "workload.h"
#include "hx_err.h"

/* ---- Zipf ----------------------------------------------------------------- */

int trace_zipf_init(trace_zipf *z, int k, double s, char *err, size_t errlen) {
    z->cdf = NULL;
    z->k = 0;
    if (k < 1) return hx_fail_code(err, errlen, CX_EINVAL, "zipf table needs at least one value (got %d)", k);
    if (!(s >= 0) || isinf(s)) return hx_fail_code(err, errlen, CX_EINVAL,
                                                   "zipf exponent must be a number >= 0 (got %g)", s);
    z->cdf = malloc((size_t)k * sizeof *z->cdf);
    if (!z->cdf) return hx_fail_code(err, errlen, CX_ENOMEM, "out of memory for a zipf table of %d values", k);
    double sum = 0;
    for (int i = 0; i < k; i++) {
        sum += rng_exp(-s * rng_log((double)(i + 1))); /* (i + 1)^-s; exactly 1 when s = 0 */
        z->cdf[i] = sum;
    }
    for (int i = 0; i < k; i++) z->cdf[i] /= sum;
    z->cdf[k - 1] = 1.0; /* so every u in [0, 1) finds an entry */
    z->k = k;
    return 0;
}

/* Inverse CDF: the smallest i with u < cdf[i], by binary search. */
int trace_zipf_draw(const trace_zipf *z, rng *r) {
    assert(z->k >= 1 && z->cdf[z->k - 1] == 1.0);
    double u = rng_uniform(r);
    int lo = 0, hi = z->k - 1; /* the answer is in [lo, hi]: cdf[hi] > u */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (u < z->cdf[mid]) hi = mid;
        else lo = mid + 1;
    }
    return lo + 1;
}

/* Probability of value i recovered from the cumulative table. */
double trace_zipf_prob(const trace_zipf *z, int i) {
    assert(i >= 1 && i <= z->k);
    return i == 1 ? z->cdf[0] : z->cdf[i - 1] - z->cdf[i - 2];
}

/* Release the table. */
void trace_zipf_free(trace_zipf *z) {
    free(z->cdf);
    z->cdf = NULL;
    z->k = 0;
}

/* ---- length distributions ------------------------------------------------- */

static const char *const LEN_NAMES[] = {"fixed", "uniform", "normal", "lognormal"};
static const char *const LEN_ARGS[] = {"one number N", "two numbers A,B", "two numbers MEAN,SD", "two numbers MU,SIGMA"};

/* Parse a whole token as a finite number; 1 on success. */
static int parse_num(const char *s, size_t n, double *out) {
    char buf[64];
    if (n == 0 || n >= sizeof buf) return 0;
    memcpy(buf, s, n);
    buf[n] = 0;
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (*end || !isfinite(v) || buf[0] == ' ' || buf[0] == '\t') return 0;
    *out = v;
    return 1;
}

/* Is v an integer in [lo, hi]? */
static int int_in(double v, double lo, double hi) { return v >= lo && v <= hi && v == floor(v); }

/* Parse KIND:NUM[,NUM][,max=M], checking each kind's arity and ranges and
 * naming the flag and the spec in every message. */
int trace_len_parse(const char *spec, const char *flag, trace_len *d, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    const char *colon = strchr(spec, ':');
    size_t name_len = colon ? (size_t)(colon - spec) : strlen(spec);
    int kind = -1;
    for (int i = 0; i < 4; i++)
        if (strlen(LEN_NAMES[i]) == name_len && strncmp(spec, LEN_NAMES[i], name_len) == 0) kind = i;
    if (kind < 0 || !colon)
        return hx_fail_code(err, errlen, CX_EINVAL,
                            "%s: '%s' is not a length distribution (use fixed:N, uniform:A,B, normal:MEAN,SD or "
                            "lognormal:MU,SIGMA, optionally followed by ,max=M)", flag, spec);
    d->kind = (trace_len_kind)kind;
    double v[2];
    int nv = 0, need = kind == TRACE_LEN_FIXED ? 1 : 2;
    const char *p = colon + 1;
    for (;;) { /* comma-separated items: numbers, then an optional max=M */
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len >= 4 && strncmp(p, "max=", 4) == 0) {
            double m;
            if (!parse_num(p + 4, len - 4, &m) || !int_in(m, 1, TRACE_MAX_LEN))
                return hx_fail_code(err, errlen, CX_EINVAL,
                                    "%s: '%s': max=M needs an integer M in 1..%d", flag, spec, TRACE_MAX_LEN);
            if (comma) return hx_fail_code(err, errlen, CX_EINVAL, "%s: '%s': max=M must come last", flag, spec);
            d->max = (int)m;
            break;
        }
        double x;
        if (!parse_num(p, len, &x))
            return hx_fail_code(err, errlen, CX_EINVAL,
                                "%s: '%s': '%.*s' is not a number", flag, spec, (int)(len < 40 ? len : 40), p);
        if (nv == need)
            return hx_fail_code(err, errlen, CX_EINVAL,
                                "%s: '%s' has too many numbers ('%s' needs %s)", flag, spec, LEN_NAMES[kind],
                                LEN_ARGS[kind]);
        v[nv++] = x;
        if (!comma) break;
        p = comma + 1;
    }
    if (nv < need) return hx_fail_code(err, errlen, CX_EINVAL, "%s: '%s' needs %s", flag, spec, LEN_ARGS[kind]);
    d->a = v[0];
    d->b = need == 2 ? v[1] : 0;
    switch (d->kind) {
    case TRACE_LEN_FIXED:
        if (!int_in(d->a, 1, TRACE_MAX_LEN))
            return hx_fail_code(err, errlen, CX_EINVAL,
                                "%s: '%s': N must be an integer in 1..%d", flag, spec, TRACE_MAX_LEN);
        break;
    case TRACE_LEN_UNIFORM:
        if (!int_in(d->a, 1, TRACE_MAX_LEN) || !int_in(d->b, 1, TRACE_MAX_LEN) || d->a > d->b)
            return hx_fail_code(err, errlen, CX_EINVAL,
                                "%s: '%s': A and B must be integers with 1 <= A <= B <= %d", flag, spec,
                                TRACE_MAX_LEN);
        break;
    case TRACE_LEN_NORMAL:
    case TRACE_LEN_LOGNORMAL:
        if (d->b < 0 || d->b > 1e6 || fabs(d->a) > 1e6)
            return hx_fail_code(err, errlen, CX_EINVAL,
                                "%s: '%s': the %s must be >= 0 (and both numbers within +-1e6)", flag, spec,
                                d->kind == TRACE_LEN_NORMAL ? "standard deviation SD" : "SIGMA");
        break;
    }
    return 0;
}

/* Draw, round to nearest, clamp to [1, max]; clamping happens in double
 * before the conversion so huge or tiny draws never overflow an int. */
int trace_len_draw(const trace_len *d, rng *r) {
    int hi = d->max ? d->max : TRACE_MAX_LEN;
    double x;
    switch (d->kind) {
    case TRACE_LEN_FIXED: x = d->a; break;
    case TRACE_LEN_UNIFORM: x = d->a + (double)rng_below(r, (uint64_t)(d->b - d->a) + 1); break;
    case TRACE_LEN_NORMAL: x = d->a + d->b * rng_normal(r); break;
    default: x = rng_exp(d->a + d->b * rng_normal(r)); break;
    }
    if (!(x >= 1)) return 1;
    if (x > hi) return hi;
    return (int)floor(x + 0.5); /* <= hi: hi is an integer and x <= hi */
}

/* Canonical spec text with shortest numbers, for the sidecar. */
void trace_len_format(const trace_len *d, char *buf, size_t cap) {
    char a[40], b[40];
    jx_format_number(a, sizeof a, d->a);
    jx_format_number(b, sizeof b, d->b);
    int k = d->kind == TRACE_LEN_FIXED ? snprintf(buf, cap, "fixed:%s", a)
                                       : snprintf(buf, cap, "%s:%s,%s", LEN_NAMES[d->kind], a, b);
    if (d->max && k >= 0 && (size_t)k < cap) snprintf(buf + k, cap - (size_t)k, ",max=%d", d->max);
}

/* ---- text ----------------------------------------------------------------- */

/* Common English words, roughly most frequent first (the Zipf draw over this
 * order makes "the" and "of" common and "harbor" rare, as in real text). */
static const char *const WORDS[] = {
    "the", "of", "and", "to", "a", "in", "is", "that", "it", "for",
    "was", "on", "with", "as", "he", "be", "at", "by", "this", "had",
    "not", "are", "but", "from", "or", "have", "an", "they", "which", "one",
    "you", "were", "all", "we", "her", "she", "there", "would", "their", "will",
    "when", "who", "him", "been", "has", "more", "if", "no", "out", "so",
    "said", "what", "up", "its", "about", "than", "into", "them", "can", "only",
    "other", "new", "some", "could", "time", "these", "two", "may", "then", "do",
    "first", "any", "my", "now", "such", "like", "our", "over", "man", "me",
    "even", "most", "made", "after", "also", "did", "many", "before", "must", "through",
    "back", "years", "where", "much", "your", "way", "well", "down", "should", "because",
    "each", "just", "those", "people", "how", "too", "little", "state", "good", "very",
    "make", "world", "still", "own", "see", "men", "work", "long", "get", "here",
    "between", "both", "life", "being", "under", "never", "day", "same", "another", "know",
    "while", "last", "might", "us", "great", "old", "year", "off", "come", "since",
    "against", "go", "came", "right", "used", "take", "three", "small", "place", "house",
    "during", "without", "again", "around", "however", "home", "found", "number", "part", "general",
    "high", "once", "upon", "school", "every", "among", "water", "system", "left", "end",
    "less", "hand", "why", "name", "think", "point", "group", "city", "morning", "often",
    "early", "along", "light", "family", "night", "country", "question", "river", "change", "program",
    "answer", "order", "table", "story", "paper", "market", "idea", "road", "window", "field",
    "voice", "garden", "letter", "music", "winter", "summer", "journey", "machine", "model", "signal",
    "reason", "result", "evening", "simple", "careful", "quiet", "bright", "heavy", "open", "clear",
    "strong", "short", "quick", "slow", "warm", "cold", "green", "blue", "white", "black",
    "tiny", "large", "young", "ready", "free", "full", "true", "real", "whole", "certain",
    "began", "turned", "asked", "looked", "seemed", "called", "brought", "kept", "held", "wrote",
    "read", "built", "moved", "stood", "heard", "learned", "carried", "followed", "opened", "remembered",
    "measure", "build", "travel", "follow", "explain", "listen", "write", "carry", "gather", "notice",
    "teacher", "doctor", "farmer", "captain", "student", "neighbor", "stranger", "friend", "mother", "father",
    "bridge", "harbor", "forest", "valley", "island", "mountain", "village", "station", "kitchen", "library",
    "engine", "lamp", "clock", "rope", "basket", "stone", "candle", "ladder", "map", "compass",
    "slowly", "quickly", "quietly", "almost", "always", "already", "together", "perhaps", "suddenly", "nearly",
};
enum { N_WORDS = sizeof WORDS / sizeof WORDS[0] };

int trace_word_count(void) { return N_WORDS; }

/* English-like filler: Zipf(1)-distributed words (no immediate repeats),
 * sentences of 5..14 words, a comma after ~1 word in 12, capitalized starts. */
size_t trace_text(rng *r, const trace_zipf *words, int target_tokens, char **buf, size_t *cap) {
    assert(words->k == N_WORDS && target_tokens >= 1);
    /* ~1.3 tokens per English word with SentencePiece/BPE vocabularies. */
    long n_words = (long)floor((double)target_tokens / 1.3 + 0.5);
    if (n_words < 1) n_words = 1;
    size_t need = (size_t)n_words * 16 + 16; /* longest word 10 + ", " + slack */
    if (need > *cap) {
        char *nb = realloc(*buf, need);
        if (!nb) return 0;
        *buf = nb;
        *cap = need;
    }
    char *out = *buf;
    size_t len = 0;
    long left_in_sentence = 0;
    int prev = 0;
    for (long w = 0; w < n_words; w++) {
        if (left_in_sentence == 0) left_in_sentence = 5 + (long)rng_below(r, 10); /* 5..14 words */
        int pick = trace_zipf_draw(words, r);
        while (pick == prev) pick = trace_zipf_draw(words, r); /* no "the the" */
        prev = pick;
        const char *word = WORDS[pick - 1];
        size_t wl = strlen(word);
        int starts = w == 0 || out[len - 1] == '.';
        if (w > 0) out[len++] = ' ';
        memcpy(out + len, word, wl);
        assert(word[0] >= 'a' && word[0] <= 'z' && wl <= 10);
        if (starts) out[len] = (char)(out[len] - 'a' + 'A');
        len += wl;
        left_in_sentence--;
        if (left_in_sentence == 0 || w == n_words - 1) out[len++] = '.';
        else if (rng_below(r, 12) == 0) out[len++] = ',';
        assert(len + 16 <= *cap);
    }
    out[len] = 0;
    return len;
}

/* ---- generator ------------------------------------------------------------ */

enum { STREAM_ARRIVALS = 1, STREAM_ADAPTERS, STREAM_PROMPT_LEN, STREAM_GEN_LEN, STREAM_SYSTEM, STREAM_PRIORITY,
       STREAM_TEXT = 1000 }; /* a new quantity takes a new stream: the others' draws stay as they were */

/* Range checks for the CLI flags, each message naming its flag. */
int trace_params_check(const trace_params *p, char *err, size_t errlen) {
    if (p->requests < 1 || p->requests > TRACE_MAX_REQUESTS)
        return hx_fail_code(err, errlen, CX_EINVAL, "--requests must be in 1..%d (got %d)", TRACE_MAX_REQUESTS, p->requests);
    if (!(p->rate > 0) || p->rate > 1e9)
        return hx_fail_code(err, errlen, CX_EINVAL,
                            "--rate must be a number of requests per second in (0, 1e9] (got %g)", p->rate);
    if (!(p->zipf_s >= 0) || p->zipf_s > 100)
        return hx_fail_code(err, errlen, CX_EINVAL, "--zipf must be an exponent in [0, 100] (got %g)", p->zipf_s);
    if (p->adapters < 0 || p->adapters > WL_MAX_ADAPTER)
        return hx_fail_code(err, errlen, CX_EINVAL, "--adapters must be in 0..%d (got %d)", WL_MAX_ADAPTER, p->adapters);
    if (p->deadline_ms < 0 || p->deadline_ms > 1e9)
        return hx_fail_code(err, errlen, CX_EINVAL, "--deadline-ms must be in 0..1e9 (got %g)", p->deadline_ms);
    if (p->system_prefix < 0 || p->system_prefix > TRACE_MAX_LEN / 2)
        return hx_fail_code(err, errlen, CX_EINVAL, "--system-prefix must be in 0..%d tokens (got %d)", TRACE_MAX_LEN / 2,
                            p->system_prefix);
    return 0;
}

/* See trace_gen.h. */
int trace_prio_parse(const char *v, trace_params *p, char *err, size_t errlen) {
    int n = 0;
    double total = 0;
    for (const char *q = v; *q;) {
        char *end;
        double w = strtod(q, &end);
        if (end == q || !(w >= 0) || w > 1e9 || (*end && *end != ',') || n == TRACE_MAX_CLASSES)
            return hx_fail_code(err, errlen, CX_EINVAL, "--priorities: '%s' is not up to %d non-negative weights W0,W1,... "
                                "(class k drawn with weight Wk)", v, TRACE_MAX_CLASSES);
        p->prio_w[n++] = w;
        total += w;
        q = *end ? end + 1 : end;
    }
    if (!n || !(total > 0)) return hx_fail_code(err, errlen, CX_EINVAL, "--priorities: '%s' has no positive weight", v);
    p->n_prio = n;
    return 0;
}

/* Seed one stream per quantity and build the adapter and word tables. */
int trace_gen_init(trace_gen *g, const trace_params *p, char *err, size_t errlen) {
    memset(g, 0, sizeof *g);
    int rc = trace_params_check(p, err, errlen);
    if (rc) return rc;
    g->p = *p;
    rng_seed(&g->arrivals, p->seed, STREAM_ARRIVALS);
    rng_seed(&g->adapters, p->seed, STREAM_ADAPTERS);
    rng_seed(&g->prompt_lens, p->seed, STREAM_PROMPT_LEN);
    rng_seed(&g->gen_lens, p->seed, STREAM_GEN_LEN);
    rng_seed(&g->priorities, p->seed, STREAM_PRIORITY);
    if (p->adapters > 0) /* --adapters 0: a plain trace, no adapter to draw (the other streams are unchanged) */
        rc = trace_zipf_init(&g->zipf, p->adapters, p->zipf_s, err, errlen);
    if (!rc) rc = trace_zipf_init(&g->words, N_WORDS, 1.0, err, errlen);
    if (!rc && p->system_prefix > 0) { /* the shared system prompt, from its own stream */
        rng sys_rng;
        size_t cap = 0;
        rng_seed(&sys_rng, p->seed, STREAM_SYSTEM);
        g->system_len = trace_text(&sys_rng, &g->words, p->system_prefix, &g->system, &cap);
        if (!g->system_len) rc = hx_fail_code(err, errlen, CX_ENOMEM, "out of memory for the system prompt");
    }
    if (rc) trace_gen_free(g);
    return rc;
}

/* Produce request i: arrival (cumulative exponential gaps, rounded to
 * microseconds), adapter, lengths, then the text from its own stream. */
int trace_gen_next(trace_gen *g, trace_request *r) {
    if (g->next >= g->p.requests) return 0;
    int i = g->next;
    memset(r, 0, sizeof *r);
    r->index = i;
    size_t width = 4; /* digits of the id: enough for p.requests, at least 4 */
    for (int n = g->p.requests; n >= 10000; n /= 10) width++;
    char num[16];
    size_t len = (size_t)snprintf(num, sizeof num, "%d", i + 1);
    assert(len <= width && width + 2 <= sizeof r->id);
    r->id[0] = 'r';
    memset(r->id + 1, '0', width - len);
    memcpy(r->id + 1 + width - len, num, len + 1);
    g->t += rng_exponential(&g->arrivals, g->p.rate); /* first request at the first gap */
    double us = floor(g->t * 1e6 + 0.5);
    r->arrival_us = us < 9.2e18 ? (int64_t)us : INT64_MAX; /* 292,000 years: never in practice */
    r->arrival_s = (double)r->arrival_us / 1e6;
    r->adapter = g->p.adapters > 0 ? trace_zipf_draw(&g->zipf, &g->adapters) : 0; /* 0: the base model */
    r->prompt_len = trace_len_draw(&g->p.prompt_len, &g->prompt_lens);
    r->max_tokens = trace_len_draw(&g->p.gen_len, &g->gen_lens);
    if (g->p.n_prio > 1) { /* class by its weight: the first whose cumulative share passes u */
        double total = 0, u, acc = 0;
        for (int k = 0; k < g->p.n_prio; k++) total += g->p.prio_w[k];
        u = rng_uniform(&g->priorities) * total;
        r->priority = g->p.n_prio - 1;
        for (int k = 0; k < g->p.n_prio; k++)
            if (u < (acc += g->p.prio_w[k])) {
                r->priority = k;
                break;
            }
    }
    rng text_rng; /* per request: a text depends only on (seed, index, prompt_len) */
    rng_seed(&text_rng, g->p.seed, STREAM_TEXT + (uint64_t)i);
    r->text_len = trace_text(&text_rng, &g->words, r->prompt_len, &g->text, &g->text_cap);
    if (r->text_len == 0) return CX_ENOMEM;
    r->text = g->text;
    if (g->system) { /* system prompt, a space, the request's own text */
        size_t need = g->system_len + 1 + r->text_len + 1;
        if (need > g->joined_cap) {
            char *nb = realloc(g->joined, need);
            if (!nb) return CX_ENOMEM;
            g->joined = nb;
            g->joined_cap = need;
        }
        memcpy(g->joined, g->system, g->system_len);
        g->joined[g->system_len] = ' ';
        memcpy(g->joined + g->system_len + 1, g->text, r->text_len + 1);
        r->text = g->joined;
        r->text_len += g->system_len + 1;
        r->prompt_len += g->p.system_prefix;
    }
    g->next++;
    return 1;
}

/* Release the tables and the text buffer. */
void trace_gen_free(trace_gen *g) {
    trace_zipf_free(&g->zipf);
    trace_zipf_free(&g->words);
    free(g->text);
    g->text = NULL;
    g->text_cap = 0;
    free(g->system);
    g->system = NULL;
    g->system_len = 0;
    free(g->joined);
    g->joined = NULL;
    g->joined_cap = 0;
}

/* The sidecar: a flat JSON object, one key per line, keys in a fixed order,
 * numbers in their shortest exact form, so the bytes are reproducible. */
int trace_meta_write(FILE *f, const trace_params *p, const char *trace_sha256, const char *cmdline) {
    char rate[40], zipf[40], pl[128], gl[128];
    int oom = 0;
    assert(trace_sha256 && strlen(trace_sha256) == 64);
    jx_format_number(rate, sizeof rate, p->rate);
    jx_format_number(zipf, sizeof zipf, p->zipf_s);
    trace_len_format(&p->prompt_len, pl, sizeof pl);
    trace_len_format(&p->gen_len, gl, sizeof gl);
    fprintf(f, "{\n  \"format\": \"cortex-bench trace\",\n  \"version\": %d,\n  \"requests\": %d,\n  \"rate\": %s,\n"
               "  \"zipf\": %s,\n  \"adapters\": %d,\n  \"prompt_len\": ",
            TRACE_FORMAT_VERSION, p->requests, rate, zipf, p->adapters);
    oom |= jx_write_string(f, pl, strlen(pl));
    fputs(",\n  \"gen_len\": ", f);
    oom |= jx_write_string(f, gl, strlen(gl));
    fprintf(f, ",\n  \"system_prefix\": %d,\n  \"seed\": %llu,\n  \"trace_sha256\": \"%s\"", p->system_prefix,
            (unsigned long long)p->seed, trace_sha256);
    if (p->n_prio) { /* only when given: older sidecars keep their bytes */
        fputs(",\n  \"priorities\": \"", f);
        for (int k = 0; k < p->n_prio; k++) {
            char w[40];
            jx_format_number(w, sizeof w, p->prio_w[k]);
            fprintf(f, "%s%s", k ? "," : "", w);
        }
        fputs("\"", f);
    }
    if (p->deadline_ms > 0) {
        char dl[40];
        jx_format_number(dl, sizeof dl, p->deadline_ms);
        fprintf(f, ",\n  \"deadline_ms\": %s", dl);
    }
    if (cmdline) {
        fputs(",\n  \"cmdline\": ", f);
        oom |= jx_write_string(f, cmdline, strlen(cmdline));
    }
    fputs("\n}\n", f);
    return oom ? CX_ENOMEM : 0;
}

/* Write every request of the generator `ctx` to f, one JSON object a line;
 * 0, or CX_ENOMEM from the generator or jansson. */
static int write_requests(FILE *f, void *ctx) {
    trace_gen *g = ctx;
    trace_request r;
    int k;
    while ((k = trace_gen_next(g, &r)) == 1) {
        fprintf(f, "{\"id\": \"%s\", \"arrival_s\": %lld.%06lld, \"adapter\": %d, \"prompt_len\": %d, \"max_tokens\": %d, ",
                r.id, (long long)(r.arrival_us / 1000000), (long long)(r.arrival_us % 1000000), r.adapter, r.prompt_len,
                r.max_tokens);
        if (g->p.n_prio) fprintf(f, "\"priority\": %d, ", r.priority);
        if (g->p.deadline_ms > 0) {
            char dl[40];
            jx_format_number(dl, sizeof dl, g->p.deadline_ms);
            fprintf(f, "\"deadline_ms\": %s, ", dl);
        }
        fputs("\"text\": ", f);
        if (jx_write_string(f, r.text, r.text_len)) return CX_ENOMEM;
        fputs("}\n", f);
        if (ferror(f)) break;
    }
    return k < 0 ? k : 0;
}

/* What write_meta needs: the parameters, the trace's hash, the command line. */
typedef struct meta_ctx {
    const trace_params *p;
    const char *sha256;
    const char *cmdline;
} meta_ctx;

/* write_file body for the sidecar. */
static int write_meta(FILE *f, void *ctx) {
    const meta_ctx *m = ctx;
    return trace_meta_write(f, m->p, m->sha256, m->cmdline);
}

/* Create `path`, fill it with body(f, ctx), and check every write and the
 * close; on failure the message names the file and `path` is removed. */
static int write_file(const char *path, int (*body)(FILE *, void *), void *ctx, char *err, size_t errlen) {
    FILE *f = fopen(path, "wb");
    if (!f) return hx_fail_code(err, errlen, CX_EIO, "%s: cannot create: %s", path, strerror(errno));
    int rc = body(f, ctx);
    int bad = ferror(f);
    int saved = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        saved = errno;
    }
    if (rc) hx_fail_code(err, errlen, rc, "%s: out of memory while generating the trace", path);
    else if (bad) rc = hx_fail_code(err, errlen, CX_EIO, "%s: write error: %s", path, strerror(saved));
    if (rc) remove(path);
    return rc;
}

/* A malloc'd a + b, or NULL. */
static char *concat(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *s = malloc(na + nb + 1);
    if (s) {
        memcpy(s, a, na);
        memcpy(s + na, b, nb + 1);
    }
    return s;
}

/* Generate into PATH.tmp, hash it, write PATH.meta.json.tmp, then rename the
 * trace and the sidecar into place. If the sidecar's rename fails the new
 * trace is removed again: a trace is never left without its sidecar. */
int trace_write(const trace_params *p, const char *path, const char *cmdline, char *err, size_t errlen) {
    trace_gen g;
    int rc = trace_gen_init(&g, p, err, errlen);
    if (rc) return rc;
    char *tmp = concat(path, ".tmp"), *meta = concat(path, WL_META_SUFFIX);
    char *meta_tmp = meta ? concat(meta, ".tmp") : NULL;
    char sha[65];
    if (!tmp || !meta || !meta_tmp) rc = hx_fail_code(err, errlen, CX_ENOMEM, "out of memory");
    if (!rc) rc = write_file(tmp, write_requests, &g, err, errlen);
    if (!rc) rc = sha256_hex_file(tmp, sha, err, errlen);
    meta_ctx m = {p, sha, cmdline};
    if (!rc) rc = write_file(meta_tmp, write_meta, &m, err, errlen);
    if (!rc && rename(tmp, path) != 0)
        rc = hx_fail_code(err, errlen, CX_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    else if (!rc && rename(meta_tmp, meta) != 0) {
        rc = hx_fail_code(err, errlen, CX_EIO, "cannot rename %s to %s: %s", meta_tmp, meta, strerror(errno));
        remove(path);
    }
    if (rc && tmp) remove(tmp);
    if (rc && meta_tmp) remove(meta_tmp);
    free(tmp);
    free(meta);
    free(meta_tmp);
    trace_gen_free(&g);
    return rc;
}
