/*
 * srv_routes.c - what each route answers:
 *   POST /v1/completions, /v1/chat/completions   generate (srv_job.c), whole or streamed (srv_sse.c)
 *   GET  /v1/models, /v1/models/{id}              the base model and every adapter, by name; one of them
 *   POST /v1/load_lora_adapter, /v1/unload_lora_adapter   adapters at run time (vLLM's routes; srv_admin.c)
 *   GET  /health                                  {"status":"ok"}
 *   GET  /metrics                                 Prometheus text (srv_metrics.c)
 * A completion request is parsed (srv_parse.c), its model resolved, its
 * prompt rendered (chat templates) and tokenized as `cortex generate` does
 * (BOS, control-token text as those tokens), then submitted to the
 * scheduler: a full queue answers 429, a prompt too long for the context 400.
 * A completions request with several prompts is one scheduler request per
 * prompt, answered together (one choice each, in order) or not at all.
 * A text longer than the context could hold is refused before it is
 * tokenized (S->max_prompt_bytes), so a huge prompt costs no token array.
 */
#include <assert.h>
#include <fcntl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "srv.h"
#include "cortex_tools.h"


/* See srv.h. */
uint64_t srv_random_seed(void) {
    static atomic_uint_fast64_t counter;
    uint64_t r = 0;
    ssize_t got = getrandom(&r, sizeof r, GRND_NONBLOCK);
    if (got != (ssize_t)sizeof r) { /* no getrandom (old kernel, seccomp) or its pool not ready yet */
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (read(fd, &r, sizeof r) != (ssize_t)sizeof r) r = 0;
            close(fd);
        }
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t n = atomic_fetch_add(&counter, 1) + 1;
    return cx_mix64(r ^ cx_mix64(n * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec));
}

/* See srv.h: the base model's name, or an adapter's (as vLLM names LoRA models). */
int srv_resolve_model(const srv_server *S, const char *model, srv_error *e) {
    if (!model || !strcmp(model, S->model_id)) return 0;
    int id = cx_sched_adapter_find(S->sched, model);
    cx_adapter_info in;
    for (int i = 0; id > 0 && cx_sched_adapter_info(S->sched, i, &in) == 0; i++)
        if (in.id == id && in.removing) id = 0; /* being unloaded: gone for new requests, as /v1/models says */
    if (id > 0) return id;
    return srv_error_set(e, MHD_HTTP_NOT_FOUND, "invalid_request_error", "model_not_found", "model",
                    "the model '%s' does not exist: this server serves '%s' and its adapters (GET /v1/models)", model,
                    S->model_id);
}

/* Reply with a malloc'd JSON document. */
static int reply_json(srv_server *S, struct MHD_Connection *c, int status, char *body) {
    return srv_http_reply(S, c, status, "application/json", body, body ? strlen(body) : 0, 0);
}

/* Tokenize text as `cortex generate` does; malloc'd ids, or NULL with e filled. */
static int32_t *tokenize(const srv_server *S, const char *text, int flags, int *n, srv_error *e) {
    size_t len = strlen(text);
    int cap = (int)(len + 2 < 1u << 28 ? len + 2 : 1u << 28);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)cap);
    cx_err err = {0};
    if (!ids) {
        srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory for the prompt's tokens");
        return NULL;
    }
    if (cx_tokenize(S->m, text, len, flags, ids, cap, n, &err)) {
        srv_error_set(e, 400, "invalid_request_error", NULL, "prompt", "cannot tokenize the prompt: %s", err.msg);
        free(ids);
        return NULL;
    }
    return ids;
}

/* The chat prompt of p's messages in the server's format (harmony's dated
 * today, UTC); NULL with e filled. */
