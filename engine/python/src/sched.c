/*
 * sched.c - cortex.Scheduler and cortex.Request: many requests served at
 * once by the C scheduler (cx_sched, docs/serving.md) on a thread of its
 * own; tokens come back through callbacks, iteration, result() and asyncio
 * (cortex/aio.py).
 *
 * Two halves of a request. The C scheduler's callbacks run on its stepping
 * thread WITHOUT the GIL and copy what they are handed (the token's final
 * bytes; at the end the stats, tokens, gaps and text) into a C record,
 * rq_rec, under the record's mutex, and broadcast its condition: a Python
 * thread waiting in result() or iteration sleeps on that condition with the
 * GIL released and never needs the scheduler's thread to take the GIL. Only
 * a request with Python callbacks (on_token, on_done) or an asyncio waker
 * makes the stepping thread take the GIL (PyGILState_Ensure), once per
 * token and once at the end.
 *
 * A Request's life (rq_rec.ended / rq_rec.done):
 *
 *   submit --> live --on_done (C part)--> ended --Python on_done, wakers--> done
 *                |                                                          ^
 *                +--- no Python callbacks nor waker: ended and done at once -+
 *
 *   live    queued or running in the C scheduler (states QUEUED..DECODE);
 *           cancel() asks cx_sched_cancel, effective at the next step
 *   ended   the final state and output are copied into the record and the C
 *           scheduler's record is released (cx_sched_release, from on_done:
 *           sched.c frees it once on_done returns); readable from inside
 *           the request's own on_done callback
 *   done    readable by everyone: result() returns, iteration ends,
 *           done() is True. A callback's exception is recorded before done,
 *           so result() and iteration always see it
 *
 * Who frees what:
 *   - rq_rec is reference counted (refs, under its mutex): one reference
 *     for the Python Request (dropped by its dealloc) and one for the C
 *     scheduler (dropped at the end of the C on_done). The last one frees
 *     it, on whichever thread; a record holds no Python object by then.
 *   - While a request with on_token/on_done is live, its record holds the
 *     Request, the two callables (strong references, GIL only), so a
 *     fire-and-forget `sched.submit(p, on_done=f)` runs to its end; the
 *     references are dropped once on_done has run. Wakers are held until
 *     the end or until removed. These references are not visible to the
 *     cycle collector on purpose: they are roots until the request ends.
 *   - A Request dropped by Python while it is live and has no callbacks
 *     cannot be read by anyone: its dealloc cancels it (the record lives on
 *     until the scheduler's on_done).
 *   - A Request holds its Scheduler (strong); the Scheduler holds its Model
 *     (pycx_model_acquire until close, plus the `model` attribute). close()
 *     stops the C scheduler (cancelling or draining what is live: every
 *     record ends, so none refers to the C scheduler afterwards), frees it
 *     and releases the model.
 *   - The last reference to a Scheduler can be dropped on its own stepping
 *     thread (the Request a callback kept alive goes at the end of on_done).
 *     That thread cannot join itself, so the dealloc hands the C scheduler
 *     and the model to a detached reaper thread that stops and frees them.
 *
 * Threads: C callbacks run on the stepping thread (the scheduler's own, or
 * the thread inside close(), which runs the last steps). Python callbacks
 * and wakers run there holding the GIL; they may submit and cancel, but not
 * close() their scheduler nor wait on one of its live requests (RuntimeError
 * rather than a deadlock: tls_sched says which scheduler's step this thread
 * is in). Lock order: GIL before a record's mutex; the stepping thread never
 * takes the GIL while holding a record's mutex or the scheduler's. Calls
 * into the C scheduler with the GIL released are counted (`calls`); close()
 * waits for them before it stops and again before it frees. An atexit hook
 * closes every open scheduler (cancelling), so no scheduler thread calls
 * into Python while the interpreter finalizes.
 */
#include "pycx.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <structmember.h>
#include <time.h>

/* ---- the C record of a request ------------------------------------------- */

typedef struct rq_rec {
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* bytes or the end arrived (CLOCK_MONOTONIC) */
    int refs;                   /* the Python Request's and the C scheduler's (until on_done returns) */
    int64_t id;                 /* written under mu before any callback can read it (mu held across the submit) */
    cx_sched *sched;
    /* output, written by the stepping thread under mu */
    char *text;                 /* the streamed bytes; at the end the request's final text */
    size_t len, cap;
    int n_tok;                  /* on_token events so far */
    int ended, done;            /* see the life above */
    int oom;                    /* an output copy failed: the text may be short */
    int state, reason, n_prompt, n_gen, n_cached, n_preempted, priority;
    int64_t t_submit, t_start, t_first, t_end;
    int spec;                   /* its scheduler speculates: the counters below mean something */
    int spec_steps, spec_verified, spec_drafted, spec_accepted, spec_tokens;
    int64_t spec_draft_ns, spec_verify_ns;
    int32_t *toks;              /* [n_gen] at the end */
    int64_t *itl;               /* [n_gen - 1] at the end */
    char error[256];
    /* the Python side: read and written with the GIL held (n_wakers under mu too; has_cb is
     * also read by the C callbacks, and written only before the submission and after the end) */
    int has_cb;                 /* on_token or on_done given, until the end */
    int n_wakers;               /* len(wakers), read by the stepping thread to decide on the GIL */
    int cb_failed;              /* a callback raised: on_token is not called again */
    PyObject *req;              /* strong while has_cb: the Request handed to the callbacks */
    PyObject *on_token, *on_done;
    PyObject *wakers;           /* list of callables, or NULL */
    size_t cb_off;              /* bytes handed to on_token's pieces */
} rq_rec;

/* The scheduler step (and record) this thread is inside a callback of, or NULL. */
static _Thread_local cx_sched *tls_sched;
static _Thread_local rq_rec *tls_rec;

