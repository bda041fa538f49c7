/*
 * test_chat.c - the library's chat templates (engine/src/chat.c,
 * cortex_tools.h): detection from excerpts of the Jinja templates real
 * models carry (and none for templates it does not know), names, and each
 * format rendered for a system + user + assistant + user conversation, byte
 * for byte, with the texts that end its assistant turn (and a "developer"
 * message as the system one); the messages a format cannot hold refused; a
 * GGUF's tokenizer.chat_template reaching cx_model_info.chat_template;
 * cx_chat_init on vocabulary-only GGUFs (BOS/EOS texts found, unknown names
 * and templates refused with the known names) and on stories260K
 * (../shared/models, or CORTEX_MODELS; skipped without it, failed in CI).
 * The server's side (a "developer" body, harmony answers split) is
 * test_srv_parse.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "gguf_write.h"

/* Excerpts of tokenizer.chat_template as the model families ship them. */
static const struct { const char *jinja; int want; } DETECT[] = {
    {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
     "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}", CX_CHAT_CHATML},
    {"{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
     " + message['content'] | trim + '<|eot_id|>' }}{% endfor %}", CX_CHAT_LLAMA3},
    {"{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + messages[0]['content'] + "
     "'\\n<</SYS>>\\n\\n' %}{% endif %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}", CX_CHAT_LLAMA2},
    {"{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + eos_token }}"
     "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\\n'  + message['content'] + eos_token }}{% endif %}"
     "{% endfor %}", CX_CHAT_ZEPHYR},
    {"{% for message in messages %}{% if message['role'] == 'user' %}{{'<|user|>' + '\\n' + message['content'] + "
     "'<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}{% endif %}{% endfor %}", CX_CHAT_PHI3},
    {"{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + "
     "'<end_of_turn>\\n' }}{% endfor %}", CX_CHAT_GEMMA},
    /* gpt-oss (harmony), by <|start|>, <|message|> and <|channel|> */
    {"{{- \"<|start|>system<|message|>\" }}{{- build_system_message() }}{{- \"<|end|>\" }}{%- elif message.role == 'user' -%}"
     "{{- \"<|start|>user<|message|>\" + message.content + \"<|end|>\" }}{{- \"<|start|>assistant<|channel|>final<|message|>\" "
     "+ message.content + \"<|end|>\" }}", CX_CHAT_HARMONY},
    /* Mistral's [INST] without <<SYS>>, and an invented format: not known, never guessed */
    {"{{ bos_token }}{% for message in messages %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% endfor %}", -1},
    {"{% for m in messages %}### {{ m['role'] }}: {{ m['content'] }}\\n{% endfor %}", -1},
};

/* Write a vocabulary-only GGUF (five SentencePiece tokens, BOS and EOS
 * spelled bos and eos) with chat template `jinja` (NULL: none) as `file` in
 * the scratch directory, and load it (NULL on failure, checked). */
static cx_model *vocab_model(const char *file, const char *jinja, const char *bos, const char *eos) {
    const char *path = fx_path("%s", file);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "open %s", path);
    if (!f) return NULL;
    const char *toks[] = {"<unk>", bos, eos, "a", "b"};
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
    return fx_load(path, NULL);
}

/* A GGUF's template `jinja` (NULL: none) reaches its info as written (NULL
 * when none), and the chatml one is recognized. */
static void model_template(const char *jinja) {
    cx_model *m = vocab_model(jinja ? "with-template.gguf" : "no-template.gguf", jinja, "<s>", "</s>");
    if (!m) return;
    const char *got = cx_model_get_info(m)->chat_template;
    if (jinja) {
        CHECK(got && !strcmp(got, jinja), "the template as written: %s", got ? got : "(null)");
        CHECK(cx_chat_detect(got) == CX_CHAT_CHATML, "detected as chatml");
    } else {
        CHECK(got == NULL, "no template: NULL");
    }
    cx_model_free(m);
}

