/*
 * oai.c - the OpenAI-compatible request and response bodies (see oai.h),
 * built and read with jansson.
 */
#include "oai.h"
#include "hx_err.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* See oai.h. */
char *oai_completion_body(const char *model, const char *prompt, size_t prompt_len, int max_tokens, double temperature,
                          int ignore_eos, const char *no_cache_salt) {
    json_t *o = json_object();
    json_t *so = json_object();
    char *s = NULL;
    if (o && so && !json_object_set_new(o, "model", json_string(model)) &&
        !json_object_set_new(o, "prompt", json_stringn(prompt, prompt_len)) &&
        !json_object_set_new(o, "max_tokens", json_integer(max_tokens)) &&
        !json_object_set_new(o, "temperature", json_real(temperature)) &&
        !json_object_set_new(o, "stream", json_true()) && !json_object_set_new(so, "include_usage", json_true()) &&
        !json_object_set(o, "stream_options", so) && (!ignore_eos || !json_object_set_new(o, "ignore_eos", json_true())) &&
        (!no_cache_salt || (!json_object_set_new(o, "cache_prompt", json_false()) &&
                            !json_object_set_new(o, "cache_salt", json_string(no_cache_salt)))))
        s = json_dumps(o, JSON_COMPACT);
    json_decref(so);
    json_decref(o);
    return s;
}

/* A token count: a non-negative integral number below 2^31, into *out; 1 if it is one. */
static int count_of(const json_t *v, long *out) {
    if (!json_is_number(v)) return 0;
    double d = json_number_value(v);
    if (!(d >= 0 && d < 2147483648.0) || d != floor(d)) return 0;
    *out = (long)d;
    return 1;
}

/* The error message of a body: {"error": {"message": M}}, {"error": M}, {"message": M} (with "object": "error"). */
static const char *error_of(const json_t *root) {
    const json_t *e = json_object_get(root, "error");
    if (json_is_string(e)) return json_string_value(e);
    if (json_is_object(e)) {
        const json_t *m = json_object_get(e, "message");
        return json_is_string(m) ? json_string_value(m) : "error (no message)";
    }
    const json_t *obj = json_object_get(root, "object");
    if (json_is_string(obj) && !strcmp(json_string_value(obj), "error")) {
        const json_t *m = json_object_get(root, "message");
        return json_is_string(m) ? json_string_value(m) : "error (no message)";
    }
    return NULL;
}

/* A non-negative finite number of milliseconds, else NAN (absent, null, or nonsense from a server). */
static double ms_of(const json_t *v) {
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    return isfinite(x) && x >= 0 ? x : NAN;
}

/* See oai.h. */
int oai_parse_chunk(const char *data, size_t n, oai_chunk *c, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    c->text = "";
    size_t a = 0, b = n; /* "[DONE]", allowing surrounding blanks */
    while (a < b && (data[a] == ' ' || data[a] == '\t')) a++;
    while (b > a && (data[b - 1] == ' ' || data[b - 1] == '\t')) b--;
    if (b - a == 6 && !memcmp(data + a, "[DONE]", 6)) {
        c->done = 1;
        return 0;
    }
    json_error_t je;
    json_t *root = json_loadb(data, n, JSON_ALLOW_NUL, &je);
    if (!root || !json_is_object(root)) {
        hx_fail(err, errlen, "not a JSON object: %s", root ? "another JSON value" : je.text);
        json_decref(root);
        return -1;
    }
    c->root = root;
    c->error = error_of(root);
    const json_t *choices = json_object_get(root, "choices");
    const json_t *ch = json_is_array(choices) ? json_array_get(choices, 0) : NULL;
    if (json_is_object(ch)) {
        const json_t *t = json_object_get(ch, "text");
        if (!json_is_string(t)) {
            const json_t *d = json_object_get(ch, "delta");
            if (!json_is_object(d)) d = json_object_get(ch, "message");
            t = json_is_object(d) ? json_object_get(d, "content") : NULL;
        }
        if (json_is_string(t)) {
            c->text = json_string_value(t);
            c->text_len = json_string_length(t);
        }
        const json_t *f = json_object_get(ch, "finish_reason");
        if (json_is_string(f)) c->finish = json_string_value(f);
    }
    const json_t *u = json_object_get(root, "usage");
    if (json_is_object(u))
        c->has_usage = count_of(json_object_get(u, "prompt_tokens"), &c->prompt_tokens) &&
                       count_of(json_object_get(u, "completion_tokens"), &c->completion_tokens);
    const json_t *tm = json_object_get(root, "timings");
    c->t_prompt_ms = c->t_queue_ms = c->t_ttft_ms = NAN;
    if (json_is_object(tm)) {
        c->has_timings = 1;
        c->t_prompt_ms = ms_of(json_object_get(tm, "prompt_ms"));
        c->t_queue_ms = ms_of(json_object_get(tm, "queue_ms"));
        c->t_ttft_ms = ms_of(json_object_get(tm, "ttft_ms"));
    }
    /* Prompt tokens from the server's cache, by either name; a server that
     * sends both means the same count, and the larger is the safe reading. */
    long cached;
    const json_t *pd = json_is_object(u) ? json_object_get(u, "prompt_tokens_details") : NULL;
    if (json_is_object(pd) && count_of(json_object_get(pd, "cached_tokens"), &cached)) {
        c->has_cached = 1;
        c->cached_tokens = cached;
    }
    if (json_is_object(tm) && count_of(json_object_get(tm, "cache_n"), &cached)) {
        if (!c->has_cached || cached > c->cached_tokens) c->cached_tokens = cached;
        c->has_cached = 1;
    }
    /* speculative decoding, llama-server's names: a pair of counts, accepted no more than drafted, or nothing */
    if (json_is_object(tm) && count_of(json_object_get(tm, "draft_n"), &c->draft_n) &&
        count_of(json_object_get(tm, "draft_n_accepted"), &c->draft_accepted) && c->draft_accepted <= c->draft_n)
        c->has_draft = 1;
    else c->draft_n = c->draft_accepted = 0;
    const json_t *fp = json_object_get(root, "system_fingerprint");
    if (json_is_string(fp) && json_string_length(fp)) c->fingerprint = json_string_value(fp);
    return 0;
}