/* A condition variable on CLOCK_MONOTONIC (timeouts immune to clock changes). */
static int cond_init_mono(pthread_cond_t *cv) {
    pthread_condattr_t a;
    int rc = pthread_condattr_init(&a);
    if (!rc) rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    if (!rc) rc = pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
    return rc;
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A new record with one reference (the Request's); NULL when out of memory. */
static rq_rec *rec_new(void) {
    rq_rec *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->cap = 64; /* never NULL: offsets into it are always defined */
    r->text = malloc(r->cap);
    if (!r->text || pthread_mutex_init(&r->mu, NULL)) {
        free(r->text);
        free(r);
        return NULL;
    }
    if (cond_init_mono(&r->cv)) {
        pthread_mutex_destroy(&r->mu);
        free(r->text);
        free(r);
        return NULL;
    }
    r->refs = 1;
    return r;
}

/* Drop one reference (mutex not held); the last frees the record, which
 * holds no Python object by then (any thread, GIL or not). */
static void rec_unref(rq_rec *r) {
    pthread_mutex_lock(&r->mu);
    assert(r->refs >= 1 && r->refs <= 2 && "a record has the Request's and the scheduler's references at most");
    int left = --r->refs;
    pthread_mutex_unlock(&r->mu);
    if (left) return;
    assert(!r->req && !r->on_token && !r->on_done && !r->wakers && "Python references are dropped with the GIL first");
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r->text);
    free(r->toks);
    free(r->itl);
    free(r);
}

/* Make room for `more` bytes of text (mu held): 0, or -1 when out of memory. */
static int rec_reserve(rq_rec *r, size_t more) {
    if (r->len + more <= r->cap) return 0;
    size_t cap = r->cap;
    assert(cap > 0 && "rec_new gives every record a buffer");
    while (cap < r->len + more) cap *= 2;
    char *t = realloc(r->text, cap);
    if (!t) return -1;
    r->text = t;
    r->cap = cap;
    return 0;
}

/* ---- the Python objects ---------------------------------------------------- */

typedef struct CxScheduler {
    PyObject_HEAD
    CxModel *model;             /* the `model` attribute: strong for the object's life */
    int acquired;               /* a user of the model (pycx_model_acquire) until closed */
    const cx_model *m;
    int n_vocab;
    cx_sched *s;                /* NULL before __init__ and once closed */
    int closing;                /* close() in progress: new work is refused */
    Py_ssize_t calls;           /* calls into s with the GIL released, in progress */
    int next_adapter;           /* the id add_adapter gives next */
    CxDrafter *drafter;         /* Scheduler(drafter=...): a user of it until the C scheduler is freed, or NULL */
    struct CxScheduler *open_prev, *open_next; /* the open schedulers (closed at exit) */
    PyObject *weakrefs;
} CxScheduler;

typedef struct CxRequest {
    PyObject_HEAD
    CxScheduler *sched;         /* strong */
    rq_rec *rec;                /* one reference */
    long long id;
    int submitted;              /* the C scheduler accepted it (its callbacks will come) */
    int busy;                   /* iteration in progress (pycx_enter) */
    size_t it_off;              /* bytes iteration has yielded */
    int it_done;                /* iteration has ended */
    PyObject *cb_exc;           /* the exception a callback raised (the last; earlier ones as its __context__) */
    const char *cb_which;       /* "on_token" or "on_done" */
    PyObject *weakrefs;
} CxRequest;

/* The open schedulers, closed by the exit hook (GIL held). */
static CxScheduler *open_list;

/* A call into the C scheduler with the GIL released, counted so close() waits for it. */
#define SCHED_CALL(self, stmt)                                                                     \
    do {                                                                                           \
        (self)->calls++;                                                                           \
        Py_BEGIN_ALLOW_THREADS                                                                     \
        stmt;                                                                                      \
        Py_END_ALLOW_THREADS                                                                       \
        (self)->calls--;                                                                           \
    } while (0)

/* ValueError when the scheduler takes no new work; 0 when it does. */
static int sched_check_open(CxScheduler *self) {
    if (self->s && !self->closing) return 0;
    PyErr_SetString(PyExc_ValueError, "scheduler is closed");
    return -1;
}

/* ---- callbacks: the Python side (stepping thread, GIL held) ---------------- */

/* The current exception, normalized, with its traceback attached; NULL if none. */
static PyObject *fetch_exception(void) {
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    if (!t) return NULL;
    PyErr_NormalizeException(&t, &v, &tb);
    if (tb && v) PyException_SetTraceback(v, tb);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    return v;
#endif
}

/* A callback of r raised (the exception is set): record it on the Request
 * (chaining an earlier one as its __context__), stop calling on_token and
 * cancel the request if it is still live. */
static void cb_failed(rq_rec *r, const char *which) {
    PyObject *exc = fetch_exception();
    CxRequest *q = (CxRequest *)r->req;
    assert(q && "callbacks exist only while the record holds its Request");
    if (!exc) exc = PyObject_CallFunction(PyExc_RuntimeError, "s", "callback failed without an exception");
    if (!exc) { /* out of memory making even that: the failure cannot be recorded, say so */
        PyErr_WriteUnraisable(r->req);
        return;
    }
    if (q->cb_exc && q->cb_exc != exc) PyException_SetContext(exc, q->cb_exc); /* steals */
    else Py_XDECREF(q->cb_exc); /* the same object raised again: no cycle through __context__ */
    q->cb_exc = exc;
    q->cb_which = which;
    r->cb_failed = 1;
    pthread_mutex_lock(&r->mu);
    int ended = r->ended;
    pthread_mutex_unlock(&r->mu);
    if (!ended) cx_sched_cancel(r->sched, r->id); /* ends at the next step boundary */
}

/* Call every waker of r (GIL held). A waker that raises is reported as
 * unraisable: it belongs to cortex.aio, which catches what it expects. */
static void call_wakers(rq_rec *r) {
    if (!r->wakers || PyList_GET_SIZE(r->wakers) == 0) return;
    PyObject *list = PyList_GetSlice(r->wakers, 0, PyList_GET_SIZE(r->wakers)); /* a waker may remove itself */
    if (!list) {
        PyErr_WriteUnraisable(r->wakers);
        return;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *w = PyList_GET_ITEM(list, i);
        PyObject *res = PyObject_CallNoArgs(w);
        if (res) Py_DECREF(res);
        else PyErr_WriteUnraisable(w);
    }
    Py_DECREF(list);
}

/* The Python half of a token: on_token(request, token_id, piece), then the wakers. */
static void token_py(rq_rec *r, const cx_token_event *ev) {
    PyGILState_STATE g = PyGILState_Ensure();
    cx_sched *saved_s = tls_sched;
    rq_rec *saved_r = tls_rec;
    tls_sched = r->sched;
    tls_rec = r;
    if (r->on_token && !r->cb_failed) {
        /* the bytes since the last piece, less an incomplete UTF-8 tail (it comes with a later token);
         * read without the mutex: this thread is the only one that writes the text */
        size_t end = r->len - pycx_utf8_partial(r->text + r->cb_off, r->len - r->cb_off);
        PyObject *piece = pycx_text(r->text + r->cb_off, end - r->cb_off);
        if (piece) r->cb_off = end;
        PyObject *res = NULL;
        if (piece) res = PyObject_CallFunction(r->on_token, "OiN", r->req, (int)ev->token, piece);
        if (res) Py_DECREF(res);
        else cb_failed(r, "on_token");
    }
    call_wakers(r);
    tls_sched = saved_s;
    tls_rec = saved_r;
    PyGILState_Release(g);
}

/* The Python half of the end: on_done(request), done published, wakers,
 * and the references the record held dropped. The Request may go here (and
 * with it its Scheduler: tls_sched is still set so its dealloc knows it
 * runs on the stepping thread). */
static void done_py(rq_rec *r) {
    PyGILState_STATE g = PyGILState_Ensure();
    cx_sched *saved_s = tls_sched;
    rq_rec *saved_r = tls_rec;
    tls_sched = r->sched;
    tls_rec = r;
    if (r->on_done) {
        PyObject *res = PyObject_CallOneArg(r->on_done, r->req);
        if (res) Py_DECREF(res);
        else cb_failed(r, "on_done");
    }
    pthread_mutex_lock(&r->mu);
    r->done = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    call_wakers(r);
    pthread_mutex_lock(&r->mu);
    r->n_wakers = 0;
    pthread_mutex_unlock(&r->mu);
    PyObject *req = r->req, *wakers = r->wakers, *on_token = r->on_token, *on_done = r->on_done;
    r->req = r->wakers = r->on_token = r->on_done = NULL;
    r->has_cb = 0;
    Py_XDECREF(wakers);
    Py_XDECREF(on_token);
    Py_XDECREF(on_done);
    Py_XDECREF(req);
    tls_sched = saved_s;
    tls_rec = saved_r;
    PyGILState_Release(g);
}

/* ---- callbacks: the C side (stepping thread, no GIL) ----------------------- */

/* The scheduler's on_token: append the token's final bytes. */
static void rec_on_token(void *user, const cx_token_event *ev) {
    rq_rec *r = user;
    pthread_mutex_lock(&r->mu);
    assert(!r->ended && r->refs >= 1 && "tokens come before on_done, while the scheduler holds its reference");
    assert(ev->id == r->id && ev->index == r->n_tok && "a request's tokens arrive in order, each once");
    if (ev->len && !r->oom) {
        if (rec_reserve(r, ev->len)) r->oom = 1;
        else {
            memcpy(r->text + r->len, ev->text, ev->len);
            r->len += ev->len;
        }
    }
    r->n_tok = ev->index + 1;
    int py = r->has_cb || r->n_wakers > 0;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (py) token_py(r, ev);
}

/* The scheduler's on_done: copy the end (the final text replaces the
 * streamed bytes: it is the same plus what a cancellation left held back),
 * release the C record, then the Python half; drop the scheduler's reference. */
static void rec_on_done(void *user, const cx_request_stats *st) {
    rq_rec *r = user;
    pthread_mutex_lock(&r->mu);
    assert(!r->ended && st->id == r->id && "on_done runs once per request");
    assert(st->state >= CX_REQ_FINISHED && st->state <= CX_REQ_FAILED && "on_done reports a final state");
    r->state = st->state;
    r->reason = st->reason;
    r->n_prompt = st->n_prompt;
    r->n_gen = st->n_gen;
    r->n_cached = st->n_cached;
    r->n_preempted = st->n_preempted;
    r->priority = st->priority;
    r->t_submit = st->t_submit;
    r->t_start = st->t_start;
    r->t_first = st->t_first;
    r->t_end = st->t_end;
    r->spec_steps = st->spec_steps;
    r->spec_verified = st->spec_verified;
    r->spec_drafted = st->spec_drafted;
    r->spec_accepted = st->spec_accepted;
    r->spec_tokens = st->spec_tokens;
    r->spec_draft_ns = st->spec_draft_ns;
    r->spec_verify_ns = st->spec_verify_ns;
    memcpy(r->error, st->error, sizeof r->error);
    r->error[sizeof r->error - 1] = 0;
    if (st->text_len >= r->len && !rec_reserve(r, st->text_len - r->len)) {
        if (st->text_len) memcpy(r->text, st->text, st->text_len);
        r->len = st->text_len;
        r->oom = 0; /* whatever streaming missed, the text is whole now */
    } else if (st->text_len > r->len) {
        r->oom = 1;
    }
    if (st->n_gen > 0) {
        r->toks = malloc(sizeof(int32_t) * (size_t)st->n_gen);
        r->itl = st->n_gen > 1 ? malloc(sizeof(int64_t) * (size_t)(st->n_gen - 1)) : NULL;
        if (!r->toks || (st->n_gen > 1 && !r->itl)) {
            r->oom = 1;
            r->n_gen = 0; /* the copies below would be short */
        } else {
            memcpy(r->toks, st->tokens, sizeof(int32_t) * (size_t)st->n_gen);
            if (st->n_gen > 1) memcpy(r->itl, st->itl_ns, sizeof(int64_t) * (size_t)(st->n_gen - 1));
        }
    }
    r->ended = 1;
    int py = r->has_cb || r->n_wakers > 0;
    if (!py) { /* nobody to call with the GIL: readable now */
        r->done = 1;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
    /* everything is copied: the scheduler frees its record once this callback returns */
    cx_sched_release(r->sched, st->id);
    if (py) done_py(r);
    rec_unref(r); /* the scheduler's reference */
}

/* ---- Request ----------------------------------------------------------------- */

/* The record is readable by this thread: done, or ended and this thread is inside its on_done. */
static int rec_readable(const rq_rec *r) { return r->done || (r->ended && tls_rec == r); }

/* Complete bytes (no incomplete UTF-8 tail) past offset `off` have arrived (mu held); never for SIZE_MAX. */
static int rec_has_bytes(const rq_rec *r, size_t off) {
    return off != SIZE_MAX && r->len > off && r->len - pycx_utf8_partial(r->text + off, r->len - off) > off;
}

/* Wait until request `self` is readable or, when want_off is not SIZE_MAX, until complete bytes
 * past want_off have arrived: the GIL released, in slices of at most 50 ms so that signals
 * (Ctrl-C) are seen. timeout < 0: forever. 0 when ready; -1 with TimeoutError, RuntimeError
 * (waiting inside a callback of its own scheduler) or a signal's exception set. */
static int req_wait(CxRequest *self, double timeout, size_t want_off) {
    rq_rec *r = self->rec;
    double deadline = timeout >= 0 ? mono_s() + timeout : 0;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        int ready = rec_readable(r) || rec_has_bytes(r, want_off);
        pthread_mutex_unlock(&r->mu);
        if (ready) return 0;
        double now = mono_s();
        if (timeout >= 0 && now >= deadline) {
            PyErr_Format(PyExc_TimeoutError, "request %lld did not end within %g s", self->id, timeout);
            return -1;
        }
        if (tls_sched && tls_sched == r->sched) {
            PyErr_Format(PyExc_RuntimeError,
                         "request %lld: cannot wait for it inside a callback of its own scheduler (the scheduler's "
                         "thread would wait for itself)",
                         self->id);
            return -1;
        }
        double until = now + 0.05;
        if (timeout >= 0 && deadline < until) until = deadline;
        struct timespec ts;
        ts.tv_sec = (time_t)until;
        ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
        if (ts.tv_nsec > 999999999L) ts.tv_nsec = 999999999L;
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&r->mu);
        while (!r->done && !rec_has_bytes(r, want_off) && pthread_cond_timedwait(&r->cv, &r->mu, &ts) != ETIMEDOUT) {}
        pthread_mutex_unlock(&r->mu);
        Py_END_ALLOW_THREADS
        if (PyErr_CheckSignals()) return -1;
    }
}

