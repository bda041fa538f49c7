/*
 * fuzz_jsonl.c - libFuzzer target for cortex-bench's workload input path:
 * any byte string given to the JSON object reader (jansson with
 * cortex-bench's settings, jsonx.c), the JSONL workload loader and the
 * length-distribution spec parser must give either a valid result or one
 * error message, never a crash, an out-of-bounds access, undefined behaviour
 * or a leak. (jansson itself is the system library, not instrumented: the
 * target checks what our code does with what it returns.)
 *
 * Per input:
 *   1. jx_parse_object over the bytes. On success it is an object whose
 *      every key is NUL-free and found by json_object_get, and every string
 *      value written back with jx_write_string parses again to the same
 *      bytes. On failure the message must be "column N: ..." with N inside
 *      the input (or 1 past it) and the line within the input's lines.
 *      The raw input written as a string must always parse back (to itself
 *      when it is valid UTF-8).
 *   2. wl_parse_buffer over the bytes (the in-memory twin of wl_load). On
 *      success the workload must satisfy every documented invariant (ranges,
 *      non-empty NUL-free texts, sorted arrivals, unique ids, a 64-digit hash);
 *      on failure the message must start with "fuzz:".
 *   3. wl_attach_meta over the bytes as the sidecar of a fixed one-request
 *      trace. On success the kept text must be the input without trailing
 *      whitespace; on failure the message must start with "fuzz.meta.json:"
 *      and the workload must keep no sidecar.
 *   4. trace_len_parse on the first line as a spec; on success draws must lie
 *      in [1, max].
 * Seeds: tests/fuzz/corpus/jsonl/.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"
#include "jsonx.h"
#include "trace_gen.h"
#include "workload.h"

/* Abort (a finding) when a property fails: libFuzzer records the input. */
static void require(int cond) {
    if (!cond) abort();
}

/* Write s with jx_write_string as the value of {"k": ...}; parse it back and
 * return the value's copy (malloc'd, *len bytes), or NULL if it did not parse. */
static char *roundtrip(const char *s, size_t n, size_t *len) {
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    require(f != NULL);
    fputs("{\"k\": ", f);
    require(jx_write_string(f, s, n) == 0);
    fputc('}', f);
    fclose(f);
    json_t *o;
    char err[256];
    char *out = NULL;
    if (jx_parse_object(buf, blen, &o, NULL, err, sizeof err) == 0) {
        const json_t *k = json_object_get(o, "k");
        require(json_is_string(k));
        *len = json_string_length(k);
        out = malloc(*len + 1);
        require(out != NULL);
        memcpy(out, json_string_value(k), *len + 1);
        json_decref(o);
    }
    free(buf);
    return out;
}

/* Is s[0, n) valid UTF-8? (jansson's own check, through json_stringn.) */
static int valid_utf8(const char *s, size_t n) {
    json_t *v = json_stringn(s, n);
    json_decref(v);
    return v != NULL;
}

/* Property checks on one parsed object. */
static void check_object(const uint8_t *data, size_t size) {
    json_t *o = (json_t *)1;
    char err[256];
    int line = 0;
    int rc = jx_parse_object((const char *)data, size, &o, &line, err, sizeof err);
    if (rc != 0) {
        unsigned long col = 0;
        size_t lines = 1;
        for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
        require(rc == CX_EFORMAT && o == NULL && sscanf(err, "column %lu: ", &col) == 1 && col >= 1 && col <= size + 1);
        require(line >= 1 && (size_t)line <= lines);
    } else {
        require(json_is_object(o));
        const char *key;
        json_t *v;
        json_object_foreach(o, key, v) {
            require(json_object_get(o, key) == v);
            if (json_is_string(v)) {
                size_t n = json_string_length(v), len = 0;
                char *back = roundtrip(json_string_value(v), n, &len); /* valid UTF-8 by construction */
                require(back && len == n && memcmp(back, json_string_value(v), n) == 0);
                free(back);
            } else if (json_is_number(v)) {
                double x = json_number_value(v);
                require(json_is_real(v) && x == x && x - x == 0); /* a finite double (JSON_DECODE_INT_AS_REAL) */
            }
        }
        json_decref(o);
    }
    /* The raw input written as a string gives parseable JSON: the same bytes
     * when they are valid UTF-8. */
    size_t len = 0;
    char *back = roundtrip((const char *)data, size, &len);
    require(back != NULL);
    if (valid_utf8((const char *)data, size)) require(len == size && memcmp(back, data, size) == 0);
    free(back);
}

