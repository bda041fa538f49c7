/*
 * srv_routes.c - what each route answers:
 *   POST /v1/completions, /v1/chat/completions   generate (srv_job.c), whole or streamed (srv_sse.c)
 *   GET  /v1/models                               the one model served
 *   GET  /health                                  {"status":"ok"}
 *   GET  /metrics                                 Prometheus text (srv_metrics.c)
 * A completion request is parsed (srv_parse.c), its model resolved, its
 * prompt rendered (chat templates) and tokenized as `cortex generate` does
 * (BOS, control-token text as those tokens), then submitted to the
 * scheduler: a full queue answers 429, a prompt too long for the context 400.
 */
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "srv.h"

/* See srv.h. Adapters will be found here by name; today only the base model is. */
int srv_resolve_model(const srv_server *S, const char *model, srv_error *e) {
    if (!model || !strcmp(model, S->model_id)) return 0;
    return srv_fail(e, MHD_HTTP_NOT_FOUND, "invalid_request_error", "model_not_found", "model",
                    "the model '%s' does not exist: this server serves '%s' (GET /v1/models)", model, S->model_id);
}

/* Reply with a malloc'd JSON document. */
static int reply_json(srv_server *S, struct MHD_Connection *c, int status, char *body) {
    return srv_reply(S, c, status, "application/json", body, body ? strlen(body) : 0, 0);
}

/* Tokenize text as `cortex generate` does; malloc'd ids, or NULL with e filled. */
static int32_t *tokenize(const srv_server *S, const char *text, int flags, int *n, srv_error *e) {
    size_t len = strlen(text);
    int cap = (int)(len + 2 < 1u << 28 ? len + 2 : 1u << 28);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)cap);
    cx_err err = {0};
    if (!ids) {
        srv_fail(e, 500, "server_error", NULL, NULL, "out of memory for the prompt's tokens");
        return NULL;
    }
    if (cx_tokenize(S->m, text, len, flags, ids, cap, n, &err)) {
        srv_fail(e, 400, "invalid_request_error", NULL, "prompt", "cannot tokenize the prompt: %s", err.msg);
        free(ids);
        return NULL;
    }
    return ids;
}

/* The chat prompt of p's messages in the server's template, with the text
 * ending an assistant turn in *end; NULL with e filled. */
static char *chat_prompt(const srv_server *S, const srv_params *p, const char **end, srv_error *e) {
    char *text;
    if (S->tmpl < 0) {
        srv_fail(e, 400, "invalid_request_error", "chat_template_unsupported", "messages", "%s", S->tmpl_why);
        return NULL;
    }
    return srv_chat_render(S->tmpl, p->msgs, p->n_msgs, S->bos, S->eos, &text, end, e) ? NULL : text;
}

/* The error a refused submission answers with. */
static void submit_error(const srv_params *p, int rc, const cx_err *err, srv_error *e) {
    const char *what = p->chat ? "messages" : "prompt";
    if (rc == CX_EBUSY)
        srv_fail(e, MHD_HTTP_TOO_MANY_REQUESTS, "rate_limit_error", "queue_full", NULL, "the server is busy: %s; retry later",
                 err->msg);
    else if (rc == CX_ECTX)
        srv_fail(e, 400, "invalid_request_error", "context_length_exceeded", what, "%s", err->msg);
    else if (rc == CX_ENOMEM)
        srv_fail(e, 500, "server_error", NULL, NULL, "%s", err->msg);
    else
        srv_fail(e, 400, "invalid_request_error", NULL, NULL, "%s", err->msg);
}

/* Wait for j's end and answer with the whole response (504 with partial
 * usage past the deadline); a client that goes away drops the connection. */
static int answer_whole(srv_server *S, struct MHD_Connection *c, const srv_out *o, srv_job *j) {
    pthread_mutex_lock(&j->mu);
    int gone = srv_job_wait(j, (size_t)-1, c); /* until it ends */
    srv_error e;
    char *body = NULL;
    int status = 200;
    if (!gone && srv_job_error(j, &e)) {
        body = srv_reply_error_usage(&e, j);
        status = e.status;
    } else if (!gone) {
        body = srv_reply_body(o, j);
    }
    pthread_mutex_unlock(&j->mu);
    srv_job_put(j);
    if (gone) return MHD_NO;
    return reply_json(S, c, status, body);
}

