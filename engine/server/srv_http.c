/*
 * srv_http.c - the libmicrohttpd glue: the daemon (one thread per
 * connection, so a route may block while its request is generated), request
 * bodies gathered up to --max-body (413 past it, at once when Content-Length
 * says so), the API key (401), refusal while draining (503), and the replies
 * every route sends through. It also counts requests in flight, so a drain
 * can wait for their responses to be written.
 *
 * Connections are bounded so that no client can take the server from the
 * others (docs/server.md, "Limits"):
 *   - every open connection is on S->conns from libmicrohttpd's STARTED
 *     notification to its CLOSED one (which comes before the descriptor is
 *     closed, so a descriptor on the list is always that connection's);
 *   - a connection opened past --max-conns served ones, or past
 *     --max-conns-per-ip from its address, is busy: its request is read
 *     (within --busy-timeout) and answered 503 server_busy with
 *     Connection: close, except /health and /metrics, answered as usual so
 *     a load balancer's probe sees a live server and monitoring sees why. libmicrohttpd's own limit (the
 *     hard one, which closes new connections unanswered) is set well above
 *     --max-conns, below the file limit;
 *   - the reaper thread shuts down (shutdown(2): the descriptor stays the
 *     connection thread's to close) every connection whose request has not
 *     arrived whole within --read-timeout of its waiting for one (accept,
 *     or the previous response written): idle keep-alive connections,
 *     trickled headers, truncated bodies. At a drain it shuts down every
 *     connection without an admitted request at once;
 *   - libmicrohttpd's --idle-timeout closes a connection on which no byte
 *     moved for that long (a client that stops reading its response).
 */
#include <assert.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "srv.h"

/* File descriptors kept for the rest of the process (the model, a KV spill
 * file, adapters being loaded, stdio): connections get the others. */
#define SRV_FD_RESERVE 64
/* A request whose body buffer reached this returns its memory to the system when it ends. */
#define SRV_TRIM_BYTES (256 * 1024)

/* glibc keeps freed memory in its arenas (one per thread that allocated,
 * up to 8 per core): after large requests, hand it back, so that RSS after
 * a burst of big prompts returns to what it was. */
static void srv_trim(void) {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

/* One TCP connection (libmicrohttpd's socket context), on S->conns. */
typedef struct srv_conn {
    struct srv_conn *prev, *next;
    int fd;
    unsigned char key[12];  /* the client's address as the per-address limit counts it (ip_key) */
    int busy;               /* opened past a limit: every request but /health and /metrics gets 503 */
    int admitted;           /* a whole request is being answered (the reaper leaves it alone) */
    int half_closed;        /* the client had shut its sending side when its request was complete */
    int shut;               /* shut down by the reaper or the drain */
    int64_t t_wait;         /* ns: since when it waits for a request */
} srv_conn;

/* Served connections of one address: a slot of S->ips (count 0: free). */
typedef struct srv_ipslot {
    unsigned char key[12];
    int count;
} srv_ipslot;

/* One HTTP request's state between libmicrohttpd's calls. */
typedef struct conn_state {
    char *body;
    size_t len, cap;
    int too_big;   /* the body passed --max-body: it is read and dropped, then 413 */
    int replied;   /* a reply is queued already (413 from Content-Length) */
    int busy;      /* on a busy connection: the body is dropped, the answer is 503 */
    int admitted;  /* counted in S->in_flight */
    size_t declared; /* Content-Length (0: none): the buffer never grows past it */
} conn_state;

/* The connection record of c (NULL if it could not be allocated). */
static srv_conn *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* The key the per-address limit counts a client under: an IPv4 address, or
 * an IPv6 address's /64 (one host is given a whole /64, so counting single
 * IPv6 addresses would limit nothing); IPv4-mapped IPv6 counts as IPv4. */
