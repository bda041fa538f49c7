/*
 * srv.h - `cortex serve`, the OpenAI-compatible HTTP server (docs/server.md),
 * shared by the files of engine/server/, one job each (this is the folder's
 * file map; docs/server.md points here):
 *   srv_main.c     the command's life: model, scheduler thread, chat template (the library's
 *                  cx_chat_init, engine/src/chat.c), daemon, sigwait, drain
 *   srv_http.c     libmicrohttpd glue: bodies and --max-body, the API key, 503 while draining, routing,
 *                  replies (srv_http_reply*), client-gone check; connection limits, per-address
 *                  fairness, read deadlines (the reaper thread)
 *   srv_routes.c   the routes: completions, chat, models, health, metrics; the one place `model` is
 *                  resolved (srv_resolve_model); the per-request seed
 *   srv_admin.c    the adapter routes: closed unless --lora-dir, confined to it, capped by --max-adapters
 *   srv_parse.c    request bodies (jansson) into srv_params
 *   srv_error.c    the one error convention: srv_error_set fills OpenAI's error object,
 *                  srv_http_reply_error (srv_http.c) answers with it
 *   srv_job.c      one request between the scheduler's callbacks and a connection
 *   srv_reply.c    response bodies: completion objects, chunks, logprobs, usage; harmony answers
 *                  split into content and reasoning (srv_chat_split)
 *   srv_sse.c      streaming ("stream": true): server-sent events from a job
 *   srv_metrics.c  Prometheus text for /metrics: gauges, counters, latency histograms
 * The parser needs neither a model nor a socket (the unit tests and the
 * fuzz target use it alone). Chat templates are the library's (cortex_tools.h,
 * engine/src/chat.c): the chat route renders with them.
 */
#ifndef CX_SRV_H
#define CX_SRV_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "cortex.h"
#include "cortex_tools.h"

struct json_t;          /* jansson */
struct MHD_Connection;  /* libmicrohttpd */
struct MHD_Daemon;
struct srv_conn;        /* srv_http.c: one TCP connection */
struct srv_ipslot;      /* srv_http.c: connections per client address */

/* ---- errors: the OpenAI error object ------------------------------------- */

typedef struct srv_error {
    int status;           /* HTTP status */
    const char *type;     /* "invalid_request_error", "authentication_error", ... */
    const char *code;     /* a machine-readable code, or NULL (JSON null) */
    char param[64];       /* the offending field ("messages[1].content"), "" when none */
    char message[384];
} srv_error;