static char *chat_prompt(const srv_server *S, const srv_params *p, srv_error *e) {
    char *text;
    cx_err err = {0};
    if (!S->has_chat) {
        srv_error_set(e, 400, "invalid_request_error", "chat_template_unsupported", "messages", "%s", S->tmpl_why);
        return NULL;
    }
    int rc = cx_chat_render(&S->chat, p->msgs, p->n_msgs, NULL, &text, &err);
    if (rc == CX_ENOMEM) srv_error_set(e, 500, "server_error", NULL, NULL, "%s", err.msg);
    else if (rc) srv_error_set(e, 400, "invalid_request_error", NULL, "messages", "%s", err.msg);
    return rc ? NULL : text;
}

/* The error a refused submission answers with. */
static void submit_error(const srv_params *p, int rc, const cx_err *err, srv_error *e) {
    const char *what = p->chat ? "messages" : "prompt";
    if (rc == CX_EBUSY)
        srv_error_set(e, MHD_HTTP_TOO_MANY_REQUESTS, "rate_limit_error", "queue_full", NULL, "the server is busy: %s; retry later",
                 err->msg);
    else if (rc == CX_ECTX)
        srv_error_set(e, 400, "invalid_request_error", "context_length_exceeded", what, "%s", err->msg);
    else if (rc == CX_ENOMEM)
        srv_error_set(e, 500, "server_error", NULL, NULL, "%s", err->msg);
    else
        srv_error_set(e, 400, "invalid_request_error", NULL, NULL, "%s", err->msg);
}

/* Wait for the end of jobs j[0..n) and answer with the whole response
 * (504 with partial usage past the deadline); a client that goes away drops
 * the connection (and cancels every job). The jobs' references are dropped. */
static int answer_whole(srv_server *S, struct MHD_Connection *c, const srv_out *o, srv_job **j, int n) {
    assert(n >= 1 && n <= SRV_MAX_PROMPTS && "one job per prompt, within the limit");
    int gone = 0;
    for (int i = 0; i < n && !gone; i++) {
        pthread_mutex_lock(&j[i]->mu);
        gone = srv_job_wait(j[i], (size_t)-1, c); /* until it ends */
        pthread_mutex_unlock(&j[i]->mu);
    }
    srv_error e;
    char *body = NULL;
    int status = 200, failed = 0;
    for (int i = 0; i < n; i++) pthread_mutex_lock(&j[i]->mu); /* always in this order */
    for (int i = 0; i < n && !gone && !failed; i++) failed = srv_job_error(j[i], &e) != 0;
    if (!gone && failed) {
        body = srv_reply_error_usage(&e, j, n);
        status = e.status;
    } else if (!gone) {
        body = srv_reply_body(o, j, n);
    }
    for (int i = n - 1; i >= 0; i--) pthread_mutex_unlock(&j[i]->mu);
    for (int i = 0; i < n; i++) srv_job_put(j[i]);
    if (gone) return MHD_NO;
    return reply_json(S, c, status, body);
}

/* POST /v1/completions (chat = 0) and /v1/chat/completions (chat = 1).
 * Choice i samples with seed + i: the request's `seed`, or one drawn now. */
