/*
 * trace_gen.h - reproducible synthetic request traces for
 *
 *   cortex-bench trace --requests N --rate R --zipf S --adapters K
 *                      --prompt-len DIST --gen-len DIST --seed X -o FILE.jsonl
 *
 * Request i arrives at the i-th event of a Poisson process of rate R (gaps
 * Exp(R), the first request at the first gap, times rounded to microseconds),
 * asks for adapter k in 1..K with Zipf probability P(k) = k^-S / sum_j j^-S
 * (S = 0 is uniform; with K = 0, a plain trace, every request asks for
 * adapter 0, the base model, and no adapter is drawn), and has a target prompt length and a max_tokens drawn
 * from two length distributions. Its text is English-like, built from a fixed
 * word list to about prompt_len / 1.3 words, so traces do not depend on any
 * model (the real token count is measured at replay).
 *
 * With --system-prefix N every text starts with the same system prompt of
 * about N tokens (its own random stream), as requests of a chat service
 * sharing one system prompt do: the workload of the KV prefix cache.
 *
 * Determinism: the same parameters and seed give byte-identical files. Each
 * quantity has its own random stream (arrivals, adapters, prompt lengths,
 * generation lengths, and one per request for the text), so changing, say,
 * --zipf leaves the arrival times alone. All floating point is done with
 * IEEE basic operations plus this file's own log/exp (no libm transcendental
 * functions, whose last bit differs between C libraries), and files are
 * written with integer formatting, so the bytes are the same on every
 * machine with IEEE doubles.
 *
 * The file holds nothing but the requests, one JSON object a line; the
 * parameters go to the sidecar FILE.meta.json (trace_meta_write), which
 * `cortex-bench run` stores with the run.
 */
#ifndef CX_HARNESS_TRACE_GEN_H
#define CX_HARNESS_TRACE_GEN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rng.h"


/* ---- Zipf over 1..K by inverse CDF ---------------------------------------- */

typedef struct trace_zipf {
    double *cdf;  /* cdf[i] = P(X <= i + 1); cdf[k - 1] == 1 exactly */
    int k;
} trace_zipf;

/* Build the table for Zipf(s) over 1..k (k >= 1, s >= 0 finite). */
int trace_zipf_init(trace_zipf *z, int k, double s, char *err, size_t errlen);
/* Draw a value in 1..k: binary search for the first cdf entry above u. */
int trace_zipf_draw(const trace_zipf *z, rng *r);
/* P(X = i) for 1 <= i <= k, from the table. */
double trace_zipf_prob(const trace_zipf *z, int i);
void trace_zipf_free(trace_zipf *z);

/* ---- length distributions ------------------------------------------------- */

#define TRACE_MAX_LEN 1000000 /* = WL_MAX_TOKENS: every drawn length loads back */

typedef enum trace_len_kind {
    TRACE_LEN_FIXED,     /* fixed:N */
    TRACE_LEN_UNIFORM,   /* uniform:A,B   integers, inclusive */
    TRACE_LEN_NORMAL,    /* normal:MEAN,SD */
    TRACE_LEN_LOGNORMAL  /* lognormal:MU,SIGMA   exp(N(MU, SIGMA^2)) */
} trace_len_kind;

typedef struct trace_len {
    trace_len_kind kind;
    double a, b;  /* N | A,B | MEAN,SD | MU,SIGMA */
    int max;      /* ",max=M" upper clamp; 0 = none (TRACE_MAX_LEN still applies) */
} trace_len;

/*
 * Parse a spec such as "uniform:16,96" or "lognormal:4.5,0.6,max=512".
 * `flag` names the option in messages: "--prompt-len: 'uniform:5' needs two
 * numbers A,B". Returns 0 or CX_EINVAL.
 */
int trace_len_parse(const char *spec, const char *flag, trace_len *d, char *err, size_t errlen);
/* Draw a length: continuous kinds are rounded to nearest; all are clamped to
 * [1, max] (max = TRACE_MAX_LEN when none is given). */
int trace_len_draw(const trace_len *d, rng *r);
/* The canonical spec text ("uniform:16,96", "normal:200,30,max=400"). */
void trace_len_format(const trace_len *d, char *buf, size_t cap);

/* ---- traces --------------------------------------------------------------- */

#define TRACE_MAX_REQUESTS 10000000
#define TRACE_MAX_CLASSES 16     /* priority classes --priorities can weigh */