/* Raise the error of a failed callback: RuntimeError whose __cause__ is the callback's exception. */
static PyObject *raise_cb(CxRequest *self) {
    assert(self->cb_exc && "only when a callback raised");
    PyErr_Format(PyExc_RuntimeError, "request %lld: its %s callback raised %R (%s)", self->id, self->cb_which,
                 self->cb_exc,
                 strcmp(self->cb_which, "on_done") ? "the request was cancelled" : "after the request had ended");
    PyObject *exc = fetch_exception();
    if (!exc) return NULL;
    PyException_SetCause(exc, Py_NewRef(self->cb_exc)); /* steals */
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
    return NULL;
}

static const char *state_name(int state) {
    switch (state) {
    case CX_REQ_FINISHED: return "finished";
    case CX_REQ_CANCELLED: return "cancelled";
    case CX_REQ_TIMEOUT: return "timeout";
    case CX_REQ_FAILED: return "failed";
    default: return "live";
    }
}

/* Set d[key] = v, stealing v; -1 (v NULL or failed). */
static int dict_steal(PyObject *d, const char *key, PyObject *v) {
    if (!v) return -1;
    int rc = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return rc;
}

static PyObject *str_or_none(const char *s) { return s ? PyUnicode_FromString(s) : Py_NewRef(Py_None); }

/* The result dict of a readable record. */
static PyObject *req_result_dict(CxRequest *self) {
    rq_rec *r = self->rec;
    assert(r->ended && "the end has been copied");
    static const char *const STOP[] = {NULL, "length", "eos", "token", "string"};
    const char *stop = r->reason >= 0 && r->reason <= CX_STOP_STRING ? STOP[r->reason] : NULL;
    const char *finish = r->reason == CX_STOP_LENGTH ? "length" : stop ? "stop" : NULL;
    const char *error = r->state == CX_REQ_FAILED ? r->error
                        : r->oom ? "out of memory copying the request's output (the text may be incomplete)"
                                 : NULL;
    PyObject *d = PyDict_New(), *toks = d ? PyList_New(r->n_gen) : NULL,
             *itl = toks ? PyList_New(r->n_gen > 1 ? r->n_gen - 1 : 0) : NULL;
    int rc = itl ? 0 : -1;
    for (int i = 0; !rc && i < r->n_gen; i++) {
        PyObject *v = PyLong_FromLong(r->toks[i]);
        if (!v) rc = -1;
        else PyList_SET_ITEM(toks, i, v);
    }
    for (int i = 0; !rc && i + 1 < r->n_gen; i++) {
        PyObject *v = PyFloat_FromDouble((double)r->itl[i] / 1e6);
        if (!v) rc = -1;
        else PyList_SET_ITEM(itl, i, v);
    }
    if (!rc) {
        PyObject *tokens_ref = toks, *itl_ref = itl;
        toks = itl = NULL; /* dict_steal owns them now */
        rc = dict_steal(d, "id", PyLong_FromLongLong(self->id)) || dict_steal(d, "text", pycx_text(r->text, r->len)) ||
             dict_steal(d, "tokens", tokens_ref) || dict_steal(d, "state", PyUnicode_FromString(state_name(r->state))) ||
             dict_steal(d, "finish_reason", str_or_none(finish)) || dict_steal(d, "stop_reason", str_or_none(stop)) ||
             dict_steal(d, "n_prompt", PyLong_FromLong(r->n_prompt)) ||
             dict_steal(d, "n_gen", PyLong_FromLong(r->n_gen)) ||
             dict_steal(d, "n_cached", PyLong_FromLong(r->n_cached)) ||
             dict_steal(d, "n_preempted", PyLong_FromLong(r->n_preempted)) ||
             dict_steal(d, "priority", PyLong_FromLong(r->priority)) ||
             dict_steal(d, "ttft_ms", r->t_first ? PyFloat_FromDouble((double)(r->t_first - r->t_submit) / 1e6)
                                                 : Py_NewRef(Py_None)) ||
             dict_steal(d, "latency_ms", PyFloat_FromDouble((double)(r->t_end - r->t_submit) / 1e6)) ||
             dict_steal(d, "itl_ms", itl_ref) || dict_steal(d, "error", str_or_none(error)) ||
             dict_steal(d, "speculation",
                        !r->spec ? Py_NewRef(Py_None)
                                 : Py_BuildValue("{s:i,s:i,s:i,s:i,s:i,s:d,s:d}", "steps", r->spec_steps, "verified",
                                                 r->spec_verified, "drafted", r->spec_drafted, "accepted",
                                                 r->spec_accepted, "tokens", r->spec_tokens, "draft_ms",
                                                 (double)r->spec_draft_ns / 1e6, "verify_ms",
                                                 (double)r->spec_verify_ns / 1e6));
    }
    Py_XDECREF(toks);
    Py_XDECREF(itl);
    if (rc) Py_CLEAR(d);
    return d;
}

static PyObject *Request_result(CxRequest *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"timeout", NULL};
    PyObject *timeout_o = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:result", kwlist, &timeout_o)) return NULL;
    double timeout = -1;
    if (timeout_o != Py_None && pycx_float_arg(timeout_o, "timeout", 0, 1e9, 0, &timeout)) return NULL;
    if (req_wait(self, timeout, SIZE_MAX)) return NULL;
    if (self->cb_exc) return raise_cb(self);
    return req_result_dict(self);
}

