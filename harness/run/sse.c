/*
 * sse.c - the Server-Sent Events parser (see sse.h). Bytes go into the
 * current line; each complete line is interpreted as a field of the event
 * being built; an empty line hands the event to the callback.
 */
#include "sse.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* See sse.h. */
void sse_init(sse_parser *p, sse_event_fn on_event, void *user) {
    memset(p, 0, sizeof *p);
    p->on_event = on_event;
    p->user = user;
}

/* See sse.h. */
void sse_free(sse_parser *p) {
    free(p->line);
    free(p->data);
    p->line = p->data = NULL;
    p->line_len = p->line_cap = p->data_len = p->data_cap = 0;
}

/* Make room for `extra` more bytes and a NUL in *buf (length len, capacity
 * *cap), within SSE_MAX_LINE; 0 or -1. */
static int reserve(char **buf, size_t len, size_t *cap, size_t extra) {
    if (len + extra > SSE_MAX_LINE) return -1;
    if (len + extra + 1 <= *cap) return 0;
    size_t n = *cap ? *cap : 256;
    while (n < len + extra + 1) n *= 2;
    char *q = realloc(*buf, n);
    if (!q) return -1;
    *buf = q;
    *cap = n;
    return 0;
}

/* Dispatch the event built so far (if it has data) and start a new one. */
static int dispatch(sse_parser *p) {
    int rc = 0;
    if (p->has_data) {
        if (reserve(&p->data, p->data_len, &p->data_cap, 0)) return -1;
        p->data[p->data_len] = 0;
        p->events++;
        rc = p->on_event(p->user, p->event, p->data, p->data_len);
    }
    p->data_len = 0;
    p->has_data = 0;
    p->event[0] = 0;
    return rc;
}

/* Interpret the complete line p->line[0, line_len). */
static int take_line(sse_parser *p) {
    const char *l = p->line;
    size_t n = p->line_len;
    if (!p->lines++ && n >= 3 && !memcmp(l, "\xEF\xBB\xBF", 3)) l += 3, n -= 3; /* the stream's BOM, however split */
    if (n == 0) return dispatch(p);
    if (l[0] == ':') return 0; /* a comment (servers send them as keep-alives) */
    const char *colon = memchr(l, ':', n);
    size_t name_len = colon ? (size_t)(colon - l) : n;
    const char *v = colon ? colon + 1 : l + n;
    size_t vn = (size_t)(l + n - v);
    if (vn && v[0] == ' ') v++, vn--;
    if (name_len == 4 && !memcmp(l, "data", 4)) {
        if (reserve(&p->data, p->data_len, &p->data_cap, vn + 1)) return -1;
        if (p->has_data) p->data[p->data_len++] = '\n';
        memcpy(p->data + p->data_len, v, vn);
        p->data_len += vn;
        p->has_data = 1;
    } else if (name_len == 5 && !memcmp(l, "event", 5)) {
        size_t k = vn < sizeof p->event - 1 ? vn : sizeof p->event - 1;
        memcpy(p->event, v, k);
        p->event[k] = 0;
    }
    return 0; /* id, retry and unknown fields mean nothing to a benchmark */
}

/* See sse.h. */
int sse_feed(sse_parser *p, const char *buf, size_t n) {
    size_t i = 0;
    while (i < n) {
        char c = buf[i];
        if (c == '\n' && p->after_cr) { /* the \n of a \r\n: the line already ended */
            p->after_cr = 0;
            i++;
            continue;
        }
        p->after_cr = 0;
        if (c == '\n' || c == '\r') {
            p->after_cr = c == '\r';
            int rc = take_line(p);
            p->line_len = 0;
            if (rc) return rc;
            i++;
            continue;
        }
        /* the rest of the line up to the next end, in one copy */
        size_t j = i;
        while (j < n && buf[j] != '\n' && buf[j] != '\r') j++;
        if (reserve(&p->line, p->line_len, &p->line_cap, j - i)) return -1;
        memcpy(p->line + p->line_len, buf + i, j - i);
        p->line_len += j - i;
        i = j;
    }
    assert(p->line_len <= SSE_MAX_LINE);
    return 0;
}

/* See sse.h. */
int sse_finish(const sse_parser *p) { return p->line_len > 0 || p->has_data; }