/* Fill e; returns -1 (so a parser can `return srv_error_set(...)`). (srv_error.c) */
int srv_error_set(srv_error *e, int status, const char *type, const char *code, const char *param, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;
/* A JSON string of n bytes, every invalid UTF-8 byte replaced by U+FFFD (JSON text must be UTF-8). */
struct json_t *srv_json_utf8(const char *s, size_t n);
/* {"error":{"message","type","param","code"}} as a malloc'd string (NULL: out of memory). */
char *srv_error_json(const srv_error *e);

/* ---- request bodies (srv_parse.c) ---------------------------------------- */

#define SRV_MAX_STOP 4          /* stop strings per request (OpenAI's limit) */
#define SRV_MAX_TOP_LOGPROBS 20 /* alternatives per token (OpenAI's limit) */

#define SRV_MAX_PROMPTS 32    /* prompts of one /v1/completions request (one choice each) */

/* A chat message: role "system", "user" or "assistant" (cortex_tools.h's type, which the harmony renderer takes);
 * OpenAI's "developer" role arrives as "system". */
typedef cx_chat_msg srv_msg;

/* One completions prompt: text, or token ids (malloc'd). */
typedef struct srv_prompt {
    const char *text;           /* NULL when given as token ids */
    int32_t *ids;
    int n_ids;
} srv_prompt;

/* A parsed /v1/completions or /v1/chat/completions body. Strings point into
 * `root` (the parsed document), freed by srv_params_free. */
typedef struct srv_params {
    struct json_t *root;
    int chat;
    const char *model;          /* NULL: absent */
    srv_prompt *prompts;        /* completions: 1..SRV_MAX_PROMPTS prompts (malloc'd), one choice each, in order */
    int n_prompts;
    srv_msg *msgs;              /* chat: the messages (malloc'd) */
    int n_msgs;
    int max_tokens;             /* 0: absent (the server's default) */
    cx_sampler_params sp;       /* the defaults given, overridden by the body */
    int seed_given;             /* 1: the body set `seed` (else the server draws one: srv_random_seed) */
    const char *stop[SRV_MAX_STOP];
    int n_stop;
    int stream, include_usage;
    int logprobs;               /* 1: per-token log-probabilities asked */
    int top_logprobs;           /* alternatives per token, 0..SRV_MAX_TOP_LOGPROBS */
    int priority;               /* extension: the scheduler's class, higher first */
    int ignore_eos;             /* extension (llama.cpp's): the end-of-text token does not end it */
    int cache_prompt;           /* extension (llama.cpp's): 0 takes nothing from the prefix cache (default 1) */
    int speculate;              /* extension: cx_request.speculate; -1 (default): the server's drafter, if any;
                                   0: "speculative": false or llama-server's "speculative.n_max": 0; N > 0:
                                   "speculative.n_max": N, drafts of at most N tokens */
} srv_params;

/* Parse a request body of `len` bytes for the chat route (chat = 1) or the
 * completions route; sampling starts from *dflt. 0, or -1 with e filled (400,
 * naming the field). Either way srv_params_free(out) releases what it holds. */
int srv_parse_request(const char *body, size_t len, int chat, const cx_sampler_params *dflt, srv_params *out,
                      srv_error *e);
void srv_params_free(srv_params *p);

/* ---- metrics (srv_metrics.c) --------------------------------------------- */

#define SRV_HIST_MAX 20

typedef struct srv_hist {
    const double *bounds; /* upper bounds in seconds, ascending */
    int n;
    uint64_t counts[SRV_HIST_MAX + 1]; /* per bucket, not cumulative; the last is +Inf */
    double sum;
    uint64_t count;
} srv_hist;

#define SRV_STATUS_MAX 600

typedef struct srv_metrics {
    pthread_mutex_t mu;
    srv_hist ttft, itl, e2e;
    int64_t prompt_tokens, generation_tokens; /* over ended requests */
    int64_t http[SRV_STATUS_MAX];             /* responses by status (100..599) */
    int64_t invalid, queue_full;              /* completion requests refused: 4xx other than 429, and 429 */
    int64_t conn_open;                        /* connections open now (served and busy) */
    int64_t conn_busy, conn_timeouts;         /* connections answered 503 busy; closed at a read deadline */
} srv_metrics;

void srv_metrics_init(srv_metrics *mt);
void srv_metrics_free(srv_metrics *mt);
/* Count an ended request: its tokens and its TTFT, gaps and end-to-end time. */
void srv_metrics_record(srv_metrics *mt, const cx_request_stats *st);
/* Count one HTTP response by its status. */
void srv_metrics_http(srv_metrics *mt, int status);
/* Count a completion request refused before it ran, by its status (429: queue full; other 4xx: invalid). */
void srv_metrics_refused(srv_metrics *mt, int status);
/* Count connections: d_open opened (+1) or closed (-1), d_busy found busy, d_timeouts closed at a deadline. */
void srv_metrics_conn(srv_metrics *mt, int d_open, int d_busy, int d_timeouts);
/* The Prometheus text exposition of mt and the scheduler's state (malloc'd; NULL: out of memory). */
char *srv_metrics_text(srv_metrics *mt, cx_sched *s, size_t *len);

/* ---- the server ----------------------------------------------------------- */

#define SRV_CTL_MAX 8

/* What `cortex serve` was asked for (the CLI fills it from its flags). */
typedef struct srv_config {
    const char *host;          /* address to bind (default 127.0.0.1) */
    int port;                  /* 0: any free one (printed) */
    const char *api_key;       /* NULL: no authentication */
    const char *chat_template; /* NULL: the model's (detected); else a name */
    int max_tokens;            /* a request's default max_tokens */
    int64_t request_timeout_ms;/* 0: none; else a request's deadline from its arrival */
    long max_body;             /* bytes a request body may have */
    /* Connections (docs/server.md, "Limits"): */
    int max_conns;             /* connections served at once; one more is answered 503 busy */
    int max_conns_per_ip;      /* of them from one address (IPv6: one /64); 0: no such limit */
    double read_timeout;       /* s: a request's headers and body arrive within it, else the connection closes */
    double busy_timeout;       /* s: the same for a busy connection (past a limit), which then gets its 503 */
    int idle_timeout;          /* s: no byte in or out for this long closes a connection (libmicrohttpd's); 0: none */
    double drain_timeout;      /* s: SIGTERM waits this long for admitted requests' responses */
    cx_sched_params sched;     /* (sched.lora_budget, sched.lora_type: the adapters') */
    const char *const *lora;   /* "NAME=FILE" adapters registered (and loaded) at start */
    int n_lora;
    const char *lora_dir;      /* NULL: the adapter routes answer 403; else the one directory they load from */
    int max_adapters;          /* adapters registered at once, --lora's included */
    const cx_spec_params *spec;/* speculative decoding (--spec, --draft): the drafter's parameters; NULL: none
                                  (sched.spec_max_batch: --spec-max-batch) */
} srv_config;

typedef struct srv_server {
    const cx_model *m;
    cx_sched *sched;
    cx_drafter *drafter;       /* cfg->spec's drafter (NULL: none); freed after the scheduler */
    const srv_config *cfg;
    const char *model_id;      /* the base model's name: what `model` must equal */
    cx_chat chat;              /* the chat format (cx_chat_init; never copied: its end[] points into it) */
    int has_chat;              /* 0: none (then tmpl_why says why) */
    char tmpl_why[512];        /* (a cx_err message fits) */
    int32_t ctl_id[SRV_CTL_MAX];   /* harmony: control tokens whose text a chat answer keeps (<|channel|>, ...) */
    const char *ctl_text[SRV_CTL_MAX];
    int n_ctl;
    cx_sampler_params sp;      /* requests' sampling defaults */
    srv_metrics metrics;
    char *lora_dir;            /* realpath of cfg->lora_dir (malloc'd), or NULL: runtime adapters off */
    pthread_mutex_t admin_mu;  /* one adapter load or unload at a time: the cap and the ids stay exact */
    struct MHD_Daemon *daemon;
    size_t max_prompt_bytes;   /* the most prompt text the context can hold (longest token x n_ctx): longer is 400 untokenized */
    int n_ctx;                 /* each request's context, in tokens */
    pthread_mutex_t mu;        /* guards what follows */
    pthread_cond_t cv;
    int in_flight;             /* admitted HTTP requests (whole request read) until their response is written */
    int draining;              /* SIGTERM: new requests get 503, connections without a request are closed */
    int stopping;              /* the reaper thread ends */
    int max_conns, hard_conns; /* served connections (config, lowered to fit the file limit); libmicrohttpd's limit */
    int n_served;              /* open connections that are not busy */
    struct srv_conn *conns;    /* every open connection */
    struct srv_ipslot *ips;    /* served connections per address: open addressing, ip_cap slots */
    int ip_cap;
    pthread_t reaper;          /* closes connections past their read deadline, and idle ones at a drain */
    int reaper_started;
} srv_server;

/* srv_main.c: run the server on model m until SIGTERM/SIGINT (then drain).
 * The process's exit status: 0 after a drain, 1 on a start failure (message printed). */
int srv_serve(const cx_model *m, const srv_config *cfg);

/* srv_http.c */
/* Start the daemon on cfg's host and port; *port gets the bound port. 0, or -1 with msg filled. */
int srv_http_start(srv_server *S, int *port, char *msg, size_t cap);
/* Start the drain: stop listening, answer new requests on open connections
 * 503, shut down every connection without an admitted request. */
void srv_http_quiesce(srv_server *S);
/* Wait up to `seconds` for the admitted requests' responses to be written;
 * returns how many are still in flight. */
int srv_http_drain(srv_server *S, double seconds);
/* Stop the reaper and the daemon (every connection closed, its thread joined). */
void srv_http_stop(srv_server *S);
/* Queue a reply with a malloc'd body (taken over); `retry_after` > 0 adds Retry-After. Returns MHD_YES/NO. */
int srv_http_reply(srv_server *S, struct MHD_Connection *c, int status, const char *content_type, char *body, size_t len,
              int retry_after);
/* Reply with the error object of e. */
int srv_http_reply_error(srv_server *S, struct MHD_Connection *c, const srv_error *e);
/* 1 if the client of connection c has gone (checked without blocking): its
 * connection was reset or closed, or it shut its sending side after the
 * request was complete. A client that shut its sending side together with
 * the request (a half-close: `nc -N`, shutdown(SHUT_WR) right after the
 * send) has not gone: it waits for the answer. */
int srv_http_gone(struct MHD_Connection *c);

/* ---- one request (srv_job.c) ---------------------------------------------- */

typedef struct srv_top {
    int32_t token;
    float logprob;
} srv_top;

/* What a job keeps of each generated token when logprobs are asked. */
typedef struct srv_tok {
    int32_t token, prev;  /* prev: the token before it (its text depends on it) */
    float logprob;
    int n_top;
    srv_top top[SRV_MAX_TOP_LOGPROBS];
} srv_tok;

typedef struct srv_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;             /* the scheduler's (until on_done) and the connection's */
    srv_server *S;
    int64_t id;
    int n_top, want_lp;
    int32_t last_prompt;  /* the prompt's last token: the first generated token's prev */
    int harmony;          /* a harmony chat answer: the text keeps S->ctl_* tokens' text (srv_chat_split) */
    char *text;           /* final text so far (NUL-terminated) */
    size_t len, cap;
    srv_tok *toks;        /* want_lp: one per generated token */
    int n_toks, cap_toks;
    int n_gen;
    int done;             /* on_done ran: what follows is set */
    cx_req_state state;   /* with done: a final state (before: CX_REQ_QUEUED, never read) */
    cx_stop_reason reason;
    int n_prompt, oom;
    int n_cached;         /* prompt tokens the prefix cache supplied */
    int draft_n, draft_accepted; /* speculative decoding: draft tokens checked, and accepted */
    int64_t t_arrive;     /* CLOCK_MONOTONIC ns: the whole request body was in (before parsing and tokenizing) */
    int64_t t_submit, t_start, t_first, t_end; /* the scheduler's clocks (cx_request_stats), set with done */
    char error[256];
} srv_job;

