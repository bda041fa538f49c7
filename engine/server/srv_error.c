/*
 * srv_error.c - the server's one error convention: every layer that refuses
 * a request (the body parser, the chat templates, the routes, the adapter
 * routes, the HTTP glue) fills an srv_error, OpenAI's error object with its
 * HTTP status, and the edge (srv_http_reply_error) answers with it.
 */
#include <stdarg.h>
#include <stdio.h>

#include "srv.h"

/* See srv.h. */
int srv_error_set(srv_error *e, int status, const char *type, const char *code, const char *param, const char *fmt, ...) {
    va_list ap;
    e->status = status;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}
