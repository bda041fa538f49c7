/*
 * srv_parse.c - request bodies of /v1/completions and /v1/chat/completions
 * into srv_params, with jansson. Every wrong type, range or shape is refused
 * with a 400 naming the field (OpenAI's error object), and so is every
 * field OpenAI defines that this server does not implement (UNSUPPORTED,
 * below); fields OpenAI does not define are ignored, as llama-server does;
 * a JSON null is the field left out.
 */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

#define BAD 400
#define INVALID "invalid_request_error"

/* Length of the valid UTF-8 sequence starting at s (n bytes left), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t k = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!k || k > n) return 0;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (k == 2 && c < 0xc2) return 0;                                    /* overlong */
    if (k == 3 && c == 0xe0 && s[1] < 0xa0) return 0;                    /* overlong */
    if (k == 3 && c == 0xed && s[1] >= 0xa0) return 0;                   /* surrogates */
    if (k == 4 && (c > 0xf4 || (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))) return 0;
    return k;
}

/* See srv.h. */
json_t *srv_json_utf8(const char *s, size_t n) {
    char *buf = malloc(n * 3 + 1);
    if (!buf) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq((const unsigned char *)s + i, n - i);
        if (k) {
            memcpy(buf + o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(buf + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    json_t *j = json_stringn(buf, o);
    free(buf);
    return j;
}

/* See srv.h. The message and param may quote request bytes (or be cut
 * inside a character), so they go through srv_json_utf8. */
char *srv_error_json(const srv_error *e) {
    json_t *o = json_pack("{s:{s:o, s:s, s:o, s:o}}", "error", "message", srv_json_utf8(e->message, strlen(e->message)),
                          "type", e->type, "param", e->param[0] ? srv_json_utf8(e->param, strlen(e->param)) : json_null(), "code",
                          e->code ? json_string(e->code) : json_null());
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

/* Field `k` of object o; NULL when absent or null. */
static json_t *field(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return v && !json_is_null(v) ? v : NULL;
}

/* Read number field k into *out when present: within [lo, hi]. 0, or -1 with e filled. */
static int get_num(json_t *o, const char *k, double lo, double hi, float *out, srv_error *e) {
    json_t *v = field(o, k);
    if (!v) return 0;
    if (!json_is_number(v)) return srv_error_set(e, BAD, INVALID, NULL, k, "'%s' must be a number", k);
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) return srv_error_set(e, BAD, INVALID, NULL, k, "'%s' is %g; it must lie in [%g, %g]", k, d, lo, hi);
    *out = (float)d;
    return 0;
}

/* Read integer field k into *out when present: within [lo, hi]. 0, or -1 with e filled. */
static int get_int(json_t *o, const char *k, long long lo, long long hi, long long *out, srv_error *e) {
    json_t *v = field(o, k);
    if (!v) return 0;
    if (!json_is_integer(v)) return srv_error_set(e, BAD, INVALID, NULL, k, "'%s' must be an integer", k);
    long long n = json_integer_value(v);
    if (n < lo || n > hi) return srv_error_set(e, BAD, INVALID, NULL, k, "'%s' is %lld; it must lie in [%lld, %lld]", k, n, lo, hi);
    *out = n;
    return 0;
}

/* Read boolean field k into *out when present. 0, or -1 with e filled. */
static int get_bool(json_t *o, const char *k, int *out, srv_error *e) {
    json_t *v = field(o, k);
    if (!v) return 0;
    if (!json_is_boolean(v)) return srv_error_set(e, BAD, INVALID, NULL, k, "'%s' must be true or false", k);
    *out = json_is_true(v);
    return 0;
}

/* `stop`: a string or an array of up to SRV_MAX_STOP non-empty strings. */
static int get_stop(json_t *o, srv_params *p, srv_error *e) {
    json_t *v = field(o, "stop");
    if (!v) return 0;
    if (json_is_string(v)) {
        if (!json_string_length(v)) return srv_error_set(e, BAD, INVALID, NULL, "stop", "'stop' must not be empty");
        p->stop[p->n_stop++] = json_string_value(v);
        return 0;
    }
    if (!json_is_array(v)) return srv_error_set(e, BAD, INVALID, NULL, "stop", "'stop' must be a string or an array of strings");
    if (json_array_size(v) > SRV_MAX_STOP)
        return srv_error_set(e, BAD, INVALID, NULL, "stop", "'stop' has %zu strings; at most %d are allowed", json_array_size(v),
                        SRV_MAX_STOP);
    size_t i;
    json_t *s;
    json_array_foreach(v, i, s) {
        if (!json_is_string(s) || !json_string_length(s))
            return srv_error_set(e, BAD, INVALID, NULL, "stop", "'stop[%zu]' must be a non-empty string", i);
        p->stop[p->n_stop++] = json_string_value(s);
    }
    return 0;
}

/* One completions prompt from v (a string, or an array of token ids) into *out; `param` names it. */
static int get_one_prompt(json_t *v, const char *param, srv_prompt *out, srv_error *e) {
    if (json_is_string(v)) {
        if (!json_string_length(v)) return srv_error_set(e, BAD, INVALID, NULL, param, "'%s' must not be empty", param);
        out->text = json_string_value(v);
        return 0;
    }
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (!n) return srv_error_set(e, BAD, INVALID, NULL, param, "'%s' must be a non-empty string or array of token ids", param);
    if (n > (1u << 24)) return srv_error_set(e, BAD, INVALID, NULL, param, "'%s' has too many tokens (%zu)", param, n);
    out->ids = malloc(sizeof(int32_t) * n);
    if (!out->ids) return srv_error_set(e, 500, "server_error", NULL, param, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(v, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX)
            return srv_error_set(e, BAD, INVALID, NULL, param, "'%s[%zu]' must be a token id (an integer >= 0)", param, i);
        out->ids[i] = (int32_t)json_integer_value(t);
    }
    out->n_ids = (int)n;
    return 0;
}

/* The completions route's `prompt`, OpenAI's four shapes: a string, an
 * array of token ids (one prompt each), or an array of strings or of token-id
 * arrays (one prompt, and one choice, per element). */
static int get_prompt(json_t *o, srv_params *p, srv_error *e) {
    json_t *v = field(o, "prompt");
    if (!v) return srv_error_set(e, BAD, INVALID, NULL, "prompt", "'prompt' is required");
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    int list = n && !json_is_integer(json_array_get(v, 0)); /* [ids...] is one prompt; [x, y] with x not an id, a list */
    if (list && n > SRV_MAX_PROMPTS)
        return srv_error_set(e, BAD, INVALID, NULL, "prompt", "'prompt' has %zu prompts; at most %d are allowed", n,
                        SRV_MAX_PROMPTS);
    p->prompts = calloc(list ? n : 1, sizeof *p->prompts);
    if (!p->prompts) return srv_error_set(e, 500, "server_error", NULL, "prompt", "out of memory");
    if (!list) {
        p->n_prompts = 1;
        return get_one_prompt(v, "prompt", &p->prompts[0], e);
    }
    for (size_t i = 0; i < n; i++) {
        char param[32];
        snprintf(param, sizeof param, "prompt[%zu]", i);
        p->n_prompts = (int)i + 1; /* freed up to here whatever happens */
        if (get_one_prompt(json_array_get(v, i), param, &p->prompts[i], e)) return -1;
    }
    return 0;
}

/* A message's content: a string, or an array of {"type":"text","text":...}
 * parts, joined (the joined string is stored back into the message, which
 * the document owns). */
static int get_content(json_t *msg, size_t i, const char **out, srv_error *e) {
    char param[64];
    snprintf(param, sizeof param, "messages[%zu].content", i);
    json_t *v = field(msg, "content");
    if (!v) return srv_error_set(e, BAD, INVALID, NULL, param, "'%s' is required", param);
    if (json_is_string(v)) {
        *out = json_string_value(v);
        return 0;
    }
    if (!json_is_array(v)) return srv_error_set(e, BAD, INVALID, NULL, param, "'%s' must be a string or an array of text parts", param);
    size_t total = 0, k;
    json_t *part;
    json_array_foreach(v, k, part) {
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_string(type) || strcmp(json_string_value(type), "text") || !json_is_string(text))
            return srv_error_set(e, BAD, INVALID, NULL, param, "'%s[%zu]' must be a text part {\"type\": \"text\", \"text\": ...}",
                            param, k);
        total += json_string_length(text);
    }
    char *buf = malloc(total + 1);
    if (!buf) return srv_error_set(e, 500, "server_error", NULL, param, "out of memory");
    size_t at = 0;
    json_array_foreach(v, k, part) {
        json_t *text = json_object_get(part, "text");
        memcpy(buf + at, json_string_value(text), json_string_length(text));
        at += json_string_length(text);
    }
    buf[at] = 0;
    json_t *s = json_string(buf);
    free(buf);
    if (!s || json_object_set_new(msg, "content", s)) return srv_error_set(e, 500, "server_error", NULL, param, "out of memory");
    *out = json_string_value(json_object_get(msg, "content"));
    return 0;
}

/* The chat route's `messages`: a non-empty array of {role, content}. */
static int get_messages(json_t *o, srv_params *p, srv_error *e) {
    json_t *v = field(o, "messages");
    if (!v) return srv_error_set(e, BAD, INVALID, NULL, "messages", "'messages' is required");
    if (!json_is_array(v) || !json_array_size(v))
        return srv_error_set(e, BAD, INVALID, NULL, "messages", "'messages' must be a non-empty array");
    size_t n = json_array_size(v), i;
    if (n > (1u << 20)) return srv_error_set(e, BAD, INVALID, NULL, "messages", "'messages' has too many entries (%zu)", n);
    p->msgs = calloc(n, sizeof *p->msgs);
    if (!p->msgs) return srv_error_set(e, 500, "server_error", NULL, "messages", "out of memory");
    json_t *m;
    json_array_foreach(v, i, m) {
        char param[64];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(m)) return srv_error_set(e, BAD, INVALID, NULL, param, "'%s' must be an object", param);
        json_t *role = json_object_get(m, "role");
        const char *r = json_is_string(role) ? json_string_value(role) : "";
        if (!strcmp(r, "developer")) r = "system"; /* OpenAI's newer name for the system role (o1 and later) */
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant")) {
            snprintf(param, sizeof param, "messages[%zu].role", i);
            return srv_error_set(e, BAD, INVALID, NULL, param, "'%s' must be \"system\", \"developer\", \"user\" or "
                            "\"assistant\" (tool calls are not supported)", param);
        }
        p->msgs[i].role = r;
        if (get_content(m, i, &p->msgs[i].content, e)) return -1;
        p->n_msgs++;
    }
    return 0;
}

