/*
 * srv_chat.c - chat templates. A GGUF model names its chat format only as
 * Jinja source (tokenizer.chat_template); rather than run Jinja, the server
 * recognizes the common formats by markers only they write, and renders
 * them itself. A template it does not recognize fails the chat route with
 * the names it knows (--chat-template NAME picks one): a wrong format would
 * silently degrade every answer, so it never guesses.
 *
 * The formats (BOS, when the vocabulary wants it, comes from the tokenizer,
 * not from here):
 *   chatml  <|im_start|>ROLE\nTEXT<|im_end|>\n ... <|im_start|>assistant\n
 *   llama2  [INST] <<SYS>>\nSYS\n<</SYS>>\n\nUSER [/INST] ANSWER </s><s>[INST] USER [/INST]
 *   llama3  <|start_header_id|>ROLE<|end_header_id|>\n\nTEXT<|eot_id|> ... assistant header
 *   zephyr  <|ROLE|>\nTEXT</s>\n ... <|assistant|>\n
 *   phi3    <|ROLE|>\nTEXT<|end|>\n ... <|assistant|>\n
 *   gemma   <start_of_turn>user\nTEXT<end_of_turn>\n ... <start_of_turn>model\n (system joins
 *           the first user turn; gemma has no system role)
 *   gpt-oss OpenAI's harmony (alias "harmony"): rendered by the library's
 *           cx_harmony_prompt (harmony.c), which cortex-bench's challenge
 *           replay shares; the turn ends with <|return|> or <|call|>
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "srv.h"

static const char *const NAMES[SRV_TMPL_N] = {"chatml", "llama2", "llama3", "zephyr", "phi3", "gemma", "gpt-oss"};

/* See srv.h. */
const char *srv_chat_name(int t) { return t >= 0 && t < SRV_TMPL_N ? NAMES[t] : NULL; }

/* See srv.h. */
int srv_chat_find(const char *name) {
    for (int t = 0; t < SRV_TMPL_N; t++)
        if (!strcasecmp(name, NAMES[t])) return t;
    return strcasecmp(name, "harmony") ? -1 : SRV_TMPL_HARMONY;
}

/* See srv.h. The order matters where formats share a marker: phi3 and
 * zephyr both write <|user|>, and only phi3 ends turns with <|end|>;
 * harmony's <|start|>, <|message|> and <|channel|> come first (its template
 * also writes <|end|>). */
int srv_chat_detect(const char *j) {
    if (!j) return -1;
    if (cx_harmony_detect(j)) return SRV_TMPL_HARMONY;
    if (strstr(j, "<|im_start|>")) return SRV_TMPL_CHATML;
    if (strstr(j, "<|start_header_id|>") && strstr(j, "<|end_header_id|>")) return SRV_TMPL_LLAMA3;
    if (strstr(j, "<start_of_turn>")) return SRV_TMPL_GEMMA;
    if (strstr(j, "<|user|>") && strstr(j, "<|end|>")) return SRV_TMPL_PHI3;
    if (strstr(j, "<|user|>") && strstr(j, "<|assistant|>")) return SRV_TMPL_ZEPHYR;
    if (strstr(j, "[INST]") && strstr(j, "<<SYS>>")) return SRV_TMPL_LLAMA2;
    return -1;
}

/* A growing output string. */
typedef struct sbuf {
    char *s;
    size_t len, cap;
    int oom;
} sbuf;

