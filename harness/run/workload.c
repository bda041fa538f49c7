/*
 * workload.c - JSONL workload loader: splits the bytes into lines, parses
 * each with jx_parse_object (jansson), checks the fields for the workload's kind, and
 * rejects duplicate ids with a hash set, all in one pass in file order so the
 * first problem in the file is the one reported.
 */
#include "workload.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"
#include "jsonx.h"
#include "sha256.h"
#include "hx_err.h"

/* A malloc'd copy of s[0, n) with a terminator. */
static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* A string value made printable and short for messages. */
static const char *for_msg(const char *s, char buf[48]) {
    size_t k = 0, i = 0;
    for (; s[i] && k < 40; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[k++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (s[i]) { memcpy(buf + k, "...", 3); k += 3; }
    buf[k] = 0;
    return buf;
}

/* ---- id set: open addressing over request indices ------------------------ */

typedef struct id_set {
    size_t *slot;  /* request index + 1; 0 = empty */
    size_t cap;    /* power of two */
    size_t n;
} id_set;

/* FNV-1a: ids are short, any decent spread will do. */
static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Insert request `idx` (id req[idx].id); returns the index of an earlier
 * request with the same id, SIZE_MAX if new, or SIZE_MAX - 1 on no memory. */
static size_t id_set_add(id_set *set, const wl_request *req, size_t idx) {
    if (2 * (set->n + 1) > set->cap) { /* keep the load under 1/2 */
        size_t ncap = set->cap ? 2 * set->cap : 64;
        size_t *ns = calloc(ncap, sizeof *ns);
        if (!ns) return SIZE_MAX - 1;
        for (size_t i = 0; i < set->cap; i++) {
            if (!set->slot[i]) continue;
            size_t j = hash_str(req[set->slot[i] - 1].id) & (ncap - 1);
            while (ns[j]) j = (j + 1) & (ncap - 1);
            ns[j] = set->slot[i];
        }
        free(set->slot);
        set->slot = ns;
        set->cap = ncap;
    }
    size_t j = hash_str(req[idx].id) & (set->cap - 1);
    for (; set->slot[j]; j = (j + 1) & (set->cap - 1))
        if (strcmp(req[set->slot[j] - 1].id, req[idx].id) == 0) return set->slot[j] - 1;
    set->slot[j] = idx + 1;
    set->n++;
    return SIZE_MAX;
}

/* ---- one line ----------------------------------------------------------- */

typedef struct line_ctx {
    const char *name;
    size_t line;
    char *err;
    size_t errlen;
} line_ctx;

/* Fetch a required key; report it missing. */
static int need(const line_ctx *c, const json_t *o, const char *key, const json_t **out) {
    *out = json_object_get(o, key);
    if (!*out) return hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line, "missing required key \"%s\"", key);
    return 0;
}

/* Shortest text for a number in messages ("0.1", not "0.10000000000000001"). */
static const char *num_str(double x, char buf[40]) {
    jx_format_number(buf, 40, x);
    return buf;
}

/* A required integer key in [lo, hi] (lo is 0 or 1: "non-negative"/"positive"). */
static int need_int(const line_ctx *c, const json_t *o, const char *key, long lo, long hi, int *out) {
    const json_t *f;
    char nb[40];
    int rc = need(c, o, key, &f);
    if (rc) return rc;
    const char *range = lo == 1 ? "a positive integer" : "a non-negative integer";
    if (!json_is_number(f))
        return hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line, "\"%s\" must be %s, not %s", key, range,
                          jx_type_name(f));
    double x = json_number_value(f); /* finite: the parser rejects overflow */
    if (x != floor(x) || x < (double)lo)
        return hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line, "\"%s\" must be %s (got %s)", key, range,
                          num_str(x, nb));
    if (x > (double)hi)
        return hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line, "\"%s\" %s is too large (at most %ld)", key,
                          num_str(x, nb), hi);
    *out = (int)x;
    return 0;
}

/* Copy a string field's bytes, refusing embedded NULs (JSON_ALLOW_NUL keeps
 * them in the value so this can name them) and, if `nonempty`, the empty string. */
static int take_string(const line_ctx *c, const json_t *f, const char *key, int nonempty, char **out, size_t *len) {
    if (!json_is_string(f))
        return hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line, "\"%s\" must be a string, not %s", key,
                          jx_type_name(f));
    const char *s = json_string_value(f);
    size_t n = json_string_length(f);
    if (nonempty && n == 0)
        return hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line, "\"%s\" must not be empty", key);
    if (memchr(s, 0, n))
        return hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line, "\"%s\" must not contain \\u0000", key);
    *out = dup_n(s, n);
    if (!*out) return hx_fail_at(c->err, c->errlen, CX_ENOMEM, c->name, c->line, "out of memory");
    if (len) *len = n;
    return 0;
}

