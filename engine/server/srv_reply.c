/*
 * srv_reply.c - the JSON bodies the completion routes answer with, in
 * OpenAI's shapes: text_completion and chat.completion objects, their
 * streaming chunks, usage, logprobs, and error bodies carrying partial usage.
 * JSON strings must be UTF-8 while a model may emit any bytes (a byte token
 * can be half a character), so text goes through srv_json_utf8: each
 * invalid byte becomes U+FFFD, as decoders do; the streaming code only cuts text at
 * character boundaries (srv_sse.c), so chunks add up to the whole. A
 * harmony chat answer shows its final channel as content and its analysis
 * as reasoning (srv_chat_split, which the streaming code shares).
 */
#include <assert.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

/* See srv.h. */
size_t srv_utf8_cut(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t k = n; k > 0 && n - k < 4; k--) {
        unsigned c = u[k - 1];
        if ((c & 0xc0) == 0x80) continue; /* a continuation byte: look further back */
        size_t want = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
        return want > n - (k - 1) ? k - 1 : n;
    }
    return n;
}

/* See srv.h. */
const char *srv_finish_reason(const srv_job *j) {
    if (!j->done || j->state != CX_REQ_FINISHED) return NULL;
    switch (j->reason) {
    case CX_STOP_LENGTH:
        return "length";
    case CX_STOP_EOS:
    case CX_STOP_TOKEN:
    case CX_STOP_STRING:
        return "stop";
    case CX_STOP_NONE:
        break;
    }
    assert(0 && "a finished request has a reason");
    return "stop";
}

/* {"prompt_tokens","completion_tokens","total_tokens"} of j so far, and
 * prompt_tokens_details.cached_tokens: the prompt tokens the prefix cache
 * supplied (OpenAI's and vLLM's name for timings.cache_n). */
static json_t *usage_json(int prompt, int gen, int cached) {
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", prompt, "completion_tokens", gen, "total_tokens",
                     prompt + gen, "prompt_tokens_details", "cached_tokens", cached);
}
static json_t *usage(const srv_job *j) { return usage_json(j->n_prompt, j->n_gen, j->n_cached); }
/* Several prompts: summed over their choices, as OpenAI counts them. */
static json_t *usage_of(srv_job *const *j, int n) {
    int prompt = 0, gen = 0, cached = 0;
    for (int i = 0; i < n; i++) {
        prompt += j[i]->n_prompt;
        gen += j[i]->n_gen;
        cached += j[i]->n_cached;
    }
    return usage_json(prompt, gen, cached);
}

/* Milliseconds from a to b (CLOCK_MONOTONIC ns), or null when either is not known yet. */
static json_t *span_ms(int64_t a, int64_t b) { return a && b ? json_real((double)(b - a) * 1e-6) : json_null(); }

/* The server's own split of an ended job's time (docs/server.md, "Timings"):
 * llama-server's names (prompt_n/prompt_ms: tokens computed and the prefill
 * up to the first token; predicted_n/predicted_ms: tokens generated and the
 * time after the first), and Cortex's: cache_n, prepare_ms (body in ->
 * submitted: parsing, chat template, tokenizing), queue_ms (submitted ->
 * first scheduled) and ttft_ms (submitted -> first token, the
 * cortex_time_to_first_token_seconds of /metrics). A client subtracts ttft_ms
 * from its own TTFT to see what the HTTP path costs. */
static json_t *timings(const srv_job *j) {
    json_t *t = json_pack("{s:i, s:o, s:i, s:o, s:i, s:o, s:o, s:o}", "prompt_n", j->n_prompt - j->n_cached, "prompt_ms",
                          span_ms(j->t_start, j->t_first), "predicted_n", j->n_gen, "predicted_ms",
                          span_ms(j->t_first, j->t_end), "cache_n", j->n_cached, "prepare_ms",
                          span_ms(j->t_arrive, j->t_submit), "queue_ms", span_ms(j->t_submit, j->t_start), "ttft_ms",
                          span_ms(j->t_submit, j->t_first));
    if (t && j->S->drafter) { /* speculation (llama-server's names): draft tokens checked, and accepted */
        json_object_set_new(t, "draft_n", json_integer(j->draft_n));
        json_object_set_new(t, "draft_n_accepted", json_integer(j->draft_accepted));
    }
    return t;
}

/* A token's text as a JSON string, and its raw bytes when `bytes` is not NULL. */
static json_t *piece_json(const cx_model *m, int prev, int token, json_t **bytes) {
    char tmp[2];
    const char *p;
    size_t n = cx_token_piece(m, prev, token, tmp, &p);
    if (bytes) {
        *bytes = json_array();
        for (size_t i = 0; i < n; i++) json_array_append_new(*bytes, json_integer((unsigned char)p[i]));
    }
    return srv_json_utf8(p, n);
}