/* POST /v1/completions (chat = 0) and /v1/chat/completions (chat = 1). */
static int completion(srv_server *S, struct MHD_Connection *c, const char *body, size_t len, int chat) {
    srv_params p;
    srv_error e;
    int32_t *ids = NULL, stop_id = -1;
    const char *stop[SRV_MAX_STOP + 1], *end = NULL;
    char *text = NULL;
    int n_ids = 0, ret, adapter = 0;
    if (srv_parse_request(body, len, chat, &S->sp, &p, &e) || (adapter = srv_resolve_model(S, p.model, &e)) < 0) goto fail;
    if (chat) {
        if (!(text = chat_prompt(S, &p, &end, &e))) goto fail;
    }
    if (text || p.prompt) {
        if (!(ids = tokenize(S, text ? text : p.prompt, CX_TOKENIZE_BOS | CX_TOKENIZE_SPECIAL, &n_ids, &e))) goto fail;
    }
    cx_request q = cx_request_defaults();
    q.sampling = p.sp;
    q.max_tokens = p.max_tokens ? p.max_tokens : S->cfg->max_tokens;
    q.priority = p.priority;
    q.ignore_eos = p.ignore_eos;
    q.deadline_ms = S->cfg->request_timeout_ms;
    q.adapter = adapter;
    memcpy(stop, p.stop, sizeof p.stop);
    q.stop = stop;
    q.n_stop = p.n_stop;
    if (end && *end) { /* the template's end of turn: its token when it is one, else its text */
        int n_end = 0;
        int32_t *end_ids = tokenize(S, end, CX_TOKENIZE_SPECIAL, &n_end, &e);
        if (end_ids && n_end == 1) stop_id = end_ids[0];
        else stop[q.n_stop++] = end;
        free(end_ids);
    }
    if (stop_id >= 0) {
        q.stop_ids = &stop_id;
        q.n_stop_ids = 1;
    }
    srv_job *j;
    cx_err err = {0};
    int rc = srv_job_submit(S, &q, ids ? ids : p.prompt_ids, ids ? n_ids : p.n_prompt_ids,
                            p.logprobs ? p.top_logprobs : 0, p.logprobs, &j, &err);
    if (rc) {
        submit_error(&p, rc, &err, &e);
        goto fail;
    }
    free(ids);
    free(text);
    srv_out o = {.S = S, .p = &p, .created = (int64_t)time(NULL)};
    snprintf(o.id, sizeof o.id, "%s-%lld", chat ? "chatcmpl" : "cmpl", (long long)j->id);
    if (p.stream) ret = srv_sse_start(S, c, &o, &p, j);
    else ret = answer_whole(S, c, &o, j);
    srv_params_free(&p);
    return ret;
fail:
    free(ids);
    free(text);
    srv_params_free(&p);
    return srv_reply_error(S, c, &e);
}

/* GET /v1/models: the base model (adapters will be listed beside it). */
static int models(srv_server *S, struct MHD_Connection *c) {
    json_t *v = json_pack("{s:s, s:[{s:s, s:s, s:i, s:s}]}", "object", "list", "data", "id", S->model_id, "object", "model",
                          "created", 0, "owned_by", "cortex");
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    return reply_json(S, c, 200, s);
}

/* See srv.h. */
int srv_route(srv_server *S, struct MHD_Connection *c, const char *method, const char *url, const char *body, size_t len) {
    static const struct { const char *url, *method; } ROUTES[] = {
        {"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"}, {"/v1/models", "GET"}, {"/health", "GET"},
        {"/metrics", "GET"}};
    srv_error e;
    int r = -1;
    for (int i = 0; i < (int)(sizeof ROUTES / sizeof ROUTES[0]); i++)
        if (!strcmp(url, ROUTES[i].url)) r = i;
    if (r < 0) {
        srv_fail(&e, MHD_HTTP_NOT_FOUND, "invalid_request_error", "not_found", NULL, "no route %s %s", method, url);
        return srv_reply_error(S, c, &e);
    }
    if (strcmp(method, ROUTES[r].method)) {
        srv_fail(&e, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", "method_not_allowed", NULL,
                 "%s takes %s, not %s", url, ROUTES[r].method, method);
        return srv_reply_error(S, c, &e);
    }
    switch (r) {
    case 0: case 1: return completion(S, c, body, len, r == 1);
    case 2: return models(S, c);
    case 3: {
        char *ok = strdup("{\"status\":\"ok\"}");
        return reply_json(S, c, 200, ok);
    }
    default: {
        size_t n = 0;
        char *text = srv_metrics_text(&S->metrics, S->sched, &n);
        return srv_reply(S, c, 200, "text/plain; version=0.0.4", text, n, 0);
    }
    }
}
