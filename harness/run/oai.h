/*
 * oai.h - the bodies of the OpenAI-compatible HTTP API that `cortex-bench run
 * --endpoint` writes and reads (jansson): the completion request, a streamed
 * chunk or a whole completion, the /v1/models list and an error body.
 *
 * Readers accept what vLLM, llama.cpp's llama-server and OpenAI send:
 *   - text from choices[0].text (completions), choices[0].delta.content
 *     (streamed chat) or choices[0].message.content (chat);
 *   - "usage": {"prompt_tokens": P, "completion_tokens": C} when present
 *     (stream_options.include_usage: the last chunk, with no choices);
 *   - prompt tokens the server took from its prompt cache: OpenAI's and
 *     vLLM's usage.prompt_tokens_details.cached_tokens, llama-server's
 *     timings.cache_n (the larger when both are there);
 *   - speculative decoding's draft tokens: llama-server's timings.draft_n
 *     and timings.draft_n_accepted (Cortex's server sends the same names);
 *   - the server's build: "system_fingerprint" (OpenAI's "fp_...",
 *     llama-server's build_info "b4567-abc1234"; vLLM sends null);
 *   - errors as {"error": {"message": M}}, {"error": M} or {"message": M}.
 * Anything else in a body is ignored; a body that is not a JSON object is an
 * error with one sentence in err.
 */
#ifndef CB_OAI_H
#define CB_OAI_H

#include <stddef.h>

typedef struct json_t json_t;

/* One data payload of a stream, or a whole (non-streamed) completion. */
typedef struct oai_chunk {
    int done;               /* the payload was "[DONE]": the stream's end */
    const char *text;       /* generated text in this payload ("" when none; valid until oai_chunk_free) */
    size_t text_len;
    const char *finish;     /* choices[0].finish_reason, NULL when absent or null */
    int has_usage;          /* usage with both counts was present */
    long prompt_tokens, completion_tokens;
    const char *error;      /* the server reported an error in the stream; NULL when not */
    int has_timings;        /* a "timings" object (llama-server's, and Cortex's with more fields) was present */
    double t_prompt_ms, t_queue_ms, t_ttft_ms; /* its prompt_ms, queue_ms, ttft_ms; NAN where absent */
    int has_cached;         /* cached_tokens or cache_n (a count) was present */
    long cached_tokens;     /* prompt tokens served from the server's prompt cache */
    int has_draft;          /* timings.draft_n and timings.draft_n_accepted (counts) were both present */
    long draft_n, draft_accepted; /* draft tokens the server checked, and accepted (accepted <= drafted) */
    const char *fingerprint; /* system_fingerprint: a non-empty string, else NULL (valid until oai_chunk_free) */
    json_t *root;           /* the parsed payload, owned */
} oai_chunk;

/* The JSON body of a /v1/completions request, malloc'd (NULL on no memory):
 * model, prompt (prompt_len bytes), max_tokens, temperature, streamed with
 * usage (stream_options.include_usage), and "ignore_eos": true when asked
 * (vLLM and llama-server honour it; OpenAI itself does not take it).
 * no_cache_salt non-NULL asks the server not to reuse cached prompts for
 * this request: "cache_prompt": false (llama-server; Cortex) and
 * "cache_salt": no_cache_salt (vLLM >= 0.9 and SGLang namespace their
 * prefix caches by it: a salt no other request carries shares nothing);
 * servers that know neither ignore them (docs/harness.md). */
char *oai_completion_body(const char *model, const char *prompt, size_t prompt_len, int max_tokens, double temperature,
                          int ignore_eos, const char *no_cache_salt);

/* Parse one payload data[0, n) into *c (zeroed first; free with
 * oai_chunk_free). 0, or -1 when it is neither "[DONE]" nor a JSON object. */
int oai_parse_chunk(const char *data, size_t n, oai_chunk *c, char *err, size_t errlen);
void oai_chunk_free(oai_chunk *c);

/* The model ids of a /v1/models answer ({"data": [{"id": ...}, ...]}), as a
 * malloc'd array of malloc'd strings in order (free with oai_models_free).
 * 0, or -1 when the body is not such a list. */
int oai_parse_models(const char *body, size_t n, char ***ids, int *n_ids, char *err, size_t errlen);
void oai_models_free(char **ids, int n);

/* The message of an error body, into out (at most cap - 1 bytes, control
 * characters as spaces): the JSON error message when there is one, else the
 * body's first bytes. */
void oai_error_message(const char *body, size_t n, char *out, size_t cap);

/* The server's build from a probe's answer: llama-server's GET /props
 * {"build_info": B} or vLLM's and SGLang's GET /version {"version": V} ("version V").
 * Into out (at most cap - 1 bytes, control characters as spaces); 1 if the
 * body named one, else 0 (out ""). */
int oai_server_build(const char *body, size_t n, char *out, size_t cap);

/* Text from a server into out (at most cap - 1 bytes), control characters as
 * spaces and trailing spaces dropped: safe for one line of a table. */
void oai_clean_text(const char *src, size_t len, char *out, size_t cap);

#endif
