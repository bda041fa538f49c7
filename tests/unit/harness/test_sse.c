/*
 * test_sse.c - what `cortex-bench run --endpoint` reads from a server: the
 * Server-Sent Events framing (sse.c) fed whole and split at every byte,
 * the OpenAI bodies (oai.c: completions, streamed chat, usage, errors,
 * [DONE], model lists) and the Prometheus text with the difference of two
 * scrapes (prom.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oai.h"
#include "prom.h"
#include "results.h"
#include "sse.h"
#include "testing.h"

/* Events collected by the callback: "name|data" lines joined with '\n'. */
typedef struct sink {
    char buf[4096];
    size_t len;
    int stop_after; /* stop (return 7) once this many events came; 0: never */
    int n;
} sink;

static int collect(void *user, const char *event, const char *data, size_t n) {
    sink *s = user;
    CHECK(data[n] == 0, "data is NUL-terminated");
    s->len += (size_t)snprintf(s->buf + s->len, sizeof s->buf - s->len, "%s|%.*s\n", event, (int)n, data);
    s->n++;
    return s->stop_after && s->n >= s->stop_after ? 7 : 0;
}

/* Parse `in` in pieces of `step` bytes (0: whole); the events, and whether something was left open. */
static void parse(const char *in, size_t step, sink *s, int *open) {
    sse_parser p;
    memset(s, 0, sizeof *s);
    sse_init(&p, collect, s);
    size_t n = strlen(in);
    for (size_t at = 0; at < n;) {
        size_t k = step && n - at > step ? step : n - at;
        int rc = sse_feed(&p, in + at, k);
        CHECK(rc == 0, "feed at %zu", at);
        at += k;
    }
    *open = sse_finish(&p);
    sse_free(&p);
}