/* The next piece of text (GIL and mu held; decoding runs no Python code):
 * a new str past it_off; NULL when there is none yet (*at_end: nor will
 * there be); NULL with *err set and an exception. Once the request is
 * readable the rest is flushed, an incomplete tail decoded as U+FFFD. */
static PyObject *req_piece(CxRequest *self, int *at_end, int *err) {
    rq_rec *r = self->rec;
    int readable = rec_readable(r);
    size_t end = readable ? r->len : r->len - pycx_utf8_partial(r->text + self->it_off, r->len - self->it_off);
    *at_end = 0;
    *err = 0;
    if (end > self->it_off) {
        PyObject *s = pycx_text(r->text + self->it_off, end - self->it_off);
        if (!s) *err = 1;
        else self->it_off = end;
        return s;
    }
    *at_end = readable;
    return NULL;
}

/* Iteration ends: the callback's error (once), else StopIteration (NULL without an exception). */
static PyObject *req_iter_end(CxRequest *self) {
    int first = !self->it_done;
    self->it_done = 1;
    if (first && self->cb_exc) return raise_cb(self);
    return NULL;
}

/* __next__ and _poll: the next piece; blocking waits for one, else None when nothing is new. */
static PyObject *req_next(CxRequest *self, int blocking) {
    if (self->it_done) {
        if (!blocking) PyErr_SetNone(PyExc_StopIteration);
        return NULL;
    }
    if (pycx_enter(&self->busy, "the request's iteration")) return NULL;
    PyObject *out = NULL;
    for (;;) {
        int at_end, err;
        pthread_mutex_lock(&self->rec->mu);
        out = req_piece(self, &at_end, &err);
        pthread_mutex_unlock(&self->rec->mu);
        if (out || err) break;
        if (at_end) {
            out = req_iter_end(self);
            if (!out && !PyErr_Occurred() && !blocking) PyErr_SetNone(PyExc_StopIteration);
            break;
        }
        if (!blocking) {
            out = Py_NewRef(Py_None);
            break;
        }
        if (req_wait(self, -1, self->it_off)) break;
    }
    pycx_leave(&self->busy);
    return out;
}

static PyObject *Request_iternext(CxRequest *self) { return req_next(self, 1); }
static PyObject *Request_poll(CxRequest *self, PyObject *unused) {
    (void)unused;
    return req_next(self, 0);
}

static PyObject *Request_done(CxRequest *self, PyObject *unused) {
    (void)unused;
    pthread_mutex_lock(&self->rec->mu);
    int d = rec_readable(self->rec);
    pthread_mutex_unlock(&self->rec->mu);
    return PyBool_FromLong(d);
}

static PyObject *Request_cancel(CxRequest *self, PyObject *unused) {
    (void)unused;
    CxScheduler *S = self->sched;
    pthread_mutex_lock(&self->rec->mu);
    int ended = self->rec->ended;
    pthread_mutex_unlock(&self->rec->mu);
    /* while close() runs, S->s stays valid until every counted call has returned */
    if (!ended && self->submitted && S->s) {
        cx_sched *s = S->s;
        int64_t id = self->id;
        SCHED_CALL(S, cx_sched_cancel(s, id)); /* CX_EINVAL: it ended meanwhile, a no-op */
    }
    Py_RETURN_NONE;
}

/* _add_waker(fn): call fn() (no arguments, on the scheduler's thread, GIL held) after each token and at the end.
 * Returns False, registering nothing, when the request is already done. */
static PyObject *Request_add_waker(CxRequest *self, PyObject *fn) {
    rq_rec *r = self->rec;
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "waker must be callable, not %.100s", Py_TYPE(fn)->tp_name);
        return NULL;
    }
    if (!r->wakers && !(r->wakers = PyList_New(0))) return NULL;
    if (PyList_Append(r->wakers, fn)) return NULL;
    /* checked with the count published in one step: the C on_done reads both at once */
    pthread_mutex_lock(&r->mu);
    int done = r->done;
    if (!done) r->n_wakers = (int)PyList_GET_SIZE(r->wakers);
    pthread_mutex_unlock(&r->mu);
    if (!done) Py_RETURN_TRUE;
    if (PySequence_DelItem(r->wakers, PyList_GET_SIZE(r->wakers) - 1)) return NULL;
    Py_RETURN_FALSE;
}

/* _remove_waker(fn): forget fn (compared by identity); True if it was registered. */
static PyObject *Request_remove_waker(CxRequest *self, PyObject *fn) {
    rq_rec *r = self->rec;
    Py_ssize_t n = r->wakers ? PyList_GET_SIZE(r->wakers) : 0, i = 0;
    while (i < n && PyList_GET_ITEM(r->wakers, i) != fn) i++;
    if (i == n) Py_RETURN_FALSE;
    if (PySequence_DelItem(r->wakers, i)) return NULL;
    pthread_mutex_lock(&r->mu);
    r->n_wakers = (int)PyList_GET_SIZE(r->wakers);
    pthread_mutex_unlock(&r->mu);
    Py_RETURN_TRUE;
}

/* cortex.aio.<fn>(self) */
static PyObject *call_aio(CxRequest *self, const char *fn) {
    PyObject *aio = PyImport_ImportModule("cortex.aio");
    if (!aio) return NULL;
    PyObject *r = PyObject_CallMethod(aio, fn, "O", (PyObject *)self);
    Py_DECREF(aio);
    return r;
}

static PyObject *Request_aiter(CxRequest *self) { return call_aio(self, "stream"); }

static PyObject *Request_await(CxRequest *self) {
    PyObject *coro = call_aio(self, "result");
    if (!coro) return NULL;
    PyObject *it = PyObject_CallMethod(coro, "__await__", NULL);
    Py_DECREF(coro);
    return it;
}

static PyObject *Request_repr(CxRequest *self) {
    pthread_mutex_lock(&self->rec->mu);
    int done = self->rec->done, state = self->rec->state, n = self->rec->n_tok;
    pthread_mutex_unlock(&self->rec->mu);
    if (done) return PyUnicode_FromFormat("<cortex.Request %lld %s>", self->id, state_name(state));
    return PyUnicode_FromFormat("<cortex.Request %lld live, %d tokens>", self->id, n);
}

static int Request_traverse(CxRequest *self, visitproc visit, void *arg) {
    Py_VISIT(self->cb_exc); /* its traceback's frames may hold this Request */
    Py_VISIT(self->sched);
    return 0;
}

static int Request_clear(CxRequest *self) {
    Py_CLEAR(self->cb_exc);
    return 0;
}