static void ip_key(const struct sockaddr *sa, unsigned char key[12]) {
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    memset(key, 0, 12);
    if (sa && sa->sa_family == AF_INET) {
        key[0] = 4;
        memcpy(key + 1, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
        const unsigned char *a = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
        if (!memcmp(a, mapped, 12)) {
            key[0] = 4;
            memcpy(key + 1, a + 12, 4);
        } else {
            key[0] = 6;
            memcpy(key + 1, a, 8);
        }
    }
}

/* The slot of key in S->ips (lock held): its own, or the free one where it
 * would go. The table has twice as many slots as connections can be served,
 * so a free one always exists. */
static srv_ipslot *ip_slot(srv_server *S, const unsigned char key[12]) {
    assert(S->ip_cap > 0 && (S->ip_cap & (S->ip_cap - 1)) == 0 && S->ip_cap >= 2 * S->max_conns &&
           "the address table: a power of two, twice the served connections (a free slot always exists)");
    uint32_t h = 2166136261u; /* FNV-1a */
    for (int i = 0; i < 12; i++) h = (h ^ key[i]) * 16777619u;
    for (uint32_t i = h & (uint32_t)(S->ip_cap - 1);; i = (i + 1) & (uint32_t)(S->ip_cap - 1))
        if (!S->ips[i].count || !memcmp(S->ips[i].key, key, 12)) return &S->ips[i];
}

/* One served connection less for slot e (lock held). Linear probing needs
 * no tombstones if a freed slot is refilled by the entries after it that
 * probed past it (backward shift). */
static void ip_release(srv_server *S, srv_ipslot *e) {
    assert(e->count > 0 && "a served connection's address is counted");
    if (e->count <= 0 || --e->count) return; /* (<= 0: not counted, never so) */
    uint32_t mask = (uint32_t)S->ip_cap - 1, i = (uint32_t)(e - S->ips), j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!S->ips[j].count) break;
        uint32_t h = 2166136261u;
        for (int k = 0; k < 12; k++) h = (h ^ S->ips[j].key[k]) * 16777619u;
        uint32_t home = h & mask;
        /* move j into the hole at i unless its home lies cyclically in (i, j] */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            S->ips[i] = S->ips[j];
            S->ips[j].count = 0;
            i = j;
        }
    }
}

/* libmicrohttpd's connection notifications: a connection opened (counted,
 * found busy or not) or closed (before its descriptor is). */
static void on_connection(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_ConnectionNotificationCode what) {
    srv_server *S = cls;
    srv_conn *cn = *ctx;
    if (what == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (!cn) return;
        pthread_mutex_lock(&S->mu);
        if (cn->prev) cn->prev->next = cn->next;
        else S->conns = cn->next;
        if (cn->next) cn->next->prev = cn->prev;
        if (!cn->busy) {
            assert(S->n_served > 0 && "n_served counts the open connections that are not busy");
            S->n_served--;
            ip_release(S, ip_slot(S, cn->key));
        }
        pthread_mutex_unlock(&S->mu);
        srv_metrics_conn(&S->metrics, -1, 0, 0);
        free(cn);
        *ctx = NULL;
        return;
    }
    const union MHD_ConnectionInfo *fi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ai = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!fi || !(cn = calloc(1, sizeof *cn))) return; /* unlisted: served, but never reaped nor counted */
    cn->fd = fi->connect_fd;
    ip_key(ai ? ai->client_addr : NULL, cn->key);
    cn->t_wait = srv_now_ns();
    pthread_mutex_lock(&S->mu);
    srv_ipslot *e = ip_slot(S, cn->key);
    int per_ip = S->cfg->max_conns_per_ip;
    cn->busy = S->n_served >= S->max_conns || (per_ip > 0 && e->count >= per_ip);
    if (!cn->busy) {
        S->n_served++;
        if (!e->count++) memcpy(e->key, cn->key, 12);
        assert(S->n_served <= S->max_conns && (per_ip <= 0 || e->count <= per_ip) &&
               "a connection past a limit is busy, not served");
    }
    cn->next = S->conns;
    if (S->conns) S->conns->prev = cn;
    S->conns = cn;
    pthread_mutex_unlock(&S->mu);
    srv_metrics_conn(&S->metrics, 1, cn->busy, 0);
    *ctx = cn;
}

/* Shut connection cn down (lock held): its thread sees the end of the
 * stream and closes it. */
static void conn_shut(srv_conn *cn) {
    assert(cn->fd >= 0 && "a listed connection has its socket");
    if (cn->shut) return;
    cn->shut = 1;
    shutdown(cn->fd, SHUT_RDWR);
}

