/*
 * fuzz_sse.c - libFuzzer target for what `cortex-bench run --endpoint` reads
 * from a server: any bytes as an event stream (sse.c) and each event's data
 * as an OpenAI payload (oai.c), the bytes as a model list and an error body,
 * and as Prometheus text with a scrape difference (prom.c). A server is
 * untrusted input: each must give a result or an error, never a crash, an
 * out-of-bounds access, undefined behaviour or a leak.
 *
 * Per input:
 *   1. The bytes fed to an SSE parser whole and, in a second parser, in
 *      pieces whose sizes come from the input itself: both must dispatch the
 *      same events (same count, same bytes) and agree on sse_finish. Every
 *      event's data is NUL-terminated at its length and parsed with
 *      oai_parse_chunk: on success text is NUL-terminated at text_len,
 *      counts (usage, cached prompt tokens) are non-negative and a
 *      system_fingerprint is non-empty and stays within a short list of
 *      builds (rep_add_build); on failure the message is non-empty.
 *   2. oai_parse_models: on success every id is a string; oai_error_message
 *      and oai_server_build (a /props or /version answer) into small buffers
 *      stay within them.
 *   3. prom_parse: series sorted and unique, names shorter than
 *      PROM_MAX_NAME; prom_diff of the scrape with itself is empty.
 * Seeds: tests/fuzz/corpus/sse/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "oai.h"
#include "prom.h"
#include "results.h"
#include "sse.h"

/* Abort (a finding) when a property fails: libFuzzer records the input. */
static void require(int cond) {
    if (!cond) abort();
}

/* The events of one parse: a running hash of their bytes, and their count. */
typedef struct seen {
    uint64_t hash;
    size_t n;
} seen;

/* sse_event_fn: check the data, parse it as a payload, fold it into the hash. */
static int on_event(void *user, const char *event, const char *data, size_t n) {
    seen *s = user;
    require(data[n] == 0 && strlen(event) < 64);
    for (size_t i = 0; i < n; i++) s->hash = (s->hash ^ (uint8_t)data[i]) * 1099511628211ull;
    s->hash = (s->hash ^ 0xff) * 1099511628211ull;
    s->n++;
    oai_chunk c;
    char err[160] = "";
    if (oai_parse_chunk(data, n, &c, err, sizeof err) == 0) {
        require(c.text && c.text[c.text_len] == 0);
        require(!c.has_usage || (c.prompt_tokens >= 0 && c.completion_tokens >= 0));
        require(!c.has_cached || c.cached_tokens >= 0);
        if (c.fingerprint) {
            char fp[24], list[40];
            require(c.fingerprint[0] != 0);
            memset(list, 'z', sizeof list);
            list[0] = 0;
            oai_clean_text(c.fingerprint, strlen(c.fingerprint), fp, sizeof fp);
            require(strlen(fp) < sizeof fp);
            rep_add_build(list, 32, fp);
            rep_add_build(list, 32, "another");
            rep_add_build(list, 32, fp);
            require(strlen(list) < 32 && list[39] == 'z');
        }
        oai_chunk_free(&c);
    } else {
        require(err[0] != 0 && c.root == NULL);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *p = (const char *)data;
    seen whole = {1469598103934665603ull, 0}, split = {1469598103934665603ull, 0};
    sse_parser a, b;
    sse_init(&a, on_event, &whole);
    sse_init(&b, on_event, &split);
    int ra = sse_feed(&a, p, size);
    int rb = 0;
    for (size_t at = 0, k = 0; at < size && !rb; k++) { /* piece sizes 1..8 from the bytes themselves */
        size_t step = 1 + (size_t)(data[k % size] & 7);
        if (step > size - at) step = size - at;
        rb = sse_feed(&b, p + at, step);
        at += step;
    }
    require(ra == rb);
    if (ra == 0) require(whole.n == split.n && whole.hash == split.hash && sse_finish(&a) == sse_finish(&b));
    sse_free(&a);
    sse_free(&b);

    char **ids;
    int n_ids;
    char err[160];
    if (oai_parse_models(p, size, &ids, &n_ids, err, sizeof err) == 0) {
        for (int i = 0; i < n_ids; i++) require(ids[i] != NULL);
        oai_models_free(ids, n_ids);
    }
    char msg[9];
    memset(msg, 'z', sizeof msg);
    oai_error_message(p, size, msg, 8);
    require(msg[8] == 'z' && strlen(msg) < 8);
    memset(msg, 'z', sizeof msg);
    int got = oai_server_build(p, size, msg, 8);
    require(msg[8] == 'z' && strlen(msg) < 8 && got == (msg[0] != 0));

    prom_scrape s;
    if (prom_parse(p, size, &s) == 0) {
        for (int i = 0; i < s.n; i++) {
            require(strlen(s.s[i].name) < PROM_MAX_NAME);
            if (i) require(strcmp(s.s[i - 1].name, s.s[i].name) < 0);
        }
        prom_delta *d;
        int n;
        require(prom_diff(&s, &s, &d, &n) == 0 && n == 0 && d == NULL);
        prom_free(&s);
    }
    return 0;
}
