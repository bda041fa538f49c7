/*
 * test_srv_parse.c - the server's request-body parser (engine/server/srv_parse.c):
 * every field read into srv_params with the defaults kept where absent or
 * null; each wrong type, range or shape refused with 400 naming the field;
 * lists of prompts; OpenAI's fields the server does not implement refused
 * (their no-effect values accepted); the developer role, parsed and
 * rendered by every chat template (cx_chat_render) as the system one;
 * the error object's JSON; the UTF-8 cut the streaming code relies on; and
 * what a chat client sees of a harmony answer (srv_chat_split, srv_reply.c).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"
#include "testing.h"

/* Parse body for the route (chat or not) from the sampler defaults. */
static int parse(const char *body, int chat, srv_params *p, srv_error *e) {
    cx_sampler_params d = cx_sampler_defaults();
    return srv_parse_request(body, strlen(body), chat, &d, p, e);
}

/* Expect body to be refused with 400 naming `param`. */
static void refused(const char *body, int chat, const char *param) {
    srv_params p;
    srv_error e;
    CHECK(parse(body, chat, &p, &e) == -1, "refused: %s", body);
    CHECK(e.status == 400 && !strcmp(e.param, param), "%s: status %d, param '%s' (want '%s'): %s", body, e.status, e.param,
          param, e.message);
    CHECK(!strcmp(e.type, "invalid_request_error"), "%s: type %s", body, e.type);
    srv_params_free(&p);
}

/* A completions body with every field set. */
static void test_completions_fields(void) {
    srv_params p;
    srv_error e;
    const char *b = "{\"model\": \"m\", \"prompt\": \"Once\", \"max_tokens\": 7, \"temperature\": 0.5, \"top_p\": 0.9,"
                    " \"top_k\": 12, \"min_p\": 0.1, \"seed\": 99, \"presence_penalty\": 0.5, \"frequency_penalty\": -1,"
                    " \"repeat_penalty\": 1.1, \"stop\": [\"a\", \"bc\"], \"stream\": true,"
                    " \"stream_options\": {\"include_usage\": true}, \"logprobs\": 3, \"priority\": 5,"
                    " \"ignore_eos\": true, \"user\": \"u1\", \"unknown_field\": [1, 2], \"cache_prompt\": false,"
                    " \"cache_salt\": \"s1\"}";
    CHECK(parse(b, 0, &p, &e) == 0, "parse: %s", e.message);
    CHECK(!strcmp(p.model, "m") && p.n_prompts == 1 && !strcmp(p.prompts[0].text, "Once") && !p.prompts[0].ids,
          "model and prompt");
    CHECK(p.seed_given == 1, "an explicit seed is marked given");
    CHECK(p.max_tokens == 7 && p.priority == 5 && p.ignore_eos == 1, "max_tokens %d priority %d", p.max_tokens, p.priority);
    CHECK(p.sp.temperature == 0.5f && p.sp.top_p == 0.9f && p.sp.top_k == 12 && p.sp.min_p == 0.1f && p.sp.seed == 99,
          "sampling");
    CHECK(p.sp.presence_penalty == 0.5f && p.sp.frequency_penalty == -1.0f && p.sp.repeat_penalty == 1.1f, "penalties");
    CHECK(p.n_stop == 2 && !strcmp(p.stop[0], "a") && !strcmp(p.stop[1], "bc"), "stop");
    CHECK(p.stream == 1 && p.include_usage == 1, "stream");
    CHECK(p.logprobs == 1 && p.top_logprobs == 3, "logprobs %d %d", p.logprobs, p.top_logprobs);
    CHECK(p.cache_prompt == 0, "cache_prompt false (vLLM's cache_salt beside it is ignored)");
    srv_params_free(&p);
}