/* Sampling fields: OpenAI's, and llama.cpp's extensions top_k, min_p, repeat_penalty. */
static int get_sampling(json_t *o, srv_params *p, srv_error *e) {
    long long seed = -1;
    if (get_num(o, "temperature", 0, 100, &p->sp.temperature, e) || get_num(o, "top_p", 0, 1, &p->sp.top_p, e) ||
        get_num(o, "min_p", 0, 1, &p->sp.min_p, e) || get_num(o, "presence_penalty", -2, 2, &p->sp.presence_penalty, e) ||
        get_num(o, "frequency_penalty", -2, 2, &p->sp.frequency_penalty, e) ||
        get_num(o, "repeat_penalty", 0.01, 100, &p->sp.repeat_penalty, e) ||
        get_int(o, "seed", 0, 0xffffffffLL, &seed, e))
        return -1;
    long long top_k = p->sp.top_k;
    if (get_int(o, "top_k", 0, 1 << 24, &top_k, e)) return -1;
    p->sp.top_k = (int)top_k;
    if (seed >= 0) p->sp.seed = (uint64_t)seed;
    p->seed_given = seed >= 0;
    return 0;
}

/* logprobs: completions take an integer (alternatives per token, 0..20),
 * chat a boolean with top_logprobs beside it. */