/* The reaper thread: every 100 ms, connections past their read deadline
 * (or, draining, every one without an admitted request) are shut down. */
static void *reaper(void *arg) {
    srv_server *S = arg;
    const srv_config *cfg = S->cfg;
    pthread_mutex_lock(&S->mu);
    while (!S->stopping) {
        int64_t now = srv_now_ns();
        int timed_out = 0;
        for (srv_conn *cn = S->conns; cn; cn = cn->next) {
            if (cn->admitted || cn->shut) continue;
            double limit = cn->busy ? cfg->busy_timeout : cfg->read_timeout;
            if (S->draining) conn_shut(cn);
            else if ((double)(now - cn->t_wait) >= limit * 1e9) {
                conn_shut(cn);
                timed_out++;
            }
        }
        if (timed_out) { /* the metrics lock is never taken inside S->mu elsewhere: keep that order free */
            pthread_mutex_unlock(&S->mu);
            srv_metrics_conn(&S->metrics, 0, 0, timed_out);
            pthread_mutex_lock(&S->mu);
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&S->cv, &S->mu, &ts);
    }
    pthread_mutex_unlock(&S->mu);
    return NULL;
}

/* See srv.h. */
int srv_http_reply(srv_server *S, struct MHD_Connection *c, int status, const char *content_type, char *body, size_t len,
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
    /* busy or draining: the client is to go elsewhere or come back later, not reuse this connection */
    if (status == MHD_HTTP_SERVICE_UNAVAILABLE) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    srv_metrics_http(&S->metrics, status);
    return ok;
}

/* See srv.h. */
int srv_http_reply_error(srv_server *S, struct MHD_Connection *c, const srv_error *e) {
    char *body = srv_error_json(e);
    return srv_http_reply(S, c, e->status, "application/json", body, body ? strlen(body) : 0,
                     e->status == MHD_HTTP_TOO_MANY_REQUESTS || e->status == MHD_HTTP_SERVICE_UNAVAILABLE ? 1 : 0);
}

/* The client's end of connection fd, without blocking: 0 open, 1 its
 * sending side shut (a FIN came: closed, or half-closed), 2 reset or gone. */
static int peer_state(int fd) {
    struct pollfd pfd = {.fd = fd, .events = POLLRDHUP};
    if (poll(&pfd, 1, 0) <= 0) return 0;
    if (pfd.revents & (POLLHUP | POLLERR | POLLNVAL)) return 2;
    return (pfd.revents & POLLRDHUP) ? 1 : 0;
}

/* See srv.h. A FIN alone cannot tell a client that closed from one that
 * only shut its sending side (both send one; only a write would draw the
 * closed one's reset), so the time decides: a FIN that was in when the
 * request was complete came with it (a half-close, answered); one that
 * comes later, while the client waits, is a client leaving (cancelled). A
 * reset is always gone. */
int srv_http_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 1;
    int st = peer_state(ci->connect_fd);
    if (st != 1) return st == 2;
    srv_conn *cn = conn_of(c);
    return !(cn && cn->half_closed); /* set before the request was admitted, read-only after */
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
    srv_error_set(&e, MHD_HTTP_CONTENT_TOO_LARGE, "invalid_request_error", "body_too_large", NULL,
             "the request body is larger than the server's limit of %ld bytes (--max-body)", S->cfg->max_body);
    return srv_http_reply_error(S, c, &e);
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
        /* doubling, but never past the declared length: memory follows the
         * bytes that arrived, not what a client claims it will send */
        size_t cap = (cs->len + n + 1) * 2;
        if (cs->declared >= cs->len + n && cap > cs->declared + 1) cap = cs->declared + 1;
        assert(cap >= cs->len + n + 1 && "the buffer grows to hold the bytes and a NUL");
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
    assert(cs->len < cs->cap && cs->len <= (size_t)S->cfg->max_body && "the body within its buffer and --max-body");
}