static int completion(srv_server *S, struct MHD_Connection *c, const char *body, size_t len, int chat) {
    srv_params p;
    srv_error e;
    srv_job *jobs[SRV_MAX_PROMPTS];
    int32_t *ids = NULL, stop_ids[CX_CHAT_MAX_END];
    const char *stop[SRV_MAX_STOP + CX_CHAT_MAX_END];
    const char *const *end = chat ? S->chat.end : NULL; /* the texts ending an assistant turn */
    char *text = NULL;
    int n_ids = 0, ret, adapter = 0, n_jobs = 0;
    int64_t t_arrive = srv_now_ns(); /* parsing and tokenizing count in the server's own time, not the client's */
    if (srv_parse_request(body, len, chat, &S->sp, &p, &e) || (adapter = srv_resolve_model(S, p.model, &e)) < 0) goto fail;
    if (chat) {
        if (!(text = chat_prompt(S, &p, &e))) goto fail;
    }
    for (int i = 0; i < (chat ? 1 : p.n_prompts); i++) { /* every text bounded before any is tokenized */
        const char *t = chat ? text : p.prompts[i].text;
        size_t bytes = t ? strlen(t) : 0;
        if (bytes > S->max_prompt_bytes) {
            srv_error_set(&e, 400, "invalid_request_error", "context_length_exceeded", chat ? "messages" : "prompt",
                     "the prompt (%zu bytes) leaves no room to generate in the %d-token context: a context of %d tokens "
                     "holds at most %zu bytes of text (%zu per token, the model's longest, times %d)",
                     bytes, S->n_ctx, S->n_ctx, S->max_prompt_bytes, S->max_prompt_bytes / (size_t)S->n_ctx, S->n_ctx);
            goto fail;
        }
    }
    cx_request q = cx_request_defaults();
    q.sampling = p.sp;
    if (!p.seed_given) q.sampling.seed = srv_random_seed(); /* as llama-server and vLLM: unseeded answers differ */
    q.max_tokens = p.max_tokens ? p.max_tokens : S->cfg->max_tokens;
    q.priority = p.priority;
    q.ignore_eos = p.ignore_eos;
    q.no_prefix_cache = !p.cache_prompt;
    q.speculate = p.speculate;
    q.deadline_ms = S->cfg->request_timeout_ms;
    q.adapter = adapter;
    memcpy(stop, p.stop, sizeof p.stop);
    q.stop = stop;
    q.n_stop = p.n_stop;
    for (int k = 0; end && k < CX_CHAT_MAX_END && end[k] && *end[k]; k++) { /* the template's ends of turn: tokens, or texts */
        int n_end = 0;
        int32_t *end_ids = tokenize(S, end[k], CX_TOKENIZE_SPECIAL, &n_end, &e);
        if (end_ids && n_end == 1) stop_ids[q.n_stop_ids++] = end_ids[0];
        else stop[q.n_stop++] = end[k];
        free(end_ids);
    }
    q.stop_ids = stop_ids;
    uint64_t seed = q.sampling.seed;
    for (int i = 0; i < (chat ? 1 : p.n_prompts); i++) {
        const srv_prompt *pr = chat ? NULL : &p.prompts[i];
        const char *t = chat ? text : pr->text;
        if (t && !(ids = tokenize(S, t, CX_TOKENIZE_BOS | CX_TOKENIZE_SPECIAL, &n_ids, &e))) goto fail;
        q.sampling.seed = seed + (uint64_t)i;
        cx_err err = {0};
        int rc = srv_job_submit(S, &q, ids ? ids : pr->ids, ids ? n_ids : pr->n_ids, p.logprobs ? p.top_logprobs : 0,
                                p.logprobs, chat && S->chat.tmpl == CX_CHAT_HARMONY, &jobs[n_jobs], &err);
        free(ids); /* the scheduler copied the prompt */
        ids = NULL;
        if (rc) {
            submit_error(&p, rc, &err, &e);
            goto fail;
        }
        pthread_mutex_lock(&jobs[n_jobs]->mu);
        jobs[n_jobs]->t_arrive = t_arrive;
        pthread_mutex_unlock(&jobs[n_jobs]->mu);
        n_jobs++;
    }
    free(text);
    srv_out o = {.S = S, .p = &p, .created = (int64_t)time(NULL)};
    snprintf(o.id, sizeof o.id, "%s-%lld", chat ? "chatcmpl" : "cmpl", (long long)jobs[0]->id);
    if (p.stream) ret = srv_sse_start(S, c, &o, &p, jobs[0]); /* one job: the parser refuses streams of several */
    else ret = answer_whole(S, c, &o, jobs, n_jobs);
    srv_params_free(&p);
    return ret;
fail:
    for (int i = 0; i < n_jobs; i++) srv_job_put(jobs[i]); /* all or nothing: the prompts submitted so far are cancelled */
    free(ids);
    free(text);
    srv_params_free(&p);
    srv_metrics_refused(&S->metrics, e.status);
    return srv_http_reply_error(S, c, &e);
}

/* The /v1/models entry of the base model, or of adapter `in` (vLLM's shape:
 * the base as its parent, and whether it is loaded now). */
