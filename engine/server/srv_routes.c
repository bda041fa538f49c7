/*
 * srv_routes.c - what each route answers:
 *   POST /v1/completions, /v1/chat/completions   generate (srv_job.c), whole or streamed (srv_sse.c)
 *   GET  /v1/models                               the base model and every adapter, by name
 *   POST /v1/load_lora_adapter, /v1/unload_lora_adapter   adapters at run time (vLLM's routes)
 *   GET  /health                                  {"status":"ok"}
 *   GET  /metrics                                 Prometheus text (srv_metrics.c)
 * A completion request is parsed (srv_parse.c), its model resolved, its
 * prompt rendered (chat templates) and tokenized as `cortex generate` does
 * (BOS, control-token text as those tokens), then submitted to the
 * scheduler: a full queue answers 429, a prompt too long for the context 400
 * (a text longer than the context could hold is refused before it is
 * tokenized: S->max_prompt_bytes).
 */
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "srv.h"

/* See srv.h: the base model's name, or an adapter's (as vLLM names LoRA models). */
int srv_resolve_model(const srv_server *S, const char *model, srv_error *e) {
    if (!model || !strcmp(model, S->model_id)) return 0;
    int id = cx_sched_adapter_find(S->sched, model);
    if (id > 0) return id;
    return srv_fail(e, MHD_HTTP_NOT_FOUND, "invalid_request_error", "model_not_found", "model",
                    "the model '%s' does not exist: this server serves '%s' and its adapters (GET /v1/models)", model,
                    S->model_id);
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

/* The chat prompt of p's messages in the server's template (dated today,
 * UTC), with the texts ending an assistant turn in end[]; NULL with e filled. */
static char *chat_prompt(const srv_server *S, const srv_params *p, const char **end, srv_error *e) {
    char *text, date[16];
    if (S->tmpl < 0) {
        srv_fail(e, 400, "invalid_request_error", "chat_template_unsupported", "messages", "%s", S->tmpl_why);
        return NULL;
    }
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%d", &tm);
    return srv_chat_render(S->tmpl, p->msgs, p->n_msgs, S->bos, S->eos, date, &text, end, e) ? NULL : text;
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
    int32_t *ids = NULL, stop_ids[SRV_CHAT_MAX_END];
    const char *stop[SRV_MAX_STOP + SRV_CHAT_MAX_END], *end[SRV_CHAT_MAX_END] = {NULL};
    char *text = NULL;
    int n_ids = 0, ret, adapter = 0;
    int64_t t_arrive = srv_now_ns(); /* parsing and tokenizing count in the server's own time, not the client's */
    if (srv_parse_request(body, len, chat, &S->sp, &p, &e) || (adapter = srv_resolve_model(S, p.model, &e)) < 0) goto fail;
    if (chat) {
        if (!(text = chat_prompt(S, &p, end, &e))) goto fail;
    }
    if ((text || p.prompt) && strlen(text ? text : p.prompt) > S->max_prompt_bytes) {
        srv_fail(&e, 400, "invalid_request_error", "context_length_exceeded", chat ? "messages" : "prompt",
                 "the prompt (%zu bytes) leaves no room to generate in the %d-token context: a context of %d tokens "
                 "holds at most %zu bytes of text (%zu per token, the model's longest, times %d)",
                 strlen(text ? text : p.prompt), S->n_ctx, S->n_ctx, S->max_prompt_bytes,
                 S->max_prompt_bytes / (size_t)S->n_ctx, S->n_ctx);
        goto fail;
    }
    if (text || p.prompt) {
        if (!(ids = tokenize(S, text ? text : p.prompt, CX_TOKENIZE_BOS | CX_TOKENIZE_SPECIAL, &n_ids, &e))) goto fail;
    }
    cx_request q = cx_request_defaults();
    q.sampling = p.sp;
    q.max_tokens = p.max_tokens ? p.max_tokens : S->cfg->max_tokens;
    q.priority = p.priority;
    q.ignore_eos = p.ignore_eos;
    q.no_prefix_cache = !p.cache_prompt;
    q.deadline_ms = S->cfg->request_timeout_ms;
    q.adapter = adapter;
    memcpy(stop, p.stop, sizeof p.stop);
    q.stop = stop;
    q.n_stop = p.n_stop;
    for (int k = 0; k < SRV_CHAT_MAX_END && end[k] && *end[k]; k++) { /* the template's ends of turn: tokens, or texts */
        int n_end = 0;
        int32_t *end_ids = tokenize(S, end[k], CX_TOKENIZE_SPECIAL, &n_end, &e);
        if (end_ids && n_end == 1) stop_ids[q.n_stop_ids++] = end_ids[0];
        else stop[q.n_stop++] = end[k];
        free(end_ids);
    }
    q.stop_ids = stop_ids;
    srv_job *j;
    cx_err err = {0};
    int rc = srv_job_submit(S, &q, ids ? ids : p.prompt_ids, ids ? n_ids : p.n_prompt_ids,
                            p.logprobs ? p.top_logprobs : 0, p.logprobs, chat && S->tmpl == SRV_TMPL_HARMONY, &j, &err);
    if (rc) {
        submit_error(&p, rc, &err, &e);
        goto fail;
    }
    pthread_mutex_lock(&j->mu);
    j->t_arrive = t_arrive;
    pthread_mutex_unlock(&j->mu);
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

/* GET /v1/models: the base model, then each adapter with the base as its
 * parent (vLLM's shape), and whether it is loaded now. */
static int models(srv_server *S, struct MHD_Connection *c) {
    json_t *v = json_pack("{s:s, s:[{s:s, s:s, s:i, s:s, s:s}]}", "object", "list", "data", "id", S->model_id, "object",
                          "model", "created", 0, "owned_by", "cortex", "root", S->model_id);
    json_t *data = v ? json_object_get(v, "data") : NULL;
    cx_adapter_info in;
    for (int i = 0; data && cx_sched_adapter_info(S->sched, i, &in) == 0; i++)
        if (!in.removing)
            json_array_append_new(data, json_pack("{s:s, s:s, s:i, s:s, s:s, s:s, s:b}", "id", in.name, "object",
                                                  "model", "created", 0, "owned_by", "cortex", "root", in.path,
                                                  "parent", S->model_id, "resident", in.resident));
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    return reply_json(S, c, 200, s);
}

/* The string field `key` of a JSON object body, or NULL with e filled (400). */
static const char *body_string(json_t *doc, const char *key, srv_error *e) {
    json_t *f = doc ? json_object_get(doc, key) : NULL;
    if (!json_is_string(f) || !json_string_value(f)[0]) {
        srv_fail(e, 400, "invalid_request_error", NULL, key, "'%s' must be a non-empty string", key);
        return NULL;
    }
    return json_string_value(f);
}

/* A plain-text success answer, as vLLM's adapter routes give. */
static int reply_text(srv_server *S, struct MHD_Connection *c, const char *fmt, const char *name, int n) {
    char buf[320];
    snprintf(buf, sizeof buf, fmt, name, n);
    char *t = strdup(buf);
    return srv_reply(S, c, 200, "text/plain; charset=utf-8", t, t ? strlen(t) : 0, 0);
}

/* POST /v1/load_lora_adapter {"lora_name", "lora_path"}: register and load
 * now (a bad file is a 400 naming it); 400 when the name is taken. */
static int load_adapter(srv_server *S, struct MHD_Connection *c, const char *body, size_t len) {
    srv_error e;
    json_error_t je;
    json_t *doc = json_loadb(body, len, 0, &je);
    const char *name = NULL, *path = NULL;
    if (!json_is_object(doc)) srv_fail(&e, 400, "invalid_request_error", NULL, NULL, "the body is not a JSON object");
    else if ((name = body_string(doc, "lora_name", &e)) && (path = body_string(doc, "lora_path", &e))) {
        cx_err err = {0};
        int id = 1;
        cx_adapter_info in;
        for (int i = 0; cx_sched_adapter_info(S->sched, i, &in) == 0; i++)
            if (in.id >= id) id = in.id + 1;
        if (!strcmp(name, S->model_id))
            srv_fail(&e, 400, "invalid_request_error", NULL, "lora_name", "'%s' is the base model's name", name);
        else if (cx_sched_adapter_add(S->sched, id, name, path, 1, &err))
            srv_fail(&e, 400, "invalid_request_error", NULL, strstr(err.msg, "name") ? "lora_name" : "lora_path", "%s",
                     err.msg);
        else {
            int ret = reply_text(S, c, "Success: LoRA adapter '%s' added successfully.", name, 0);
            json_decref(doc);
            return ret;
        }
    }
    json_decref(doc);
    return srv_reply_error(S, c, &e);
}

/* POST /v1/unload_lora_adapter {"lora_name"}: gone now, or (while requests
 * use it) refused to new requests and gone when they end; 404 if unknown. */
static int unload_adapter(srv_server *S, struct MHD_Connection *c, const char *body, size_t len) {
    srv_error e;
    json_error_t je;
    json_t *doc = json_loadb(body, len, 0, &je);
    const char *name = NULL;
    if (!json_is_object(doc)) srv_fail(&e, 400, "invalid_request_error", NULL, NULL, "the body is not a JSON object");
    else if ((name = body_string(doc, "lora_name", &e))) {
        int id = cx_sched_adapter_find(S->sched, name), refs = 0;
        cx_adapter_info in;
        for (int i = 0; id > 0 && cx_sched_adapter_info(S->sched, i, &in) == 0; i++)
            if (in.id == id) refs = in.refs;
        cx_err err = {0};
        int rc = id > 0 ? cx_sched_adapter_remove(S->sched, id, &err) : CX_EINVAL;
        if (rc < 0)
            srv_fail(&e, MHD_HTTP_NOT_FOUND, "invalid_request_error", "model_not_found", "lora_name",
                     "no adapter named '%s' (GET /v1/models)", name);
        else {
            int ret = rc == 0 ? reply_text(S, c, "Success: LoRA adapter '%s' removed successfully.", name, 0)
                              : reply_text(S, c, "Success: LoRA adapter '%s' will be removed when its %d requests end; "
                                                 "new requests naming it are refused.", name, refs);
            json_decref(doc);
            return ret;
        }
    }
    json_decref(doc);
    return srv_reply_error(S, c, &e);
}

/* See srv.h. */
int srv_route(srv_server *S, struct MHD_Connection *c, const char *method, const char *url, const char *body, size_t len) {
    static const struct { const char *url, *method; } ROUTES[] = {
        {"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"}, {"/v1/models", "GET"}, {"/health", "GET"},
        {"/metrics", "GET"}, {"/v1/load_lora_adapter", "POST"}, {"/v1/unload_lora_adapter", "POST"}};
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
    case 5: return load_adapter(S, c, body, len);
    case 6: return unload_adapter(S, c, body, len);
    default: {
        size_t n = 0;
        char *text = srv_metrics_text(&S->metrics, S->sched, &n);
        return srv_reply(S, c, 200, "text/plain; version=0.0.4", text, n, 0);
    }
    }
}