typedef struct trace_params {
    int requests;        /* --requests N, 1..TRACE_MAX_REQUESTS */
    double rate;         /* --rate R requests per second, > 0 */
    double zipf_s;       /* --zipf S >= 0 */
    int adapters;        /* --adapters K, 0..WL_MAX_ADAPTER (0: a plain trace, every request adapter 0) */
    trace_len prompt_len;/* --prompt-len DIST: target prompt tokens */
    trace_len gen_len;   /* --gen-len DIST: max_tokens */
    uint64_t seed;       /* --seed X */
    int system_prefix;   /* --system-prefix N: target tokens of one system prompt every request's
                            text starts with (then a space, then its own text); 0: none */
    double prio_w[TRACE_MAX_CLASSES]; /* --priorities W0,W1,...: class k drawn with weight prio_w[k] */
    int n_prio;          /* classes given (0: no "priority" field written) */
    double deadline_ms;  /* --deadline-ms MS: every request's "deadline_ms" (0: none written) */
} trace_params;

/* One generated request; text is owned by the generator and valid until the
 * next trace_gen_next call. */
typedef struct trace_request {
    int index;             /* 0-based */
    char id[24];           /* "r0001"...: 'r' + 1-based index, zero-padded to >= 4 digits */
    int64_t arrival_us;    /* arrival time in microseconds */
    double arrival_s;      /* arrival_us / 1e6 */
    int adapter;           /* 1..adapters; 0 when adapters is 0 */
    int prompt_len;        /* target prompt tokens (system prefix included) */
    int max_tokens;        /* tokens to generate at most */
    int priority;          /* class 0..n_prio-1 (0 when no classes were given) */
    const char *text;
    size_t text_len;
} trace_request;

typedef struct trace_gen {
    trace_params p;
    rng arrivals, adapters, prompt_lens, gen_lens, priorities;
    trace_zipf zipf;       /* adapters (empty when p.adapters is 0) */
    trace_zipf words;      /* Zipf(1) over the word list: frequent words come up often */
    double t;              /* current arrival time, seconds */
    int next;              /* index of the next request */
    char *text;
    size_t text_cap;
    char *system;          /* the shared system prompt (--system-prefix), NULL when none */
    size_t system_len;
    char *joined;          /* system + " " + the request's own text */
    size_t joined_cap;
} trace_gen;

/* Parse "--priorities W0,W1,..." (non-negative weights, at least one positive) into p; 0 or CX_EINVAL. */
int trace_prio_parse(const char *v, trace_params *p, char *err, size_t errlen);
/* Check parameters; messages name the flag ("--rate must be > 0 (got 0)"). */
int trace_params_check(const trace_params *p, char *err, size_t errlen);
/* Start generating (checks p). */
int trace_gen_init(trace_gen *g, const trace_params *p, char *err, size_t errlen);
/* Fill *r with the next request: 1 if one was produced, 0 when all
 * p.requests are done, CX_ENOMEM (negative) on allocation failure. */
int trace_gen_next(trace_gen *g, trace_request *r);
void trace_gen_free(trace_gen *g);

/*
 * Deterministic prompt text of about target_tokens / 1.3 words (at least one)
 * from stream `r`, as sentences of 5..14 words; written to *buf (grown as
 * needed, *cap updated), NUL-terminated. Returns its length, or 0 on no memory.
 */
size_t trace_text(rng *r, const trace_zipf *words, int target_tokens, char **buf, size_t *cap);
/* Number of words in the built-in list. */
int trace_word_count(void);

/* The format version the sidecar records: 1 was a "# cortex-bench trace v1
 * ..." comment as the trace's first line (readers still skip it); 2 is
 * plain JSONL with the parameters in the sidecar. */
#define TRACE_FORMAT_VERSION 2

/*
 * Write the sidecar of a trace (PATH.meta.json, docs/harness.md#traces) to f:
 * a JSON object, one key per line, with the format and version, every
 * generation parameter, the trace file's SHA-256 and, when not NULL, the
 * command line that wrote it. The same arguments give the same bytes.
 * 0, or CX_ENOMEM (jansson ran out of memory: the text is incomplete).
 */
int trace_meta_write(FILE *f, const trace_params *p, const char *trace_sha256, const char *cmdline);

/*
 * Write the trace as plain JSONL (one request object per line, nothing else)
 * to PATH and its sidecar to PATH.meta.json (WL_META_SUFFIX). Both are
 * written to PATH.tmp and PATH.meta.json.tmp first and renamed once both are
 * complete, so a failure leaves neither file new nor any temporary behind.
 * `cmdline` (may be NULL) is recorded in the sidecar. Returns 0, CX_EINVAL
 * (bad parameters), CX_EIO or CX_ENOMEM; err names the file and the problem.
 */
int trace_write(const trace_params *p, const char *path, const char *cmdline, char *err, size_t errlen);

#endif
