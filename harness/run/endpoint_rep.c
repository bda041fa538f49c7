/*
 * endpoint_rep.c - one repetition of a prompt set or trace over HTTP (see
 * endpoint.h): every request a streamed completion on one libcurl multi
 * handle, issued closed loop or open loop as serve.c issues them to the
 * scheduler, each chunk timed as it arrives.
 */
#include <curl/curl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "endpoint.h"
#include "oai.h"
#include "sse.h"
#include "stats.h"
#include "hx_err.h"

#define EP_MAX_BODY (4u << 20) /* bytes of a non-streamed answer kept (a whole completion, an error page) */

struct ep_rep;

/* One request of the replay while it is in flight. */
typedef struct ep_req {
    struct ep_rep *rep;
    int idx;
    CURL *h;
    struct curl_slist *hdrs;
    char *body;                 /* the POST body (oai_completion_body) */
    sse_parser sp;
    long status;                /* the HTTP status, once the first body bytes came */
    int is_sse;                 /* Content-Type: text/event-stream */
    char *raw;                  /* a body that is not an event stream, up to EP_MAX_BODY */
    size_t raw_len, raw_cap;
    double issue_ms, first_ms, last_ms, end_ms; /* absolute, runner_now_ms */
    int chunks, done, has_usage;
    long usage_prompt, usage_gen;
    double srv_prompt_ms, srv_queue_ms, srv_ttft_ms; /* the server's "timings" (NAN: it sent none) */
    long cached;                /* prompt tokens the server says its cache served (the most any payload said) */
    int has_draft;              /* the server reported its speculation (timings.draft_n, draft_n_accepted) */
    long draft_n, draft_accepted; /* ... the last payload's counts: the request's */
    char finish[16];            /* the last finish_reason the server sent ("stop", "length"); "" none */
    uint64_t hash;              /* FNV-1a 64 of the generated text: the canary */
    float *itl;
    int n_itl, itl_cap;
    char err[160];              /* what went wrong in the body (a bad payload, an error event) */
    char curl_err[CURL_ERROR_SIZE];
} ep_req;

typedef struct ep_rep {
    const ep_target *t;
    const wl_workload *wl;
    const run_config *cfg;
    rep_result *out;
    ep_req *rq;
    int n, next, done, in_flight;
    double t0, last_ms;
} ep_rep;

/* FNV-1a 64 over bytes, continuing h (runner_token_hash's function over text). */
static uint64_t fnv_bytes(uint64_t h, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}

/* One text chunk arrived at `now`: TTFT on the first, an ITL gap after. */
static int take_text(ep_req *r, const char *text, size_t n, double now) {
    if (r->chunks == 0) r->first_ms = now;
    else {
        if (r->n_itl == r->itl_cap) {
            int c = r->itl_cap ? 2 * r->itl_cap : 64;
            float *q = realloc(r->itl, sizeof(float) * (size_t)c);
            if (!q) return -1;
            r->itl = q;
            r->itl_cap = c;
        }
        r->itl[r->n_itl++] = (float)(now - r->last_ms);
    }
    r->last_ms = now;
    r->chunks++;
    r->hash = fnv_bytes(r->hash, text, n);
    return 0;
}

