/*
 * workload.h - load and validate benchmark workloads (JSONL).
 *
 * Two kinds, told apart by the first request's fields:
 *   prompt set  {"id": "p01", "text": "...", "max_tokens": 64, "category": "qa"}
 *               (category optional), replayed one request after another;
 *   trace       {"id": "r0001", "arrival_s": 0.25, "adapter": 2,
 *                "prompt_len": 57, "max_tokens": 21, "text": "..."}
 *               (has "arrival_s"), replayed at its arrival times.
 * One JSON object per line; blank lines and lines whose first non-blank
 * character is '#' are skipped (traces written before format version 2
 * began with a "# cortex-bench trace v1 ..." line; they still load);
 * unknown keys are allowed (ignored); CRLF line ends and a leading UTF-8 BOM
 * are accepted.
 *
 * A workload FILE may have a sidecar FILE.meta.json: one JSON object
 * describing how it was made (`cortex-bench trace` writes one with its
 * parameters). wl_load reads it when present and keeps its text, which
 * `cortex-bench run` stores with the run; if it has "trace_sha256", that
 * must be the SHA-256 of FILE (a sidecar left from another version of the
 * file is an error, not silently wrong provenance).
 *
 * Every line is checked: required keys present with the right types, "text"
 * non-empty, "max_tokens" and "prompt_len" integers in 1..WL_MAX_TOKENS,
 * "adapter" an integer in 0..WL_MAX_ADAPTER, "arrival_s" finite, >= 0 and
 * non-decreasing, ids (strings, or integers written as decimal) unique;
 * the optional scheduling keys "priority" (an integer class) and
 * "deadline_ms" (a positive number) of any request are checked too.
 * The first problem is reported as "FILE:LINE: problem", e.g.
 *   prompts/x.jsonl:7: "max_tokens" must be a positive integer
 * and the SHA-256 of the exact bytes parsed is kept for provenance.
 */
#ifndef CX_HARNESS_WORKLOAD_H
#define CX_HARNESS_WORKLOAD_H

#include <stddef.h>

#define WL_MAX_TOKENS 1000000
#define WL_MAX_ADAPTER 1000000
#define WL_MAX_PRIORITY 1000000
#define WL_META_SUFFIX ".meta.json" /* the sidecar of FILE is FILE.meta.json */
#define WL_META_MAX 65536           /* bytes: a sidecar holds a few parameters */

typedef enum wl_kind {
    WL_PROMPTS = 1, /* standard prompt set: no arrival times */
    WL_TRACE = 2    /* request trace: arrival_s, adapter, prompt_len */
} wl_kind;

typedef struct wl_request {
    char *id;          /* NUL-terminated, non-empty, no NUL bytes inside */
    char *text;        /* the prompt, NUL-terminated, non-empty, no NUL bytes */
    size_t text_len;
    char *category;    /* prompt sets: optional label, NULL when absent */
    int max_tokens;    /* 1..WL_MAX_TOKENS tokens to generate at most */
    double arrival_s;  /* traces: seconds after the start; prompt sets: 0 */
    int adapter;       /* traces: adapter id (0..WL_MAX_ADAPTER); prompt sets: -1 */
    int prompt_len;    /* traces: target prompt tokens the text was built for; prompt sets: 0 */
    int priority;      /* optional "priority": scheduling class, higher first (default 0) */
    double deadline_ms;/* optional "deadline_ms": ends as timed out this long after issue; 0: none */
    size_t line;       /* 1-based line in the file, for later messages */
} wl_request;

typedef struct wl_workload {
    wl_kind kind;
    wl_request *req;   /* in file order */
    size_t n;          /* >= 1 after a successful load */
    char sha256[65];   /* hex SHA-256 of the file bytes */
    char *source;      /* the path (or name) it was loaded from */
    char *meta;        /* the sidecar's JSON text (trailing whitespace dropped), NULL when none */
} wl_workload;

/*
 * Parse and validate a workload held in memory; `name` prefixes messages
 * ("NAME:LINE: ...") and becomes w->source. On failure *w is left empty and
 * a negative CX_E* code is returned (CX_EFORMAT for bad content).
 */
int wl_parse_buffer(const char *buf, size_t n, const char *name, wl_workload *w, char *err, size_t errlen);

/*
 * Check sidecar bytes buf[0, n) for the loaded workload *w (one JSON object of
 * at most WL_META_MAX bytes; "trace_sha256", when present, equal to
 * w->sha256) and keep a copy in w->meta. `name` prefixes messages. On
 * failure w->meta is unchanged and CX_EFORMAT (or CX_ENOMEM) is returned.
 */
int wl_attach_meta(wl_workload *w, const char *buf, size_t n, const char *name, char *err, size_t errlen);

/* Read the whole file at `path` and wl_parse_buffer it (CX_EIO if
 * unreadable), then its sidecar PATH.meta.json if one exists
 * (wl_attach_meta; an unreadable or bad sidecar fails the load). */
int wl_load(const char *path, wl_workload *w, char *err, size_t errlen);

/* Free everything a successful load allocated; safe on a zeroed workload. */
void wl_free(wl_workload *w);

/* "prompts" or "trace". */
const char *wl_kind_name(wl_kind k);

#endif