/* Append printf-formatted text. */
static void put(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || b->oom) return;
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = (b->len + (size_t)n + 1) * 2;
        char *s = realloc(b->s, cap);
        if (!s) { b->oom = 1; return; }
        b->s = s;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* A system message placed where the format cannot hold it (tmpl's name in the message). */
static int misplaced(srv_error *e, const char *tmpl) {
    return srv_error_set(e, 400, "invalid_request_error", NULL, "messages", "chat template %s: a system message must come first, "
                    "once, and be followed by a user message", tmpl);
}

/* llama2: the system prompt goes inside the first [INST]; each answer is
 * closed with EOS and the next turn opened with BOS. */
static int render_llama2(sbuf *b, const srv_msg *m, int n, const char *bos, const char *eos, srv_error *e) {
    const char *sys = NULL;
    for (int i = 0; i < n; i++) {
        if (!strcmp(m[i].role, "system")) {
            if (i > 0) return misplaced(e, "llama2");
            sys = m[i].content;
        } else if (!strcmp(m[i].role, "user")) {
            if (b->len) put(b, "%s", bos);
            if (sys) put(b, "[INST] <<SYS>>\n%s\n<</SYS>>\n\n%s [/INST]", sys, m[i].content);
            else put(b, "[INST] %s [/INST]", m[i].content);
            sys = NULL;
        } else {
            if (sys) return misplaced(e, "llama2");
            put(b, " %s %s", m[i].content, eos);
        }
    }
    return sys ? misplaced(e, "llama2") : 0;
}

/* gemma: no system role; a leading system message joins the first user turn. */
static int render_gemma(sbuf *b, const srv_msg *m, int n, srv_error *e) {
    const char *sys = NULL;
    for (int i = 0; i < n; i++) {
        if (!strcmp(m[i].role, "system")) {
            if (i > 0) return misplaced(e, "gemma");
            sys = m[i].content;
            continue;
        }
        int user = !strcmp(m[i].role, "user");
        if (sys && !user) return misplaced(e, "gemma");
        put(b, "<start_of_turn>%s\n%s%s%s<end_of_turn>\n", user ? "user" : "model", sys ? sys : "", sys ? "\n\n" : "",
            m[i].content);
        sys = NULL;
    }
    if (sys) return misplaced(e, "gemma");
    put(b, "<start_of_turn>model\n");
    return 0;
}

/* See srv.h. */
int srv_chat_render(int t, const srv_msg *m, int n, const char *bos, const char *eos, const char *date, char **out,
                    const char **end, srv_error *e) {
    sbuf b = {0};
    *out = NULL;
    for (int k = 0; k < SRV_CHAT_MAX_END; k++) end[k] = NULL;
    int rc = 0;
    switch (t) {
    case SRV_TMPL_CHATML:
        for (int i = 0; i < n; i++) put(&b, "<|im_start|>%s\n%s<|im_end|>\n", m[i].role, m[i].content);
        put(&b, "<|im_start|>assistant\n");
        *end = "<|im_end|>";
        break;
    case SRV_TMPL_LLAMA2:
        rc = render_llama2(&b, m, n, bos, eos, e);
        *end = eos;
        break;
    case SRV_TMPL_LLAMA3:
        for (int i = 0; i < n; i++)
            put(&b, "<|start_header_id|>%s<|end_header_id|>\n\n%s<|eot_id|>", m[i].role, m[i].content);
        put(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        *end = "<|eot_id|>";
        break;
    case SRV_TMPL_ZEPHYR:
    case SRV_TMPL_PHI3: {
        const char *close = t == SRV_TMPL_PHI3 ? "<|end|>" : eos;
        for (int i = 0; i < n; i++) put(&b, "<|%s|>\n%s%s\n", m[i].role, m[i].content, close);
        put(&b, "<|assistant|>\n");
        *end = t == SRV_TMPL_PHI3 ? "<|end|>" : eos;
        break;
    }
    case SRV_TMPL_GEMMA:
        rc = render_gemma(&b, m, n, e);
        *end = "<end_of_turn>";
        break;
    case SRV_TMPL_HARMONY: {
        cx_err err = {0};
        if (cx_harmony_prompt(m, n, date, &b.s, &err))
            rc = err.code == CX_ENOMEM ? srv_error_set(e, 500, "server_error", NULL, NULL, "%s", err.msg)
                                       : srv_error_set(e, 400, "invalid_request_error", NULL, "messages", "%s", err.msg);
        end[0] = "<|return|>";
        end[1] = "<|call|>";
        break;
    }
    default: rc = srv_error_set(e, 400, "invalid_request_error", NULL, NULL, "no chat template");
    }
    if (!rc && !b.s) put(&b, "%s", ""); /* no message at all: an empty string, not NULL */
    if (!rc && b.oom) rc = srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory rendering the chat template");
    if (rc) {
        free(b.s);
        return -1;
    }
    *out = b.s;
    return 0;
}

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