static void Request_dealloc(CxRequest *self) {
    PyObject_GC_UnTrack(self);
    if (self->weakrefs) PyObject_ClearWeakRefs((PyObject *)self);
    rq_rec *r = self->rec;
    if (r) {
        assert(!r->req && "a record holding its Request keeps it alive until the end");
        pthread_mutex_lock(&r->mu);
        int ended = r->ended;
        r->n_wakers = 0;
        pthread_mutex_unlock(&r->mu);
        Py_CLEAR(r->wakers);
        CxScheduler *S = self->sched;
        /* nobody can read it any more: stop spending the scheduler's time on it */
        if (!ended && self->submitted && S && S->s) {
            cx_sched *s = S->s;
            int64_t id = self->id;
            SCHED_CALL(S, cx_sched_cancel(s, id));
        }
        self->rec = NULL;
        rec_unref(r);
    }
    Py_CLEAR(self->cb_exc);
    Py_CLEAR(self->sched);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define KW (PyCFunction)(void (*)(void))
static PyMethodDef REQUEST_METHODS[] = {
    {"result", KW Request_result, METH_VARARGS | METH_KEYWORDS,
     "result($self, /, timeout=None)\n--\n\n"
     "Wait for the request to end (the GIL released) and return a dict:\n"
     "  id, text (the generated text, a stop string excluded), tokens (generated ids, an end-of-generation\n"
     "  token included), state ('finished', 'cancelled', 'timeout' or 'failed'), finish_reason ('length',\n"
     "  'stop' or None), stop_reason (exactly why: 'length', 'eos', 'token', 'string', or None when it did\n"
     "  not finish), n_prompt, n_gen, n_cached (prompt tokens from the prefix cache), n_preempted,\n"
     "  priority, ttft_ms (submission to first token, None if none), latency_ms (submission to the end),\n"
     "  itl_ms (the gaps between consecutive tokens), error (why it failed, else None), speculation (with\n"
     "  Scheduler(drafter=...): its steps, verified, drafted, accepted, tokens, draft_ms, verify_ms; else None).\n"
     "A request that failed (state 'failed') is returned, not raised: error says why. A cancelled or\n"
     "timed-out request returns what it generated before it ended.\n"
     "Raises TimeoutError when `timeout` seconds pass first (the request goes on), and RuntimeError,\n"
     "with the callback's exception as __cause__, when on_token or on_done raised. Any thread may wait;\n"
     "inside a callback of its own scheduler only a request that has ended can be read (its own on_done)."},
    {"done", (PyCFunction)Request_done, METH_NOARGS,
     "done($self, /)\n--\n\nTrue once the request has ended and result() returns at once."},
    {"cancel", (PyCFunction)Request_cancel, METH_NOARGS,
     "cancel($self, /)\n--\n\n"
     "Ask the scheduler to end the request as 'cancelled' at its next step (it keeps what it generated).\n"
     "Returns at once; a request that has already ended is left as it is. Works while close(drain=True)\n"
     "waits for it."},
    {"_poll", (PyCFunction)Request_poll, METH_NOARGS,
     "_poll($self, /)\n--\n\n"
     "For cortex.aio: the next piece of text without waiting; None when nothing new has arrived; raises\n"
     "StopIteration at the end (or the callback error, as iteration does). Shares iteration's position."},
    {"_add_waker", (PyCFunction)Request_add_waker, METH_O,
     "_add_waker($self, fn, /)\n--\n\n"
     "For cortex.aio: call fn() on the scheduler's thread (holding the GIL) after each token and once the\n"
     "request is done. Returns False, registering nothing, when it is done already. fn must not block."},
    {"_remove_waker", (PyCFunction)Request_remove_waker, METH_O,
     "_remove_waker($self, fn, /)\n--\n\nFor cortex.aio: stop calling fn; True if it was registered."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef REQUEST_MEMBERS[] = {
    {"id", T_LONGLONG, offsetof(CxRequest, id), READONLY, "The scheduler's id of the request (1, 2, ...)."},
    {NULL, 0, 0, 0, NULL},
};

static PyAsyncMethods REQUEST_ASYNC = {
    .am_await = (unaryfunc)Request_await,
    .am_aiter = (unaryfunc)Request_aiter,
};

PyTypeObject CxRequest_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cortex._cortex.Request",
    .tp_basicsize = sizeof(CxRequest),
    .tp_dealloc = (destructor)Request_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc =
        "A request submitted to a Scheduler (made by Scheduler.submit, not directly).\n\n"
        "Ways to read it, in any mix:\n"
        "  for piece in req: ...      str pieces as tokens arrive (blocks with the GIL released); an\n"
        "                             incomplete UTF-8 character is held back until a later token completes it,\n"
        "                             and ''.join(pieces) == req.result()['text']\n"
        "  req.result(timeout=None)   waits for the end and returns a dict (see result)\n"
        "  async for piece in req / await req   the same for asyncio (cortex.aio)\n"
        "  on_token / on_done callbacks given to submit()\n\n"
        "States: live (queued or running) until it ends as 'finished', 'cancelled', 'timeout' or 'failed'.\n"
        "Lifetime: a request with on_token or on_done keeps itself alive until it ends (fire and forget\n"
        "works); one without callbacks that Python drops before it ends is cancelled, since nobody can read\n"
        "it any more. It holds its Scheduler; the result stays readable after the scheduler is closed.\n"
        "One thread at a time iterates a request (another gets RuntimeError); result(), done() and cancel()\n"
        "are safe from any thread.",
    .tp_traverse = (traverseproc)Request_traverse,
    .tp_clear = (inquiry)Request_clear,
    .tp_weaklistoffset = offsetof(CxRequest, weakrefs),
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)Request_iternext,
    .tp_methods = REQUEST_METHODS,
    .tp_members = REQUEST_MEMBERS,
    .tp_as_async = &REQUEST_ASYNC,
    .tp_repr = (reprfunc)Request_repr,
};

/* ---- Scheduler --------------------------------------------------------------- */

/* An int argument in [lo, hi] (None: dflt); ValueError "NAME must be >= LO" when hi is the type's limit. */
static int int_arg(PyObject *obj, const char *arg, long long lo, long long hi, long long dflt, long long *out) {
    long long v;
    if (pycx_int_arg(obj, arg, LLONG_MIN, LLONG_MAX, dflt, &v)) return -1;
    if (v >= lo && v <= hi) {
        *out = v;
        return 0;
    }
    if ((hi == INT_MAX || hi == LLONG_MAX) && lo != INT_MIN) PyErr_Format(PyExc_ValueError, "%s must be >= %lld, not %lld", arg, lo, v);
    else PyErr_Format(PyExc_ValueError, "%s must be in [%lld, %lld], not %lld", arg, lo, hi, v);
    return -1;
}

static void open_link(CxScheduler *self) {
    self->open_prev = NULL;
    self->open_next = open_list;
    if (open_list) open_list->open_prev = self;
    open_list = self;
}

static void open_unlink(CxScheduler *self) {
    if (self->open_prev) self->open_prev->open_next = self->open_next;
    else if (open_list == self) open_list = self->open_next;
    if (self->open_next) self->open_next->open_prev = self->open_prev;
    self->open_prev = self->open_next = NULL;
}

/* Wait (GIL released between looks) until no call into the C scheduler is in progress. */
static void wait_calls(CxScheduler *self) {
    while (self->calls > 0) {
        Py_BEGIN_ALLOW_THREADS
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
        Py_END_ALLOW_THREADS
    }
}

/* Stop and free the C scheduler, then release the model (GIL held; not on the scheduler's own
 * stepping thread). Every live request ends (cancelled, or run to its end when draining) and
 * reports before this returns. */
static void sched_shutdown(CxScheduler *self, int drain) {
    cx_sched *s = self->s;
    assert(s && !self->closing && "one shutdown at a time");
    assert(tls_sched != s && "the stepping thread cannot join itself");
    self->closing = 1;
    open_unlink(self);
    wait_calls(self); /* calls that started before close(): a submission lands before the stop */
    Py_BEGIN_ALLOW_THREADS
    cx_sched_stop(s, drain);
    Py_END_ALLOW_THREADS
    wait_calls(self); /* cancel() calls made during the stop */
    self->s = NULL;
    Py_BEGIN_ALLOW_THREADS
    cx_sched_free(s);
    Py_END_ALLOW_THREADS
    if (self->drafter) { /* after the C scheduler, whose slots' speculation used it */
        pycx_drafter_release(self->drafter);
        self->drafter = NULL;
    }
    if (self->acquired) {
        self->acquired = 0;
        pycx_model_release(self->model);
    }
    self->closing = 0;
}

/* The reaper of a scheduler dropped on its own stepping thread: stop, free, release the model. */
typedef struct reap_job {
    cx_sched *s;
    CxModel *model;     /* a user of the model and a reference, or NULL */
    CxDrafter *drafter; /* a user of the drafter and a reference, or NULL */
} reap_job;

static int py_finalizing(void) {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

static void *reap_main(void *arg) {
    reap_job *j = arg;
    cx_sched_stop(j->s, 0); /* joins the stepping thread once its callback has returned */
    cx_sched_free(j->s);
    if ((j->model || j->drafter) && !py_finalizing()) {
        PyGILState_STATE g = PyGILState_Ensure();
        if (j->drafter) pycx_drafter_release(j->drafter);
        if (j->model) pycx_model_release(j->model);
        PyGILState_Release(g);
    }
    free(j);
    return NULL;
}

/* The dealloc's shutdown on the stepping thread itself (GIL held): the C scheduler and the
 * model's user (with its reference) go to a detached thread. If no thread can be made, they
 * are leaked rather than freed under the running step. */
static void sched_reap(CxScheduler *self) {
    reap_job *j = malloc(sizeof *j);
    pthread_attr_t a;
    pthread_t t;
    int ok = j && !pthread_attr_init(&a);
    if (ok) {
        j->s = self->s;
        j->model = self->acquired ? self->model : NULL;
        j->drafter = self->drafter;
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        ok = !pthread_create(&t, &a, reap_main, j);
        pthread_attr_destroy(&a);
    }
    if (!ok) free(j);
    open_unlink(self);
    self->s = NULL;
    self->acquired = 0; /* the reaper releases them (or, leaked, nobody) */
    self->drafter = NULL;
}

static int Scheduler_init(CxScheduler *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"model", "max_seqs", "max_batch_tokens", "max_queue", "n_ctx", "threads", "aging_ms",
                             "chunk", "prefix_cache", "kv_type", "lora_budget", "drafter", "spec_max_batch", NULL};
    PyObject *model_o, *seqs_o = NULL, *batch_o = NULL, *queue_o = NULL, *ctx_o = NULL, *threads_o = Py_None,
                       *aging_o = NULL, *chunk_o = NULL, *budget_o = NULL, *drafter_o = Py_None, *smb_o = NULL;
    int prefix_cache = 1;
    const char *kv_type = "f32";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|$OOOOOOOpsOOO:Scheduler", kwlist, &CxModel_Type, &model_o, &seqs_o,
                                     &batch_o, &queue_o, &ctx_o, &threads_o, &aging_o, &chunk_o, &prefix_cache,
                                     &kv_type, &budget_o, &drafter_o, &smb_o))
        return -1;
    CxModel *M = (CxModel *)model_o;
    if (self->model) {
        PyErr_SetString(PyExc_RuntimeError, "Scheduler.__init__ called twice");
        return -1;
    }
    long long seqs, batch, queue, ctx, threads, aging, chunk, budget, smb;
    if (int_arg(seqs_o, "max_seqs", 1, 256, 8, &seqs) || int_arg(batch_o, "max_batch_tokens", 1, 256, 256, &batch) ||
        int_arg(queue_o, "max_queue", 1, INT_MAX, 256, &queue) || int_arg(ctx_o, "n_ctx", 0, INT_MAX, 0, &ctx) ||
        int_arg(threads_o, "threads", 1, 1024, M->threads > 0 ? M->threads : 1, &threads) ||
        int_arg(aging_o, "aging_ms", 0, INT_MAX, 1000, &aging) || int_arg(chunk_o, "chunk", 0, INT_MAX, 0, &chunk) ||
        int_arg(budget_o, "lora_budget", 0, LLONG_MAX, 0, &budget) ||
        int_arg(smb_o, "spec_max_batch", 1, 256, CX_SCHED_SPEC_MAX_BATCH, &smb))
        return -1;
    int no_drafter = 0;
    cx_drafter *drafter = pycx_drafter_arg(drafter_o, M, "drafter", &no_drafter);
    if (!drafter && !no_drafter) return -1;
    int kv = cx_kv_type_from_name(kv_type);
    if (kv != CX_KV_F32 && kv != CX_KV_F16 && kv != CX_KV_Q8) {
        PyErr_Format(PyExc_ValueError, "kv_type must be 'f32', 'f16' or 'q8', not '%s'", kv_type);
        return -1;
    }
    if (batch < seqs) {
        PyErr_Format(PyExc_ValueError,
                     "max_batch_tokens (%lld) must be >= max_seqs (%lld): every running sequence decodes one token "
                     "per step",
                     batch, seqs);
        return -1;
    }
    const cx_model *m = pycx_model_get(M);
    if (!m) return -1;
    const cx_model_info *mi = cx_model_get_info(m);
    if (mi->vocab_only) {
        pycx_raise_code(CX_EINVAL, "%s: a vocabulary-only model cannot generate", mi->name);
        return -1;
    }
    cx_sched_params p = cx_sched_defaults();
    p.max_seqs = (int)seqs;
    p.max_batch_tokens = (int)batch;
    p.max_queue = (int)queue;
    p.n_ctx = (int)ctx;
    p.n_threads = (int)threads;
    p.aging_ms = (int)aging;
    p.chunk = (int)chunk;
    p.kv.prefix_cache = prefix_cache;
    p.kv.type = kv;
    p.lora_budget = budget;
    p.drafter = drafter;
    p.spec_max_batch = (int)smb;
    if (pycx_model_acquire(M)) return -1;
    if (drafter) pycx_drafter_acquire((CxDrafter *)drafter_o); /* before the GIL goes: close() cannot free it */
    cx_err err = {0};
    cx_sched *s = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cx_sched_new(m, &p, &s, &err);
    if (!rc) rc = cx_sched_start(s, &err);
    if (rc) cx_sched_free(s);
    Py_END_ALLOW_THREADS
    if (rc) {
        if (drafter) pycx_drafter_release((CxDrafter *)drafter_o);
        pycx_model_release(M);
        pycx_raise(&err);
        return -1;
    }
    self->model = (CxModel *)Py_NewRef(model_o);
    self->acquired = 1;
    self->m = m;
    self->n_vocab = mi->n_vocab;
    self->s = s;
    self->next_adapter = 1;
    self->drafter = drafter ? (CxDrafter *)drafter_o : NULL; /* its user (acquired above) until the C scheduler goes */
    open_link(self);
    return 0;
}