/* CLOCK_MONOTONIC in ns: the scheduler's clock (cx_request_stats), so the
 * server's own times and the scheduler's subtract. */
static inline int64_t srv_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Submit request q (its callbacks and user are set here) for S; *out holds
 * two references. 0, or the cx_sched_submit code with err filled. */
int srv_job_submit(srv_server *S, cx_request *q, const int32_t *prompt, int n_prompt, int n_top, int want_lp,
                   int harmony, srv_job **out, cx_err *err);
/* Wait (job lock held) until the text passes `len` bytes ((size_t)-1: until
 * the job is done), the job is done, or the client of c has gone (then 1 is
 * returned and the job cancelled). */
int srv_job_wait(srv_job *j, size_t len, struct MHD_Connection *c);
/* Drop the connection's reference: cancel the job if it still runs, free at the last reference. */
void srv_job_put(srv_job *j);

/* ---- response bodies (srv_reply.c) ---------------------------------------- */

/* What a response describes of a job: the id and creation time it names. */
typedef struct srv_out {
    srv_server *S;
    const srv_params *p;
    char id[40];
    int64_t created;
} srv_out;

/* The longest prefix of s[0..n) that does not end inside a UTF-8 character
 * that may still be completed by later bytes (streaming cuts text there). */
size_t srv_utf8_cut(const char *s, size_t n);
/* The OpenAI finish_reason of a job's end ("stop", "length"; NULL: none). */
const char *srv_finish_reason(const srv_job *j);
/* The whole non-streaming response of finished jobs j[0..n), one choice
 * each in order (each job's lock held): malloc'd JSON text. */
