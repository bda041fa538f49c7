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
 * character is '#' are skipped; unknown keys are allowed (ignored); CRLF line
 * ends and a leading UTF-8 BOM are accepted.
 *
 * Every line is checked: required keys present with the right types, "text"
 * non-empty, "max_tokens" and "prompt_len" integers in 1..WL_MAX_TOKENS,
 * "adapter" an integer in 0..WL_MAX_ADAPTER, "arrival_s" finite, >= 0 and
 * non-decreasing, ids (strings, or integers written as decimal) unique.
 * The first problem is reported as "FILE:LINE: problem", e.g.
 *   prompts/x.jsonl:7: "max_tokens" must be a positive integer
 * and the SHA-256 of the exact bytes parsed is kept for provenance.
 */
#ifndef CX_HARNESS_WORKLOAD_H
#define CX_HARNESS_WORKLOAD_H

#include <stddef.h>

#define WL_MAX_TOKENS 1000000
#define WL_MAX_ADAPTER 1000000

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
    size_t line;       /* 1-based line in the file, for later messages */
} wl_request;

typedef struct wl_workload {
    wl_kind kind;
    wl_request *req;   /* in file order */
    size_t n;          /* >= 1 after a successful load */
    char sha256[65];   /* hex SHA-256 of the file bytes */
    char *source;      /* the path (or name) it was loaded from */
} wl_workload;

/*
 * Parse and validate a workload held in memory; `name` prefixes messages
 * ("NAME:LINE: ...") and becomes w->source. On failure *w is left empty and
 * a negative CX_E* code is returned (CX_EFORMAT for bad content).
 */
int wl_parse_buffer(const char *buf, size_t n, const char *name, wl_workload *w, char *err, size_t errlen);

/* Read the whole file at `path` and wl_parse_buffer it (CX_EIO if unreadable). */
int wl_load(const char *path, wl_workload *w, char *err, size_t errlen);

/* Free everything a successful load allocated; safe on a zeroed workload. */
void wl_free(wl_workload *w);

/* "prompts" or "trace". */
const char *wl_kind_name(wl_kind k);

#endif
