/*
 * srv_http.c - the libmicrohttpd glue: the daemon (one thread per
 * connection, so a route may block while its request is generated), request
 * bodies gathered up to --max-body (413 past it, at once when Content-Length
 * says so), the API key (401), refusal while draining (503), and the replies
 * every route sends through. It also counts requests in flight, so a drain
 * can wait for their responses to be written.
 */
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "srv.h"

/* One HTTP request's state between libmicrohttpd's calls. */
typedef struct conn_state {
    char *body;
    size_t len, cap;
    int too_big;   /* the body passed --max-body: it is read and dropped, then 413 */
    int replied;   /* a reply is queued already (413 from Content-Length) */
} conn_state;

/* See srv.h. */
int srv_reply(srv_server *S, struct MHD_Connection *c, int status, const char *content_type, char *body, size_t len,
              int retry_after) {
    if (!body) { /* out of memory building it: an empty 500 */
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        len = 0;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body ? body : "", body ? MHD_RESPMEM_MUST_FREE
                                                                                         : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (retry_after > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", retry_after);
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, v);
    }
    if (status == MHD_HTTP_UNAUTHORIZED) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    srv_metrics_http(&S->metrics, status);
    return ok;
}

/* See srv.h. */
int srv_reply_error(srv_server *S, struct MHD_Connection *c, const srv_error *e) {
    char *body = srv_error_json(e);
    return srv_reply(S, c, e->status, "application/json", body, body ? strlen(body) : 0,
                     e->status == MHD_HTTP_TOO_MANY_REQUESTS || e->status == MHD_HTTP_SERVICE_UNAVAILABLE ? 1 : 0);
}

/* See srv.h. POLLRDHUP: the client shut its side (closed, or killed). */
int srv_http_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 1;
    struct pollfd pfd = {.fd = ci->connect_fd, .events = POLLRDHUP};
    return poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* 1 if the Authorization header is "Bearer <key>" (compared in time
 * independent of where it differs). The scheme is case-insensitive and
 * followed by one or more spaces (RFC 9110, 11.1 and 11.4): "bearer" and
 * "BEARER" are the same scheme, as clients send it either way. */
static int authorized(const srv_server *S, struct MHD_Connection *c) {
    const char *key = S->cfg->api_key;
    if (!key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer", 6) || h[6] != ' ') return 0;
    h += 6;
    while (*h == ' ') h++;
    size_t n = strlen(key);
    if (strlen(h) != n) return 0;
    unsigned diff = 0;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)h[i] ^ (unsigned char)key[i];
    return diff == 0;
}

/* A 413 naming the limit. */
static int too_large(srv_server *S, struct MHD_Connection *c) {
    srv_error e;
    srv_fail(&e, MHD_HTTP_CONTENT_TOO_LARGE, "invalid_request_error", "body_too_large", NULL,
             "the request body is larger than the server's limit of %ld bytes (--max-body)", S->cfg->max_body);
    return srv_reply_error(S, c, &e);
}

/* Append upload bytes to the body, or drop them once past the limit. */
static void gather(srv_server *S, conn_state *cs, const char *data, size_t n) {
    if (cs->too_big) return;
    if (cs->len + n > (size_t)S->cfg->max_body) {
        cs->too_big = 1;
        free(cs->body);
        cs->body = NULL;
        cs->len = cs->cap = 0;
        return;
    }
    if (cs->len + n + 1 > cs->cap) {
        size_t cap = (cs->len + n + 1) * 2;
        char *b = realloc(cs->body, cap);
        if (!b) {
            cs->too_big = 1; /* no memory for it: as good as too big */
            return;
        }
        cs->body = b;
        cs->cap = cap;
    }
    memcpy(cs->body + cs->len, data, n);
    cs->len += n;
}

/* libmicrohttpd's access handler: called once when the headers are in,
 * then once per piece of body, then once more with none to answer. */
static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    srv_server *S = cls;
    conn_state *cs = *con_cls;
    (void)version;
    if (!cs) {
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        *con_cls = cs;
        pthread_mutex_lock(&S->mu);
        S->in_flight++;
        pthread_mutex_unlock(&S->mu);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > (unsigned long long)S->cfg->max_body) {
            cs->replied = 1;
            return (enum MHD_Result)too_large(S, c);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cs->replied) gather(S, cs, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (cs->replied) return MHD_YES;
    if (cs->too_big) return (enum MHD_Result)too_large(S, c);
    srv_error e;
    pthread_mutex_lock(&S->mu);
    int draining = S->draining;
    pthread_mutex_unlock(&S->mu);
    if (draining) {
        srv_fail(&e, MHD_HTTP_SERVICE_UNAVAILABLE, "server_error", "shutting_down", NULL, "the server is shutting down");
        return (enum MHD_Result)srv_reply_error(S, c, &e);
    }
    if (strcmp(url, "/health") && !authorized(S, c)) {
        srv_fail(&e, MHD_HTTP_UNAUTHORIZED, "authentication_error", "invalid_api_key", NULL,
                 "a valid API key is required: send the header 'Authorization: Bearer <key>'");
        return (enum MHD_Result)srv_reply_error(S, c, &e);
    }
    return (enum MHD_Result)srv_route(S, c, method, url, cs->body ? cs->body : "", cs->len);
}

/* libmicrohttpd's end of a request (answered, or the connection lost): free its state. */
static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why) {
    srv_server *S = cls;
    conn_state *cs = *con_cls;
    (void)c;
    (void)why;
    if (!cs) return;
    free(cs->body);
    free(cs);
    *con_cls = NULL;
    pthread_mutex_lock(&S->mu);
    S->in_flight--;
    pthread_cond_broadcast(&S->cv);
    pthread_mutex_unlock(&S->mu);
}

/* See srv.h. */
int srv_http_start(srv_server *S, int *port, char *msg, size_t cap) {
    const srv_config *cfg = S->cfg;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char ps[8];
    snprintf(ps, sizeof ps, "%d", cfg->port);
    int gai = getaddrinfo(cfg->host, ps, &hints, &ai);
    if (gai) {
        snprintf(msg, cap, "--host %s: not an address of this machine: %s", cfg->host, gai_strerror(gai));
        return -1;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_POLL;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    S->daemon = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, handler, S, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                 MHD_OPTION_NOTIFY_COMPLETED, completed, S, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!S->daemon) {
        snprintf(msg, cap, "cannot listen on %s port %d (in use, or not allowed)", cfg->host, cfg->port);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(S->daemon, MHD_DAEMON_INFO_BIND_PORT);
    *port = di ? di->port : cfg->port;
    return 0;
}

/* See srv.h. */
void srv_http_quiesce(srv_server *S) {
    pthread_mutex_lock(&S->mu);
    S->draining = 1;
    pthread_mutex_unlock(&S->mu);
    MHD_socket fd = MHD_quiesce_daemon(S->daemon);
    if (fd != MHD_INVALID_SOCKET) close(fd);
}

/* See srv.h. Waits (up to 30 s) for the requests in flight to be answered. */
void srv_http_stop(srv_server *S) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 30;
    pthread_mutex_lock(&S->mu);
    while (S->in_flight > 0)
        if (pthread_cond_timedwait(&S->cv, &S->mu, &ts)) break;
    pthread_mutex_unlock(&S->mu);
    MHD_stop_daemon(S->daemon);
    S->daemon = NULL;
}