char *srv_reply_body(const srv_out *o, srv_job *const *j, int n);
/* One streaming chunk (job lock held): n bytes of text (chat: content) and
 * nr of reasoning (chat: reasoning_content, left out when 0), tokens [t0, t1),
 * the finish reason (NULL: none yet); role: 1 for the chat's first delta.
 * Malloc'd JSON text. */
char *srv_reply_chunk(const srv_out *o, const srv_job *j, const char *text, size_t n, const char *reasoning, size_t nr,
                      int t0, int t1, const char *finish, int role);
/* The usage-only chunk of stream_options.include_usage. */
char *srv_reply_usage_chunk(const srv_out *o, const srv_job *j);
/* Fill e for a job that did not end normally (timeout: 504, failed: 500). 0 if it did. */
int srv_job_error(const srv_job *j, srv_error *e);
/* e's error object with jobs j[0..n)'s partial usage added (504 bodies). */
char *srv_reply_error_usage(const srv_error *e, srv_job *const *j, int n);

/* The answer a chat client sees of a job's text t[0..n) (harmony: the
 * control tokens' text kept): for harmony output that follows the format,
 * the final channel's text as content and the analysis channel's as
 * reasoning (malloc'd in *parts, which the caller frees); for any other
 * output, content is t itself (not copied: parts->content stays NULL).
 * Sets *c, *nc, *r, *nr; -1 when out of memory. */