/* 503 server_busy, for a request on a connection opened past a limit. */
static int busy(srv_server *S, struct MHD_Connection *c) {
    srv_error e;
    srv_error_set(&e, MHD_HTTP_SERVICE_UNAVAILABLE, "server_error", "server_busy", NULL,
             "the server is busy: too many connections (--max-conns %d, --max-conns-per-ip %d); retry later",
             S->max_conns, S->cfg->max_conns_per_ip);
    return srv_http_reply_error(S, c, &e);
}

/* libmicrohttpd's access handler: called once when the headers are in,
 * then once per piece of body, then once more with none to answer. */
static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    srv_server *S = cls;
    conn_state *cs = *con_cls;
    srv_conn *cn = conn_of(c);
    (void)version;
    if (!cs) {
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        *con_cls = cs;
        cs->busy = cn && cn->busy && strcmp(url, "/health") && strcmp(url, "/metrics");
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        unsigned long long n = cl ? strtoull(cl, NULL, 10) : 0;
        if (!cs->busy && n > (unsigned long long)S->cfg->max_body) {
            cs->replied = 1;
            return (enum MHD_Result)too_large(S, c);
        }
        cs->declared = (size_t)n;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cs->replied && !cs->busy) gather(S, cs, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (cs->replied) return MHD_YES;
    /* The whole request is in: admitted (the drain waits for its response,
     * the reaper leaves its connection alone). A FIN already here came with
     * the request: a half-close, whose client still waits for the answer. */
    pthread_mutex_lock(&S->mu);
    int draining = S->draining;
    assert(!cs->admitted && "a request is admitted once");
    cs->admitted = 1;
    S->in_flight++;
    if (cn) {
        cn->admitted = 1;
        cn->half_closed = peer_state(cn->fd) == 1;
    }
    pthread_mutex_unlock(&S->mu);
    if (cs->busy) return (enum MHD_Result)busy(S, c);
    if (cs->too_big) return (enum MHD_Result)too_large(S, c);
    srv_error e;
    if (draining) {
        srv_error_set(&e, MHD_HTTP_SERVICE_UNAVAILABLE, "server_error", "shutting_down", NULL, "the server is shutting down");
        return (enum MHD_Result)srv_http_reply_error(S, c, &e);
    }
    if (strcmp(url, "/health") && !authorized(S, c)) {
        srv_error_set(&e, MHD_HTTP_UNAUTHORIZED, "authentication_error", "invalid_api_key", NULL,
                 "a valid API key is required: send the header 'Authorization: Bearer <key>'");
        return (enum MHD_Result)srv_http_reply_error(S, c, &e);
    }
    return (enum MHD_Result)srv_route(S, c, method, url, cs->body ? cs->body : "", cs->len);
}

/* libmicrohttpd's end of a request (answered, or the connection lost): free
 * its state; the connection waits for its next request from now (at a
 * drain it is shut down: no next request will be taken). */
static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why) {
    srv_server *S = cls;
    conn_state *cs = *con_cls;
    srv_conn *cn = conn_of(c);
    (void)why;
    if (!cs) return;
    size_t big = cs->cap;
    free(cs->body);
    *con_cls = NULL;
    pthread_mutex_lock(&S->mu);
    assert((!cs->admitted || S->in_flight > 0) && "in_flight counts the admitted requests");
    if (cs->admitted) S->in_flight--;
    if (cn) {
        cn->admitted = 0;
        cn->half_closed = 0;
        cn->t_wait = srv_now_ns();
        if (S->draining) conn_shut(cn);
    }
    pthread_cond_broadcast(&S->cv);
    pthread_mutex_unlock(&S->mu);
    free(cs);
    if (big >= SRV_TRIM_BYTES) srv_trim();
}

/* The connection limits the file limit allows: the soft RLIMIT_NOFILE is
 * raised to the hard one (at most 65536) first, as servers do; libmicrohttpd's
 * hard limit is then 4 x --max-conns (at least --max-conns + 1024, so a burst
 * past the limit is answered 503 rather than dropped) within the file limit
 * less SRV_FD_RESERVE, and --max-conns at most half of it. */