/* Absent and null fields keep the defaults; a single stop string; token-id prompts. */
static void test_defaults(void) {
    srv_params p;
    srv_error e;
    cx_sampler_params d = cx_sampler_defaults();
    CHECK(parse("{\"prompt\": \"x\", \"temperature\": null, \"stop\": \"end\"}", 0, &p, &e) == 0, "parse: %s", e.message);
    CHECK(p.sp.temperature == d.temperature && p.sp.top_k == d.top_k && p.sp.seed == d.seed, "defaults kept");
    CHECK(p.max_tokens == 0 && !p.model && !p.stream && !p.logprobs && p.n_stop == 1 && !strcmp(p.stop[0], "end"),
          "absent fields");
    CHECK(p.cache_prompt == 1, "the prefix cache may serve a request that does not say");
    CHECK(p.speculate == -1, "speculation as the server has it when the request does not say");
    srv_params_free(&p);
    static const struct { const char *body; int want; } spec[] = {
        {"{\"prompt\": \"x\", \"speculative\": false}", 0},
        {"{\"prompt\": \"x\", \"speculative\": true}", -1},
        {"{\"prompt\": \"x\", \"speculative.n_max\": 0}", 0},
        {"{\"prompt\": \"x\", \"speculative.n_max\": 3, \"speculative.n_min\": 1}", 3},
        {"{\"prompt\": \"x\", \"speculative\": false, \"speculative.n_max\": 3}", 0},
        {"{\"prompt\": \"x\", \"speculative\": null}", -1},
    };
    for (size_t i = 0; i < sizeof spec / sizeof spec[0]; i++) {
        CHECK(parse(spec[i].body, 0, &p, &e) == 0 && p.speculate == spec[i].want, "%s: speculate %d (want %d): %s",
              spec[i].body, p.speculate, spec[i].want, e.message);
        srv_params_free(&p);
    }
    CHECK(!p.seed_given, "no seed given: the server draws one");
    srv_params_free(&p);
    CHECK(parse("{\"prompt\": [1, 2, 300]}", 0, &p, &e) == 0, "ids: %s", e.message);
    CHECK(p.n_prompts == 1 && !p.prompts[0].text && p.prompts[0].n_ids == 3 && p.prompts[0].ids[2] == 300,
          "token-id prompt");
    srv_params_free(&p);
    CHECK(parse("{\"prompt\": [\"only\"]}", 0, &p, &e) == 0 && p.n_prompts == 1 && p.prompts[0].text &&
          !strcmp(p.prompts[0].text, "only"), "an array of one string");
    srv_params_free(&p);
}

/* Chat: messages, content parts joined, logprobs as a boolean with top_logprobs, max_completion_tokens. */
static void test_chat(void) {
    srv_params p;
    srv_error e;
    const char *b = "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\":"
                    " [{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", \"text\": \"b\"}]}],"
                    " \"logprobs\": true, \"top_logprobs\": 4, \"max_completion_tokens\": 9}";
    CHECK(parse(b, 1, &p, &e) == 0, "chat: %s", e.message);
    CHECK(p.n_msgs == 2 && !strcmp(p.msgs[0].role, "system") && !strcmp(p.msgs[1].content, "ab"), "messages");
    CHECK(p.logprobs == 1 && p.top_logprobs == 4 && p.max_tokens == 9, "chat logprobs and max_completion_tokens");
    srv_params_free(&p);
}