/* The logprobs of tokens [t0, t1) in the completions shape (tokens,
 * token_logprobs, top_logprobs, text_offset: offsets count from the first
 * token of the range, as the pieces add up) or the chat shape (content). */
static json_t *logprobs(const srv_out *o, const srv_job *j, int t0, int t1) {
    const cx_model *m = o->S->m;
    if (o->p->chat) {
        json_t *content = json_array();
        for (int i = t0; i < t1; i++) {
            const srv_tok *t = &j->toks[i];
            json_t *bytes, *tops = json_array();
            json_t *s = piece_json(m, t->prev, t->token, &bytes);
            for (int k = 0; k < t->n_top; k++) {
                json_t *kb, *ks = piece_json(m, t->prev, t->top[k].token, &kb);
                json_array_append_new(tops, json_pack("{s:o, s:f, s:o}", "token", ks, "logprob",
                                                      (double)t->top[k].logprob, "bytes", kb));
            }
            json_array_append_new(content, json_pack("{s:o, s:f, s:o, s:o}", "token", s, "logprob", (double)t->logprob,
                                                     "bytes", bytes, "top_logprobs", tops));
        }
        return json_pack("{s:o}", "content", content);
    }
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t off = 0;
    for (int i = t0; i < t1; i++) {
        const srv_tok *t = &j->toks[i];
        char tmp[2];
        const char *p;
        json_array_append_new(offs, json_integer((json_int_t)off));
        off += cx_token_piece(m, t->prev, t->token, tmp, &p);
        json_array_append_new(toks, piece_json(m, t->prev, t->token, NULL));
        json_array_append_new(lps, json_real(t->logprob));
        json_t *top = json_object();
        for (int k = 0; k < t->n_top; k++) {
            json_t *ks = piece_json(m, t->prev, t->top[k].token, NULL);
            if (ks && !json_object_get(top, json_string_value(ks)))
                json_object_set_new(top, json_string_value(ks), json_real(t->top[k].logprob));
            json_decref(ks);
        }
        json_array_append_new(tops, top);
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs", tops, "text_offset",
                     offs);
}

/* The logprobs value of a choice: null unless asked (or tokens were lost to memory). */
static json_t *choice_logprobs(const srv_out *o, const srv_job *j, int t0, int t1) {
    if (!o->p->logprobs || j->oom) return json_null();
    return logprobs(o, j, t0, t1 < j->n_toks ? t1 : j->n_toks);
}

/* An object with id, object, created, model (the name the request used: the
 * base model's or an adapter's) and `choices`. */
static json_t *envelope(const srv_out *o, const char *object, json_t *choices) {
    const char *model = o->p->model ? o->p->model : o->S->model_id;
    return json_pack("{s:s, s:s, s:I, s:s, s:o}", "id", o->id, "object", object, "created", (json_int_t)o->created, "model",
                     model, "choices", choices);
}

