/*
 * test_srv_chat.c - the server's chat templates (engine/server/srv_chat.c):
 * detection from excerpts of the Jinja templates real models carry (and
 * none for templates it does not know), names, and each format rendered for
 * a system + user + assistant + user conversation, byte for byte (and a
 * "developer" message as the system one); and a
 * GGUF's tokenizer.chat_template reaching cx_model_info.chat_template.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf_write.h"
#include "srv.h"
#include "testing.h"

/* Excerpts of tokenizer.chat_template as the model families ship them. */
static const struct { const char *jinja; int want; } DETECT[] = {
    {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
     "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}", SRV_TMPL_CHATML},
    {"{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
     " + message['content'] | trim + '<|eot_id|>' }}{% endfor %}", SRV_TMPL_LLAMA3},
    {"{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + messages[0]['content'] + "
     "'\\n<</SYS>>\\n\\n' %}{% endif %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}", SRV_TMPL_LLAMA2},
    {"{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + eos_token }}"
     "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\\n'  + message['content'] + eos_token }}{% endif %}"
     "{% endfor %}", SRV_TMPL_ZEPHYR},
    {"{% for message in messages %}{% if message['role'] == 'user' %}{{'<|user|>' + '\\n' + message['content'] + "
     "'<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}{% endif %}{% endfor %}", SRV_TMPL_PHI3},
    {"{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + "
     "'<end_of_turn>\\n' }}{% endfor %}", SRV_TMPL_GEMMA},
    /* gpt-oss (harmony), by <|start|>, <|message|> and <|channel|> */
    {"{{- \"<|start|>system<|message|>\" }}{{- build_system_message() }}{{- \"<|end|>\" }}{%- elif message.role == 'user' -%}"
     "{{- \"<|start|>user<|message|>\" + message.content + \"<|end|>\" }}{{- \"<|start|>assistant<|channel|>final<|message|>\" "
     "+ message.content + \"<|end|>\" }}", SRV_TMPL_HARMONY},
    /* Mistral's [INST] without <<SYS>>, and an invented format: not known, never guessed */
    {"{{ bos_token }}{% for message in messages %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% endfor %}", -1},
    {"{% for m in messages %}### {{ m['role'] }}: {{ m['content'] }}\\n{% endfor %}", -1},
};

/* Detection, names and lookups. */
static void test_detect(void) {
    for (size_t i = 0; i < sizeof DETECT / sizeof DETECT[0]; i++)
        CHECK(srv_chat_detect(DETECT[i].jinja) == DETECT[i].want, "excerpt %zu: %d, want %d", i,
              srv_chat_detect(DETECT[i].jinja), DETECT[i].want);
    CHECK(srv_chat_detect(NULL) == -1, "no template");
    for (int t = 0; t < SRV_TMPL_N; t++) CHECK(srv_chat_find(srv_chat_name(t)) == t, "find(name(%d))", t);
    CHECK(srv_chat_find("ChatML") == SRV_TMPL_CHATML && srv_chat_find("vicuna") == -1, "find");
    CHECK(srv_chat_find("gpt-oss") == SRV_TMPL_HARMONY && srv_chat_find("Harmony") == SRV_TMPL_HARMONY, "gpt-oss, harmony");
    CHECK(srv_chat_name(SRV_TMPL_N) == NULL && srv_chat_name(-1) == NULL, "name out of range");
}

