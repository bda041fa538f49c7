/*
 * endpoint.h - `cortex-bench run --endpoint URL`: the same prompt sets and
 * traces the in-process run serves, replayed over HTTP against any
 * OpenAI-compatible server (cortex serve, vLLM, llama.cpp's llama-server),
 * every time measured on the client (docs/harness.md, "Measuring a server
 * over HTTP").
 *
 *   - before anything is stored, ep_probe asks URL/models (the server's
 *     identity: its model list and Server header; an unreachable server, a
 *     refused API key or an answer that is not a model list is one error),
 *     whether ROOT/metrics answers (ROOT: URL without its "/v1"), and the
 *     server's build where it tells it (ROOT/props: llama-server's
 *     build_info; else ROOT/version: vLLM's and SGLang's version);
 *   - each request is a streamed POST URL/completions (oai.h) on the libcurl
 *     multi interface, all in flight on one thread: closed loop (cfg
 *     concurrency clients) or open loop (trace arrival times, or Poisson
 *     arrivals at cfg->rate), as serve.c issues them to the scheduler;
 *   - with the server cache off (the default), each request asks the server
 *     not to reuse cached prompts ("cache_prompt": false and a "cache_salt"
 *     no other request carries: oai_completion_body);
 *   - per request: TTFT to the first chunk with text, ITL between chunks
 *     with text (one token each, as vLLM's benchmark_serving counts), E2E to
 *     "data: [DONE]", token totals from the server's usage, the prompt
 *     tokens it says its cache served, its system_fingerprint; HTTP 429 is
 *     recorded as rejected, any other failure (status, dropped connection,
 *     a stream without [DONE], an error in the stream) as failed, a trace
 *     deadline passed as timeout;
 *   - with /metrics, a scrape before and after each repetition; the series
 *     that changed are the repetition's server metrics (prom.h).
 */
#ifndef CB_ENDPOINT_H
#define CB_ENDPOINT_H

#include <stddef.h>

#include "prom.h"
#include "runner.h"
#include "workload.h"

#define EP_MAX_ADAPTERS 1024

typedef struct ep_target {
    char base[512];         /* the API base, no trailing '/': "http://127.0.0.1:8080/v1" */
    char metrics_url[600];  /* ROOT/metrics */
    const char *api_key;    /* "Authorization: Bearer KEY"; NULL: none */
    char model[256];        /* --model, or the first model /v1/models lists */
    char *adapters[EP_MAX_ADAPTERS]; /* model names of trace adapter ids 1..n_adapters (--adapter-names) */
    int n_adapters;
    char server[256];       /* the Server header ("" when none) and the model ids, for comparability */
    char *info;             /* JSON: {"url", "server", "models": the /v1/models answer}, malloc'd */
    int has_metrics;        /* ROOT/metrics answered 200 at the probe */
    char build[128];        /* the server's build from ROOT/props or ROOT/version ("" when neither says) */
    int server_cache;       /* 1: --server-cache on (the server's own policy); 0: each request asks it off */
    char salt[64];          /* what makes this process's cache salts unique: its pid and start time */
    int model_unlisted;     /* --model is not among the listed models (llama-server takes any name; vLLM 404s) */
} ep_target;

/* Check and keep the URL (http:// or https://, a host; a trailing '/' is
 * dropped) and the API key; no network yet. 0, or -1 with the problem in err. */
int ep_init(ep_target *t, const char *url, const char *api_key, char *err, size_t errlen);
/* --adapter-names NAME1,NAME2,...: the models of adapter ids 1, 2, ... 0 or -1. */
int ep_set_adapters(ep_target *t, const char *list, char *err, size_t errlen);
/* Every request's model is known: adapter ids 0 (and prompt sets) go to
 * t->model, ids 1..n_adapters to their names; another id is an error naming
 * the request. 0 or -1. */
int ep_check_workload(const ep_target *t, const wl_workload *wl, char *err, size_t errlen);
/* Ask the server (see above); `model` (NULL: take the first listed) becomes
 * t->model. 0, or -1 with one sentence naming the URL in err. */
int ep_probe(ep_target *t, const char *model, char *err, size_t errlen);
/* The model name a request with adapter id `adapter` is sent to. */
const char *ep_model_of(const ep_target *t, int adapter);
/* Scrape ROOT/metrics into *out; 0, or -1 (no scrape: *out empty). */
int ep_scrape(const ep_target *t, prom_scrape *out);
/* Free what ep_init, ep_set_adapters and ep_probe allocated. */
void ep_free(ep_target *t);

/* GET url (with t's API key) into a malloc'd NUL-terminated *body (*len
 * bytes, at most 16 MiB), its status into *status and its Server header into
 * server (may be NULL). 0, or -1 when no HTTP answer came (err: curl's reason). */
int ep_get(const ep_target *t, const char *url, char **body, size_t *len, long *status, char *server, size_t server_cap,
           char *err, size_t errlen);

/* endpoint_rep.c: one repetition of `wl` against t (see above): fills
 * out->req, the request counts' metrics, out->srv and out->server_build (the
 * system_fingerprints the answers carried); *makespan_ms from the
 * first issue to the last request's end. -1 only when the client itself
 * fails (no memory, libcurl refuses); a server's failures are per request. */
int endpoint_rep(const ep_target *t, const wl_workload *wl, const run_config *cfg, rep_result *out, double *makespan_ms,
                 char *err, size_t errlen);

#endif