/* A list of prompts: strings and token-id arrays, one prompt (one choice) each, in order. */
static void test_prompt_list(void) {
    srv_params p;
    srv_error e;
    CHECK(parse("{\"prompt\": [\"a\", \"bc\", [5, 6]]}", 0, &p, &e) == 0, "list: %s", e.message);
    CHECK(p.n_prompts == 3 && !strcmp(p.prompts[0].text, "a") && !strcmp(p.prompts[1].text, "bc") &&
          !p.prompts[2].text && p.prompts[2].n_ids == 2 && p.prompts[2].ids[1] == 6, "three prompts in order");
    srv_params_free(&p);
    CHECK(parse("{\"prompt\": [[1], [2, 3]]}", 0, &p, &e) == 0 && p.n_prompts == 2 && p.prompts[1].n_ids == 2,
          "token-id arrays: %s", e.message);
    srv_params_free(&p);
    char big[16 + 5 * (SRV_MAX_PROMPTS + 1)] = "{\"prompt\": [";
    for (int i = 0; i <= SRV_MAX_PROMPTS; i++) strcat(big, i ? ", \"x\"" : "\"x\"");
    strcat(big, "]}");
    refused(big, 0, "prompt");
    refused("{\"prompt\": [\"a\", \"\"]}", 0, "prompt[1]");
    refused("{\"prompt\": [\"a\", 3]}", 0, "prompt[1]");
    refused("{\"prompt\": [\"a\", [1, \"x\"]]}", 0, "prompt[1]");
    refused("{\"prompt\": [[1], []]}", 0, "prompt[1]");
    refused("{\"prompt\": [\"a\", \"b\"], \"stream\": true}", 0, "stream");
}

/* Refused with 400 naming `param`, code unsupported_parameter. */
static void unsupported(const char *body, int chat, const char *param) {
    srv_params p;
    srv_error e;
    CHECK(parse(body, chat, &p, &e) == -1, "refused: %s", body);
    CHECK(e.status == 400 && !strcmp(e.param, param) && e.code && !strcmp(e.code, "unsupported_parameter") &&
          strstr(e.message, param), "%s: status %d, param '%s' (want '%s'), code %s: %s", body, e.status, e.param, param,
          e.code ? e.code : "null", e.message);
    srv_params_free(&p);
}

/* Accepted (a field's no-effect value). */
static void accepted(const char *body, int chat) {
    srv_params p;
    srv_error e;
    CHECK(parse(body, chat, &p, &e) == 0, "accepted: %s: %s", body, e.message);
    srv_params_free(&p);
}

/* OpenAI's fields the server does not implement: 400 naming each, except
 * the values that ask for nothing; fields OpenAI does not define: ignored. */
static void test_unsupported(void) {
#define C "{\"prompt\": \"x\", "
#define M "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], "
    unsupported(C "\"echo\": true}", 0, "echo");
    unsupported(C "\"best_of\": 2}", 0, "best_of");
    unsupported(C "\"suffix\": \"end\"}", 0, "suffix");
    unsupported(C "\"logit_bias\": {\"50256\": -100}}", 0, "logit_bias");
    unsupported(C "\"n\": 3}", 0, "n");
    unsupported(C "\"response_format\": {\"type\": \"json_object\"}}", 0, "response_format");
    unsupported(M "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {}}}", 1, "response_format");
    unsupported(M "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}", 1, "tools");
    unsupported(M "\"tool_choice\": \"auto\"}", 1, "tool_choice");
    unsupported(M "\"tool_choice\": {\"type\": \"function\"}}", 1, "tool_choice");
    unsupported(M "\"functions\": [{\"name\": \"f\"}]}", 1, "functions");
    unsupported(M "\"function_call\": \"auto\"}", 1, "function_call");
    unsupported(M "\"logit_bias\": {\"1\": 5}}", 1, "logit_bias");
    unsupported(M "\"n\": 2}", 1, "n");
    unsupported(M "\"n\": \"1\"}", 1, "n");
    unsupported(M "\"audio\": {\"voice\": \"alloy\"}}", 1, "audio");
    unsupported(M "\"modalities\": [\"text\", \"audio\"]}", 1, "modalities");
    unsupported(M "\"prediction\": {\"type\": \"content\"}}", 1, "prediction");
    unsupported(M "\"reasoning_effort\": \"low\"}", 1, "reasoning_effort");
    unsupported(M "\"store\": true}", 1, "store");
    unsupported(M "\"web_search_options\": {}}", 1, "web_search_options");
    unsupported(C "\"service_tier\": \"flex\"}", 0, "service_tier");
    accepted(C "\"echo\": false, \"best_of\": 1, \"suffix\": \"\", \"logit_bias\": {}, \"n\": 1, \"response_format\": "
             "{\"type\": \"text\"}, \"service_tier\": \"auto\"}", 0);
    accepted(M "\"tools\": [], \"tool_choice\": \"none\", \"function_call\": \"none\", \"modalities\": [\"text\"],"
             " \"store\": false, \"logit_bias\": null, \"response_format\": {\"type\": \"text\"}, \"metadata\": {}}", 1);
    /* not OpenAI's chat fields on the completions route, nor fields OpenAI does not define: ignored */
    accepted(C "\"tools\": [1], \"audio\": 1, \"vendor_extension\": {\"x\": 1}}", 0);
    accepted(M "\"echo\": true, \"suffix\": \"s\", \"best_of\": 3}", 1);
#undef C
#undef M
}