/* Property checks on the workload loader. */
static void check_workload(const uint8_t *data, size_t size) {
    wl_workload w;
    char err[512];
    int rc = wl_parse_buffer((const char *)data, size, "fuzz", &w, err, sizeof err);
    if (rc != 0) {
        require(rc < 0 && strncmp(err, "fuzz:", 5) == 0 && w.n == 0 && w.req == NULL);
        return;
    }
    require(w.n >= 1 && (w.kind == WL_PROMPTS || w.kind == WL_TRACE));
    require(strlen(w.sha256) == 64 && strcmp(w.source, "fuzz") == 0);
    for (size_t i = 0; i < w.n; i++) {
        const wl_request *r = &w.req[i];
        require(r->id && r->id[0] && r->text && r->text_len > 0 && strlen(r->text) == r->text_len);
        require(r->max_tokens >= 1 && r->max_tokens <= WL_MAX_TOKENS);
        require(r->line >= 1 && (i == 0 || r->line > w.req[i - 1].line));
        if (w.kind == WL_TRACE) {
            require(r->arrival_s >= 0 && (i == 0 || r->arrival_s >= w.req[i - 1].arrival_s));
            require(r->adapter >= 0 && r->adapter <= WL_MAX_ADAPTER);
            require(r->prompt_len >= 1 && r->prompt_len <= WL_MAX_TOKENS);
        } else {
            require(r->adapter == -1 && r->prompt_len == 0 && r->arrival_s == 0);
        }
        for (size_t j = 0; j < i && w.n <= 2000; j++) require(strcmp(w.req[j].id, r->id) != 0);
    }
    wl_free(&w);
}

/* Property checks on the sidecar reader, against a fixed loaded trace. */
static void check_meta(const uint8_t *data, size_t size) {
    static const char trace[] =
        "{\"id\": \"r1\", \"arrival_s\": 0.5, \"adapter\": 1, \"prompt_len\": 4, \"max_tokens\": 2, \"text\": \"hi\"}\n";
    wl_workload w;
    char err[512];
    require(wl_parse_buffer(trace, sizeof trace - 1, "fuzz", &w, err, sizeof err) == 0 && w.meta == NULL);
    int rc = wl_attach_meta(&w, (const char *)data, size, "fuzz.meta.json", err, sizeof err);
    if (rc != 0) {
        require(rc < 0 && strncmp(err, "fuzz.meta.json:", 15) == 0 && w.meta == NULL);
    } else {
        size_t n = size;
        while (n > 0 && (data[n - 1] == ' ' || data[n - 1] == '\t' || data[n - 1] == '\r' || data[n - 1] == '\n')) n--;
        require(w.meta && size <= WL_META_MAX && strlen(w.meta) == n && memcmp(w.meta, data, n) == 0);
    }
    wl_free(&w);
}

/* Property checks on the length-distribution spec parser. */
static void check_len_spec(const uint8_t *data, size_t size) {
    char spec[128];
    size_t n = 0;
    while (n < size && n < sizeof spec - 1 && data[n] != '\n' && data[n] != 0) {
        spec[n] = (char)data[n];
        n++;
    }
    spec[n] = 0;
    trace_len d;
    char err[256];
    if (trace_len_parse(spec, "--gen-len", &d, err, sizeof err) != 0) {
        require(strncmp(err, "--gen-len: '", 12) == 0);
        return;
    }
    rng r;
    rng_seed(&r, n, 0);
    int hi = d.max ? d.max : TRACE_MAX_LEN;
    for (int i = 0; i < 8; i++) {
        int v = trace_len_draw(&d, &r);
        require(v >= 1 && v <= hi);
    }
    char buf[128];
    trace_len_format(&d, buf, sizeof buf);
    trace_len d2;
    require(trace_len_parse(buf, "--gen-len", &d2, err, sizeof err) == 0 && d2.kind == d.kind && d2.a == d.a &&
            d2.b == d.b && d2.max == d.max);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* libFuzzer entry: the same bytes through all four parsers. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_object(data, size);
    check_workload(data, size);
    check_meta(data, size);
    check_len_spec(data, size);
    return 0;
}
