/*
 * test_srv_chat.c - the server's chat templates (engine/server/srv_chat.c):
 * detection from excerpts of the Jinja templates real models carry (and
 * none for templates it does not know), names, and each format rendered for
 * a system + user + assistant + user conversation, byte for byte; and a
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
    CHECK(srv_chat_name(SRV_TMPL_N) == NULL && srv_chat_name(-1) == NULL, "name out of range");
}

static const srv_msg CONV[] = {
    {"system", "Be kind."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};

/* Render CONV in template t and compare with want; also the end-of-turn text. */
static void rendered(int t, const char *want, const char *want_end) {
    char *out = NULL;
    const char *end = NULL;
    srv_error e;
    CHECK(srv_chat_render(t, CONV, 4, "<s>", "</s>", &out, &end, &e) == 0, "%s: %s", srv_chat_name(t), e.message);
    CHECK(out && !strcmp(out, want), "%s:\n got  [%s]\n want [%s]", srv_chat_name(t), out ? out : "(null)", want);
    CHECK(end && !strcmp(end, want_end), "%s: end %s", srv_chat_name(t), end ? end : "(null)");
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
}

/* llama2 takes one system message, first; an unknown template id is refused. */
static void test_render_errors(void) {
    char *out = NULL;
    const char *end;
    srv_error e;
    const srv_msg late[] = {{"user", "Hi"}, {"system", "late"}}, alone[] = {{"system", "S"}},
                  no_user[] = {{"system", "S"}, {"assistant", "A"}};
    for (int t = SRV_TMPL_LLAMA2; t <= SRV_TMPL_GEMMA; t += SRV_TMPL_GEMMA - SRV_TMPL_LLAMA2) { /* llama2, gemma */
        CHECK(srv_chat_render(t, late, 2, "<s>", "</s>", &out, &end, &e) == -1 && e.status == 400 && !out,
              "%s: a late system message is refused", srv_chat_name(t));
        CHECK(srv_chat_render(t, alone, 1, "<s>", "</s>", &out, &end, &e) == -1 && !out,
              "%s: a system message alone is refused (it would be dropped)", srv_chat_name(t));
        CHECK(srv_chat_render(t, no_user, 2, "<s>", "</s>", &out, &end, &e) == -1 && !out,
              "%s: a system message before an answer is refused", srv_chat_name(t));
    }
    CHECK(srv_chat_render(SRV_TMPL_N, CONV, 1, "<s>", "</s>", &out, &end, &e) == -1 && !out, "unknown template id");
    const srv_msg one[] = {{"user", "Hi"}};
    CHECK(srv_chat_render(SRV_TMPL_LLAMA2, one, 1, "<s>", "</s>", &out, &end, &e) == 0 && !strcmp(out, "[INST] Hi [/INST]"),
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

TEST_MAIN({
    model_template(DETECT[0].jinja);
    model_template(NULL);
    test_detect();
    test_render();
    test_render_errors();
})