static PyObject *Scheduler_submit(CxScheduler *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"prompt", "max_tokens", "temperature", "top_k", "top_p", "min_p", "repeat_penalty",
                             "repeat_last_n", "presence_penalty", "frequency_penalty", "seed", "stop", "stop_ids",
                             "ignore_eos", "priority", "deadline_ms", "adapter", "adapter_scale", "cache_prompt",
                             "on_token", "on_done", "speculate", NULL};
    PyObject *prompt, *max_o = NULL, *stop_o = Py_None, *stop_ids_o = Py_None, *prio_o = NULL, *deadline_o = NULL,
                      *adapter_o = Py_None, *scale_o = NULL, *on_token = Py_None, *on_done = Py_None,
                      *spec_o = Py_None;
    int ignore_eos = 0, cache_prompt = 1;
    pycx_sampling sp = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$OOOOOOOOOOOpOOOOpOOO:submit", kwlist, &prompt, &max_o,
                                     &sp.temperature, &sp.top_k, &sp.top_p, &sp.min_p, &sp.repeat_penalty,
                                     &sp.repeat_last_n, &sp.presence_penalty, &sp.frequency_penalty, &sp.seed, &stop_o,
                                     &stop_ids_o, &ignore_eos, &prio_o, &deadline_o, &adapter_o, &scale_o,
                                     &cache_prompt, &on_token, &on_done, &spec_o))
        return NULL;
    PyObject *ret = NULL;
    int32_t *ids = NULL, *stop_ids = NULL;
    int n_ids = 0, n_stop_ids = 0, n_stops = 0, adapter = 0;
    char **stops = NULL;
    CxRequest *req = NULL;
    long long max_tokens, priority, deadline, speculate = -1;
    double scale;
    cx_request q = cx_request_defaults();
    if (sched_check_open(self)) goto out;
    /* speculate: None or True, drafts of up to the drafter's draft_max; False or 0, none; N, at most N */
    if (PyBool_Check(spec_o)) speculate = spec_o == Py_True ? -1 : 0;
    else if (spec_o != Py_None && int_arg(spec_o, "speculate", 0, CX_SPEC_MAX_DRAFT, 0, &speculate)) goto out;
    /* every conversion that may run Python code first (the scheduler is checked again after) */
    if (int_arg(max_o, "max_tokens", 1, INT_MAX, 16, &max_tokens) ||
        int_arg(prio_o, "priority", INT_MIN, INT_MAX, 0, &priority) ||
        int_arg(deadline_o, "deadline_ms", 0, LLONG_MAX, 0, &deadline) ||
        pycx_float_arg(scale_o, "adapter_scale", -1e3, 1e3, 1.0, &scale) || pycx_sampling_params(&sp, &q.sampling) ||
        pycx_stops(stop_o, "stop", &stops, &n_stops))
        goto out;
    if (stop_ids_o != Py_None && pycx_ids(stop_ids_o, self->n_vocab, "stop_ids", &stop_ids, &n_stop_ids)) goto out;
    if (on_token != Py_None && !PyCallable_Check(on_token)) {
        PyErr_Format(PyExc_TypeError, "on_token must be callable or None, not %.100s", Py_TYPE(on_token)->tp_name);
        goto out;
    }
    if (on_done != Py_None && !PyCallable_Check(on_done)) {
        PyErr_Format(PyExc_TypeError, "on_done must be callable or None, not %.100s", Py_TYPE(on_done)->tp_name);
        goto out;
    }
    if (adapter_o != Py_None && !PyUnicode_Check(adapter_o)) {
        PyErr_Format(PyExc_TypeError, "adapter must be a str (a name given to add_adapter) or None, not %.100s",
                     Py_TYPE(adapter_o)->tp_name);
        goto out;
    }
    if (!PyUnicode_Check(prompt) && !PyBytes_Check(prompt)) { /* ids: may run Python code (__index__, __iter__) */
        if (pycx_ids(prompt, self->n_vocab, "prompt", &ids, &n_ids)) goto out;
        if (n_ids == 0) {
            PyErr_SetString(PyExc_ValueError, "prompt is empty");
            goto out;
        }
    }
    if (sched_check_open(self)) goto out;
    if (PyUnicode_Check(prompt) || PyBytes_Check(prompt)) { /* tokenized with the GIL released: counted */
        self->calls++;
        int prc = pycx_prompt(self->m, prompt, 1, "prompt", &ids, &n_ids);
        self->calls--;
        if (prc) goto out;
    }
    if (adapter_o != Py_None) {
        const char *name = PyUnicode_AsUTF8(adapter_o);
        if (!name) goto out;
        cx_sched *s = self->s;
        SCHED_CALL(self, adapter = cx_sched_adapter_find(s, name));
        if (!adapter) {
            PyErr_Format(PyExc_ValueError, "adapter '%s' is not registered with this scheduler (add_adapter first)",
                         name);
            goto out;
        }
    }
    req = PyObject_GC_New(CxRequest, &CxRequest_Type);
    if (!req) goto out;
    req->sched = (CxScheduler *)Py_NewRef(self);
    req->rec = NULL;
    req->id = 0;
    req->submitted = req->busy = req->it_done = 0;
    req->it_off = 0;
    req->cb_exc = NULL;
    req->cb_which = NULL;
    req->weakrefs = NULL;
    PyObject_GC_Track(req);
    rq_rec *r = req->rec = rec_new();
    if (!r) {
        PyErr_NoMemory();
        goto out;
    }
    q.prompt = ids;
    q.n_prompt = n_ids;
    q.max_tokens = (int)max_tokens;
    q.stop_ids = stop_ids;
    q.n_stop_ids = n_stop_ids;
    q.stop = (const char *const *)stops;
    q.n_stop = n_stops;
    q.ignore_eos = ignore_eos;
    q.no_prefix_cache = !cache_prompt;
    q.priority = (int)priority;
    q.deadline_ms = deadline;
    q.adapter = adapter;
    q.adapter_scale = (float)scale;
    q.speculate = (int)speculate;
    r->spec = self->drafter != NULL;
    q.user = r;
    q.on_token = rec_on_token;
    q.on_done = rec_on_done;
    if (sched_check_open(self)) goto out;
    if (on_token != Py_None || on_done != Py_None) { /* the record keeps the Request and its callbacks until the end */
        r->has_cb = 1;
        r->req = Py_NewRef(req);
        r->on_token = on_token != Py_None ? Py_NewRef(on_token) : NULL;
        r->on_done = on_done != Py_None ? Py_NewRef(on_done) : NULL;
    }
    r->refs = 2; /* the scheduler's, given back by on_done, or below if the submission fails */
    cx_err err = {0};
    /* With the GIL held (serialized with close()) and the record's mutex held, so the callbacks,
     * which may start before cx_sched_submit returns, see the id. It only takes the scheduler's
     * mutex, whose holders never wait for the GIL or a record. */
    pthread_mutex_lock(&r->mu);
    int64_t id = cx_sched_submit(self->s, &q, &err);
    r->id = id;
    r->sched = self->s;
    pthread_mutex_unlock(&r->mu);
    if (id < 0) {
        r->refs = 1;
        r->has_cb = 0;
        Py_CLEAR(r->on_token);
        Py_CLEAR(r->on_done);
        PyObject *self_ref = r->req;
        r->req = NULL;
        pycx_raise(&err);
        Py_XDECREF(self_ref); /* not the last: `req` is still ours */
        goto out;
    }
    req->id = id;
    req->submitted = 1;
    ret = (PyObject *)req;
    req = NULL;
