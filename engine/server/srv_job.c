/*
 * srv_job.c - one request between the scheduler and the connection that
 * asked for it. The scheduler's thread appends each token's final text (and,
 * when asked, its log-probabilities: the logits are only valid during the
 * callback) and marks the end; the connection's thread waits for more,
 * watching its client: a client that goes away cancels the request, whose
 * KV blocks the scheduler then frees at its next step. Two references keep
 * the job alive, the scheduler's until on_done and the connection's.
 */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "srv.h"

/* Free j (no reference is left). */
static void job_free(srv_job *j) {
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j->text);
    free(j->toks);
    free(j);
}

/* Drop one reference (lock not held); free at the last. */
static void job_unref(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    assert(j->refs > 0 && j->refs <= 2 && "a job has the scheduler's and the connection's references at most");
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (!left) job_free(j);
}

/* Make room for `more` text bytes (lock held); 0, or -1 (out of memory). */
static int text_reserve(srv_job *j, size_t more) {
    if (j->len + more + 1 <= j->cap) return 0;
    size_t cap = (j->len + more + 1) * 2;
    char *t = realloc(j->text, cap);
    if (!t) return -1;
    j->text = t;
    j->cap = cap;
    assert(j->len + more < j->cap && "room for the bytes and the NUL");
    return 0;
}

/* The log-probability of ev's token and its n_top best alternatives, from
 * the raw logits it was sampled from (before penalties and temperature):
 * log-softmax in double. */
static void tok_logprobs(srv_tok *t, const float *logits, int n_vocab, int n_top) {
    double mx = logits[0];
    for (int i = 1; i < n_vocab; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    double lse = mx + log(sum);
    t->logprob = (float)((double)logits[t->token] - lse);
    t->n_top = 0;
    for (int i = 0; i < n_vocab; i++) { /* insertion into the n_top best so far, highest first, lowest id on ties */
        float lp = (float)((double)logits[i] - lse);
        if (t->n_top == n_top && (n_top == 0 || lp <= t->top[n_top - 1].logprob)) continue;
        int at = t->n_top < n_top ? t->n_top++ : n_top - 1;
        while (at > 0 && t->top[at - 1].logprob < lp) {
            t->top[at] = t->top[at - 1];
            at--;
        }
        t->top[at].token = i;
        t->top[at].logprob = lp;
    }
}

/* The scheduler's on_token: append the final bytes (and the token's logprobs). */
static void on_token(void *user, const cx_token_event *ev) {
    srv_job *j = user;
    pthread_mutex_lock(&j->mu);
    assert(!j->done && j->refs >= 1 && "tokens come before on_done, while the scheduler holds its reference");
    assert(ev->id == j->id && ev->index == j->n_gen && "a job's tokens arrive in order, each once");
    if (j->want_lp && !j->oom) {
        if (j->n_toks == j->cap_toks) {
            int cap = j->cap_toks ? 2 * j->cap_toks : 64;
            srv_tok *t = realloc(j->toks, sizeof *t * (size_t)cap);
            if (t) {
                j->toks = t;
                j->cap_toks = cap;
            } else {
                j->oom = 1;
            }
        }
        if (!j->oom) {
            assert(j->n_toks < j->cap_toks && "room for one more token");
            srv_tok *t = &j->toks[j->n_toks++];
            t->token = ev->token;
            t->prev = j->n_toks > 1 ? t[-1].token : j->last_prompt;
            tok_logprobs(t, ev->logits, cx_model_get_info(j->S->m)->n_vocab, j->n_top);
        }
    }
    const char *bytes = ev->text;
    size_t len = ev->len;
    for (int k = 0; j->harmony && !len && k < j->S->n_ctl; k++) /* harmony's structure: its control tokens' text */
        if (ev->token == j->S->ctl_id[k]) {
            bytes = j->S->ctl_text[k];
            len = strlen(bytes);
        }
    if (len && !j->oom) {
        if (text_reserve(j, len)) j->oom = 1;
        else {
            memcpy(j->text + j->len, bytes, len);
            j->len += len;
            assert(j->len < j->cap && "the text stays within its buffer, NUL included");
            j->text[j->len] = 0;
        }
    }
    j->n_gen = ev->index + 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* The scheduler's on_done: the end, the metrics, the record released; the scheduler's reference dropped. */
static void on_done(void *user, const cx_request_stats *st) {
    srv_job *j = user;
    srv_metrics_record(&j->S->metrics, st);
    pthread_mutex_lock(&j->mu);
    assert(!j->done && st->id == j->id && "on_done runs once per job");
    assert(st->state >= CX_REQ_FINISHED && st->state <= CX_REQ_FAILED && "on_done reports a final state");
    j->done = 1;
    j->state = (cx_req_state)st->state;
    j->reason = (cx_stop_reason)st->reason;
    j->n_prompt = st->n_prompt;
    j->n_gen = st->n_gen;
    j->n_cached = st->n_cached;
    j->draft_n = st->spec_drafted;
    j->draft_accepted = st->spec_accepted;
    j->t_submit = st->t_submit;
    j->t_start = st->t_start;
    j->t_first = st->t_first;
    j->t_end = st->t_end;
    memcpy(j->error, st->error, sizeof j->error);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    cx_sched_release(j->S->sched, st->id);
    job_unref(j);
}

/* See srv.h. */
int srv_job_submit(srv_server *S, cx_request *q, const int32_t *prompt, int n_prompt, int n_top, int want_lp,
                   int harmony, srv_job **out, cx_err *err) {
    assert(n_prompt >= 1 && n_top >= 0 && n_top <= SRV_MAX_TOP_LOGPROBS && "a prompt, and logprobs within the limit");
    srv_job *j = calloc(1, sizeof *j);
    *out = NULL;
    if (!j || text_reserve(j, 256)) {
        free(j);
        err->code = CX_ENOMEM;
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return CX_ENOMEM;
    }
    j->text[0] = 0;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 2;
    j->S = S;
    j->n_top = n_top;
    j->want_lp = want_lp;
    j->harmony = harmony;
    j->last_prompt = prompt[n_prompt - 1];
    j->n_prompt = n_prompt;
    q->prompt = prompt;
    q->n_prompt = n_prompt;
    q->user = j;
    q->on_token = on_token;
    q->on_done = on_done;
    /* The lock is held across the submission so the callbacks (on the
     * scheduler's thread) see the id before anything else. */
    pthread_mutex_lock(&j->mu);
    int64_t id = cx_sched_submit(S->sched, q, err);
    j->id = id;
    pthread_mutex_unlock(&j->mu);
    if (id < 0) {
        job_free(j);
        return (int)id;
    }
    *out = j;
    return 0;
}

/* See srv.h. The client is looked at every 100 ms, however often tokens
 * wake the wait (the deadline moves only when it passes). */
int srv_job_wait(srv_job *j, size_t len, struct MHD_Connection *c) {
    struct timespec ts = {0, 0};
    while (!j->done && j->len <= len) {
        if (ts.tv_sec == 0) {
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
        }
        if (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT) {
            ts.tv_sec = 0;
            if (c && srv_http_gone(c)) {
                cx_sched_cancel(j->S->sched, j->id);
                return 1;
            }
        }
    }
    return 0;
}

/* See srv.h. */
void srv_job_put(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    int live = !j->done;
    pthread_mutex_unlock(&j->mu);
    if (live) cx_sched_cancel(j->S->sched, j->id); /* its on_done comes at the next step */
    job_unref(j);
}
