/*
 * endpoint.c - the server a run measures over HTTP (see endpoint.h): its URL,
 * the models requests go to, the probe that identifies it before anything
 * is stored, and /metrics scrapes. The replay itself: endpoint_rep.c.
 */
#include "endpoint.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "oai.h"
#include "hx_err.h"

#define EP_MAX_GET (16u << 20) /* bytes of a GET answer kept: model lists and scrapes are far smaller */

/* See endpoint.h. */
int ep_init(ep_target *t, const char *url, const char *api_key, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    size_t n = strlen(url);
    while (n && url[n - 1] == '/') n--;
    int scheme = !strncasecmp(url, "http://", 7) ? 7 : !strncasecmp(url, "https://", 8) ? 8 : 0;
    if (!scheme || n <= (size_t)scheme || n >= sizeof t->base - 32)
        return hx_fail(err, errlen, "--endpoint '%s' is not an http:// or https:// URL with a host", url);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return hx_fail(err, errlen, "libcurl: cannot initialize");
    CURLU *u = curl_url();
    char *host = NULL;
    memcpy(t->base, url, n);
    t->base[n] = 0;
    CURLUcode uc = u ? curl_url_set(u, CURLUPART_URL, t->base, 0) : CURLUE_OUT_OF_MEMORY;
    if (!uc) uc = curl_url_get(u, CURLUPART_HOST, &host, 0);
    if (uc || !host || !host[0] || strpbrk(t->base, " \t\r\n")) {
        hx_fail(err, errlen, "--endpoint '%s' is not a valid URL (%s)", url, uc ? curl_url_strerror(uc) : "no host");
        curl_free(host);
        curl_url_cleanup(u);
        return -1;
    }
    curl_free(host);
    curl_url_cleanup(u);
    /* /metrics sits at the server's root, beside /v1 */
    size_t root = n >= 3 && !strcmp(t->base + n - 3, "/v1") ? n - 3 : n;
    snprintf(t->metrics_url, sizeof t->metrics_url, "%.*s/metrics", (int)root, t->base);
    t->api_key = api_key;
    /* cache salts must differ from every other request's, this process's and any other client's */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    snprintf(t->salt, sizeof t->salt, "cortex-bench-%ld-%lld%09ld", (long)getpid(), (long long)now.tv_sec, now.tv_nsec);
    return 0;
}

/* See endpoint.h. */
int ep_set_adapters(ep_target *t, const char *list, char *err, size_t errlen) {
    for (const char *p = list;;) {
        const char *c = strchr(p, ',');
        size_t k = c ? (size_t)(c - p) : strlen(p);
        if (!k || k >= 256 || t->n_adapters == EP_MAX_ADAPTERS)
            return hx_fail(err, errlen, "--adapter-names '%s': expected NAME1,NAME2,... (up to %d non-empty names"
                           " of at most 255 bytes)", list, EP_MAX_ADAPTERS);
        if (!(t->adapters[t->n_adapters] = strndup(p, k))) return hx_fail(err, errlen, "out of memory");
        t->n_adapters++;
        if (!c) return 0;
        p = c + 1;
    }
}

/* See endpoint.h. */
const char *ep_model_of(const ep_target *t, int adapter) {
    return adapter >= 1 && adapter <= t->n_adapters ? t->adapters[adapter - 1] : t->model;
}

/* See endpoint.h. */
int ep_check_workload(const ep_target *t, const wl_workload *wl, char *err, size_t errlen) {
    for (size_t i = 0; i < wl->n; i++) {
        int a = wl->req[i].adapter;
        if (a > t->n_adapters)
            return hx_fail(err, errlen, "%s:%zu: request %s asks for adapter %d, but --adapter-names names %d"
                           " adapter%s (ids 1..%d; id 0 is --model)", wl->source, wl->req[i].line, wl->req[i].id, a,
                           t->n_adapters, t->n_adapters == 1 ? "" : "s", t->n_adapters);
    }
    return 0;
}

/* A GET answer being received. */
typedef struct get_buf {
    char *data;
    size_t len, cap;
    char *server;
    size_t server_cap;
} get_buf;