/* 1 and *out = v when v is a number with an integral value in [-2^53, 2^53]
 * (every integer up to 2^53 is exact in a double; beyond, ids would collide). */
static int int53(const json_t *v, int64_t *out) {
    const double lim = 9007199254740992.0; /* 2^53 */
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!(x >= -lim && x <= lim) || (double)(int64_t)x != x) return 0;
    *out = (int64_t)x;
    return 1;
}

/* The request id: a non-empty string, or an integer kept as its decimal form. */
static int take_id(const line_ctx *c, const json_t *o, char **out) {
    const json_t *f;
    int rc = need(c, o, "id", &f);
    if (rc) return rc;
    if (json_is_number(f)) {
        int64_t v;
        if (!int53(f, &v))
            return hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line, "\"id\" must be a string or an integer");
        char buf[32];
        snprintf(buf, sizeof buf, "%lld", (long long)v);
        *out = dup_n(buf, strlen(buf));
        return *out ? 0 : hx_fail_at(c->err, c->errlen, CX_ENOMEM, c->name, c->line, "out of memory");
    }
    if (!json_is_string(f))
        return hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line, "\"id\" must be a string or an integer, not %s",
                          jx_type_name(f));
    return take_string(c, f, "id", 1, out, NULL);
}

/* The optional scheduling fields of any request: "priority", an integer
 * class in -WL_MAX_PRIORITY..WL_MAX_PRIORITY (higher first, default 0), and
 * "deadline_ms", a positive number of milliseconds after the request is
 * issued (absent or null: none). */
static int read_sched_fields(const line_ctx *c, const json_t *o, wl_request *r) {
    char nb[40];
    const json_t *f = json_object_get(o, "priority");
    if (f && !json_is_null(f)) {
        double x = json_is_number(f) ? json_number_value(f) : 0;
        if (!json_is_number(f) || x != floor(x))
            return hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line,
                              "\"priority\" must be an integer class, not %s",
                              json_is_number(f) ? num_str(x, nb) : jx_type_name(f));
        if (fabs(x) > WL_MAX_PRIORITY)
            return hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line, "\"priority\" %s is outside -%d..%d",
                              num_str(x, nb), WL_MAX_PRIORITY, WL_MAX_PRIORITY);
        r->priority = (int)x;
    }
    f = json_object_get(o, "deadline_ms");
    if (f && !json_is_null(f)) {
        if (!json_is_number(f))
            return hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line,
                              "\"deadline_ms\" must be a number of milliseconds, not %s", jx_type_name(f));
        double x = json_number_value(f);
        if (!(x > 0) || x > 1e9)
            return hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line,
                              "\"deadline_ms\" must be in (0, 1e9] milliseconds (got %s)", num_str(x, nb));
        r->deadline_ms = x;
    }
    return 0;
}

/* Fill r from a parsed line of a workload of kind `kind`. */
static int read_request(const line_ctx *c, const json_t *o, wl_kind kind, wl_request *r) {
    const json_t *f;
    int rc = take_id(c, o, &r->id);
    if (!rc) rc = need(c, o, "text", &f);
    if (!rc) rc = take_string(c, f, "text", 1, &r->text, &r->text_len);
    if (!rc) rc = need_int(c, o, "max_tokens", 1, WL_MAX_TOKENS, &r->max_tokens);
    if (!rc) rc = read_sched_fields(c, o, r);
    if (rc) return rc;
    r->adapter = -1;
    if (kind == WL_PROMPTS) {
        f = json_object_get(o, "category");
        if (f && !json_is_null(f)) rc = take_string(c, f, "category", 0, &r->category, NULL);
        return rc;
    }
    rc = need(c, o, "arrival_s", &f);
    if (rc) return rc;
    if (!json_is_number(f))
        return hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line,
                          "\"arrival_s\" must be a number of seconds, not %s", jx_type_name(f));
    char nb[40];
    if (!(json_number_value(f) >= 0))
        return hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line, "\"arrival_s\" must not be negative (got %s)",
                          num_str(json_number_value(f), nb));
    r->arrival_s = json_number_value(f);
    rc = need_int(c, o, "adapter", 0, WL_MAX_ADAPTER, &r->adapter);
    if (!rc) rc = need_int(c, o, "prompt_len", 1, WL_MAX_TOKENS, &r->prompt_len);
    return rc;
}

/* Release one request's strings. */
static void request_free(wl_request *r) {
    free(r->id);
    free(r->text);
    free(r->category);
}