out:
    Py_XDECREF(req);
    PyMem_Free(ids);
    PyMem_Free(stop_ids);
    pycx_stops_free(stops, n_stops);
    return ret;
}

static PyObject *Scheduler_add_adapter(CxScheduler *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"name", "path", "preload", NULL};
    const char *name;
    PyObject *path_b = NULL, *ret = NULL;
    int preload = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO&|$p:add_adapter", kwlist, &name, PyUnicode_FSConverter, &path_b,
                                     &preload))
        return NULL;
    if (sched_check_open(self)) goto out;
    if (!name[0] || strlen(name) >= sizeof(((cx_adapter_info *)0)->name)) {
        PyErr_Format(PyExc_ValueError, "name must be 1 to %zu bytes long", sizeof(((cx_adapter_info *)0)->name) - 1);
        goto out;
    }
    int id = self->next_adapter++, rc;
    cx_sched *s = self->s;
    const char *path = PyBytes_AS_STRING(path_b);
    cx_err err = {0};
    SCHED_CALL(self, rc = cx_sched_adapter_add(s, id, name, path, preload, &err));
    if (rc && self->next_adapter == id + 1) self->next_adapter = id; /* unused: the next add takes it */
    ret = rc ? pycx_raise(&err) : PyLong_FromLong(id);
out:
    Py_XDECREF(path_b);
    return ret;
}

static PyObject *Scheduler_remove_adapter(CxScheduler *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"name", NULL};
    const char *name;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s:remove_adapter", kwlist, &name)) return NULL;
    if (sched_check_open(self)) return NULL;
    cx_sched *s = self->s;
    cx_err err = {0};
    int id, rc = CX_EINVAL;
    SCHED_CALL(self, id = cx_sched_adapter_find(s, name); if (id) rc = cx_sched_adapter_remove(s, id, &err));
    if (!id) return PyErr_Format(PyExc_ValueError, "adapter '%s' is not registered with this scheduler", name);
    if (rc < 0) return pycx_raise(&err);
    return PyBool_FromLong(rc == 0);
}

static PyObject *Scheduler_stats(CxScheduler *self, PyObject *unused) {
    (void)unused;
    if (sched_check_open(self)) return NULL;
    cx_sched *s = self->s;
    cx_sched_stats st;
    SCHED_CALL(self, cx_sched_get_stats(s, &st));
    PyObject *d = PyDict_New();
    if (!d) return NULL;
#define I(f) dict_steal(d, #f, PyLong_FromLongLong((long long)st.f))
    int rc = I(running) || I(waiting) || I(submitted) || I(rejected) || I(finished) || I(cancelled) || I(timed_out) ||
             I(failed) || I(preemptions) || I(steps) || I(prefill_tokens) || I(decode_tokens) || I(step_ns) ||
             I(eval_ns) || I(kv_blocks_used) || I(kv_blocks_max) || I(kv_blocks_capacity) || I(lora_registered) ||
             I(lora_resident) || I(lora_bytes) || I(lora_loads) || I(lora_evictions) || I(lora_load_ns) ||
             I(lora_load_ns_max) || I(spec_steps) || I(spec_verified) || I(spec_passes) || I(spec_drafted) ||
             I(spec_accepted) || I(spec_draft_passes) || I(spec_tokens) || I(spec_draft_ns) || I(spec_verify_ns);
#undef I
    if (rc) Py_CLEAR(d);
    return d;
}

/* close(drain): see its doc. */
static PyObject *sched_close(CxScheduler *self, int drain) {
    if (self->s && tls_sched == self->s) {
        PyErr_SetString(PyExc_RuntimeError,
                        "a scheduler cannot be closed from its own callbacks (its thread would wait for itself)");
        return NULL;
    }
    while (self->closing) { /* another thread is closing it: return once it is closed */
        Py_BEGIN_ALLOW_THREADS
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
        Py_END_ALLOW_THREADS
    }
    if (self->s) sched_shutdown(self, drain);
    Py_RETURN_NONE;
}

static PyObject *Scheduler_close(CxScheduler *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"drain", NULL};
    int drain = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p:close", kwlist, &drain)) return NULL;
    return sched_close(self, drain);
}

static PyObject *Scheduler_enter(CxScheduler *self, PyObject *unused) {
    (void)unused;
    if (sched_check_open(self)) return NULL;
    return Py_NewRef(self);
}

static PyObject *Scheduler_exit(CxScheduler *self, PyObject *args) {
    (void)args;
    return sched_close(self, 0);
}

static PyObject *Scheduler_closed(CxScheduler *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(!self->s || self->closing);
}