static json_t *model_entry(const srv_server *S, const cx_adapter_info *in) {
    if (!in)
        return json_pack("{s:s, s:s, s:i, s:s, s:s}", "id", S->model_id, "object", "model", "created", 0, "owned_by",
                         "cortex", "root", S->model_id);
    return json_pack("{s:s, s:s, s:i, s:s, s:s, s:s, s:b}", "id", in->name, "object", "model", "created", 0, "owned_by",
                     "cortex", "root", in->path, "parent", S->model_id, "resident", in->resident);
}

/* GET /v1/models: the base model, then each adapter not being unloaded. */
static int models(srv_server *S, struct MHD_Connection *c) {
    json_t *data = json_array();
    json_array_append_new(data, model_entry(S, NULL));
    cx_adapter_info in;
    for (int i = 0; data && cx_sched_adapter_info(S->sched, i, &in) == 0; i++)
        if (!in.removing) json_array_append_new(data, model_entry(S, &in));
    json_t *v = json_pack("{s:s, s:o}", "object", "list", "data", data);
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    return reply_json(S, c, 200, s);
}

/* GET /v1/models/{id}: that entry of /v1/models, or OpenAI's 404. */
static int model_one(srv_server *S, struct MHD_Connection *c, const char *id) {
    json_t *v = NULL;
    cx_adapter_info in;
    if (!strcmp(id, S->model_id)) v = model_entry(S, NULL);
    for (int i = 0; !v && cx_sched_adapter_info(S->sched, i, &in) == 0; i++)
        if (!in.removing && !strcmp(in.name, id)) v = model_entry(S, &in);
    if (!v) {
        srv_error e;
        srv_error_set(&e, MHD_HTTP_NOT_FOUND, "invalid_request_error", "model_not_found", "model",
                 "The model '%s' does not exist", id);
        return srv_http_reply_error(S, c, &e);
    }
    char *s = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    return reply_json(S, c, 200, s);
}

/* See srv.h. */
int srv_route(srv_server *S, struct MHD_Connection *c, const char *method, const char *url, const char *body, size_t len) {
    static const struct { const char *url, *method; } ROUTES[] = {
        {"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"}, {"/v1/models", "GET"}, {"/health", "GET"},
        {"/metrics", "GET"}, {"/v1/load_lora_adapter", "POST"}, {"/v1/unload_lora_adapter", "POST"},
        {"/v1/models/", "GET"}}; /* the last: a prefix, the model's id after it */
    enum { N_ROUTES = (int)(sizeof ROUTES / sizeof ROUTES[0]) };
    srv_error e;
    int r = -1;
    for (int i = 0; i < N_ROUTES - 1; i++)
        if (!strcmp(url, ROUTES[i].url)) r = i;
    size_t np = strlen(ROUTES[N_ROUTES - 1].url);
    if (r < 0 && !strncmp(url, ROUTES[N_ROUTES - 1].url, np) && url[np]) r = N_ROUTES - 1;
    if (r < 0) {
        srv_error_set(&e, MHD_HTTP_NOT_FOUND, "invalid_request_error", "not_found", NULL, "no route %s %s", method, url);
        return srv_http_reply_error(S, c, &e);
    }
    if (strcmp(method, ROUTES[r].method)) {
        srv_error_set(&e, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", "method_not_allowed", NULL,
                 "%s takes %s, not %s", r == N_ROUTES - 1 ? "/v1/models/{id}" : url, ROUTES[r].method, method);
        return srv_http_reply_error(S, c, &e);
    }
    switch (r) {
    case 0: case 1: return completion(S, c, body, len, r == 1);
    case 2: return models(S, c);
    case 3: {
        char *ok = strdup("{\"status\":\"ok\"}");
        return reply_json(S, c, 200, ok);
    }
    case 5: case 6: return srv_admin_adapter(S, c, r == 5, body, len);
    case 7: return model_one(S, c, url + np);
    default: {
        size_t n = 0;
        char *text = srv_metrics_text(&S->metrics, S->sched, &n);
        return srv_http_reply(S, c, 200, "text/plain; version=0.0.4", text, n, 0);
    }
    }
}