/* Free every request and the source name; leave w zeroed. */
void wl_free(wl_workload *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) request_free(&w->req[i]);
    free(w->req);
    free(w->source);
    free(w->meta);
    memset(w, 0, sizeof *w);
}

/* Kind names as shown in results and messages. */
const char *wl_kind_name(wl_kind k) {
    return k == WL_TRACE ? "trace" : k == WL_PROMPTS ? "prompts" : "?";
}

/* Is line[0, n) blank or a '#' comment? */
static int skippable(const char *line, size_t n) {
    size_t i = 0;
    while (i < n && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) i++;
    return i == n || line[i] == '#';
}

/* Validate one non-comment line and append its request to w (kind decided
 * by the first request; `first_line` is where that one is). */
static int add_line(const line_ctx *c, const char *s, size_t n, wl_workload *w, size_t *cap, size_t *first_line,
                    id_set *ids) {
    char jerr[256], b[48];
    json_t *o;
    int rc = jx_parse_object(s, n, &o, NULL, jerr, sizeof jerr); /* one line: its column is the file's */
    if (rc) return hx_fail_at(c->err, c->errlen, rc, c->name, c->line, "%s", jerr);
    int has_arrival = json_object_get(o, "arrival_s") != NULL;
    if (w->n == 0) {
        w->kind = has_arrival ? WL_TRACE : WL_PROMPTS;
        *first_line = c->line;
    } else if (w->kind == WL_PROMPTS && has_arrival) {
        json_decref(o);
        return hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line,
                          "\"arrival_s\" in a prompt set (the first request, line %zu, has none; a trace needs it on every line)",
                          *first_line);
    } else if (w->kind == WL_TRACE && !has_arrival) {
        json_decref(o);
        return hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line,
                          "missing required key \"arrival_s\" (this is a trace: the first request, line %zu, has it)",
                          *first_line);
    }
    if (w->n == *cap) {
        size_t ncap = *cap ? 2 * *cap : 16;
        wl_request *nr = realloc(w->req, ncap * sizeof *nr);
        if (!nr) {
            json_decref(o);
            return hx_fail_at(c->err, c->errlen, CX_ENOMEM, c->name, c->line, "out of memory for %zu requests", ncap);
        }
        w->req = nr;
        *cap = ncap;
    }
    wl_request *r = &w->req[w->n];
    memset(r, 0, sizeof *r);
    r->line = c->line;
    rc = read_request(c, o, w->kind, r);
    json_decref(o);
    if (!rc && w->kind == WL_TRACE && w->n > 0 && r->arrival_s < w->req[w->n - 1].arrival_s) {
        char t1[40], t0[40];
        rc = hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line,
                        "\"arrival_s\" %s is earlier than the previous request's %s (line %zu): "
                        "a trace must be sorted by arrival",
                        num_str(r->arrival_s, t1), num_str(w->req[w->n - 1].arrival_s, t0), w->req[w->n - 1].line);
    }
    if (!rc) {
        size_t prev = id_set_add(ids, w->req, w->n);
        if (prev == SIZE_MAX - 1) rc = hx_fail_at(c->err, c->errlen, CX_ENOMEM, c->name, c->line, "out of memory");
        else if (prev != SIZE_MAX)
            rc = hx_fail_at(c->err, c->errlen, CX_EFORMAT, c->name, c->line, "duplicate id \"%s\" (first used on line %zu)",
                            for_msg(r->id, b), w->req[prev].line);
    }
    if (rc) {
        request_free(r);
        return rc;
    }
    w->n++;
    return 0;
}

/* Split into lines (LF, optional CR), skip blanks and comments, validate
 * each line in order, then hash the exact bytes for provenance. */
int wl_parse_buffer(const char *buf, size_t n, const char *name, wl_workload *w, char *err, size_t errlen) {
    assert(w && name && (buf || n == 0));
    memset(w, 0, sizeof *w);
    if (err && errlen) err[0] = 0;
    size_t cap = 0, first_line = 0, pos = 0;
    id_set ids = {0};
    line_ctx c = {name, 0, err, errlen};
    int rc = 0;
    if (n >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) pos = 3; /* UTF-8 byte order mark */
    while (pos < n && rc == 0) {
        const char *nl = memchr(buf + pos, '\n', n - pos);
        size_t end = nl ? (size_t)(nl - buf) : n;
        c.line++;
        if (!skippable(buf + pos, end - pos)) rc = add_line(&c, buf + pos, end - pos, w, &cap, &first_line, &ids);
        pos = end + 1;
    }
    free(ids.slot);
    if (rc == 0 && w->n == 0)
        rc = hx_fail_at(err, errlen, CX_EFORMAT, name, 0, "no requests (only blank lines and '#' comments)");
    if (rc == 0) {
        w->source = dup_n(name, strlen(name));
        if (!w->source) rc = hx_fail_at(err, errlen, CX_ENOMEM, name, 0, "out of memory");
    }
    if (rc) {
        wl_free(w);
        return rc;
    }
    sha256_hex(buf, n, w->sha256);
    return 0;
}

