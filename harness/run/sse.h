/*
 * sse.h - an incremental parser of a Server-Sent Events stream (the WHATWG
 * "text/event-stream" format), as OpenAI-compatible servers stream
 * completions:
 *
 *   data: {"choices":[{"text":"Hello"}]}\n
 *   \n
 *   data: [DONE]\n\n
 *
 * Bytes are fed as they arrive, split anywhere (inside a line, between \r
 * and \n). Lines end with \n, \r\n or \r; a line starting with ':' is a
 * comment; "data" lines of one event are joined with \n (one leading space
 * after the colon is dropped); "event" names the event; other fields (id,
 * retry, unknown ones) are ignored; an empty line dispatches the event if it
 * had data. An event still open when the stream ends is dropped, as the
 * format says (sse_finish tells whether one was).
 */
#ifndef CB_SSE_H
#define CB_SSE_H

#include <stddef.h>

#define SSE_MAX_LINE (1 << 20) /* bytes in one line or one event's data: beyond is an error */

/* Called once per dispatched event: `event` its name ("" when none was
 * given, "message" by the format's default), `data` its data (NUL-terminated,
 * `n` bytes, may hold NUL bytes from the stream). Return 0 to go on, non-zero
 * to stop (sse_feed then returns that value). */
typedef int (*sse_event_fn)(void *user, const char *event, const char *data, size_t n);

typedef struct sse_parser {
    sse_event_fn on_event;
    void *user;
    char *line;       /* the line being read (without its end) */
    size_t line_len, line_cap;
    char *data;       /* the event's data so far */
    size_t data_len, data_cap;
    int has_data;     /* a data field was seen (data may still be empty) */
    char event[64];   /* the event's name, truncated */
    int after_cr;     /* the last byte was \r: a following \n ends nothing */
    int lines;        /* lines taken so far (a UTF-8 BOM is dropped from the first) */
    size_t events;    /* events dispatched */
} sse_parser;

/* Start a parser calling on_event(user, ...) for each event. */
void sse_init(sse_parser *p, sse_event_fn on_event, void *user);
/* Parse buf[0, n). 0; -1 when a line or an event's data would pass
 * SSE_MAX_LINE, or on no memory (the parser is then finished: feed no more);
 * or the callback's non-zero value. */
int sse_feed(sse_parser *p, const char *buf, size_t n);
/* End of stream: 1 if an event (or a line) was left unterminated and so
 * dropped, else 0. */
int sse_finish(const sse_parser *p);
/* Free what the parser holds; safe on a zeroed parser. */
void sse_free(sse_parser *p);

#endif
