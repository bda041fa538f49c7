/*
 * fuzz_srv_body.c - libFuzzer target for the request bodies `cortex serve`
 * parses (engine/server/srv_parse.c) and the chat prompts it renders from
 * them (the library's cx_chat_render, engine/src/chat.c): any byte string
 * must give either a valid srv_params or
 * one error, never a crash, an out-of-bounds access, undefined behaviour or
 * a leak.
 *
 * Per input, for the completions route and the chat route:
 *   1. srv_parse_request. On failure: status 400 or 500, a non-empty message,
 *      a param that is empty or names a field, and an error object that
 *      serializes. On success: the documented ranges (stop strings 0..4, each
 *      non-empty and NUL-terminated; top_logprobs 0..20; max_tokens >= 0),
 *      1..SRV_MAX_PROMPTS completions prompts, each text or at least one
 *      token id (a stream only with one), a chat route with at least one
 *      message of a known role (developer arrives as system).
 *   2. On success on the chat route: every template renders, or refuses with
 *      CX_EINVAL (llama2's late system message), and a rendered prompt holds
 *      each message's content.
 * Seeds: tests/fuzz/corpus/srv_body/.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

/* Abort (a finding) when a property fails: libFuzzer records the input. */
static void require(int cond) {
    if (!cond) abort();
}

/* Properties of a parsed body for route `chat`. */
static void check_params(const srv_params *p, int chat) {
    require(p->n_stop >= 0 && p->n_stop <= SRV_MAX_STOP);
    for (int i = 0; i < p->n_stop; i++) require(p->stop[i] && strlen(p->stop[i]) > 0);
    require(p->top_logprobs >= 0 && p->top_logprobs <= SRV_MAX_TOP_LOGPROBS);
    require(p->max_tokens >= 0);
    require(!p->include_usage || p->stream);
    if (!chat) {
        require(p->n_prompts >= 1 && p->n_prompts <= SRV_MAX_PROMPTS);
        require(!p->stream || p->n_prompts == 1);
        for (int k = 0; k < p->n_prompts; k++) {
            const srv_prompt *q = &p->prompts[k];
            require((q->text && *q->text && !q->ids) || (!q->text && q->ids && q->n_ids > 0));
            for (int i = 0; i < q->n_ids; i++) require(q->ids[i] >= 0);
        }
        return;
    }
    require(p->n_msgs > 0);
    for (int i = 0; i < p->n_msgs; i++) {
        const char *r = p->msgs[i].role;
        require(!strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "assistant"));
        require(p->msgs[i].content != NULL);
    }
    for (int t = 0; t < CX_CHAT_N; t++) {
        char *out = NULL;
        cx_chat c = {.tmpl = t, .bos = "<s>", .eos = "</s>"}; /* what cx_chat_render reads (no model here) */
        cx_err err = {0};
        if (cx_chat_render(&c, p->msgs, p->n_msgs, "2025-08-05", &out, &err)) {
            require(err.code == CX_EINVAL && err.msg[0] && !out);
            continue;
        }
        require(out != NULL);
        for (int i = 0; i < p->n_msgs; i++) require(strstr(out, p->msgs[i].content) != NULL);
        free(out);
    }
}

/* libFuzzer's entry: both routes over the same bytes. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cx_sampler_params d = {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .repeat_penalty = 1,
                           .repeat_last_n = 64, .seed = 42};
    for (int chat = 0; chat <= 1; chat++) {
        srv_params p;
        srv_error e;
        if (srv_parse_request((const char *)data, size, chat, &d, &p, &e)) {
            require(e.status == 400 || e.status == 500);
            require(e.message[0] != 0);
            char *s = srv_error_json(&e);
            require(s != NULL);
            json_t *v = json_loads(s, 0, NULL);
            require(v != NULL);
            json_decref(v);
            free(s);
        } else {
            check_params(&p, chat);
        }
        srv_params_free(&p);
    }
    return 0;
}
