/*
 * harmony.c - OpenAI's harmony chat format (gpt-oss), in the library because
 * two programs need the same prompt: the chat templates (engine/src/chat.c:
 * `cortex serve`'s chat route, the Python module) and cortex-bench's
 * challenge replay (harness/run/runner.c). What the published gpt-oss template renders by
 * default (no tools, no reasoning_effort, no model_identity given):
 *
 *   <|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
 *   Knowledge cutoff: 2024-06
 *   Current date: DATE
 *
 *   Reasoning: medium
 *
 *   # Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>
 *   <|start|>developer<|message|># Instructions\n\nSYSTEM\n\n<|end|>     (a first system message only)
 *   <|start|>user<|message|>TEXT<|end|>
 *   <|start|>assistant<|channel|>final<|message|>TEXT<|end|>            (earlier answers)
 *   <|start|>assistant                                                   (the turn opened)
 *
 * (no newlines between messages: the lines above are cut for reading). The
 * model answers with messages on channels (analysis, then final) and ends
 * its turn with <|return|>, or <|call|> for a tool call.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortex_tools.h"
#include "util.h"

/* See cortex_tools.h: markers only harmony templates write. */
int cx_harmony_detect(const char *jinja) {
    return jinja && strstr(jinja, "<|start|>") && strstr(jinja, "<|message|>") && strstr(jinja, "<|channel|>");
}

/* A growing string; oom set once an allocation failed. */
typedef struct hbuf {
    char *s;
    size_t len, cap;
    int oom;
} hbuf;

/* Append the strings given, up to a NULL. */
static void hput(hbuf *b, ...) {
    va_list ap;
    va_start(ap, b);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;) {
        size_t n = strlen(s);
        if (b->oom) continue;
        if (b->len + n + 1 > b->cap) {
            size_t cap = (b->len + n + 1) * 2;
            char *t = realloc(b->s, cap);
            if (!t) {
                b->oom = 1;
                continue;
            }
            b->s = t;
            b->cap = cap;
        }
        memcpy(b->s + b->len, s, n + 1);
        b->len += n;
    }
    va_end(ap);
}

/* See cortex_tools.h. */
int cx_harmony_prompt(const cx_chat_msg *m, int n, const char *date, char **out, cx_err *err) {
    assert(out && date);
    hbuf b = {0};
    *out = NULL;
    hput(&b, "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
             "Knowledge cutoff: 2024-06\nCurrent date: ", date, "\n\nReasoning: medium\n\n"
             "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>", NULL);
    for (int i = 0; i < n; i++) {
        const char *role = m[i].role, *text = m[i].content;
        if (!strcmp(role, "system") || !strcmp(role, "developer")) {
            if (i > 0) {
                free(b.s);
                return cx_fail(err, CX_EINVAL, "harmony: a %s message must come first (message %d is one): "
                               "the format has one developer message", role, i);
            }
            hput(&b, "<|start|>developer<|message|># Instructions\n\n", text, "\n\n<|end|>", NULL);
        } else if (!strcmp(role, "user")) {
            hput(&b, "<|start|>user<|message|>", text, "<|end|>", NULL);
        } else if (!strcmp(role, "assistant")) {
            hput(&b, "<|start|>assistant<|channel|>final<|message|>", text, "<|end|>", NULL);
        } else {
            free(b.s);
            return cx_fail(err, CX_EINVAL, "harmony: message %d has the role '%s' (system, developer, user or "
                           "assistant)", i, role);
        }
    }
    hput(&b, "<|start|>assistant", NULL);
    if (b.oom) {
        free(b.s);
        return cx_fail(err, CX_ENOMEM, "harmony: out of memory for the prompt");
    }
    *out = b.s;
    return 0;
}

/* Append n bytes of s to *dst (a malloc'd, NUL-terminated string of *len bytes); -1 when out of memory. */
static int happend(char **dst, size_t *len, const char *s, size_t n) {
    char *t = realloc(*dst, *len + n + 1);
    if (!t) return -1;
    memcpy(t + *len, s, n);
    *len += n;
    t[*len] = 0;
    *dst = t;
    return 0;
}

/* The first of the markers ending a message's text in s[0..n): its offset, or n. */
static size_t message_end(const char *s, size_t n) {
    static const char *const ENDS[] = {"<|end|>", "<|return|>", "<|call|>", "<|start|>"};
    size_t best = n;
    for (size_t k = 0; k < sizeof ENDS / sizeof ENDS[0]; k++) {
        size_t ln = strlen(ENDS[k]);
        for (size_t i = 0; i + ln <= best; i++)
            if (!memcmp(s + i, ENDS[k], ln)) {
                best = i;
                break;
            }
    }
    return best;
}

/* The offset of `needle` in s[from..n), or n. */
static size_t find(const char *s, size_t n, size_t from, const char *needle) {
    size_t ln = strlen(needle);
    for (size_t i = from; i + ln <= n; i++)
        if (!memcmp(s + i, needle, ln)) return i;
    return n;
}

/* See cortex_tools.h. A message: an optional "<|start|>ROLE", a header
 * holding "<|channel|>NAME" (and perhaps " to=..." or "<|constrain|>..."),
 * "<|message|>", the text up to <|end|>, <|return|>, <|call|>, the next
 * <|start|> or the end of the output. */
int cx_harmony_split(const char *s, size_t n, cx_harmony_parts *out) {
    static const char CH[] = "<|channel|>", MSG[] = "<|message|>";
    memset(out, 0, sizeof *out);
    if (n < sizeof CH - 1 || memcmp(s, CH, sizeof CH - 1)) return 0;
    out->harmony = 1;
    size_t at = 0;
    while (at < n) {
        size_t msg = find(s, n, at, MSG);
        if (msg == n) break; /* a header still being written */
        size_t ch = find(s, msg, at, CH), name = ch + sizeof CH - 1, name_end = name;
        while (ch < msg && name_end < msg && s[name_end] != ' ' && s[name_end] != '<') name_end++;
        size_t body = msg + sizeof MSG - 1, len = message_end(s + body, n - body);
        int final = ch < msg && name_end - name == 5 && !memcmp(s + name, "final", 5);
        int analysis = ch < msg && name_end - name == 8 && !memcmp(s + name, "analysis", 8);
        int rc = 0;
        if (final) rc = happend(&out->content, &out->n_content, s + body, len);
        else if (analysis) rc = happend(&out->reasoning, &out->n_reasoning, s + body, len);
        if (rc) {
            cx_harmony_parts_free(out);
            return -1;
        }
        at = body + len;
        at = find(s, n, at, "<|start|>"); /* the next message, if any */
    }
    return 1;
}

/* See cortex_tools.h. */
void cx_harmony_parts_free(cx_harmony_parts *p) {
    free(p->content);
    free(p->reasoning);
    memset(p, 0, sizeof *p);
}