static const srv_msg CONV[] = {
    {"system", "Be kind."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};

/* Render CONV in template t and compare with want; also the end-of-turn texts ('|'-joined). */
static void rendered(int t, const char *want, const char *want_end) {
    char *out = NULL, ends[64] = "";
    const char *end[SRV_CHAT_MAX_END];
    srv_error e;
    CHECK(srv_chat_render(t, CONV, 4, "<s>", "</s>", "2025-08-05", &out, end, &e) == 0, "%s: %s", srv_chat_name(t),
          e.message);
    CHECK(out && !strcmp(out, want), "%s:\n got  [%s]\n want [%s]", srv_chat_name(t), out ? out : "(null)", want);
    for (int k = 0; k < SRV_CHAT_MAX_END && end[k]; k++)
        snprintf(ends + strlen(ends), sizeof ends - strlen(ends), "%s%s", k ? "|" : "", end[k]);
    CHECK(!strcmp(ends, want_end), "%s: end %s", srv_chat_name(t), ends);
    free(out);
}

/* Every format, byte for byte. */
static void test_render(void) {
    rendered(SRV_TMPL_CHATML,
             "<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!"
             "<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n", "<|im_end|>");
    rendered(SRV_TMPL_LLAMA2, "[INST] <<SYS>>\nBe kind.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] Bye [/INST]", "</s>");
    rendered(SRV_TMPL_LLAMA3,
             "<|start_header_id|>system<|end_header_id|>\n\nBe kind.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
             "Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>user"
             "<|end_header_id|>\n\nBye<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>");
    rendered(SRV_TMPL_ZEPHYR, "<|system|>\nBe kind.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello!</s>\n<|user|>\nBye</s>\n"
             "<|assistant|>\n", "</s>");
    rendered(SRV_TMPL_PHI3, "<|system|>\nBe kind.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n<|user|>\n"
             "Bye<|end|>\n<|assistant|>\n", "<|end|>");
    rendered(SRV_TMPL_GEMMA, "<start_of_turn>user\nBe kind.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
             "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n", "<end_of_turn>");
    /* the published gpt-oss template's default rendering (system -> developer instructions) */
    rendered(SRV_TMPL_HARMONY,
             "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: "
             "2024-06\nCurrent date: 2025-08-05\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. "
             "Channel must be included for every message.<|end|><|start|>developer<|message|># Instructions\n\nBe kind."
             "\n\n<|end|><|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|end|>"
             "<|start|>user<|message|>Bye<|end|><|start|>assistant", "<|return|>|<|call|>");
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

/* llama2 takes one system message, first; an unknown template id is refused. */
static void test_render_errors(void) {
    char *out = NULL;
    const char *end[SRV_CHAT_MAX_END];
    srv_error e;
    const srv_msg late[] = {{"user", "Hi"}, {"system", "late"}}, alone[] = {{"system", "S"}},
                  no_user[] = {{"system", "S"}, {"assistant", "A"}};
    for (int t = SRV_TMPL_LLAMA2; t <= SRV_TMPL_GEMMA; t += SRV_TMPL_GEMMA - SRV_TMPL_LLAMA2) { /* llama2, gemma */
        CHECK(srv_chat_render(t, late, 2, "<s>", "</s>", "2025-08-05", &out, end, &e) == -1 && e.status == 400 && !out,
              "%s: a late system message is refused", srv_chat_name(t));
        CHECK(srv_chat_render(t, alone, 1, "<s>", "</s>", "2025-08-05", &out, end, &e) == -1 && !out,
              "%s: a system message alone is refused (it would be dropped)", srv_chat_name(t));
        CHECK(srv_chat_render(t, no_user, 2, "<s>", "</s>", "2025-08-05", &out, end, &e) == -1 && !out,
              "%s: a system message before an answer is refused", srv_chat_name(t));
    }
    CHECK(srv_chat_render(SRV_TMPL_N, CONV, 1, "<s>", "</s>", "2025-08-05", &out, end, &e) == -1 && !out, "unknown template id");
    CHECK(srv_chat_render(SRV_TMPL_HARMONY, late, 2, "<s>", "</s>", "2025-08-05", &out, end, &e) == -1 && e.status == 400 &&
          !out && strstr(e.message, "must come first"), "harmony: a late system message is refused: %s", e.message);
    const srv_msg one[] = {{"user", "Hi"}};
    CHECK(srv_chat_render(SRV_TMPL_LLAMA2, one, 1, "<s>", "</s>", "2025-08-05", &out, end, &e) == 0 && !strcmp(out, "[INST] Hi [/INST]"),
          "llama2 without a system message: %s", out ? out : "(null)");
    free(out);
}

/* Write a vocabulary-only GGUF (five SentencePiece tokens) with chat
 * template `jinja` (NULL: none), load it, and check its info carries the
 * template (NULL when none) and that the chatml one is recognized. */
static void model_template(const char *jinja) {
    char path[] = "/tmp/test_srv_chat_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    CHECK(f != NULL, "temp file");
    if (!f) return;
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "a", "b"};
    static const float scores[] = {0, 0, 0, -1, -2};
    static const int32_t types[] = {2, 3, 3, 1, 1};
    gguf_writer *w = gguf_writer_new(0);
    gguf_w_str(w, "general.architecture", "llama");
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 5);
    gguf_w_arr_f32(w, "tokenizer.ggml.scores", scores, 5);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, 5);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
    if (jinja) gguf_w_str(w, "tokenizer.chat_template", jinja);
    cx_err err = {0};
    CHECK(gguf_w_header(w, f, path, NULL, &err) == 0, "header: %s", err.msg);
    gguf_writer_free(w);
    fclose(f);
    cx_model *m = NULL;
    CHECK(cx_model_load(path, NULL, &m, &err) == 0, "load: %s", err.msg);
    unlink(path);
    if (!m) return;
    const char *got = cx_model_get_info(m)->chat_template;
    if (jinja) {
        CHECK(got && !strcmp(got, jinja), "the template as written: %s", got ? got : "(null)");
        CHECK(srv_chat_detect(got) == SRV_TMPL_CHATML, "detected as chatml");
    } else {
        CHECK(got == NULL, "no template: NULL");
    }
    cx_model_free(m);
}

/* A request body's "developer" message renders as the system message in
 * every template (the parser names it "system"), byte for byte. */
static void test_developer_role(void) {
    static const char *const BODY[2] = {
        "{\"messages\": [{\"role\": \"developer\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}]}",
        "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}]}"};
    cx_sampler_params d = cx_sampler_defaults();
    srv_params p[2];
    srv_error e;
    for (int k = 0; k < 2; k++)
        CHECK(srv_parse_request(BODY[k], strlen(BODY[k]), 1, &d, &p[k], &e) == 0, "parse %d: %s", k, e.message);
    for (int t = 0; t < SRV_TMPL_N; t++) {
        char *out[2] = {NULL, NULL};
        const char *end[SRV_CHAT_MAX_END];
        for (int k = 0; k < 2; k++)
            CHECK(srv_chat_render(t, p[k].msgs, p[k].n_msgs, "<s>", "</s>", "2025-08-05", &out[k], end, &e) == 0,
                  "%s: %s", srv_chat_name(t), e.message);
        CHECK(out[0] && out[1] && !strcmp(out[0], out[1]) && strstr(out[0], "Be brief."), "%s: developer = system",
              srv_chat_name(t));
        free(out[0]);
        free(out[1]);
    }
    srv_params_free(&p[0]);
    srv_params_free(&p[1]);
}

TEST_MAIN({
    model_template(DETECT[0].jinja);
    model_template(NULL);
    test_detect();
    test_render();
    test_render_errors();
    test_harmony_split();
    test_developer_role();
})