static int get_logprobs(json_t *o, srv_params *p, srv_error *e) {
    long long n = 0;
    if (!p->chat) {
        if (field(o, "logprobs") && get_int(o, "logprobs", 0, SRV_MAX_TOP_LOGPROBS, &n, e)) return -1;
        p->logprobs = field(o, "logprobs") != NULL;
        p->top_logprobs = (int)n;
        return 0;
    }
    if (get_bool(o, "logprobs", &p->logprobs, e) || get_int(o, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &n, e)) return -1;
    if (field(o, "top_logprobs") && !p->logprobs)
        return srv_error_set(e, BAD, INVALID, NULL, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
    p->top_logprobs = (int)n;
    return 0;
}

/* Speculative decoding per request (extensions): "speculative": false turns
 * it off, llama-server's "speculative.n_max" caps the draft (0: off). */
static int get_speculative(json_t *o, srv_params *p, srv_error *e) {
    int on = 1;
    long long n_max = -1;
    if (get_bool(o, "speculative", &on, e) || get_int(o, "speculative.n_max", 0, 1 << 24, &n_max, e)) return -1;
    p->speculate = !on ? 0 : n_max >= 0 ? (int)n_max : -1;
    return 0;
}

/* ---- OpenAI fields this server does not implement ------------------------
 * A client that sends one expects its effect (JSON output, tool calls, a
 * biased vocabulary, several choices); answering 200 without it would look
 * like success. So each is a 400 naming it, unless its value asks for no
 * effect at all (the value OpenAI's default means). Fields OpenAI does not
 * define are still ignored, as llama-server and vLLM ignore them. */

/* The no-effect values, one predicate each. */
static int is_text_format(json_t *v) {
    json_t *t = json_object_get(v, "type");
    return json_is_object(v) && json_object_size(v) == 1 && json_is_string(t) && !strcmp(json_string_value(t), "text");
}
static int is_none(json_t *v) { return json_is_string(v) && !strcmp(json_string_value(v), "none"); }
static int is_false(json_t *v) { return json_is_false(v); }
static int is_one(json_t *v) { return json_is_integer(v) && json_integer_value(v) == 1; }
static int is_empty(json_t *v) {
    return (json_is_string(v) && !json_string_length(v)) || (json_is_array(v) && !json_array_size(v)) ||
           (json_is_object(v) && !json_object_size(v));
}
static int is_text_only(json_t *v) {
    return json_is_array(v) && json_array_size(v) == 1 && json_is_string(json_array_get(v, 0)) &&
           !strcmp(json_string_value(json_array_get(v, 0)), "text");
}
static int is_standard_tier(json_t *v) {
    return json_is_string(v) && (!strcmp(json_string_value(v), "auto") || !strcmp(json_string_value(v), "default"));
}
static int never(json_t *v) { (void)v; return 0; }

enum { ROUTE_COMPLETIONS = 1, ROUTE_CHAT = 2 };

static const struct unsupported {
    const char *name;
    int routes;               /* ROUTE_* bits */
    int (*fine)(json_t *);    /* 1: a value without effect, accepted */
    const char *why;          /* what the server does instead, or what it accepts */
} UNSUPPORTED[] = {
    {"response_format", ROUTE_COMPLETIONS | ROUTE_CHAT, is_text_format, "only {\"type\": \"text\"}: no JSON mode or schema"},
    {"tools", ROUTE_CHAT, is_empty, "no tool calling"},
    {"tool_choice", ROUTE_CHAT, is_none, "only \"none\": no tool calling"},
    {"functions", ROUTE_CHAT, is_empty, "no function calling"},
    {"function_call", ROUTE_CHAT, is_none, "only \"none\": no function calling"},
    {"logit_bias", ROUTE_COMPLETIONS | ROUTE_CHAT, is_empty, "the sampler takes no per-token bias"},
    {"n", ROUTE_COMPLETIONS | ROUTE_CHAT, is_one, "only 1: one choice per prompt (give several prompts for several "
     "choices)"},
    {"best_of", ROUTE_COMPLETIONS, is_one, "only 1"},
    {"echo", ROUTE_COMPLETIONS, is_false, "only false: the prompt is not repeated in the answer"},
    {"suffix", ROUTE_COMPLETIONS, is_empty, "no insertion (fill-in-the-middle)"},
    {"audio", ROUTE_CHAT, never, "text only"},
    {"modalities", ROUTE_CHAT, is_text_only, "only [\"text\"]"},
    {"prediction", ROUTE_CHAT, never, "no predicted outputs"},
    {"web_search_options", ROUTE_CHAT, never, "no web search"},
    {"reasoning_effort", ROUTE_CHAT, never, "the reasoning effort is the model's own"},
    {"store", ROUTE_CHAT, is_false, "only false: nothing is stored"},
    {"service_tier", ROUTE_COMPLETIONS | ROUTE_CHAT, is_standard_tier, "only \"auto\" or \"default\""},
};

/* 400 naming the first OpenAI field of o this server does not implement; 0 when none. */
static int get_unsupported(json_t *o, int chat, srv_error *e) {
    for (size_t i = 0; i < sizeof UNSUPPORTED / sizeof UNSUPPORTED[0]; i++) {
        const struct unsupported *u = &UNSUPPORTED[i];
        json_t *v = field(o, u->name);
        if (v && (u->routes & (chat ? ROUTE_CHAT : ROUTE_COMPLETIONS)) && !u->fine(v))
            return srv_error_set(e, BAD, INVALID, "unsupported_parameter", u->name, "'%s' is not supported by this server (%s)",
                            u->name, u->why);
    }
    return 0;
}

/* See srv.h. */
int srv_parse_request(const char *body, size_t len, int chat, const cx_sampler_params *dflt, srv_params *p, srv_error *e) {
    memset(p, 0, sizeof *p);
    p->chat = chat;
    p->sp = *dflt;
    p->cache_prompt = 1;
    p->speculate = -1;
    json_error_t je;
    p->root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!p->root)
        return srv_error_set(e, BAD, INVALID, "invalid_json", NULL, "the body is not valid JSON: %s (line %d, column %d)", je.text,
                        je.line, je.column);
    json_t *o = p->root;
    if (!json_is_object(o)) return srv_error_set(e, BAD, INVALID, "invalid_json", NULL, "the body must be a JSON object");
    json_t *model = field(o, "model");
    if (model && !json_is_string(model)) return srv_error_set(e, BAD, INVALID, NULL, "model", "'model' must be a string");
    p->model = model ? json_string_value(model) : NULL;
    if (get_unsupported(o, chat, e) || (chat ? get_messages(o, p, e) : get_prompt(o, p, e))) return -1;
    long long max_tokens = 0, priority = 0;
    const char *mt = chat && field(o, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if (get_int(o, mt, 1, 1 << 24, &max_tokens, e) ||
        get_int(o, "priority", -1000, 1000, &priority, e) || get_sampling(o, p, e) || get_stop(o, p, e) ||
        get_bool(o, "stream", &p->stream, e) || get_bool(o, "ignore_eos", &p->ignore_eos, e) || get_logprobs(o, p, e) ||
        get_bool(o, "cache_prompt", &p->cache_prompt, e) || get_speculative(o, p, e))
        return -1;
    p->max_tokens = (int)max_tokens;
    p->priority = (int)priority;
    json_t *user = field(o, "user");
    if (user && !json_is_string(user)) return srv_error_set(e, BAD, INVALID, NULL, "user", "'user' must be a string");
    json_t *so = field(o, "stream_options");
    if (so) {
        if (!json_is_object(so)) return srv_error_set(e, BAD, INVALID, NULL, "stream_options", "'stream_options' must be an object");
        if (!p->stream)
            return srv_error_set(e, BAD, INVALID, NULL, "stream_options", "'stream_options' is only allowed with \"stream\": true");
        json_t *iu = field(so, "include_usage");
        if (iu && !json_is_boolean(iu))
            return srv_error_set(e, BAD, INVALID, NULL, "stream_options.include_usage", "'stream_options.include_usage' must be "
                            "true or false");
        p->include_usage = iu && json_is_true(iu);
    }
    if (p->stream && p->n_prompts > 1) /* the stream carries one choice: srv_sse.c follows one job */
        return srv_error_set(e, BAD, INVALID, "unsupported_parameter", "stream", "'stream' is not supported with several "
                        "prompts (%d): send them without streaming, or one per request", p->n_prompts);
    return 0;
}

/* See srv.h. */
void srv_params_free(srv_params *p) {
    json_decref(p->root);
    for (int i = 0; i < p->n_prompts; i++) free(p->prompts[i].ids);
    free(p->prompts);
    free(p->msgs);
    memset(p, 0, sizeof *p);
}