static void conn_limits(srv_server *S) {
    struct rlimit rl;
    long files = 1024;
    if (!getrlimit(RLIMIT_NOFILE, &rl)) {
        rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 65536 ? 65536 : rl.rlim_max;
        if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
            rl.rlim_cur = want;
            setrlimit(RLIMIT_NOFILE, &rl);
            getrlimit(RLIMIT_NOFILE, &rl);
        }
        files = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 65536 ? 65536 : (long)rl.rlim_cur;
    }
    long room = files - SRV_FD_RESERVE > 16 ? files - SRV_FD_RESERVE : 16;
    long want = S->cfg->max_conns;
    long hard = 4 * want > want + 1024 ? 4 * want : want + 1024;
    S->hard_conns = (int)(hard < room ? hard : room);
    S->max_conns = (int)(want < S->hard_conns / 2 ? want : S->hard_conns / 2);
}

/* See srv.h. */
int srv_http_start(srv_server *S, int *port, char *msg, size_t cap) {
    const srv_config *cfg = S->cfg;
    conn_limits(S);
    for (S->ip_cap = 16; S->ip_cap < 2 * S->max_conns; S->ip_cap *= 2) {}
    if (!(S->ips = calloc((size_t)S->ip_cap, sizeof *S->ips))) {
        snprintf(msg, cap, "out of memory for the connection table");
        return -1;
    }
#ifdef __GLIBC__
    /* A fixed threshold (setting it turns off glibc's raising it after each
     * large free): request bodies, parsed prompts and token arrays of more
     * than 256 KiB are mapped and unmapped, not kept in an arena. */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
#endif
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
    /* the backlog holds a burst while connections are accepted (the kernel caps it at somaxconn) */
    unsigned backlog = (unsigned)(S->hard_conns < 65535 ? S->hard_conns : 65535);
    S->daemon = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, handler, S, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                 MHD_OPTION_NOTIFY_COMPLETED, completed, S, MHD_OPTION_NOTIFY_CONNECTION, on_connection, S,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)S->hard_conns, MHD_OPTION_CONNECTION_TIMEOUT,
                                 (unsigned)cfg->idle_timeout, MHD_OPTION_LISTEN_BACKLOG_SIZE, backlog, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!S->daemon) {
        snprintf(msg, cap, "cannot listen on %s port %d (in use, or not allowed)", cfg->host, cfg->port);
        return -1;
    }
    if (pthread_create(&S->reaper, NULL, reaper, S)) {
        MHD_stop_daemon(S->daemon);
        S->daemon = NULL;
        snprintf(msg, cap, "cannot start the connection reaper thread");
        return -1;
    }
    S->reaper_started = 1;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(S->daemon, MHD_DAEMON_INFO_BIND_PORT);
    *port = di ? di->port : cfg->port;
    return 0;
}

/* See srv.h. Connections without an admitted request are shut down now
 * (the reaper's next pass, and completed() for the ones answered later). */
void srv_http_quiesce(srv_server *S) {
    pthread_mutex_lock(&S->mu);
    S->draining = 1;
    for (srv_conn *cn = S->conns; cn; cn = cn->next)
        if (!cn->admitted) conn_shut(cn);
    pthread_mutex_unlock(&S->mu);
    MHD_socket fd = MHD_quiesce_daemon(S->daemon);
    if (fd != MHD_INVALID_SOCKET) close(fd);
}

/* See srv.h. */
int srv_http_drain(srv_server *S, double seconds) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double end = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + seconds;
    ts.tv_sec = (time_t)end;
    ts.tv_nsec = (long)((end - (double)ts.tv_sec) * 1e9);
    pthread_mutex_lock(&S->mu);
    while (S->in_flight > 0)
        if (pthread_cond_timedwait(&S->cv, &S->mu, &ts)) break;
    int left = S->in_flight;
    pthread_mutex_unlock(&S->mu);
    assert(left >= 0 && "in_flight never goes below 0");
    return left;
}

/* See srv.h. */
void srv_http_stop(srv_server *S) {
    if (S->reaper_started) {
        pthread_mutex_lock(&S->mu);
        S->stopping = 1;
        pthread_cond_broadcast(&S->cv);
        pthread_mutex_unlock(&S->mu);
        pthread_join(S->reaper, NULL);
        S->reaper_started = 0;
    }
    if (S->daemon) MHD_stop_daemon(S->daemon);
    S->daemon = NULL;
    free(S->ips);
    S->ips = NULL;
}
