/*
 * srv_sse.c - "stream": true. The response body is produced on demand by
 * libmicrohttpd's content reader (on the connection's own thread, which may
 * block): each call waits for the job's text to grow and sends one
 * server-sent event "data: <chunk>\n\n" with the new text, cut at a
 * character boundary. At the end: the rest of the text, a chunk with the
 * finish_reason, the usage chunk when stream_options.include_usage asked,
 * and "data: [DONE]". A request that timed out or failed ends with an error
 * event (carrying the partial usage) instead of the finish chunk. A client
 * that goes away ends the body with an error, and the stream's free
 * callback cancels the job.
 */
#include <assert.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

typedef struct sse {
    srv_server *S;
    struct MHD_Connection *c;
    srv_params p;         /* owned: the request's fields */
    srv_out o;
    srv_job *j;           /* the connection's reference */
    size_t sent, sent_r;  /* bytes sent of the text (chat: the content) and of the reasoning */
    size_t seen;          /* the job's text length when last looked at */
    int sent_toks;        /* tokens whose logprobs were sent */
    int started, ended;
    char *pend;           /* bytes produced, not yet handed to MHD */
    size_t pend_len, pend_at;
} sse;

/* Append "data: <json>\n\n" (json malloc'd, freed here) to the pending bytes; -1 when out of memory. */
static int emit(sse *st, char *json) {
    if (!json) return -1;
    size_t n = strlen(json);
    char *p = realloc(st->pend, st->pend_len + n + 9);
    if (!p) {
        free(json);
        return -1;
    }
    st->pend = p;
    int w = sprintf(p + st->pend_len, "data: %s\n\n", json);
    assert(w == (int)n + 8 && "the event fills the n + 9 bytes made for it, NUL included");
    st->pend_len += (size_t)w;
    free(json);
    return 0;
}

/* One chunk with what the client has not seen yet of j's text (job lock
 * held): the text so far as srv_chat_split shows it (harmony: content and
 * reasoning apart), up to a character boundary unless the job has ended. */
static int emit_new(sse *st) {
    srv_job *j = st->j;
    cx_harmony_parts parts;
    const char *c, *r;
    size_t nc, nr;
    if (srv_chat_split(st->p.chat && j->harmony, j->text, j->len, &parts, &c, &nc, &r, &nr)) return -1;
    if (!j->done) {
        nc = srv_utf8_cut(c, nc);
        nr = r ? srv_utf8_cut(r, nr) : 0;
    }
    size_t dc = nc > st->sent ? nc - st->sent : 0, dr = nr > st->sent_r ? nr - st->sent_r : 0;
    int rc = 0, t1 = j->n_toks;
    assert(t1 >= st->sent_toks && "a job's tokens are only appended");
    if (dc || dr || t1 > st->sent_toks)
        rc = emit(st, srv_reply_chunk(&st->o, j, c + st->sent, dc, r ? r + st->sent_r : NULL, dr, st->sent_toks, t1, NULL, 0));
    st->sent += dc;
    st->sent_r += dr;
    st->sent_toks = t1;
    cx_harmony_parts_free(&parts);
    return rc;
}

/* The events of an ended job (job lock held): the rest of the text, then the
 * finish chunk or the error, the usage chunk, [DONE]. */
static int emit_end(sse *st) {
    srv_job *j = st->j;
    srv_error e;
    int rc = emit_new(st);
    if (!rc && srv_job_error(j, &e)) {
        rc = emit(st, srv_reply_error_usage(&e, &st->j, 1));
    } else if (!rc) {
        rc = emit(st, srv_reply_chunk(&st->o, j, "", 0, NULL, 0, j->n_toks, j->n_toks, srv_finish_reason(j), 0));
        if (!rc && st->p.include_usage) rc = emit(st, srv_reply_usage_chunk(&st->o, j));
    }
    if (!rc) {
        char *done = realloc(st->pend, st->pend_len + 15);
        if (!done) return -1;
        st->pend = done;
        memcpy(st->pend + st->pend_len, "data: [DONE]\n\n", 14);
        st->pend_len += 14;
    }
    st->ended = 1;
    return rc;
}

/* Produce the next events into st->pend: 0, or -1 (client gone, or out of memory). */
static int produce(sse *st) {
    srv_job *j = st->j;
    st->pend_len = st->pend_at = 0;
    if (!st->started) {
        st->started = 1;
        if (st->p.chat) return emit(st, srv_reply_chunk(&st->o, j, "", 0, NULL, 0, 0, 0, NULL, 1)); /* the role, empty content */
    }
    pthread_mutex_lock(&j->mu);
    int rc = 0;
    while (!rc && !st->pend_len) {
        if (srv_job_wait(j, st->seen, st->c)) rc = -1;
        else if (j->done) rc = emit_end(st);
        else {
            st->seen = j->len;
            rc = emit_new(st);
        }
    }
    pthread_mutex_unlock(&j->mu);
    return rc;
}

/* libmicrohttpd's content reader: hand out pending bytes, producing more when none are left. */
static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max) {
    sse *st = cls;
    (void)pos;
    if (st->pend_at == st->pend_len) {
        if (st->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        if (produce(st)) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    assert(st->pend_at <= st->pend_len && "hands out only bytes produced");
    size_t n = st->pend_len - st->pend_at < max ? st->pend_len - st->pend_at : max;
    memcpy(buf, st->pend + st->pend_at, n);
    st->pend_at += n;
    return (ssize_t)n;
}

/* libmicrohttpd's end of the response: cancel the job if it still runs, free everything. */
static void sse_free(void *cls) {
    sse *st = cls;
    srv_job_put(st->j);
    srv_params_free(&st->p);
    free(st->pend);
    free(st);
}

/* See srv.h. p is taken over (left empty). */
int srv_sse_start(srv_server *S, struct MHD_Connection *c, const srv_out *o, srv_params *p, srv_job *j) {
    sse *st = calloc(1, sizeof *st);
    struct MHD_Response *r = NULL;
    if (st) {
        st->S = S;
        st->c = c;
        st->p = *p;
        memset(p, 0, sizeof *p);
        st->o = *o;
        st->o.p = &st->p;
        st->j = j;
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, reader, st, sse_free);
    }
    if (!r) {
        if (st) sse_free(st);
        else srv_job_put(j);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    srv_metrics_http(&S->metrics, MHD_HTTP_OK);
    return ok;
}
