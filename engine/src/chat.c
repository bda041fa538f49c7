/*
 * chat.c - chat templates (cortex_tools.h, "chat templates"): the one copy
 * of them, which `cortex serve`'s chat route (engine/server/srv_routes.c)
 * and the Python module use. A GGUF model names its chat format only as
 * Jinja source (tokenizer.chat_template); rather than run Jinja, the library
 * recognizes the common formats by markers only they write, and renders
 * them itself. A template it does not recognize is refused with the names it
 * knows (the caller may pass one): a wrong format would silently degrade
 * every answer, so it never guesses.
 *
 * Contract: cx_chat_init chooses a model's format once (by name, or detected
 * from its template) and finds the texts of its BOS and EOS tokens, which
 * llama2 and zephyr separate turns with; cx_chat_render then writes the
 * prompt of a conversation, ending with the assistant's turn opened, and
 * reads only the struct's tmpl, bos and eos. The texts that end an
 * assistant turn (cx_chat.end) stop generation: the caller makes them stop
 * tokens where they are one token of the vocabulary, else stop strings.
 * Roles: "system" ("developer" is the same), "user", "assistant".
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
 *   gpt-oss OpenAI's harmony (alias "harmony"): rendered by cx_harmony_prompt
 *           (harmony.c), which cortex-bench's challenge replay shares; the
 *           turn ends with <|return|> or <|call|>
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cortex_tools.h"
#include "util.h"

static const char *const NAMES[CX_CHAT_N] = {"chatml", "llama2", "llama3", "zephyr", "phi3", "gemma", "gpt-oss"};

/* See cortex_tools.h. */
const char *cx_chat_name(int t) { return t >= 0 && t < CX_CHAT_N ? NAMES[t] : NULL; }

/* See cortex_tools.h. */
int cx_chat_find(const char *name) {
    if (!name) return -1;
    for (int t = 0; t < CX_CHAT_N; t++)
        if (!strcasecmp(name, NAMES[t])) return t;
    return strcasecmp(name, "harmony") ? -1 : CX_CHAT_HARMONY;
}

/* See cortex_tools.h. The order matters where formats share a marker: phi3
 * and zephyr both write <|user|>, and only phi3 ends turns with <|end|>;
 * harmony's <|start|>, <|message|> and <|channel|> come first (its template
 * also writes <|end|>). */
int cx_chat_detect(const char *j) {
    if (!j) return -1;
    if (cx_harmony_detect(j)) return CX_CHAT_HARMONY;
    if (strstr(j, "<|im_start|>")) return CX_CHAT_CHATML;
    if (strstr(j, "<|start_header_id|>") && strstr(j, "<|end_header_id|>")) return CX_CHAT_LLAMA3;
    if (strstr(j, "<start_of_turn>")) return CX_CHAT_GEMMA;
    if (strstr(j, "<|user|>") && strstr(j, "<|end|>")) return CX_CHAT_PHI3;
    if (strstr(j, "<|user|>") && strstr(j, "<|assistant|>")) return CX_CHAT_ZEPHYR;
    if (strstr(j, "[INST]") && strstr(j, "<<SYS>>")) return CX_CHAT_LLAMA2;
    return -1;
}