static void test_sse_framing(void) {
    static const struct { const char *in, *want; int open; } cases[] = {
        {"data: {\"a\":1}\n\ndata: [DONE]\n\n", "|{\"a\":1}\n|[DONE]\n", 0},
        {"data: one\r\n\r\ndata: two\r\rdata:three\n\n", "|one\n|two\n|three\n", 0},
        {": keep-alive\n\ndata: x\n\n", "|x\n", 0},                  /* a comment alone dispatches nothing */
        {"data: a\ndata: b\n\n", "|a\nb\n", 0},                      /* data lines joined with \n */
        {"event: error\ndata: {\"m\":1}\n\ndata: y\n\n", "error|{\"m\":1}\n|y\n", 0}, /* the name resets */
        {"id: 5\nretry: 10\nfoo: bar\ndata:  two spaces\n\n", "| two spaces\n", 0}, /* one space dropped */
        {"data\n\n", "|\n", 0},                                      /* a field with no colon: empty data */
        {"\xEF\xBB\xBF" "data: bom\n\n", "|bom\n", 0},              /* a leading BOM */
        {"data: done\n\ndata: cut", "|done\n", 1},                   /* unterminated: dropped, reported */
        {"data: half\n", "", 1},                                     /* no empty line: not dispatched */
        {"\n\n\n", "", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (size_t step = 0; step <= 3; step++) { /* whole, then split at every 1, 2, 3 bytes */
            sink s;
            int open;
            parse(cases[i].in, step, &s, &open);
            CHECK(!strcmp(s.buf, cases[i].want), "case %zu step %zu: got '%s'", i, step, s.buf);
            CHECK(open == cases[i].open, "case %zu step %zu: open %d", i, step, open);
        }
    /* the callback's non-zero value stops the feed and comes back */
    sink s = {.stop_after = 1};
    sse_parser p;
    sse_init(&p, collect, &s);
    CHECK(sse_feed(&p, "data: 1\n\ndata: 2\n\n", 18) == 7 && s.n == 1, "stopped after one event (%d)", s.n);
    sse_free(&p);
    /* a line over SSE_MAX_LINE is an error, not unbounded memory */
    char *big = malloc(SSE_MAX_LINE + 16);
    memset(big, 'x', SSE_MAX_LINE + 16);
    memcpy(big, "data: ", 6);
    sse_init(&p, collect, &s);
    CHECK(sse_feed(&p, big, SSE_MAX_LINE + 16) == -1, "an over-long line is refused");
    sse_free(&p);
    free(big);
}

static void test_oai_chunks(void) {
    oai_chunk c;
    char err[200];
    const char *cmpl = "{\"choices\":[{\"index\":0,\"text\":\" Hello\",\"finish_reason\":null}]}";
    CHECK(oai_parse_chunk(cmpl, strlen(cmpl), &c, err, sizeof err) == 0 && !strcmp(c.text, " Hello") &&
              c.text_len == 6 && !c.finish && !c.has_usage && !c.done && !c.error, "completion chunk");
    oai_chunk_free(&c);
    const char *chat = "{\"choices\":[{\"delta\":{\"content\":\"a\\u00e9\"},\"finish_reason\":\"stop\"}]}";
    CHECK(oai_parse_chunk(chat, strlen(chat), &c, err, sizeof err) == 0 && !strcmp(c.text, "a\xC3\xA9") &&
              c.finish && !strcmp(c.finish, "stop"), "chat delta, unescaped");
    oai_chunk_free(&c);
    const char *role = "{\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}";
    CHECK(oai_parse_chunk(role, strlen(role), &c, err, sizeof err) == 0 && c.text_len == 0, "a chunk with no text");
    oai_chunk_free(&c);
    const char *usage = "{\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":34,\"total_tokens\":46}}";
    CHECK(oai_parse_chunk(usage, strlen(usage), &c, err, sizeof err) == 0 && c.has_usage && c.prompt_tokens == 12 &&
              c.completion_tokens == 34 && c.text_len == 0, "usage chunk");
    oai_chunk_free(&c);
    const char *nul = "{\"usage\":null,\"choices\":[{\"text\":\"x\"}]}";
    CHECK(oai_parse_chunk(nul, strlen(nul), &c, err, sizeof err) == 0 && !c.has_usage, "usage null");
    oai_chunk_free(&c);
    const char *bad_usage = "{\"usage\":{\"prompt_tokens\":-1,\"completion_tokens\":2.5}}";
    CHECK(oai_parse_chunk(bad_usage, strlen(bad_usage), &c, err, sizeof err) == 0 && !c.has_usage, "counts not counts");
    oai_chunk_free(&c);
    const char *msg = "{\"choices\":[{\"message\":{\"content\":\"whole\"}}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}";
    CHECK(oai_parse_chunk(msg, strlen(msg), &c, err, sizeof err) == 0 && !strcmp(c.text, "whole") && c.has_usage,
          "a whole chat completion");
    oai_chunk_free(&c);
    CHECK(oai_parse_chunk(" [DONE] ", 8, &c, err, sizeof err) == 0 && c.done, "[DONE]");
    oai_chunk_free(&c);
    const char *e1 = "{\"error\":{\"message\":\"boom\",\"code\":500}}", *e2 = "{\"object\":\"error\",\"message\":\"vllm says\"}";
    CHECK(oai_parse_chunk(e1, strlen(e1), &c, err, sizeof err) == 0 && c.error && !strcmp(c.error, "boom"), "error object");
    oai_chunk_free(&c);
    CHECK(oai_parse_chunk(e2, strlen(e2), &c, err, sizeof err) == 0 && c.error && !strcmp(c.error, "vllm says"),
          "vLLM's error form");
    oai_chunk_free(&c);
    CHECK(oai_parse_chunk("[1,2]", 5, &c, err, sizeof err) == -1 && !c.root, "an array is not a chunk");
    CHECK(oai_parse_chunk("{\"a\":", 5, &c, err, sizeof err) == -1 && !strncmp(err, "not a JSON object", 17), "%s", err);

    /* the server's prompt cache: OpenAI/vLLM's cached_tokens, llama-server's cache_n, the larger of both */
    const char *cu = "{\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":2,"
                     "\"prompt_tokens_details\":{\"cached_tokens\":32}}}";
    CHECK(oai_parse_chunk(cu, strlen(cu), &c, err, sizeof err) == 0 && c.has_cached && c.cached_tokens == 32 && c.has_usage,
          "usage.prompt_tokens_details.cached_tokens");
    oai_chunk_free(&c);
    const char *cn = "{\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}],\"timings\":{\"cache_n\":17,\"prompt_n\":3}}";
    CHECK(oai_parse_chunk(cn, strlen(cn), &c, err, sizeof err) == 0 && c.has_cached && c.cached_tokens == 17,
          "llama-server's timings.cache_n");
    oai_chunk_free(&c);
    const char *both = "{\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":0}},\"timings\":{\"cache_n\":9}}";
    CHECK(oai_parse_chunk(both, strlen(both), &c, err, sizeof err) == 0 && c.has_cached && c.cached_tokens == 9,
          "both: the larger");
    oai_chunk_free(&c);
    const char *zero = "{\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":0}}}";
    CHECK(oai_parse_chunk(zero, strlen(zero), &c, err, sizeof err) == 0 && c.has_cached && c.cached_tokens == 0,
          "zero cached tokens is a count");
    oai_chunk_free(&c);
    const char *junk = "{\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":-3}},\"timings\":{\"cache_n\":\"7\"},"
                       "\"system_fingerprint\":\"\"}";
    CHECK(oai_parse_chunk(junk, strlen(junk), &c, err, sizeof err) == 0 && !c.has_cached && !c.fingerprint,
          "a negative count, a string count and an empty fingerprint are nothing");
    oai_chunk_free(&c);
    const char *nodet = "{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"prompt_tokens_details\":null},"
                        "\"timings\":[],\"system_fingerprint\":null}";
    CHECK(oai_parse_chunk(nodet, strlen(nodet), &c, err, sizeof err) == 0 && !c.has_cached && !c.fingerprint &&
              !c.has_timings, "vLLM without --enable-prompt-tokens-details: no count");
    oai_chunk_free(&c);
    /* speculative decoding: llama-server's timings.draft_n and draft_n_accepted, both counts or nothing */
    const char *dr = "{\"choices\":[],\"timings\":{\"predicted_n\":64,\"draft_n\":40,\"draft_n_accepted\":31}}";
    CHECK(oai_parse_chunk(dr, strlen(dr), &c, err, sizeof err) == 0 && c.has_draft && c.draft_n == 40 &&
              c.draft_accepted == 31, "timings.draft_n and draft_n_accepted");
    oai_chunk_free(&c);
    const char *bad_dr[] = {"{\"timings\":{\"draft_n\":4}}", "{\"timings\":{\"draft_n\":4,\"draft_n_accepted\":5}}",
                            "{\"timings\":{\"draft_n\":-1,\"draft_n_accepted\":0}}",
                            "{\"timings\":{\"draft_n\":\"4\",\"draft_n_accepted\":1}}", "{\"draft_n\":4,\"draft_n_accepted\":1}"};
    for (int i = 0; i < 5; i++) {
        CHECK(oai_parse_chunk(bad_dr[i], strlen(bad_dr[i]), &c, err, sizeof err) == 0 && !c.has_draft && !c.draft_n &&
                  !c.draft_accepted, "no draft counts from %s (one alone, more accepted than drafted, negative, text,"
                  " outside timings)", bad_dr[i]);
        oai_chunk_free(&c);
    }
    const char *fp = "{\"choices\":[{\"text\":\"x\"}],\"system_fingerprint\":\"b4567-abc1234\"}";
    CHECK(oai_parse_chunk(fp, strlen(fp), &c, err, sizeof err) == 0 && c.fingerprint && !strcmp(c.fingerprint, "b4567-abc1234"),
          "system_fingerprint");
    oai_chunk_free(&c);

    char *body = oai_completion_body("m\"x", "say \"hi\"\n", 9, 16, 0.0, 1, NULL);
    CHECK(body && strstr(body, "\"prompt\":\"say \\\"hi\\\"\\n\"") && strstr(body, "\"model\":\"m\\\"x\"") &&
              strstr(body, "\"max_tokens\":16") && strstr(body, "\"stream\":true") &&
              strstr(body, "\"stream_options\":{\"include_usage\":true}") && strstr(body, "\"ignore_eos\":true") &&
              strstr(body, "\"temperature\":0"), "request body: %s", body ? body : "(null)");
    CHECK(body && !strstr(body, "cache_prompt") && !strstr(body, "cache_salt"), "server cache on: nothing asked");
    free(body);
    body = oai_completion_body("m", "p", 1, 1, 0.0, 0, "salt-1");
    CHECK(body && !strstr(body, "ignore_eos"), "no ignore_eos when the end of text is respected");
    CHECK(body && strstr(body, "\"cache_prompt\":false") && strstr(body, "\"cache_salt\":\"salt-1\""),
          "server cache off: cache_prompt false and the salt: %s", body ? body : "(null)");
    free(body);

    char build[24];
    const char *props = "{\"default_generation_settings\":{},\"build_info\":\"b6000-0123abcd\"}";
    CHECK(oai_server_build(props, strlen(props), build, sizeof build) == 1 && !strcmp(build, "b6000-0123abcd"),
          "llama-server's /props build_info: '%s'", build);
    CHECK(oai_server_build("{\"version\":\"0.10.1\"}", 20, build, sizeof build) == 1 && !strcmp(build, "version 0.10.1"),
          "vLLM's /version: '%s'", build);
    const char *ctl = "{\"build_info\":\"b1\\nwith a very long tail that does not fit\"}";
    CHECK(oai_server_build(ctl, strlen(ctl), build, sizeof build) == 1 && strlen(build) == sizeof build - 1 &&
              !strchr(build, '\n'), "control characters flattened, truncated to the buffer: '%s'", build);
    CHECK(oai_server_build("{\"build_info\":3,\"version\":\"\"}", 29, build, sizeof build) == 0 && !build[0],
          "no build: a number, an empty version");
    CHECK(oai_server_build("<html>404</html>", 16, build, sizeof build) == 0 && !build[0], "a 404 page: no build");

    char list[24] = "";
    rep_add_build(list, sizeof list, "b1");
    rep_add_build(list, sizeof list, "b2");
    rep_add_build(list, sizeof list, "b1");
    CHECK(!strcmp(list, "b1, b2"), "distinct builds: '%s'", list);
    rep_add_build(list, sizeof list, "a-build-too-long");
    rep_add_build(list, sizeof list, "b3");
    CHECK(!strcmp(list, "b1, b2, ..."), "more than fit: '%s'", list);

    char **ids;
    int n;
    const char *models = "{\"object\":\"list\",\"data\":[{\"id\":\"a\"},{\"x\":1},{\"id\":\"b\"}]}";
    CHECK(oai_parse_models(models, strlen(models), &ids, &n, err, sizeof err) == 0 && n == 2 && !strcmp(ids[0], "a") &&
              !strcmp(ids[1], "b"), "model list");
    oai_models_free(ids, n);
    CHECK(oai_parse_models("{\"data\":3}", 10, &ids, &n, err, sizeof err) == -1 && !ids, "not a model list");
    char out[32];
    oai_error_message(e1, strlen(e1), out, sizeof out);
    CHECK(!strcmp(out, "boom"), "error message: '%s'", out);
    oai_error_message("<html>\n<b>Bad Gateway</b>", 25, out, sizeof out);
    CHECK(!strcmp(out, "<html> <b>Bad Gateway</b>"), "a non-JSON body, flattened: '%s'", out);
    oai_error_message("0123456789012345678901234567890123456789", 40, out, 8);
    CHECK(!strcmp(out, "0123456"), "truncated to the buffer: '%s'", out);
}