/* The payload of one chunk or of a whole completion; 0, or 1 to stop the transfer (r->err says why). */
static int take_payload(ep_req *r, const char *data, size_t n, double now) {
    oai_chunk c;
    char why[120];
    if (oai_parse_chunk(data, n, &c, why, sizeof why)) {
        snprintf(r->err, sizeof r->err, "bad payload from the server: %s", why);
        return 1;
    }
    int rc = 0;
    if (c.done) {
        r->done = 1;
        r->end_ms = now;
    } else if (c.error) {
        snprintf(r->err, sizeof r->err, "error from the server: %.120s", c.error);
        rc = 1;
    } else {
        if (c.text_len && take_text(r, c.text, c.text_len, now)) rc = (snprintf(r->err, sizeof r->err, "out of memory"), 1);
        if (c.finish) snprintf(r->finish, sizeof r->finish, "%s", c.finish);
        if (c.has_usage) {
            r->has_usage = 1;
            r->usage_prompt = c.prompt_tokens;
            r->usage_gen = c.completion_tokens;
        }
        if (c.has_timings) {
            r->srv_prompt_ms = c.t_prompt_ms;
            r->srv_queue_ms = c.t_queue_ms;
            r->srv_ttft_ms = c.t_ttft_ms;
        }
        if (c.has_cached && c.cached_tokens > r->cached) r->cached = c.cached_tokens;
        if (c.has_draft) {
            r->has_draft = 1;
            r->draft_n = c.draft_n;
            r->draft_accepted = c.draft_accepted;
        }
        if (c.fingerprint) {
            char fp[96];
            oai_clean_text(c.fingerprint, strlen(c.fingerprint), fp, sizeof fp);
            rep_add_build(r->rep->out->server_build, sizeof r->rep->out->server_build, fp);
        }
    }
    oai_chunk_free(&c);
    return rc;
}

/* sse_event_fn: each event's data is one payload ("event: error" is an error whatever it holds). */
static int on_event(void *user, const char *event, const char *data, size_t n) {
    ep_req *r = user;
    if (!strcmp(event, "error")) {
        char msg[120];
        oai_error_message(data, n, msg, sizeof msg);
        snprintf(r->err, sizeof r->err, "error event from the server: %s", msg);
        return 1;
    }
    return take_payload(r, data, n, runner_now_ms());
}

/* libcurl header callback: is the answer an event stream? */
static size_t on_header(char *p, size_t size, size_t nmemb, void *user) {
    ep_req *r = user;
    size_t n = size * nmemb;
    if (n > 13 && !strncasecmp(p, "content-type:", 13)) {
        char v[128];
        snprintf(v, sizeof v, "%.*s", (int)(n - 13 < sizeof v - 1 ? n - 13 : sizeof v - 1), p + 13);
        r->is_sse = strstr(v, "text/event-stream") != NULL;
    }
    return n;
}

/* libcurl write callback: a 200 event stream goes to the SSE parser as it
 * arrives; anything else is kept whole. Returning less than n stops it. */
static size_t on_body(char *p, size_t size, size_t nmemb, void *user) {
    ep_req *r = user;
    size_t n = size * nmemb;
    if (!r->status) curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->status);
    if (r->status == 200 && r->is_sse) {
        int rc = sse_feed(&r->sp, p, n);
        if (rc < 0) snprintf(r->err, sizeof r->err, "malformed event stream (a line over %d bytes, or no memory)", SSE_MAX_LINE);
        return rc ? 0 : n;
    }
    if (r->raw_len + n + 1 > EP_MAX_BODY) {
        snprintf(r->err, sizeof r->err, "answer longer than %u bytes", EP_MAX_BODY);
        return 0;
    }
    if (r->raw_len + n + 1 > r->raw_cap) {
        size_t c = r->raw_cap ? r->raw_cap : 4096;
        while (c < r->raw_len + n + 1) c *= 2;
        char *q = realloc(r->raw, c);
        if (!q) return snprintf(r->err, sizeof r->err, "out of memory"), 0;
        r->raw = q;
        r->raw_cap = c;
    }
    memcpy(r->raw + r->raw_len, p, n);
    r->raw_len += n;
    r->raw[r->raw_len] = 0;
    return n;
}

/* Issue request i at t_issue: its easy handle onto the multi handle, or a
 * failed request when libcurl will not take it. */