/* The known names, ", "-separated, into buf. */
static const char *known_names(char *buf, size_t cap) {
    buf[0] = 0;
    for (int t = 0; t < CX_CHAT_N; t++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", t ? ", " : "", NAMES[t]);
    return buf;
}

/* The text of token id `want` among candidates that tokenize (control text
 * taken as tokens) to exactly that one token, into out; "" if none does. */
static void special_text(const cx_model *m, int want, const char *const *cands, char *out, size_t cap) {
    out[0] = 0;
    for (int i = 0; want >= 0 && cands[i]; i++) {
        int32_t ids[8];
        int n = 0;
        cx_err err;
        if (!cx_tokenize(m, cands[i], strlen(cands[i]), CX_TOKENIZE_SPECIAL, ids, 8, &n, &err) && n == 1 && ids[0] == want) {
            snprintf(out, cap, "%s", cands[i]);
            return;
        }
    }
}

/* See cortex_tools.h. */
int cx_chat_init(const cx_model *m, const char *name, cx_chat *out, cx_err *err) {
    static const char *const BOS[] = {"<s>", "<|begin_of_text|>", "<bos>", "<|endoftext|>", NULL};
    static const char *const EOS[] = {"</s>", "<|end_of_text|>", "<eos>", "<|endoftext|>", "<|im_end|>", NULL};
    char names[128];
    if (!out) return cx_fail(err, CX_EINVAL, "cx_chat_init: no output");
    memset(out, 0, sizeof *out);
    out->tmpl = -1;
    if (!m) return cx_fail(err, CX_EINVAL, "cx_chat_init: no model");
    const char *jinja = cx_model_get_info(m)->chat_template;
    int t = name ? cx_chat_find(name) : cx_chat_detect(jinja);
    if (t < 0 && name)
        return cx_fail(err, CX_EINVAL, "unknown chat template '%s' (one of %s; harmony is gpt-oss)", name,
                       known_names(names, sizeof names));
    if (t < 0 && !jinja)
        return cx_fail(err, CX_EUNSUP, "the model has no chat template (tokenizer.chat_template): pass a template's "
                       "name (one of %s)", known_names(names, sizeof names));
    if (t < 0)
        return cx_fail(err, CX_EUNSUP, "the model's chat template is not one of the known formats: pass a template's "
                       "name (one of %s) if one of them is the model's format", known_names(names, sizeof names));
    special_text(m, cx_token_bos(m), BOS, out->bos, sizeof out->bos);
    special_text(m, cx_token_eos(m), EOS, out->eos, sizeof out->eos);
    if ((t == CX_CHAT_LLAMA2 || t == CX_CHAT_ZEPHYR) && (!out->bos[0] || !out->eos[0])) {
        out->bos[0] = out->eos[0] = 0;
        return cx_fail(err, CX_EUNSUP, "chat template %s separates turns with BOS/EOS, and this model's have no "
                       "text that tokenizes back to them", NAMES[t]);
    }
    out->tmpl = t;
    switch (t) {
    case CX_CHAT_CHATML: out->end[0] = "<|im_end|>"; break;
    case CX_CHAT_LLAMA2:
    case CX_CHAT_ZEPHYR: out->end[0] = out->eos; break;
    case CX_CHAT_LLAMA3: out->end[0] = "<|eot_id|>"; break;
    case CX_CHAT_PHI3: out->end[0] = "<|end|>"; break;
    case CX_CHAT_GEMMA: out->end[0] = "<end_of_turn>"; break;
    case CX_CHAT_HARMONY:
        out->end[0] = "<|return|>";
        out->end[1] = "<|call|>";
        break;
    }
    return 0;
}

/* A growing output string. */
typedef struct sbuf {
    char *s;
    size_t len, cap;
    int oom;
} sbuf;

/* Append printf-formatted text. */
static void put(sbuf *b, const char *fmt, ...) CX_PRINTF(2, 3);
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

/* A message's role as the formats write it: "developer" is "system". */
static const char *role(const cx_chat_msg *m) { return strcmp(m->role, "developer") ? m->role : "system"; }

/* A system message placed where the format cannot hold it (tmpl's name in the message). */
static int misplaced(cx_err *err, const char *tmpl) {
    return cx_fail(err, CX_EINVAL, "chat template %s: a system message must come first, once, and be followed by a "
                   "user message", tmpl);
}

/* llama2: the system prompt goes inside the first [INST]; each answer is
 * closed with EOS and the next turn opened with BOS. */
static int render_llama2(sbuf *b, const cx_chat_msg *m, int n, const char *bos, const char *eos, cx_err *err) {
    const char *sys = NULL;
    for (int i = 0; i < n; i++) {
        if (!strcmp(role(&m[i]), "system")) {
            if (i > 0) return misplaced(err, "llama2");
            sys = m[i].content;
        } else if (!strcmp(m[i].role, "user")) {
            if (b->len) put(b, "%s", bos);
            if (sys) put(b, "[INST] <<SYS>>\n%s\n<</SYS>>\n\n%s [/INST]", sys, m[i].content);
            else put(b, "[INST] %s [/INST]", m[i].content);
            sys = NULL;
        } else {
            if (sys) return misplaced(err, "llama2");
            put(b, " %s %s", m[i].content, eos);
        }
    }
    return sys ? misplaced(err, "llama2") : 0;
}

/* gemma: no system role; a leading system message joins the first user turn. */
static int render_gemma(sbuf *b, const cx_chat_msg *m, int n, cx_err *err) {
    const char *sys = NULL;
    for (int i = 0; i < n; i++) {
        if (!strcmp(role(&m[i]), "system")) {
            if (i > 0) return misplaced(err, "gemma");
            sys = m[i].content;
            continue;
        }
        int user = !strcmp(m[i].role, "user");
        if (sys && !user) return misplaced(err, "gemma");
        put(b, "<start_of_turn>%s\n%s%s%s<end_of_turn>\n", user ? "user" : "model", sys ? sys : "", sys ? "\n\n" : "",
            m[i].content);
        sys = NULL;
    }
    if (sys) return misplaced(err, "gemma");
    put(b, "<start_of_turn>model\n");
    return 0;
}

/* See cortex_tools.h. */
int cx_chat_render(const cx_chat *c, const cx_chat_msg *m, int n, const char *date, char **out, cx_err *err) {
    if (!out) return cx_fail(err, CX_EINVAL, "cx_chat_render: no output");
    *out = NULL;
    if (!c || c->tmpl < 0 || c->tmpl >= CX_CHAT_N) return cx_fail(err, CX_EINVAL, "no chat template");
    if (n < 0 || (n > 0 && !m)) return cx_fail(err, CX_EINVAL, "cx_chat_render: %d messages at %p", n, (const void *)m);
    for (int i = 0; i < n; i++) {
        if (!m[i].role || !m[i].content)
            return cx_fail(err, CX_EINVAL, "chat message %d has no %s", i, m[i].role ? "content" : "role");
        const char *r = role(&m[i]);
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant"))
            return cx_fail(err, CX_EINVAL, "chat message %d has the role '%s' (system, developer, user or assistant)",
                           i, m[i].role);
    }
    sbuf b = {0};
    int rc = 0;
    switch (c->tmpl) {
    case CX_CHAT_CHATML:
        for (int i = 0; i < n; i++) put(&b, "<|im_start|>%s\n%s<|im_end|>\n", role(&m[i]), m[i].content);
        put(&b, "<|im_start|>assistant\n");
        break;
    case CX_CHAT_LLAMA2: rc = render_llama2(&b, m, n, c->bos, c->eos, err); break;
    case CX_CHAT_LLAMA3:
        for (int i = 0; i < n; i++)
            put(&b, "<|start_header_id|>%s<|end_header_id|>\n\n%s<|eot_id|>", role(&m[i]), m[i].content);
        put(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case CX_CHAT_ZEPHYR:
    case CX_CHAT_PHI3: {
        const char *close = c->tmpl == CX_CHAT_PHI3 ? "<|end|>" : c->eos;
        for (int i = 0; i < n; i++) put(&b, "<|%s|>\n%s%s\n", role(&m[i]), m[i].content, close);
        put(&b, "<|assistant|>\n");
        break;
    }
    case CX_CHAT_GEMMA: rc = render_gemma(&b, m, n, err); break;
    case CX_CHAT_HARMONY: {
        char today[16];
        if (!date) { /* today, UTC */
            time_t now = time(NULL);
            struct tm tm;
            gmtime_r(&now, &tm);
            strftime(today, sizeof today, "%Y-%m-%d", &tm);
            date = today;
        }
        rc = cx_harmony_prompt(m, n, date, &b.s, err);
        break;
    }
    }
    if (!rc && !b.s) put(&b, "%s", ""); /* no message at all: an empty string, not NULL */
    if (!rc && b.oom) rc = cx_fail(err, CX_ENOMEM, "out of memory rendering the chat template");
    if (rc) {
        free(b.s);
        return rc;
    }
    *out = b.s;
    return 0;
}