static void test_prom(void) {
    const char *a = "# HELP x help\n# TYPE x counter\nx 1\n"
                    "vllm:tokens_total{model_name=\"m\",path=\"/v1 {odd}\"} 10 1700000000000\n"
                    "  g{l=\"q\\\"}\"} NaN\n"
                    "bad line\n"
                    "inf_total +Inf\n"
                    "x 99\n"; /* a duplicate: the first kept */
    prom_scrape p, q;
    CHECK(prom_parse(a, strlen(a), &p) == 0 && p.n == 4, "4 series (%d)", p.n);
    CHECK(p.n == 4 && !strcmp(p.s[0].name, "g{l=\"q\\\"}\"}") && isnan(p.s[0].value), "escaped quote in a label");
    CHECK(p.n == 4 && !strcmp(p.s[1].name, "inf_total") && isinf(p.s[1].value), "+Inf");
    CHECK(p.n == 4 && !strcmp(p.s[2].name, "vllm:tokens_total{model_name=\"m\",path=\"/v1 {odd}\"}") &&
              p.s[2].value == 10, "labels with spaces and braces, timestamp ignored");
    CHECK(p.n == 4 && !strcmp(p.s[3].name, "x") && (p.s[3].value == 1 || p.s[3].value == 99), "x");
    const char *b = "x 5\nvllm:tokens_total{model_name=\"m\",path=\"/v1 {odd}\"} 10\ng{l=\"q\\\"}\"} NaN\nnew_total 3\n";
    CHECK(prom_parse(b, strlen(b), &q) == 0 && q.n == 4, "second scrape");
    prom_delta *d;
    int n;
    CHECK(prom_diff(&p, &q, &d, &n) == 0 && n == 2, "two series changed (%d)", n);
    CHECK(n == 2 && !strcmp(d[0].name, "new_total") && isnan(d[0].before) && d[0].delta == 3, "a new counter from 0");
    CHECK(n == 2 && !strcmp(d[1].name, "x") && d[1].after == 5 && d[1].delta == 5 - d[1].before, "x changed");
    prom_delta_free(d, n);
    CHECK(prom_diff(&q, &q, &d, &n) == 0 && n == 0 && !d, "no change, no rows");
    prom_free(&p);
    prom_free(&q);
    CHECK(prom_parse("", 0, &p) == 0 && p.n == 0, "empty scrape");
    prom_free(&p);
}

TEST_MAIN({
    test_sse_framing();
    test_oai_chunks();
    test_prom();
})