int srv_chat_split(int harmony, const char *t, size_t n, cx_harmony_parts *parts, const char **c, size_t *nc,
                   const char **r, size_t *nr);

/* ---- streaming (srv_sse.c) ------------------------------------------------- */

/* Answer connection c with the server-sent events of job j (the stream takes
 * over the connection's reference to j). Returns MHD_YES/NO. */
int srv_sse_start(srv_server *S, struct MHD_Connection *c, const srv_out *o, srv_params *p, srv_job *j);

/* ---- routes (srv_routes.c) -------------------------------------------------- */

/* Answer one complete request. */
int srv_route(srv_server *S, struct MHD_Connection *c, const char *method, const char *url, const char *body,
              size_t len);
/* The adapter a request's `model` names: 0 for the base model (or none given);
 * -1 (e filled, 404 model_not_found) for an unknown name. The one place the
 * model field is resolved. */
int srv_resolve_model(const srv_server *S, const char *model, srv_error *e);
/* A seed for a request that gives none: 64 bits from getrandom (the
 * kernel's generator; /dev/urandom where it fails) mixed with a counter and
 * the clock, so concurrent requests never share one even without entropy. */
uint64_t srv_random_seed(void);
/* srv_admin.c: the adapter routes, POST /v1/load_lora_adapter (load = 1) and /v1/unload_lora_adapter. */
int srv_admin_adapter(srv_server *S, struct MHD_Connection *c, int load, const char *body, size_t len);
/* Resolve lora_path against the --lora-dir directory `dir` (a realpath):
 * the real path of a readable regular file or directory strictly inside it
 * (malloc'd), or NULL for anything else: outside (.., an absolute path, a
 * symbolic link out), missing, unreadable or of another type alike. */
char *srv_admin_path(const char *dir, const char *lora_path);

#endif