/* The developer role is the system role. */
static void test_developer(void) {
    srv_params p;
    srv_error e;
    CHECK(parse("{\"messages\": [{\"role\": \"developer\", \"content\": \"D\"}, {\"role\": \"user\", \"content\": "
                "\"u\"}]}", 1, &p, &e) == 0, "developer: %s", e.message);
    CHECK(p.n_msgs == 2 && !strcmp(p.msgs[0].role, "system") && !strcmp(p.msgs[0].content, "D"), "developer -> system");
    srv_params_free(&p);
}

/* Every kind of bad body names its field. */
static void test_refusals(void) {
    refused("{\"prompt\": \"x\",", 0, "");
    refused("[]", 0, "");
    refused("{\"prompt\": \"x\", \"prompt\": \"y\"}", 0, ""); /* duplicate keys */
    refused("{}", 0, "prompt");
    refused("{\"prompt\": \"\"}", 0, "prompt");
    refused("{\"prompt\": 5}", 0, "prompt");
    refused("{\"prompt\": [1, -2]}", 0, "prompt");
    refused("{\"prompt\": \"x\", \"max_tokens\": \"5\"}", 0, "max_tokens");
    refused("{\"prompt\": \"x\", \"cache_prompt\": 0}", 0, "cache_prompt");
    refused("{\"prompt\": \"x\", \"speculative\": 0}", 0, "speculative");
    refused("{\"prompt\": \"x\", \"speculative.n_max\": -1}", 0, "speculative.n_max");
    refused("{\"prompt\": \"x\", \"speculative.n_max\": \"4\"}", 0, "speculative.n_max");
    refused("{\"prompt\": \"x\", \"max_tokens\": 0}", 0, "max_tokens");
    refused("{\"prompt\": \"x\", \"max_tokens\": 1.5}", 0, "max_tokens");
    refused("{\"prompt\": \"x\", \"temperature\": \"hot\"}", 0, "temperature");
    refused("{\"prompt\": \"x\", \"temperature\": -1}", 0, "temperature");
    refused("{\"prompt\": \"x\", \"top_p\": 1.5}", 0, "top_p");
    refused("{\"prompt\": \"x\", \"top_k\": -1}", 0, "top_k");
    refused("{\"prompt\": \"x\", \"min_p\": 2}", 0, "min_p");
    refused("{\"prompt\": \"x\", \"presence_penalty\": 3}", 0, "presence_penalty");
    refused("{\"prompt\": \"x\", \"frequency_penalty\": -3}", 0, "frequency_penalty");
    refused("{\"prompt\": \"x\", \"seed\": -1}", 0, "seed");
    refused("{\"prompt\": \"x\", \"stop\": 3}", 0, "stop");
    refused("{\"prompt\": \"x\", \"stop\": [\"a\", \"\"]}", 0, "stop");
    refused("{\"prompt\": \"x\", \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}", 0, "stop");
    refused("{\"prompt\": \"x\", \"stream\": \"yes\"}", 0, "stream");
    refused("{\"prompt\": \"x\", \"stream_options\": {\"include_usage\": true}}", 0, "stream_options");
    refused("{\"prompt\": \"x\", \"stream\": true, \"stream_options\": {\"include_usage\": 1}}", 0,
            "stream_options.include_usage");
    refused("{\"prompt\": \"x\", \"n\": 3}", 0, "n");
    refused("{\"prompt\": \"x\", \"logprobs\": 21}", 0, "logprobs");
    refused("{\"prompt\": \"x\", \"logprobs\": true}", 0, "logprobs");
    refused("{\"prompt\": \"x\", \"model\": 4}", 0, "model");
    refused("{\"prompt\": \"x\", \"user\": 4}", 0, "user");
    refused("{\"prompt\": \"x\", \"priority\": 1e9}", 0, "priority");
    refused("{\"messages\": []}", 1, "messages");
    refused("{\"messages\": \"hi\"}", 1, "messages");
    refused("{\"messages\": [3]}", 1, "messages[0]");
    refused("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"tool\", \"content\": \"b\"}]}", 1,
            "messages[1].role");
    refused("{\"messages\": [{\"role\": \"user\", \"content\": 7}]}", 1, "messages[0].content");
    refused("{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}", 1, "messages[0].content");
    refused("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"logprobs\": 2}", 1, "logprobs");
    refused("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"top_logprobs\": 2}", 1, "top_logprobs");
}