static void Scheduler_dealloc(CxScheduler *self) {
    if (self->weakrefs) PyObject_ClearWeakRefs((PyObject *)self);
    if (self->s && !self->closing) {
        /* Requests hold their scheduler: none is left, so no record holds Python callbacks */
        if (tls_sched == self->s) sched_reap(self);
        else sched_shutdown(self, 0);
    }
    assert(!self->s && !self->acquired && !self->drafter && "closed (or handed to the reaper)");
    Py_CLEAR(self->model);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef SCHEDULER_METHODS[] = {
    {"submit", KW Scheduler_submit, METH_VARARGS | METH_KEYWORDS,
     "submit($self, prompt, max_tokens=16, *, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, "
     "repeat_penalty=1.0, repeat_last_n=64, presence_penalty=0.0, frequency_penalty=0.0, seed=42, stop=None, "
     "stop_ids=None, ignore_eos=False, priority=0, deadline_ms=0, adapter=None, adapter_scale=1.0, "
     "cache_prompt=True, on_token=None, on_done=None, speculate=None)\n--\n\n"
     "Queue a request and return its Request at once (generation runs on the scheduler's thread).\n\n"
     "prompt: str or bytes (tokenized with BOS, control tokens matched from their text, as generate()\n"
     "does), or token ids. max_tokens >= 1 (capped at what the context leaves). Sampling as\n"
     "Model.generate (temperature 0: greedy; with a seed the same tokens as generate()). stop: a str or\n"
     "strings that end the text (not part of it); stop_ids: token ids that end it (listed in tokens).\n"
     "ignore_eos: the end-of-generation token does not end it. priority: higher classes are admitted first (FIFO within a class; a waiting request climbs a class\n"
     "per aging_ms). deadline_ms > 0: end as 'timeout' that long after submission. adapter: the name of an\n"
     "adapter given to add_adapter, applied with adapter_scale. cache_prompt=False: take no cached prefix.\n"
     "speculate (with Scheduler(drafter=...)): None or True, drafts of up to the drafter's draft_max; False or\n"
     "0, none for this request; N, drafts of at most N tokens. The output is the same either way.\n\n"
     "on_token(request, token_id, piece) is called for every generated token, piece being the text it made\n"
     "final (may be '': text held back while it could begin a stop string, or an incomplete UTF-8\n"
     "character). Joined, the pieces are the text up to what no later token completed: an incomplete\n"
     "character the request ends with, or text held back for a stop string when it was cancelled or timed\n"
     "out, is only in result()['text'] (iteration does yield it). on_done(request) is called once when it\n"
     "ends, whatever the end (request.result() works inside it).\n"
     "Both run on the scheduler's thread holding the GIL, so keep them short: the next step waits. They\n"
     "may submit and cancel, not close the scheduler or wait for a live request of it. An exception in a\n"
     "callback cancels the request and is raised (as the __cause__ of a RuntimeError) by result() and at\n"
     "the end of iteration.\n\n"
     "Raises BusyError when the waiting queue is full (max_queue), ContextFullError when the prompt leaves\n"
     "no room to generate in n_ctx, ValueError/TypeError naming a bad argument (an unknown adapter too),\n"
     "ValueError('scheduler is closed') after close()."},
    {"add_adapter", KW Scheduler_add_adapter, METH_VARARGS | METH_KEYWORDS,
     "add_adapter($self, name, path, *, preload=True)\n--\n\n"
     "Register the LoRA adapter at `path` (GGUF or PEFT) under `name` for submit(adapter=name); returns its\n"
     "id (1, 2, ... in the order added). preload=True loads it now, so a bad file raises here; else it\n"
     "loads on first use. Adapters are unloaded when idle to stay within lora_budget and reloaded when\n"
     "needed. Raises InvalidArgumentError for a name already taken, the loader's error otherwise."},
    {"remove_adapter", KW Scheduler_remove_adapter, METH_VARARGS | METH_KEYWORDS,
     "remove_adapter($self, name)\n--\n\n"
     "Unregister adapter `name`: True when it is gone now; False when live requests still use it (it goes\n"
     "when the last of them ends; new requests naming it are refused meanwhile). ValueError if unknown."},
    {"stats", (PyCFunction)Scheduler_stats, METH_NOARGS,
     "stats($self, /)\n--\n\n"
     "The scheduler's counters as a dict, named as cx_sched_stats: running, waiting (now); submitted,\n"
     "rejected, finished, cancelled, timed_out, failed, preemptions; steps, prefill_tokens, decode_tokens;\n"
     "step_ns, eval_ns (time in steps, and in their forward passes); kv_blocks_used, kv_blocks_max,\n"
     "kv_blocks_capacity; lora_registered, lora_resident, lora_bytes, lora_loads, lora_evictions,\n"
     "lora_load_ns, lora_load_ns_max."},
    {"close", KW Scheduler_close, METH_VARARGS | METH_KEYWORDS,
     "close($self, /, drain=False)\n--\n\n"
     "Stop the scheduler's thread and free it. drain=False cancels every live request; drain=True refuses\n"
     "new ones and waits until every admitted one has ended. Either way each Request ends (its on_done\n"
     "runs) before close() returns and stays readable. Then the model is released. Calling it again does\n"
     "nothing; `with Scheduler(...) as s:` closes on leaving; an open scheduler is closed when it is freed and\n"
     "at interpreter exit. Not from the scheduler's own callbacks (RuntimeError)."},
    {"__enter__", (PyCFunction)Scheduler_enter, METH_NOARGS, "__enter__($self, /)\n--\n\nThe scheduler itself."},
    {"__exit__", (PyCFunction)Scheduler_exit, METH_VARARGS,
     "__exit__($self, *exc)\n--\n\nclose() (without draining)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef SCHEDULER_MEMBERS[] = {
    {"model", T_OBJECT, offsetof(CxScheduler, model), READONLY, "The Model it serves."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef SCHEDULER_GETSET[] = {
    {"closed", (getter)Scheduler_closed, NULL, "Whether close() was called.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject CxScheduler_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cortex._cortex.Scheduler",
    .tp_basicsize = sizeof(CxScheduler),
    .tp_dealloc = (destructor)Scheduler_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc =
        "Scheduler(model, *, max_seqs=8, max_batch_tokens=256, max_queue=256, n_ctx=0, threads=None, "
        "aging_ms=1000, chunk=0, prefix_cache=True, kv_type='f32', lora_budget=0, drafter=None, spec_max_batch=4)\n"
        "--\n\n"
        "Many requests on one model at once: the C scheduler (docs/serving.md) on a thread of its own runs\n"
        "continuous batching with chunked prefill over a shared, prefix-caching KV cache.\n\n"
        "max_seqs: sequences running at once (1..256); max_batch_tokens: tokens per step (max_seqs..256);\n"
        "max_queue: waiting requests before submit raises BusyError; n_ctx: each sequence's context (0: the\n"
        "model's, at most 4096); threads: of the forward pass (None: the model's); aging_ms: a waiting request\n"
        "climbs one priority class per aging_ms (0: never); chunk: most prompt tokens a sequence gets per\n"
        "step (0: what the budget leaves); prefix_cache: reuse identical prompt prefixes; kv_type: 'f32',\n"
        "'f16' or 'q8' cache blocks; lora_budget: bytes of resident adapters (0: unlimited); drafter: a\n"
        "Drafter of this model: decoding sequences speculate inside continuous batching (each step's drafts\n"
        "checked in its one pass, a draft model's drafts made together) while at most spec_max_batch of them\n"
        "decode; result()['speculation'] and stats()['spec_*'] have the counters.\n\n"
        "submit() returns a Request: iterate it, await it, or call result(). Safe from any thread. The\n"
        "scheduler holds its model until closed (close(), `with`, when freed, or at interpreter exit).",
    .tp_weaklistoffset = offsetof(CxScheduler, weakrefs),
    .tp_methods = SCHEDULER_METHODS,
    .tp_members = SCHEDULER_MEMBERS,
    .tp_getset = SCHEDULER_GETSET,
    .tp_init = (initproc)Scheduler_init,
    .tp_new = PyType_GenericNew,
};

/* The exit hook (atexit, while threads may still take the GIL): close every open scheduler,
 * cancelling what is live, so no scheduler thread calls into Python during finalization. */
static PyObject *close_all(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    while (open_list) {
        CxScheduler *S = (CxScheduler *)Py_NewRef(open_list);
        if (S->s && !S->closing && tls_sched != S->s) sched_shutdown(S, 0);
        else open_unlink(S);
        Py_DECREF(S);
    }
    Py_RETURN_NONE;
}

static PyMethodDef CLOSE_ALL = {"_close_schedulers", close_all, METH_NOARGS,
                                "Close every open cortex.Scheduler (registered with atexit)."};

/* See pycx.h. */
int pycx_sched_init(PyObject *mod) {
    if (PyType_Ready(&CxScheduler_Type) || PyType_Ready(&CxRequest_Type)) return -1;
    if (PyModule_AddObjectRef(mod, "Scheduler", (PyObject *)&CxScheduler_Type) ||
        PyModule_AddObjectRef(mod, "Request", (PyObject *)&CxRequest_Type))
        return -1;
    PyObject *atexit = PyImport_ImportModule("atexit");
    PyObject *fn = atexit ? PyCFunction_New(&CLOSE_ALL, NULL) : NULL;
    PyObject *r = fn ? PyObject_CallMethod(atexit, "register", "O", fn) : NULL;
    Py_XDECREF(atexit);
    Py_XDECREF(fn);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}