/* Validate the sidecar as one JSON object that, if it names the trace's
 * hash, names this file's; keep its text without trailing whitespace. */
int wl_attach_meta(wl_workload *w, const char *buf, size_t n, const char *name, char *err, size_t errlen) {
    assert(w && name && (buf || n == 0));
    if (n > WL_META_MAX)
        return hx_fail_at(err, errlen, CX_EFORMAT, name, 0, "larger than %d bytes: too large for a sidecar", WL_META_MAX);
    json_t *o;
    char jerr[256];
    int line;
    int rc = jx_parse_object(buf, n, &o, &line, jerr, sizeof jerr);
    if (rc) return hx_fail_at(err, errlen, rc, name, (size_t)line, "%s", jerr);
    const json_t *h = json_object_get(o, "trace_sha256");
    if (h && !json_is_string(h))
        rc = hx_fail_at(err, errlen, CX_EFORMAT, name, 0, "\"trace_sha256\" must be a string, not %s", jx_type_name(h));
    else if (h && strcmp(json_string_value(h), w->sha256) != 0) {
        char b[48];
        rc = hx_fail_at(err, errlen, CX_EFORMAT, name, 0,
                        "describes another file (\"trace_sha256\" %.12s..., but %s has %.12s...): regenerate the trace "
                        "or delete the sidecar", for_msg(json_string_value(h), b), w->source ? w->source : "the workload", w->sha256);
    }
    json_decref(o);
    if (rc) return rc;
    while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == '\t' || buf[n - 1] == '\r' || buf[n - 1] == '\n')) n--;
    char *copy = dup_n(buf, n); /* no NUL inside: jx_parse_object rejects a raw one */
    if (!copy) return hx_fail_at(err, errlen, CX_ENOMEM, name, 0, "out of memory");
    free(w->meta);
    w->meta = copy;
    return 0;
}

/* Read a whole file (growing the buffer; works for pipes too) into *out,
 * *n_out bytes; with `max` > 0 it stops once it has more than max bytes (the
 * caller reports the size). Messages are "PATH: problem". When `missing_ok`
 * and the file does not exist: 0 with *out NULL. */
static int read_all(const char *path, size_t max, int missing_ok, char **out, size_t *n_out, char *err, size_t errlen) {
    *out = NULL;
    *n_out = 0;
    FILE *f = fopen(path, "rb");
    if (!f && missing_ok && errno == ENOENT) return 0;
    if (!f) return hx_fail_at(err, errlen, CX_EIO, path, 0, "cannot open: %s", strerror(errno));
    size_t n = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    int oom = !buf, rc = 0;
    while (!oom && (!max || n <= max)) {
        if (n == cap) {
            char *nb = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                oom = 1;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (oom) rc = hx_fail_at(err, errlen, CX_ENOMEM, path, 0, "out of memory reading the file");
    else if (ferror(f)) rc = hx_fail_at(err, errlen, CX_EIO, path, 0, "read error: %s", strerror(errno));
    fclose(f);
    if (rc) free(buf);
    else {
        *out = buf;
        *n_out = n;
    }
    return rc;
}

/* Read and parse the file, so the hash covers exactly the bytes that were
 * validated; then attach its sidecar, if any. */
int wl_load(const char *path, wl_workload *w, char *err, size_t errlen) {
    assert(path && w);
    memset(w, 0, sizeof *w);
    char *buf;
    size_t n;
    int rc = read_all(path, 0, 0, &buf, &n, err, errlen);
    if (rc) return rc;
    rc = wl_parse_buffer(buf, n, path, w, err, errlen);
    free(buf);
    if (rc) return rc;
    size_t pl = strlen(path);
    char *meta_path = malloc(pl + sizeof WL_META_SUFFIX);
    if (!meta_path) rc = hx_fail_at(err, errlen, CX_ENOMEM, path, 0, "out of memory");
    else {
        memcpy(meta_path, path, pl);
        memcpy(meta_path + pl, WL_META_SUFFIX, sizeof WL_META_SUFFIX);
        rc = read_all(meta_path, WL_META_MAX, 1, &buf, &n, err, errlen);
        if (!rc && buf) rc = wl_attach_meta(w, buf, n, meta_path, err, errlen);
        free(buf);
    }
    free(meta_path);
    if (rc) wl_free(w);
    return rc;
}