/* The error object: OpenAI's four fields, null param and code when none. */
static void test_error_json(void) {
    srv_error e;
    srv_error_set(&e, 400, "invalid_request_error", NULL, "max_tokens", "'%s' must be an integer", "max_tokens");
    char *s = srv_error_json(&e);
    json_t *v = s ? json_loads(s, 0, NULL) : NULL;
    json_t *o = json_object_get(v, "error");
    CHECK(o && !strcmp(json_string_value(json_object_get(o, "message")), "'max_tokens' must be an integer"), "message: %s",
          s ? s : "(null)");
    CHECK(!strcmp(json_string_value(json_object_get(o, "type")), "invalid_request_error"), "type");
    CHECK(!strcmp(json_string_value(json_object_get(o, "param")), "max_tokens"), "param");
    CHECK(json_is_null(json_object_get(o, "code")), "code null");
    json_decref(v);
    free(s);
    srv_error_set(&e, 400, "invalid_request_error", NULL, "a\xff", "cut \xe2\x80"); /* bytes quoted from a request */
    s = srv_error_json(&e);
    v = s ? json_loads(s, 0, NULL) : NULL;
    o = json_object_get(v, "error");
    CHECK(o && !strcmp(json_string_value(json_object_get(o, "message")), "cut \xef\xbf\xbd\xef\xbf\xbd") &&
          !strcmp(json_string_value(json_object_get(o, "param")), "a\xef\xbf\xbd"),
          "invalid UTF-8 becomes U+FFFD: %s", s ? s : "(null)");
    json_decref(v);
    free(s);
    srv_error_set(&e, 404, "invalid_request_error", "model_not_found", NULL, "no");
    s = srv_error_json(&e);
    CHECK(s && strstr(s, "\"param\":null") && strstr(s, "\"code\":\"model_not_found\""), "%s", s ? s : "(null)");
    free(s);
}

/* srv_utf8_cut keeps a character that may still be completed out of a chunk. */
static void test_utf8_cut(void) {
    CHECK(srv_utf8_cut("abc", 3) == 3, "ascii");
    CHECK(srv_utf8_cut("a\xc3", 2) == 1, "a 2-byte lead alone");
    CHECK(srv_utf8_cut("a\xc3\xa9", 3) == 3, "a whole 2-byte character");
    CHECK(srv_utf8_cut("a\xe2\x80", 3) == 1, "2 of 3 bytes");
    CHECK(srv_utf8_cut("\xf0\x9f\x98", 3) == 0, "3 of 4 bytes");
    CHECK(srv_utf8_cut("\xf0\x9f\x98\x80", 4) == 4, "a whole 4-byte character");
    CHECK(srv_utf8_cut("a\x80", 2) == 2, "a stray continuation byte is not held back");
}

/* A request body's "developer" message renders as the system message in
 * every template (the parser names it "system"), byte for byte. */
