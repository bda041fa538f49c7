/*
 * fuzz_jsonl.c - libFuzzer target for cortex-bench's workload input path:
 * any byte string given to the JSON object parser, the JSONL workload loader
 * and the length-distribution spec parser must give either a valid result or
 * one error message, never a crash, an out-of-bounds access, undefined
 * behaviour or a leak.
 *
 * Per input:
 *   1. json_parse_object over the bytes. On success every field's key and
 *      string must be NUL-terminated at their stated lengths, json_get must
 *      find each key (keys without NUL bytes), and every string written back
 *      with json_write_string must parse again to the same bytes.
 *      On failure the message must start with "column N: " inside the input.
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

#include "json.h"
#include "trace_gen.h"
#include "workload.h"

/* Abort (a finding) when a property fails: libFuzzer records the input. */
static void require(int cond) {
    if (!cond) abort();
}

/* Write a string with json_write_string, parse {"k": <it>} back, compare. */
static void check_roundtrip(const char *s, size_t n) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    require(f != NULL);
    fputs("{\"k\": ", f);
    json_write_string(f, s, n);
    fputc('}', f);
    fclose(f);
    json_obj o;
    char err[256];
    require(json_parse_object(buf, len, &o, err, sizeof err) == 0);
    const json_field *k = json_get(&o, "k");
    require(k && k->type == JSON_STRING && k->str_len == n && memcmp(k->str, s, n) == 0);
    json_obj_free(&o);
    free(buf);
}

/* Property checks on one parsed object. */
static void check_object(const uint8_t *data, size_t size) {
    json_obj o;
    char err[256];
    int rc = json_parse_object((const char *)data, size, &o, err, sizeof err);
    if (rc != 0) {
        unsigned long col = 0;
        require(sscanf(err, "column %lu: ", &col) == 1 && col >= 1 && col <= size + 1);
        require(o.n == 0 && o.fields == NULL);
        return;
    }
    require(o.n <= JSON_MAX_FIELDS);
    for (size_t i = 0; i < o.n; i++) {
        const json_field *f = &o.fields[i];
        require(f->key && f->key[f->key_len] == 0 && f->col >= 1 && f->col <= size);
        if (strlen(f->key) == f->key_len) require(json_get(&o, f->key) == f);
        if (f->type == JSON_STRING) {
            require(f->str && f->str[f->str_len] == 0);
            check_roundtrip(f->str, f->str_len); /* valid UTF-8 by construction */
        } else {
            require(f->str == NULL);
        }
        if (f->type == JSON_NUMBER) require(f->number == f->number && f->number - f->number == 0); /* finite */
    }
    json_obj_free(&o);
    /* Writing the raw input as a string must also give parseable JSON. */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    require(f != NULL);
    fputs("{\"raw\": ", f);
    json_write_string(f, (const char *)data, size);
    fputc('}', f);
    fclose(f);
    require(json_parse_object(buf, len, &o, err, sizeof err) == 0);
    json_obj_free(&o);
    free(buf);
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