static int issue(ep_rep *ep, CURLM *m, int i, double t_issue) {
    const wl_request *w = &ep->wl->req[i];
    ep_req *r = &ep->rq[i];
    req_result *q = &ep->out->req[i];
    r->rep = ep;
    r->idx = i;
    r->issue_ms = t_issue;
    r->hash = 1469598103934665603ull;
    r->srv_prompt_ms = r->srv_queue_ms = r->srv_ttft_ms = NAN;
    q->arrival_ms = t_issue - ep->t0;
    q->priority = w->priority;
    q->max_tokens = w->max_tokens;
    sse_init(&r->sp, on_event, r);
    /* the salt: unique to this process (t->salt), repetition (its start) and request */
    char salt[128];
    snprintf(salt, sizeof salt, "%s-%.0f-%d", ep->t->salt, ep->t0 * 1e3, i);
    r->body = oai_completion_body(ep_model_of(ep->t, w->adapter), w->text, w->text_len, w->max_tokens, 0.0,
                                  ep->cfg->ignore_eos, ep->t->server_cache ? NULL : salt);
    char url[600], auth[600];
    snprintf(url, sizeof url, "%s/completions", ep->t->base);
    r->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    r->hdrs = curl_slist_append(r->hdrs, "Expect:"); /* no 100-continue round trip before long prompts */
    if (ep->t->api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", ep->t->api_key);
        r->hdrs = curl_slist_append(r->hdrs, auth);
    }
    if (!r->body || !r->hdrs || !(r->h = curl_easy_init())) return -1;
    curl_easy_setopt(r->h, CURLOPT_URL, url);
    curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, r->hdrs);
    curl_easy_setopt(r->h, CURLOPT_POSTFIELDS, r->body);
    curl_easy_setopt(r->h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(r->h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(r->h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(r->h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(r->h, CURLOPT_PRIVATE, r);
    curl_easy_setopt(r->h, CURLOPT_ERRORBUFFER, r->curl_err);
    curl_easy_setopt(r->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(r->h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(r->h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    if (w->deadline_ms > 0) { /* the deadline counts from the issue, as the scheduler's does */
        double left = w->deadline_ms - (runner_now_ms() - t_issue);
        curl_easy_setopt(r->h, CURLOPT_TIMEOUT_MS, (long)(left >= 1 ? ceil(left) : 1));
    }
    if (curl_multi_add_handle(m, r->h) != CURLM_OK) return -1;
    ep->in_flight++;
    return 0;
}

/* The final state of request r (transfer result `res`) into its req_result. */
static void finish(ep_rep *ep, ep_req *r, CURLcode res) {
    req_result *q = &ep->out->req[r->idx];
    double now = runner_now_ms();
    const wl_request *w = &ep->wl->req[r->idx];
    if (!r->end_ms) r->end_ms = now;
    const char *state = "stop";
    char msg[sizeof ((req_result *)0)->error] = "";
    if (res == CURLE_OK && r->status == 200 && !r->is_sse && !r->err[0]) { /* a whole completion, not streamed */
        if (take_payload(r, r->raw ? r->raw : "", r->raw_len, r->end_ms) == 0) r->done = 1;
    }
    if (res == CURLE_OPERATION_TIMEDOUT && w->deadline_ms > 0) {
        state = "timeout";
        snprintf(msg, sizeof msg, "timed out after %.0f ms with %d chunks", now - r->issue_ms, r->chunks);
    } else if (r->err[0]) {
        state = "failed";
        snprintf(msg, sizeof msg, "%s", r->err);
    } else if (res != CURLE_OK) {
        state = "failed";
        snprintf(msg, sizeof msg, "%.120s after %d chunks", r->curl_err[0] ? r->curl_err : curl_easy_strerror(res), r->chunks);
    } else if (r->status != 200) {
        char why[120];
        oai_error_message(r->raw ? r->raw : "", r->raw_len, why, sizeof why);
        state = r->status == 429 ? "rejected" : "failed";
        snprintf(msg, sizeof msg, "%sHTTP %ld%s%s", r->status == 429 ? "rejected: " : "", r->status, why[0] ? ": " : "", why);
    } else if (!r->done) {
        state = "failed";
        snprintf(msg, sizeof msg, "the stream ended before \"data: [DONE]\" (%d chunks)", r->chunks);
    }
    q->stream_chunks = r->chunks;
    q->cached_tokens = (int)r->cached; /* whatever the outcome: a failed request may have been served from the cache too */
    q->prompt_tokens = r->has_usage ? (int)r->usage_prompt : 0;
    q->gen_tokens = r->has_usage ? (int)r->usage_gen : r->chunks;
    /* finished: by length when the server says so, or (no finish_reason) when it gave every token asked */
    if (!msg[0] && (!strcmp(r->finish, "length") || (!r->finish[0] && q->gen_tokens >= w->max_tokens))) state = "length";
    snprintf(q->state, sizeof q->state, "%s", state);
    snprintf(q->error, sizeof q->error, "%s", msg);
    q->queue_ms = r->srv_queue_ms;    /* the server's own split of its time, when it sends "timings" */
    q->prefill_ms = r->srv_prompt_ms; /* (llama-server and Cortex do; NAN otherwise) */
    if (r->has_draft) { /* the server's speculation: how many it drafted and kept; its passes and times it does not say */
        q->spec = 1;
        q->draft_tokens = (int)r->draft_n;
        q->accepted_tokens = (int)r->draft_accepted;
        q->spec_passes = q->spec_verified = -1;
        q->draft_ms = q->verify_ms = NAN;
    }
    if (!msg[0]) {
        if (!r->chunks) r->first_ms = r->last_ms = r->end_ms; /* nothing generated: the first "token" is the end */
        q->ttft_ms = r->first_ms - r->issue_ms;
        q->decode_ms = r->last_ms - r->first_ms;
        q->e2e_ms = r->end_ms - r->issue_ms;
        q->tpot_ms = r->chunks > 1 && q->gen_tokens > 1 ? q->decode_ms / (q->gen_tokens - 1) : NAN;
        q->itl_ms = r->itl;
        q->n_itl = r->n_itl;
        r->itl = NULL;
        snprintf(q->token_hash, sizeof q->token_hash, "%016llx", (unsigned long long)r->hash);
    } else {
        q->ttft_ms = q->e2e_ms = q->decode_ms = q->tpot_ms = NAN;
    }
    ep->in_flight--;
    ep->done++;
    ep->last_ms = now;
}

/* Free a request's transfer state (its results stay in out->req). */
static void req_free(ep_req *r) {
    if (r->h) curl_easy_cleanup(r->h);
    curl_slist_free_all(r->hdrs);
    free(r->body);
    free(r->raw);
    free(r->itl);
    sse_free(&r->sp);
    r->h = NULL;
    r->hdrs = NULL;
    r->body = r->raw = NULL;
    r->itl = NULL;
}

/* The server's metrics that changed between two scrapes into out->srv. */
static void server_metrics(const prom_scrape *before, const prom_scrape *after, rep_result *out) {
    if (prom_diff(before, after, &out->srv, &out->n_srv)) out->srv = NULL, out->n_srv = 0;
}

/* The server's own TTFT (its "timings".ttft_ms, submission to first token)
 * and what the HTTP path adds to it (client TTFT minus that: sending,
 * parsing, tokenizing, the first event's way back), medians over the
 * finished requests that have both; nothing when the server sent no
 * ttft_ms (llama-server, vLLM). */
static void http_overhead(const ep_rep *ep) {
    double *srv = malloc(sizeof(double) * (size_t)ep->n), *add = malloc(sizeof(double) * (size_t)ep->n);
    size_t k = 0;
    for (int i = 0; srv && add && i < ep->n; i++) {
        const req_result *q = &ep->out->req[i];
        if (q->error[0] || !isfinite(q->ttft_ms) || !isfinite(ep->rq[i].srv_ttft_ms)) continue;
        srv[k] = ep->rq[i].srv_ttft_ms;
        add[k++] = q->ttft_ms - ep->rq[i].srv_ttft_ms;
    }
    if (k) {
        stats_sort(srv, k);
        stats_sort(add, k);
        rep_set_metric(ep->out, "server_ttft_ms", stats_percentile(srv, k, 50));
        rep_set_metric(ep->out, "http_ttft_overhead_ms", stats_percentile(add, k, 50));
    }
    free(srv);
    free(add);
}

/* See endpoint.h. */
int endpoint_rep(const ep_target *t, const wl_workload *wl, const run_config *cfg, rep_result *out, double *makespan_ms,
                 char *err, size_t errlen) {
    ep_rep ep;
    memset(&ep, 0, sizeof ep);
    ep.t = t;
    ep.wl = wl;
    ep.cfg = cfg;
    ep.out = out;
    ep.n = (int)wl->n;
    ep.rq = calloc((size_t)ep.n, sizeof *ep.rq);
    double *arr = runner_arrivals(wl, cfg->rate);
    CURLM *m = curl_multi_init();
    if (!ep.rq || !arr || !m) {
        free(ep.rq);
        free(arr);
        curl_multi_cleanup(m);
        return hx_fail(err, errlen, "out of memory");
    }
    for (int i = 0; i < ep.n; i++) {
        snprintf(out->req[i].item, sizeof out->req[i].item, "%s", wl->req[i].id);
        out->req[i].idx = i;
        out->req[i].adapter = wl->req[i].adapter;
    }
    out->http = 1;
    prom_scrape before, after;
    int scraped = ep_scrape(t, &before) == 0;
    int open = cfg->mode == RUN_OPEN || cfg->rate > 0, rc = 0;
    ep.t0 = ep.last_ms = runner_now_ms();
    while (!rc && ep.done < ep.n) {
        double now = runner_now_ms();
        if (open)
            while (ep.next < ep.n && ep.t0 + arr[ep.next] <= now && !rc) rc = issue(&ep, m, ep.next, ep.t0 + arr[ep.next]), ep.next++;
        else
            while (ep.next < ep.n && ep.in_flight < cfg->concurrency && !rc) rc = issue(&ep, m, ep.next++, now);
        if (rc) {
            hx_fail(err, errlen, "libcurl refused request %s (no memory?)", wl->req[ep.next - 1].id);
            break;
        }
        int running;
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            ep_req *r;
            CURLcode res = msg->data.result;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
            curl_multi_remove_handle(m, r->h);
            finish(&ep, r, res);
            req_free(r);
        }
        if (cfg->progress) runner_progress(cfg, ep.done, ep.n);
        if (ep.done == ep.n) break;
        /* wait for the sockets, or until the next arrival is due */
        long wait_ms = 100;
        if (open && ep.next < ep.n) {
            double ahead = ep.t0 + arr[ep.next] - runner_now_ms();
            wait_ms = ahead <= 0 ? 0 : ahead < 100 ? (long)ceil(ahead) : 100;
        }
        if (wait_ms > 0 || ep.in_flight) curl_multi_poll(m, NULL, 0, (int)wait_ms, NULL);
    }
    *makespan_ms = ep.last_ms - ep.t0;
    for (int i = 0; i < ep.n; i++) {
        if (ep.rq[i].h) curl_multi_remove_handle(m, ep.rq[i].h);
        req_free(&ep.rq[i]);
    }
    curl_multi_cleanup(m);
    if (!rc) http_overhead(&ep);
    free(ep.rq);
    free(arr);
    if (scraped) {
        if (ep_scrape(t, &after) == 0) server_metrics(&before, &after, out);
        prom_free(&after);
        prom_free(&before);
    }
    double chunks = 0;
    for (int i = 0; i < ep.n; i++) chunks += out->req[i].error[0] ? 0 : out->req[i].stream_chunks;
    if (!rc) rep_set_metric(out, "stream_chunks", chunks);
    return rc;
}