/* Detection, names and lookups. */
static void test_detect(void) {
    for (size_t i = 0; i < sizeof DETECT / sizeof DETECT[0]; i++)
        CHECK(cx_chat_detect(DETECT[i].jinja) == DETECT[i].want, "excerpt %zu: %d, want %d", i,
              cx_chat_detect(DETECT[i].jinja), DETECT[i].want);
    CHECK(cx_chat_detect(NULL) == -1, "no template");
    for (int t = 0; t < CX_CHAT_N; t++) CHECK(cx_chat_find(cx_chat_name(t)) == t, "find(name(%d))", t);
    CHECK(cx_chat_find("ChatML") == CX_CHAT_CHATML && cx_chat_find("vicuna") == -1, "find");
    CHECK(cx_chat_find("gpt-oss") == CX_CHAT_HARMONY && cx_chat_find("Harmony") == CX_CHAT_HARMONY, "gpt-oss, harmony");
    CHECK(cx_chat_find(NULL) == -1, "find(NULL)");
    CHECK(cx_chat_name(CX_CHAT_N) == NULL && cx_chat_name(-1) == NULL, "name out of range");
}

static const cx_chat_msg CONV[] = {
    {"system", "Be kind."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};

/* The vocabulary-only model whose BOS and EOS are <s> and </s> (no template). */
static cx_model *g_sp;

/* Template t for g_sp, chosen by name (0, checked). */
static int chat_of(int t, cx_chat *c) {
    cx_err err = {0};
    int rc = cx_chat_init(g_sp, cx_chat_name(t), c, &err);
    CHECK(rc == 0 && c->tmpl == t, "init %s: %s", cx_chat_name(t), err.msg);
    return rc;
}

/* Render CONV in template t and compare with want; also the end-of-turn texts ('|'-joined). */
static void rendered(int t, const char *want, const char *want_end) {
    char *out = NULL, ends[64] = "";
    cx_chat c;
    cx_err err = {0};
    if (chat_of(t, &c)) return;
    CHECK(!strcmp(c.bos, "<s>") && !strcmp(c.eos, "</s>"), "%s: bos [%s], eos [%s]", cx_chat_name(t), c.bos, c.eos);
    CHECK(cx_chat_render(&c, CONV, 4, "2025-08-05", &out, &err) == 0, "%s: %s", cx_chat_name(t), err.msg);
    CHECK(out && !strcmp(out, want), "%s:\n got  [%s]\n want [%s]", cx_chat_name(t), out ? out : "(null)", want);
    for (int k = 0; k < CX_CHAT_MAX_END && c.end[k]; k++)
        snprintf(ends + strlen(ends), sizeof ends - strlen(ends), "%s%s", k ? "|" : "", c.end[k]);
    CHECK(!strcmp(ends, want_end), "%s: end %s", cx_chat_name(t), ends);
    free(out);
}

/* Every format, byte for byte. */
static void test_render(void) {
    rendered(CX_CHAT_CHATML,
             "<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!"
             "<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n", "<|im_end|>");
    rendered(CX_CHAT_LLAMA2, "[INST] <<SYS>>\nBe kind.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] Bye [/INST]", "</s>");
    rendered(CX_CHAT_LLAMA3,
             "<|start_header_id|>system<|end_header_id|>\n\nBe kind.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
             "Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>user"
             "<|end_header_id|>\n\nBye<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>");
    rendered(CX_CHAT_ZEPHYR, "<|system|>\nBe kind.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello!</s>\n<|user|>\nBye</s>\n"
             "<|assistant|>\n", "</s>");
    rendered(CX_CHAT_PHI3, "<|system|>\nBe kind.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n<|user|>\n"
             "Bye<|end|>\n<|assistant|>\n", "<|end|>");
    rendered(CX_CHAT_GEMMA, "<start_of_turn>user\nBe kind.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
             "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n", "<end_of_turn>");
    /* the published gpt-oss template's default rendering (system -> developer instructions) */
    rendered(CX_CHAT_HARMONY,
             "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: "
             "2024-06\nCurrent date: 2025-08-05\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. "
             "Channel must be included for every message.<|end|><|start|>developer<|message|># Instructions\n\nBe kind."
             "\n\n<|end|><|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|end|>"
             "<|start|>user<|message|>Bye<|end|><|start|>assistant", "<|return|>|<|call|>");
    /* llama2 and zephyr end their turns with this struct's own EOS text */
    cx_chat c;
    if (!chat_of(CX_CHAT_LLAMA2, &c)) CHECK(c.end[0] == c.eos && c.end[1] == NULL, "llama2: end[0] is c.eos");
}

/* A "developer" message renders as the system message in every template,
 * byte for byte; with no date, harmony's is today's (UTC). */
static void test_developer_and_date(void) {
    const cx_chat_msg dev[] = {{"developer", "Be brief."}, {"user", "Hi"}}, sys[] = {{"system", "Be brief."}, {"user", "Hi"}};
    for (int t = 0; t < CX_CHAT_N; t++) {
        char *out[2] = {NULL, NULL};
        cx_chat c;
        cx_err err = {0};
        if (chat_of(t, &c)) continue;
        CHECK(cx_chat_render(&c, dev, 2, "2025-08-05", &out[0], &err) == 0, "%s: %s", cx_chat_name(t), err.msg);
        CHECK(cx_chat_render(&c, sys, 2, "2025-08-05", &out[1], &err) == 0, "%s: %s", cx_chat_name(t), err.msg);
        CHECK(out[0] && out[1] && !strcmp(out[0], out[1]) && strstr(out[0], "Be brief."), "%s: developer = system",
              cx_chat_name(t));
        free(out[0]);
        free(out[1]);
    }
    cx_chat c;
    char *out = NULL;
    cx_err err = {0};
    if (chat_of(CX_CHAT_HARMONY, &c)) return;
    char before[16], after[16]; /* today before and after the call: a run across midnight UTC may see either */
    time_t now = time(NULL);
    struct tm tm;
    strftime(before, sizeof before, "%Y-%m-%d", gmtime_r(&now, &tm));
    int rc = cx_chat_render(&c, sys, 2, NULL, &out, &err);
    now = time(NULL);
    strftime(after, sizeof after, "%Y-%m-%d", gmtime_r(&now, &tm));
    char want_before[64], want_after[64];
    snprintf(want_before, sizeof want_before, "Current date: %s\n", before);
    snprintf(want_after, sizeof want_after, "Current date: %s\n", after);
    CHECK(rc == 0 && (strstr(out, want_before) || strstr(out, want_after)), "harmony, no date: %s", out ? out : err.msg);
    free(out);
    /* no message at all: the opened turn alone, a string */
    if (chat_of(CX_CHAT_CHATML, &c)) return;
    CHECK(cx_chat_render(&c, NULL, 0, NULL, &out, &err) == 0 && out && !strcmp(out, "<|im_start|>assistant\n"),
          "no messages: %s", out ? out : err.msg);
    free(out);
}

/* llama2 and gemma take one system message, first, followed by a user
 * message; NULL fields, unknown roles and an unknown template id are refused. */
static void test_render_errors(void) {
    char *out = NULL;
    cx_err err = {0};
    cx_chat c;
    const cx_chat_msg late[] = {{"user", "Hi"}, {"system", "late"}}, alone[] = {{"system", "S"}},
                      no_user[] = {{"system", "S"}, {"assistant", "A"}};
    for (int t = CX_CHAT_LLAMA2; t <= CX_CHAT_GEMMA; t += CX_CHAT_GEMMA - CX_CHAT_LLAMA2) { /* llama2, gemma */
        if (chat_of(t, &c)) continue;
        CHECK(cx_chat_render(&c, late, 2, "2025-08-05", &out, &err) == CX_EINVAL && err.code == CX_EINVAL && !out,
              "%s: a late system message is refused", cx_chat_name(t));
        char want[160];
        snprintf(want, sizeof want, "chat template %s: a system message must come first, once, and be followed by a "
                 "user message", cx_chat_name(t));
        CHECK(!strcmp(err.msg, want), "%s: message [%s]", cx_chat_name(t), err.msg);
        CHECK(cx_chat_render(&c, alone, 1, "2025-08-05", &out, &err) == CX_EINVAL && !out,
              "%s: a system message alone is refused (it would be dropped)", cx_chat_name(t));
        CHECK(cx_chat_render(&c, no_user, 2, "2025-08-05", &out, &err) == CX_EINVAL && !out,
              "%s: a system message before an answer is refused", cx_chat_name(t));
    }
    cx_chat none = {.tmpl = CX_CHAT_N};
    CHECK(cx_chat_render(&none, CONV, 1, "2025-08-05", &out, &err) == CX_EINVAL && !out, "unknown template id");
    CHECK(cx_chat_render(NULL, CONV, 1, "2025-08-05", &out, &err) == CX_EINVAL && !out, "no template");
    if (!chat_of(CX_CHAT_HARMONY, &c))
        CHECK(cx_chat_render(&c, late, 2, "2025-08-05", &out, &err) == CX_EINVAL && !out &&
              strstr(err.msg, "must come first"), "harmony: a late system message is refused: %s", err.msg);
    const cx_chat_msg one[] = {{"user", "Hi"}};
    if (!chat_of(CX_CHAT_LLAMA2, &c)) {
        CHECK(cx_chat_render(&c, one, 1, "2025-08-05", &out, &err) == 0 && !strcmp(out, "[INST] Hi [/INST]"),
              "llama2 without a system message: %s", out ? out : "(null)");
        free(out);
        out = NULL;
    }
    const cx_chat_msg no_role[] = {{"user", "Hi"}, {NULL, "x"}}, no_content[] = {{"user", NULL}},
                      robot[] = {{"robot", "beep"}};
    for (int t = 0; t < CX_CHAT_N; t++) {
        if (chat_of(t, &c)) continue;
        CHECK(cx_chat_render(&c, no_role, 2, "2025-08-05", &out, &err) == CX_EINVAL && !out &&
              strstr(err.msg, "message 1 has no role"), "%s: a NULL role: %s", cx_chat_name(t), err.msg);
        CHECK(cx_chat_render(&c, no_content, 1, "2025-08-05", &out, &err) == CX_EINVAL && !out &&
              strstr(err.msg, "message 0 has no content"), "%s: a NULL content: %s", cx_chat_name(t), err.msg);
        CHECK(cx_chat_render(&c, robot, 1, "2025-08-05", &out, &err) == CX_EINVAL && !out && strstr(err.msg, "robot"),
              "%s: an unknown role: %s", cx_chat_name(t), err.msg);
    }
}

/* cx_chat_init on vocabulary-only models: names, detection, refusals. */
static void test_init(void) {
    cx_chat c;
    cx_err err = {0};
    char names[128] = "";
    for (int t = 0; t < CX_CHAT_N; t++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", t ? ", " : "", cx_chat_name(t));
    /* no template, no name: refused with the names, and no server flag named */
    CHECK(cx_chat_init(g_sp, NULL, &c, &err) == CX_EUNSUP && err.code == CX_EUNSUP, "no template: %s", err.msg);
    CHECK(strstr(err.msg, "no chat template") && strstr(err.msg, names) && !strstr(err.msg, "--"), "no template: [%s]",
          err.msg);
    CHECK(c.tmpl == -1, "a failed init leaves no template: %d", c.tmpl);
    /* an unknown name */
    CHECK(cx_chat_init(g_sp, "vicuna", &c, &err) == CX_EINVAL && strstr(err.msg, "vicuna") && strstr(err.msg, names),
          "unknown name: %s", err.msg);
    CHECK(cx_chat_init(g_sp, "HARMONY", &c, &err) == 0 && c.tmpl == CX_CHAT_HARMONY, "harmony by name: %s", err.msg);
    CHECK(cx_chat_init(NULL, "chatml", &c, &err) == CX_EINVAL, "no model");
    /* detected from the model's template */
    cx_model *m = vocab_model("chatml.gguf", DETECT[0].jinja, "<s>", "</s>");
    if (m) {
        CHECK(cx_chat_init(m, NULL, &c, &err) == 0 && c.tmpl == CX_CHAT_CHATML && !strcmp(c.end[0], "<|im_end|>") &&
              c.end[1] == NULL, "detected chatml: %s", err.msg);
        CHECK(cx_chat_init(m, "gemma", &c, &err) == 0 && c.tmpl == CX_CHAT_GEMMA, "a name overrides the template: %s",
              err.msg);
        cx_model_free(m);
    }
    /* a template no renderer knows: refused with the names, saying to pass one */
    m = vocab_model("unknown.gguf", DETECT[sizeof DETECT / sizeof DETECT[0] - 1].jinja, "<s>", "</s>");
    if (m) {
        CHECK(cx_chat_init(m, NULL, &c, &err) == CX_EUNSUP && strstr(err.msg, "not one of the known formats") &&
              strstr(err.msg, names) && strstr(err.msg, "pass") && !strstr(err.msg, "--"), "unknown template: %s", err.msg);
        cx_model_free(m);
    }
    /* BOS and EOS with no text of the candidates: llama2 and zephyr refused, chatml fine */
    m = vocab_model("odd-bos.gguf", NULL, "<START>", "<STOP>");
    if (m) {
        CHECK(cx_chat_init(m, "llama2", &c, &err) == CX_EUNSUP && !strcmp(err.msg, "chat template llama2 separates turns "
              "with BOS/EOS, and this model's have no text that tokenizes back to them"), "llama2: %s", err.msg);
        CHECK(cx_chat_init(m, "zephyr", &c, &err) == CX_EUNSUP, "zephyr: %s", err.msg);
        CHECK(cx_chat_init(m, "chatml", &c, &err) == 0 && !c.bos[0] && !c.eos[0], "chatml: %s [%s] [%s]", err.msg,
              c.bos, c.eos);
        cx_model_free(m);
    }
}

/* cx_chat_init on a real model without a template (stories260K). */
static void test_real(void) {
    char path[512];
    if (!fx_real_model("stories260K.gguf", "stories260K checks", path, sizeof path)) return;
    cx_model *m = fx_load(path, NULL);
    if (!m) return;
    cx_chat c;
    cx_err err = {0};
    char *out = NULL;
    CHECK(cx_model_get_info(m)->chat_template == NULL, "stories260K has no chat template");
    CHECK(cx_chat_init(m, NULL, &c, &err) == CX_EUNSUP && strstr(err.msg, "no chat template"), "stories260K: %s",
          err.msg);
    CHECK(cx_chat_init(m, "nonesuch", &c, &err) == CX_EINVAL, "stories260K, an unknown name: %s", err.msg);
    CHECK(cx_chat_init(m, "chatml", &c, &err) == 0 && c.tmpl == CX_CHAT_CHATML, "stories260K, chatml: %s", err.msg);
    CHECK(cx_chat_render(&c, CONV, 4, NULL, &out, &err) == 0 && out && strstr(out, "<|im_start|>assistant\n"),
          "stories260K, chatml rendered: %s", err.msg);
    free(out);
    CHECK(!strcmp(c.bos, "<s>") && !strcmp(c.eos, "</s>"), "stories260K: bos [%s], eos [%s]", c.bos, c.eos);
    cx_model_free(m);
}

TEST_MAIN({
    model_template(DETECT[0].jinja);
    model_template(NULL);
    test_detect();
    g_sp = vocab_model("sp.gguf", NULL, "<s>", "</s>");
    if (g_sp) {
        test_render();
        test_developer_and_date();
        test_render_errors();
        test_init();
        cx_model_free(g_sp);
    }
    test_real();
    fx_cleanup();
})