/* libcurl write callback: append, within EP_MAX_GET (beyond: abort). */
static size_t get_write(char *p, size_t size, size_t nmemb, void *user) {
    get_buf *b = user;
    size_t n = size * nmemb;
    if (b->len + n + 1 > EP_MAX_GET) return 0;
    if (b->len + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 4096;
        while (c < b->len + n + 1) c *= 2;
        char *q = realloc(b->data, c);
        if (!q) return 0;
        b->data = q;
        b->cap = c;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return n;
}

/* libcurl header callback: keep the Server header's value. */
static size_t get_header(char *p, size_t size, size_t nmemb, void *user) {
    get_buf *b = user;
    size_t n = size * nmemb;
    if (b->server && n > 7 && !strncasecmp(p, "server:", 7)) {
        size_t a = 7, e = n;
        while (a < e && (p[a] == ' ' || p[a] == '\t')) a++;
        while (e > a && (p[e - 1] == '\r' || p[e - 1] == '\n' || p[e - 1] == ' ')) e--;
        snprintf(b->server, b->server_cap, "%.*s", (int)(e - a), p + a);
    }
    return n;
}

/* See endpoint.h. */
int ep_get(const ep_target *t, const char *url, char **body, size_t *len, long *status, char *server, size_t server_cap,
           char *err, size_t errlen) {
    get_buf b = {NULL, 0, 0, server, server_cap};
    if (server && server_cap) server[0] = 0;
    *body = NULL;
    *len = 0;
    *status = 0;
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = NULL;
    char auth[600], cerr[CURL_ERROR_SIZE] = "";
    if (!h) return hx_fail(err, errlen, "libcurl: cannot make a request");
    if (t->api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", t->api_key);
        hdrs = curl_slist_append(hdrs, auth);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, get_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, get_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &b);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
    CURLcode rc = curl_easy_perform(h);
    if (rc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    if (rc != CURLE_OK) {
        free(b.data);
        return hx_fail(err, errlen, "%s", cerr[0] ? cerr : curl_easy_strerror(rc));
    }
    if (!b.data && !(b.data = calloc(1, 1))) return hx_fail(err, errlen, "out of memory");
    *body = b.data;
    *len = b.len;
    return 0;
}

/* t->server ("SERVER; models=a,b") and t->info (JSON) from the probe's answers. */
static int identify(ep_target *t, const char *server, const char *body, size_t len, char **ids, int n_ids) {
    int k = snprintf(t->server, sizeof t->server, "%s; models=", server[0] ? server : "(no Server header)");
    for (int i = 0; i < n_ids && k > 0 && (size_t)k < sizeof t->server; i++)
        k += snprintf(t->server + k, sizeof t->server - (size_t)k, "%s%s", i ? "," : "", ids[i]);
    json_t *o = json_object(), *models = json_loadb(body, len, JSON_ALLOW_NUL, NULL);
    if (!o || json_object_set_new(o, "url", json_string(t->base)) ||
        json_object_set_new(o, "server", json_string(server)) || json_object_set_new(o, "models", models)) {
        json_decref(o);
        return -1;
    }
    t->info = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return t->info ? 0 : -1;
}

/* The server's build where it tells it at the root, beside /metrics:
 * llama-server's /props, else /version (vLLM, SGLang); other servers answer
 * 404 and the answers' system_fingerprint is all there is. */
static void probe_build(ep_target *t) {
    static const char *const paths[] = {"/props", "/version"};
    size_t root = strlen(t->metrics_url) - strlen("/metrics");
    for (size_t i = 0; i < sizeof paths / sizeof *paths && !t->build[0]; i++) {
        char url[640], *body, why[CURL_ERROR_SIZE];
        size_t len;
        long status;
        snprintf(url, sizeof url, "%.*s%s", (int)root, t->metrics_url, paths[i]);
        if (ep_get(t, url, &body, &len, &status, NULL, 0, why, sizeof why)) return; /* unreachable now: no build */
        if (status == 200) oai_server_build(body, len, t->build, sizeof t->build);
        free(body);
    }
}

/* See endpoint.h. */
int ep_probe(ep_target *t, const char *model, char *err, size_t errlen) {
    char url[600], server[200], why[CURL_ERROR_SIZE + 64];
    snprintf(url, sizeof url, "%s/models", t->base);
    char *body;
    size_t len;
    long status;
    if (ep_get(t, url, &body, &len, &status, server, sizeof server, why, sizeof why))
        return hx_fail(err, errlen, "%s: cannot reach the server: %s", url, why);
    if (status != 200) {
        char msg[160];
        oai_error_message(body, len, msg, sizeof msg);
        hx_fail(err, errlen, "%s: HTTP %ld%s%s%s", url, status,
                status == 401 || status == 403 ? " (the server refused the API key: give the right --api-key)" : "",
                msg[0] ? ": " : "", msg);
        free(body);
        return -1;
    }
    char **ids;
    int n_ids, rc = 0;
    if (oai_parse_models(body, len, &ids, &n_ids, why, sizeof why)) {
        hx_fail(err, errlen, "%s: the answer is %s", url, why);
        free(body);
        return -1;
    }
    if (model) {
        snprintf(t->model, sizeof t->model, "%s", model);
        t->model_unlisted = 1;
        for (int i = 0; i < n_ids; i++) t->model_unlisted &= strcmp(ids[i], model) != 0;
    }
    else if (n_ids) snprintf(t->model, sizeof t->model, "%s", ids[0]);
    else rc = hx_fail(err, errlen, "%s lists no model: give --model NAME", url);
    if (!rc && identify(t, server, body, len, ids, n_ids)) rc = hx_fail(err, errlen, "out of memory");
    oai_models_free(ids, n_ids);
    free(body);
    if (rc) return rc;
    /* /metrics is optional: a server without it simply has no server metrics */
    if (ep_get(t, t->metrics_url, &body, &len, &status, NULL, 0, why, sizeof why) == 0) {
        t->has_metrics = status == 200;
        free(body);
    }
    probe_build(t);
    return 0;
}

/* See endpoint.h. */
int ep_scrape(const ep_target *t, prom_scrape *out) {
    char *body, why[CURL_ERROR_SIZE];
    size_t len;
    long status;
    memset(out, 0, sizeof *out);
    if (!t->has_metrics || ep_get(t, t->metrics_url, &body, &len, &status, NULL, 0, why, sizeof why)) return -1;
    int rc = status == 200 ? prom_parse(body, len, out) : -1;
    free(body);
    return rc;
}

/* See endpoint.h. */
void ep_free(ep_target *t) {
    for (int i = 0; i < t->n_adapters; i++) free(t->adapters[i]);
    t->n_adapters = 0;
    free(t->info);
    t->info = NULL;
}