/* See oai.h. */
void oai_chunk_free(oai_chunk *c) {
    json_decref(c->root);
    memset(c, 0, sizeof *c);
}

/* See oai.h. */
int oai_parse_models(const char *body, size_t n, char ***ids_out, int *n_out, char *err, size_t errlen) {
    *ids_out = NULL;
    *n_out = 0;
    json_error_t je;
    json_t *root = json_loadb(body, n, JSON_ALLOW_NUL, &je);
    const json_t *data = json_is_object(root) ? json_object_get(root, "data") : NULL;
    if (!json_is_array(data)) {
        hx_fail(err, errlen, "not a model list ({\"data\": [{\"id\": ...}]})%s%s", root ? "" : ": ", root ? "" : je.text);
        json_decref(root);
        return -1;
    }
    size_t k = json_array_size(data);
    char **ids = calloc(k ? k : 1, sizeof *ids);
    int m = 0, rc = ids ? 0 : -1;
    for (size_t i = 0; i < k && !rc; i++) {
        const json_t *id = json_object_get(json_array_get(data, i), "id");
        if (!json_is_string(id)) continue;
        if (!(ids[m] = strdup(json_string_value(id)))) rc = -1;
        else m++;
    }
    json_decref(root);
    if (rc) {
        oai_models_free(ids, m);
        return hx_fail(err, errlen, "out of memory");
    }
    *ids_out = ids;
    *n_out = m;
    return 0;
}

/* See oai.h. */
void oai_models_free(char **ids, int n) {
    for (int i = 0; ids && i < n; i++) free(ids[i]);
    free(ids);
}

/* See oai.h. */
void oai_clean_text(const char *src, size_t len, char *out, size_t cap) {
    if (!cap) return;
    size_t k = 0;
    while (k < len && k + 1 < cap) {
        unsigned char ch = (unsigned char)src[k];
        out[k++] = ch < 0x20 || ch == 0x7f ? ' ' : (char)ch;
    }
    while (k > 0 && out[k - 1] == ' ') k--;
    out[k] = 0;
}

/* See oai.h. */
void oai_error_message(const char *body, size_t n, char *out, size_t cap) {
    json_t *root = json_loadb(body, n, JSON_ALLOW_NUL, NULL);
    const char *m = json_is_object(root) ? error_of(root) : NULL;
    oai_clean_text(m ? m : body, m ? strlen(m) : n, out, cap);
    json_decref(root);
}

/* See oai.h. */
int oai_server_build(const char *body, size_t n, char *out, size_t cap) {
    json_t *root = json_loadb(body, n, JSON_ALLOW_NUL, NULL);
    const json_t *b = json_is_object(root) ? json_object_get(root, "build_info") : NULL, *v = NULL;
    if (!json_is_string(b) || !json_string_length(b)) b = NULL;
    if (!b && json_is_object(root)) v = json_object_get(root, "version");
    if (v && (!json_is_string(v) || !json_string_length(v))) v = NULL;
    char tmp[256];
    if (b) oai_clean_text(json_string_value(b), json_string_length(b), out, cap);
    else if (v) {
        oai_clean_text(json_string_value(v), json_string_length(v), tmp, sizeof tmp);
        if (cap) snprintf(out, cap, "version %s", tmp);
    } else if (cap) out[0] = 0;
    json_decref(root);
    return cap && out[0];
}