/* Serialize and free v. */
static char *dump(json_t *v) {
    char *s = v ? json_dumps(v, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL; /* 9 digits: every float round-trips */
    json_decref(v);
    return s;
}

/* A finish_reason value: the string, or null. */
static json_t *finish_json(const char *f) { return f ? json_string(f) : json_null(); }

/* See srv.h. */
int srv_chat_split(int harmony, const char *t, size_t n, cx_harmony_parts *parts, const char **c, size_t *nc,
                   const char **r, size_t *nr) {
    memset(parts, 0, sizeof *parts);
    *c = t;
    *nc = n;
    *r = NULL;
    *nr = 0;
    int rc = harmony ? cx_harmony_split(t, n, parts) : 0;
    if (rc < 0) return -1;
    if (rc > 0) {
        *c = parts->content ? parts->content : "";
        *nc = parts->n_content;
        *r = parts->reasoning;
        *nr = parts->n_reasoning;
    }
    return 0;
}

/* Choice number `index` of a whole response: job j's answer. A chat answer
 * carries what srv_chat_split makes of the text: harmony's final channel as
 * content, its analysis as reasoning_content. */
static json_t *choice_of(const srv_out *o, const srv_job *j, int index) {
    json_t *choice;
    const char *fin = srv_finish_reason(j);
    if (o->p->chat) {
        cx_harmony_parts parts;
        const char *c, *r;
        size_t nc, nr;
        if (srv_chat_split(j->harmony, j->text, j->len, &parts, &c, &nc, &r, &nr)) return NULL;
        json_t *msg = json_pack("{s:s, s:o}", "role", "assistant", "content", srv_json_utf8(c, nc));
        if (msg && r) json_object_set_new(msg, "reasoning_content", srv_json_utf8(r, nr));
        cx_harmony_parts_free(&parts);
        choice = json_pack("{s:i, s:o, s:o, s:o}", "index", index, "message", msg, "logprobs",
                           choice_logprobs(o, j, 0, j->n_toks), "finish_reason", finish_json(fin));
    } else {
        choice = json_pack("{s:i, s:o, s:o, s:o}", "index", index, "text", srv_json_utf8(j->text, j->len), "logprobs",
                           choice_logprobs(o, j, 0, j->n_toks), "finish_reason", finish_json(fin));
    }
    return choice;
}

/* See srv.h. `timings` describe one request's life: given for a single choice only. */
char *srv_reply_body(const srv_out *o, srv_job *const *j, int n) {
    json_t *choices = json_array();
    for (int i = 0; choices && i < n; i++) {
        json_t *ch = choice_of(o, j[i], i);
        if (!ch || json_array_append_new(choices, ch)) {
            json_decref(choices);
            return NULL;
        }
    }
    json_t *v = choices ? envelope(o, o->p->chat ? "chat.completion" : "text_completion", choices) : NULL;
    if (v) json_object_set_new(v, "usage", usage_of(j, n));
    if (v && n == 1 && j[0]->done) json_object_set_new(v, "timings", timings(j[0]));
    return dump(v);
}

/* See srv.h. */
char *srv_reply_chunk(const srv_out *o, const srv_job *j, const char *text, size_t n, const char *reasoning, size_t nr,
                      int t0, int t1, const char *finish, int role) {
    json_t *choice;
    if (o->p->chat) {
        json_t *delta = json_object();
        if (role) json_object_set_new(delta, "role", json_string("assistant"));
        if (nr) json_object_set_new(delta, "reasoning_content", srv_json_utf8(reasoning, nr));
        if (n || role) json_object_set_new(delta, "content", srv_json_utf8(text, n));
        choice = json_pack("{s:i, s:o, s:o, s:o}", "index", 0, "delta", delta, "logprobs",
                           t1 > t0 ? choice_logprobs(o, j, t0, t1) : json_null(), "finish_reason", finish_json(finish));
    } else {
        choice = json_pack("{s:i, s:o, s:o, s:o}", "index", 0, "text", srv_json_utf8(text, n), "logprobs",
                           t1 > t0 ? choice_logprobs(o, j, t0, t1) : json_null(), "finish_reason", finish_json(finish));
    }
    json_t *v = envelope(o, o->p->chat ? "chat.completion.chunk" : "text_completion", json_pack("[o]", choice));
    if (v && finish && j->done) json_object_set_new(v, "timings", timings(j)); /* on the last chunk, as llama-server */
    return dump(v);
}

/* See srv.h. */
char *srv_reply_usage_chunk(const srv_out *o, const srv_job *j) {
    json_t *v = envelope(o, o->p->chat ? "chat.completion.chunk" : "text_completion", json_array());
    if (v) json_object_set_new(v, "usage", usage(j));
    return dump(v);
}

/* See srv.h. */
int srv_job_error(const srv_job *j, srv_error *e) {
    assert(j->done && "a job's outcome is known once on_done ran");
    if (j->oom) return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory for the request's output");
    switch (j->state) {
    case CX_REQ_TIMEOUT:
        return srv_error_set(e, 504, "timeout_error", "request_timeout", NULL, "the request passed its deadline (--request-timeout) "
                        "after %d generated tokens", j->n_gen);
    case CX_REQ_FAILED:
        return srv_error_set(e, 500, "server_error", NULL, NULL, "the request failed: %s", j->error);
    case CX_REQ_CANCELLED:
        return srv_error_set(e, 503, "server_error", NULL, NULL, "the request was cancelled");
    case CX_REQ_FINISHED:
        return 0;
    case CX_REQ_QUEUED:
    case CX_REQ_PREFILL:
    case CX_REQ_DECODE:
        break;
    }
    assert(0 && "a done job is in a final state");
    return srv_error_set(e, 500, "server_error", NULL, NULL, "the request ended in no final state");
}

/* See srv.h. */
char *srv_reply_error_usage(const srv_error *e, srv_job *const *j, int n) {
    char *s = srv_error_json(e);
    json_t *v = s ? json_loads(s, 0, NULL) : NULL;
    free(s);
    if (v) json_object_set_new(v, "usage", usage_of(j, n));
    return dump(v);
}