static void test_developer_role(void) {
    static const char *const BODY[2] = {
        "{\"messages\": [{\"role\": \"developer\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}]}",
        "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}]}"};
    srv_params p[2];
    srv_error e;
    for (int k = 0; k < 2; k++) CHECK(parse(BODY[k], 1, &p[k], &e) == 0, "parse %d: %s", k, e.message);
    for (int t = 0; t < CX_CHAT_N; t++) {
        char *out[2] = {NULL, NULL};
        cx_chat c = {.tmpl = t, .bos = "<s>", .eos = "</s>"}; /* what cx_chat_render reads */
        cx_err err = {0};
        for (int k = 0; k < 2; k++)
            CHECK(cx_chat_render(&c, p[k].msgs, p[k].n_msgs, "2025-08-05", &out[k], &err) == 0, "%s: %s",
                  cx_chat_name(t), err.msg);
        CHECK(out[0] && out[1] && !strcmp(out[0], out[1]) && strstr(out[0], "Be brief."), "%s: developer = system",
              cx_chat_name(t));
        free(out[0]);
        free(out[1]);
    }
    srv_params_free(&p[0]);
    srv_params_free(&p[1]);
}

/* What a harmony answer shows: the final channel as content, the analysis
 * as reasoning; output that does not follow the format as it is. */
static void split_is(const char *out, int harmony, const char *want_c, const char *want_r) {
    cx_harmony_parts parts;
    const char *c, *r;
    size_t nc, nr;
    CHECK(srv_chat_split(harmony, out, strlen(out), &parts, &c, &nc, &r, &nr) == 0, "split");
    CHECK(nc == strlen(want_c) && !memcmp(c, want_c, nc), "[%s]: content [%.*s], want [%s]", out, (int)nc, c, want_c);
    CHECK(want_r ? r && nr == strlen(want_r) && !memcmp(r, want_r, nr) : r == NULL, "[%s]: reasoning [%.*s], want [%s]",
          out, (int)nr, r ? r : "", want_r ? want_r : "(none)");
    cx_harmony_parts_free(&parts);
}

/* Final-channel extraction on hand-written outputs. */
static void test_harmony_split(void) {
    const char *full = "<|channel|>analysis<|message|>User says hi. Reply.<|end|><|start|>assistant<|channel|>final"
                       "<|message|>Hello there!";
    split_is(full, 1, "Hello there!", "User says hi. Reply.");
    split_is(full, 0, full, NULL); /* another template: the text as it is */
    split_is("<|channel|>final<|message|>Only an answer.", 1, "Only an answer.", NULL);
    split_is("<|channel|>analysis<|message|>Still thinking", 1, "", "Still thinking"); /* cut by max_tokens */
    split_is("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>fin", 1, "", "a"); /* header unfinished */
    split_is("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>commentary to=functions.f "
             "<|constrain|>json<|message|>{}<|call|>", 1, "", "a"); /* a tool call: not content */
    split_is("<|channel|>final<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>y", 1, "xy", NULL);
    split_is("Plain words, no channel.", 1, "Plain words, no channel.", NULL); /* not the format: raw */
    split_is("", 1, "", NULL);
    /* a prefix of the output never shows less than a shorter one did (streaming sends differences);
     * from the first token on: <|channel|> comes whole, as one token's text */
    size_t n = strlen(full), sent = 0;
    for (size_t k = strlen("<|channel|>"); k <= n; k++) {
        cx_harmony_parts parts;
        const char *c, *r;
        size_t nc, nr;
        srv_chat_split(1, full, k, &parts, &c, &nc, &r, &nr);
        CHECK(nc >= sent, "prefix %zu: content shrank", k);
        sent = nc;
        cx_harmony_parts_free(&parts);
    }
}

TEST_MAIN({
    test_completions_fields();
    test_defaults();
    test_chat();
    test_refusals();
    test_prompt_list();
    test_unsupported();
    test_developer();
    test_developer_role();
    test_error_json();
    test_utf8_cut();
    test_harmony_split();
})
