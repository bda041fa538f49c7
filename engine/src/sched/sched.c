/*
 * sched.c - the request scheduler (cortex.h, docs/serving.md): creation,
 * submission, cancellation, request records and the run thread. One step
 * is in sched_step.c.
 *
 * Everything a request needs while it runs (its token array, sampler, text
 * buffer, gaps) is allocated when it is submitted, and every array a step
 * needs when the scheduler is made, so a step in steady state calls no
 * allocator (tests/unit/engine/test_nomalloc.c).
 */
#include <assert.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched.h"
#include "../placement.h"
#include "../spec/spec.h"
#include "../util.h"

/* See cortex.h. */
cx_sched_params cx_sched_defaults(void) {
    cx_sched_params p;
    memset(&p, 0, sizeof p);
    p.max_seqs = 8;
    p.max_batch_tokens = 256;
    p.max_queue = 256;
    p.n_threads = 1;
    p.aging_ms = 1000;
    p.lora_type = -1;
    p.kv = cx_kv_defaults();
    p.kv.prefix_cache = 1;
    return p;
}

/* See cortex.h. */
cx_request cx_request_defaults(void) {
    cx_request r;
    memset(&r, 0, sizeof r);
    r.sampling = cx_sampler_defaults();
    r.max_tokens = 16;
    r.adapter_scale = 1.0f;
    r.speculate = -1;
    return r;
}

/* Free one request record and everything it owns. */
static void req_free(sched_req *r) {
    if (!r) return;
    free(r->toks);
    free(r->stop_ids);
    sched_stops_free(&r->stops);
    cx_sampler_free(r->smp);
    free(r->itl);
    free(r->text);
    free(r);
}

/* The longest byte string any token decodes to (sizes each request's text buffer). */
static size_t longest_piece(const cx_model *m) {
    size_t most = 1;
    char tmp[2];
    const char *bytes;
    int n = cx_model_get_info(m)->n_vocab;
    for (int t = 0; t < n; t++) {
        size_t len = cx_token_piece(m, t, t, tmp, &bytes); /* prev = t: no BOS-space stripping */
        if (len + 1 > most) most = len + 1;            /* + a leading space SentencePiece may add */
    }
    return most;
}

/* See cortex.h. */
void cx_sched_free(cx_sched *s) {
    if (!s) return;
    if (s->threaded) cx_sched_stop(s, 0);
    for (sched_req *r = s->all, *next; r; r = next) {
        next = r->next;
        req_free(r);
    }
    for (int i = 0; s->sess && i < s->p.max_seqs; i++) cx_session_free(s->sess[i]);
    for (int i = 0; s->spec && i < s->p.max_seqs; i++) cx_spec_free(s->spec[i]);
    spec_batch_free(s->drafts);
    cx_batch_free(s->batch);
    cx_kv_cache_free(s->cache);
    sched_lora_free_all(s); /* after the sessions that applied them */
    free(s->sess);
    free(s->run);
    free(s->wait);
    free(s->b_sess);
    free((void *)s->b_tok);
    free(s->b_n);
    free(s->b_slot);
    free(s->b_nout);
    free(s->b_k);
    free(s->b_pos);
    free(s->b_dns);
    free((void *)s->b_rows);
    free(s->spec);
    free(s->spec_want);
    free(s->spec_out);
    free(s->b_dj);
    free(s->ended);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

/* Check the parameters before anything is made. */
static int check_params(const cx_sched_params *p, cx_err *err) {
    if (p->max_seqs < 1 || p->max_seqs > 256)
        return cx_fail(err, CX_EINVAL, "scheduler: max_seqs %d is out of range (1..256)", p->max_seqs);
    if (p->max_batch_tokens < 1 || p->max_batch_tokens > 256)
        return cx_fail(err, CX_EINVAL, "scheduler: max_batch_tokens %d is out of range (1..256)", p->max_batch_tokens);
    if (p->max_batch_tokens < p->max_seqs)
        return cx_fail(err, CX_EINVAL,
                       "scheduler: max_batch_tokens %d is below max_seqs %d (every running sequence decodes one "
                       "token per step)", p->max_batch_tokens, p->max_seqs);
    if (p->max_queue < 1) return cx_fail(err, CX_EINVAL, "scheduler: max_queue %d must be at least 1", p->max_queue);
    if (p->aging_ms < 0) return cx_fail(err, CX_EINVAL, "scheduler: aging_ms %d is negative", p->aging_ms);
    if (p->chunk < 0) return cx_fail(err, CX_EINVAL, "scheduler: chunk %d is negative", p->chunk);
    if (p->n_ctx < 0) return cx_fail(err, CX_EINVAL, "scheduler: n_ctx %d is negative", p->n_ctx);
    if (p->lora_budget < 0)
        return cx_fail(err, CX_EINVAL, "scheduler: adapter budget %lld is negative", (long long)p->lora_budget);
    if (p->lora_type != -1 && p->lora_type != CX_TYPE_F32 && p->lora_type != CX_TYPE_Q8_0 && p->lora_type != CX_TYPE_Q4_0)
        return cx_fail(err, CX_EINVAL, "scheduler: adapters are held as f32, q8_0 or q4_0 (type %d)", p->lora_type);
    if (p->spec_max_batch < 0)
        return cx_fail(err, CX_EINVAL, "scheduler: spec_max_batch %d is negative", p->spec_max_batch);
    return 0;
}

/* See cortex.h. */
int cx_sched_new(const cx_model *m, const cx_sched_params *pp, cx_sched **out, cx_err *err) {
    *out = NULL;
    int rc = check_params(pp, err);
    if (rc) return rc;
    if (pp->drafter && pp->drafter->target != m)
        return cx_fail(err, CX_EINVAL, "scheduler: the drafter was made for another model (cx_drafter_new's target)");
    cx_sched *s = calloc(1, sizeof *s);
    if (!s) return cx_fail(err, CX_ENOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->m = m;
    s->p = *pp;
    const cx_model_info *h = cx_model_get_info(m);
    if (s->p.n_ctx == 0) s->p.n_ctx = h->n_ctx < CX_DEFAULT_CTX ? h->n_ctx : CX_DEFAULT_CTX;
    if (s->p.n_ctx > h->n_ctx) s->p.n_ctx = h->n_ctx;
    if (s->p.n_threads < 1) s->p.n_threads = 1;
    if (s->p.kv.max_tokens == 0) s->p.kv.max_tokens = s->p.max_seqs * s->p.n_ctx;
    if (s->p.spec_max_batch == 0) s->p.spec_max_batch = CX_SCHED_SPEC_MAX_BATCH;
    int S = s->p.max_seqs, W = s->p.max_queue + S;
    s->sess = calloc((size_t)S, sizeof *s->sess);
    s->run = calloc((size_t)S, sizeof *s->run);
    s->wait = calloc((size_t)W, sizeof *s->wait);
    s->b_sess = calloc((size_t)S, sizeof *s->b_sess);
    s->b_tok = calloc((size_t)S, sizeof *s->b_tok);
    s->b_n = calloc((size_t)S, sizeof *s->b_n);
    s->b_slot = calloc((size_t)S, sizeof *s->b_slot);
    s->ended = calloc((size_t)(W + S), sizeof *s->ended);
    s->b_nout = calloc((size_t)S, sizeof *s->b_nout);
    s->b_k = calloc((size_t)S, sizeof *s->b_k);
    s->b_pos = calloc((size_t)S, sizeof *s->b_pos);
    s->b_dns = calloc((size_t)S, sizeof *s->b_dns);
    s->b_rows = calloc((size_t)S, sizeof *s->b_rows);
    int spec_ok = 1;
    if (s->p.drafter) {
        s->spec = calloc((size_t)S, sizeof *s->spec);
        s->spec_want = calloc((size_t)S, sizeof *s->spec_want);
        s->spec_out = calloc((size_t)S * (CX_SPEC_MAX_DRAFT + 1), sizeof *s->spec_out);
        s->b_dj = calloc((size_t)S, sizeof *s->b_dj);
        spec_ok = s->spec && s->spec_want && s->spec_out && s->b_dj;
    }
    if (!s->sess || !s->run || !s->wait || !s->b_sess || !s->b_tok || !s->b_n || !s->b_slot || !s->ended || !s->b_nout ||
        !s->b_k || !s->b_pos || !s->b_dns || !s->b_rows || !spec_ok) {
        cx_sched_free(s);
        return cx_fail(err, CX_ENOMEM, "out of memory for a scheduler of %d sequences", S);
    }
    rc = cx_kv_cache_new(m, &s->p.kv, &s->cache, err);
    if (!rc) rc = cx_batch_new(m, s->p.max_batch_tokens, s->p.n_threads, &s->batch, err);
    cx_session_params sp = cx_session_defaults();
    sp.n_ctx = s->p.n_ctx;
    sp.n_threads = s->p.n_threads; /* the batch's threads read each session's view */
    sp.cache = s->cache;
    sp.batch = 1;                  /* evaluated only through the batch: no pass buffers of its own */
    for (int i = 0; !rc && i < S; i++) rc = cx_session_new_ex(m, &sp, &s->sess[i], err);
    for (int i = 0; !rc && s->spec && i < S; i++) rc = spec_new(s->p.drafter, s->p.n_ctx, 0, &s->spec[i], err);
    /* a draft model's drafts: each round one pass over every drafting sequence (a token each, at most
     * CX_SPEC_MAX_DRAFT rounds), a prompt's catch-up in chunks of what is left */
    if (!rc && s->spec && s->p.drafter->draft)
        rc = spec_batch_new(s->p.drafter, S, S > s->p.max_batch_tokens ? S : s->p.max_batch_tokens, &s->drafts, err);
    if (rc) {
        cx_sched_free(s);
        return rc;
    }
    s->max_piece = longest_piece(m);
    s->next_id = 1;
    *out = s;
    return 0;
}

/* Build the record of request r (everything it will need allocated now). */
static int req_make(cx_sched *s, const cx_request *q, sched_req **out, cx_err *err) {
    const cx_model_info *h = cx_model_get_info(s->m);
    *out = NULL;
    if (q->max_tokens < 1) return cx_fail(err, CX_EINVAL, "request: max_tokens %d must be at least 1", q->max_tokens);
    if (q->adapter < 0) return cx_fail(err, CX_EINVAL, "request: adapter id %d is negative", q->adapter);
    if (!(q->adapter_scale > -1e6f && q->adapter_scale < 1e6f))
        return cx_fail(err, CX_EINVAL, "request: adapter scale %g is not a finite number", (double)q->adapter_scale);
    if (q->n_stop_ids < 0 || (q->n_stop_ids && !q->stop_ids))
        return cx_fail(err, CX_EINVAL, "request: %d stop token ids announced, none given", q->n_stop_ids);
    if (q->deadline_ms < 0) return cx_fail(err, CX_EINVAL, "request: deadline %lld ms is negative", (long long)q->deadline_ms);
    if (q->speculate < -1)
        return cx_fail(err, CX_EINVAL, "request: speculate %d is not -1 (on), 0 (off) or a draft length", q->speculate);
    for (int i = 0; i < q->n_stop_ids; i++)
        if (q->stop_ids[i] < 0 || q->stop_ids[i] >= h->n_vocab)
            return cx_fail(err, CX_EINVAL, "request: stop token id %d is outside the vocabulary (0..%d)", q->stop_ids[i],
                           h->n_vocab - 1);
    int n_ctx = s->p.n_ctx;
    sched_req *r = calloc(1, sizeof *r);
    if (!r) return cx_fail(err, CX_ENOMEM, "out of memory");
    r->slot = -1;
    int n_prompt = q->prompt ? q->n_prompt : 0;
    r->toks = malloc(sizeof(int32_t) * (size_t)n_ctx);
    int rc = r->toks ? 0 : cx_fail(err, CX_ENOMEM, "out of memory for a %d-token request", n_ctx);
    if (!rc && q->prompt) {
        if (n_prompt < 1) rc = cx_fail(err, CX_EINVAL, "request: empty prompt");
        else if (n_prompt >= n_ctx)
            rc = cx_fail(err, CX_ECTX, "request: a %d-token prompt leaves no room to generate in the %d-token context",
                         n_prompt, n_ctx);
        else {
            for (int i = 0; i < n_prompt && !rc; i++)
                if (q->prompt[i] < 0 || q->prompt[i] >= h->n_vocab)
                    rc = cx_fail(err, CX_EINVAL, "request: prompt token %d (id %d) is outside the vocabulary (0..%d)", i,
                                 q->prompt[i], h->n_vocab - 1);
            if (!rc) memcpy(r->toks, q->prompt, sizeof(int32_t) * (size_t)n_prompt);
        }
    } else if (!rc) {
        if (!q->text) rc = cx_fail(err, CX_EINVAL, "request: neither prompt tokens nor text");
        else {
            size_t len = strlen(q->text);
            rc = cx_tokenize(s->m, q->text, len, 1, r->toks, n_ctx, &n_prompt, err);
            if (rc == CX_ERANGE || (!rc && n_prompt >= n_ctx))
                rc = cx_fail(err, CX_ECTX, "request: the prompt (%zu bytes) leaves no room to generate in the %d-token "
                             "context", len, n_ctx);
            else if (!rc && n_prompt < 1) rc = cx_fail(err, CX_EINVAL, "request: empty prompt");
        }
    }
    if (rc) {
        req_free(r);
        return rc;
    }
    r->n_prompt = n_prompt;
    r->max_tokens = q->max_tokens < n_ctx - n_prompt ? q->max_tokens : n_ctx - n_prompt;
    if (q->n_stop_ids) {
        r->stop_ids = malloc(sizeof(int32_t) * (size_t)q->n_stop_ids);
        if (!r->stop_ids) rc = cx_fail(err, CX_ENOMEM, "out of memory");
        else memcpy(r->stop_ids, q->stop_ids, sizeof(int32_t) * (size_t)q->n_stop_ids);
        r->n_stop_ids = q->n_stop_ids;
    }
    if (!rc) rc = sched_stops_init(&r->stops, q->stop, q->n_stop, err);
    if (!rc) rc = cx_sampler_new(h->n_vocab, &q->sampling, &r->smp, err);
    r->text_cap = (size_t)r->max_tokens * s->max_piece + 1;
    r->itl = rc ? NULL : malloc(sizeof(int64_t) * (size_t)r->max_tokens);
    r->text = rc ? NULL : malloc(r->text_cap);
    if (!rc && (!r->itl || !r->text)) rc = cx_fail(err, CX_ENOMEM, "out of memory for a request's output");
    if (rc) {
        req_free(r);
        return rc;
    }
    r->text[0] = 0;
    for (int i = 0; i < n_prompt; i++) cx_sampler_accept(r->smp, r->toks[i]); /* the penalties see the prompt */
    r->priority = q->priority;
    r->adapter = q->adapter;
    r->adapter_scale = q->adapter_scale;
    r->ignore_eos = q->ignore_eos;
    r->no_prefix = q->no_prefix_cache != 0;
    r->speculate = s->p.drafter ? q->speculate : 0;
    r->user = q->user;
    r->on_token = q->on_token;
    r->on_done = q->on_done;
    r->state = CX_REQ_QUEUED;
    r->t_submit = cx_now_ns();
    r->deadline_ns = q->deadline_ms ? r->t_submit + q->deadline_ms * 1000000 : 0;
    *out = r;
    return 0;
}

/* See cortex.h. */
int64_t cx_sched_submit(cx_sched *s, const cx_request *q, cx_err *err) {
    sched_req *r;
    int rc = req_make(s, q, &r, err);
    pthread_mutex_lock(&s->mu);
    if (!rc && (s->stopping || s->draining)) rc = cx_fail(err, CX_EBUSY, "the scheduler is stopping");
    else if (!rc && s->n_wait >= s->p.max_queue)
        rc = cx_fail(err, CX_EBUSY, "the waiting queue is full (%d requests)", s->p.max_queue);
    else if (!rc)
        rc = sched_lora_ref(s, r, err);
    if (rc) {
        s->st.rejected++;
        pthread_mutex_unlock(&s->mu);
        req_free(r);
        return rc;
    }
    r->id = s->next_id++;
    r->next = s->all;
    s->all = r;
    s->wait[s->n_wait++] = r;
    s->st.submitted++;
    int64_t id = r->id;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return id;
}

/* The record of request id (lock held), or NULL. */
static sched_req *find(cx_sched *s, int64_t id) {
    for (sched_req *r = s->all; r; r = r->next)
        if (r->id == id) return r;
    return NULL;
}

/* See cortex.h. */
int cx_sched_cancel(cx_sched *s, int64_t id) {
    pthread_mutex_lock(&s->mu);
    sched_req *r = find(s, id);
    int ok = r && !sched_is_final(r->state);
    if (ok) r->cancel = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return ok ? 0 : CX_EINVAL;
}

/* Fill st from r (lock held or r owned by the caller). */
static void req_stats(const sched_req *r, cx_request_stats *st) {
    memset(st, 0, sizeof *st);
    st->id = r->id;
    st->state = r->state;
    st->reason = r->reason;
    st->priority = r->priority;
    st->adapter = r->adapter;
    st->n_prompt = r->n_prompt;
    st->n_gen = r->n_gen;
    st->n_cached = r->n_cached;
    st->n_preempted = r->n_preempted;
    st->t_submit = r->t_submit;
    st->t_start = r->t_start;
    st->t_first = r->t_first;
    st->t_end = r->t_end;
    st->itl_ns = r->itl;
    st->tokens = r->toks + r->n_prompt;
    st->text = r->text;
    st->text_len = r->text_len;
    snprintf(st->error, sizeof st->error, "%s", r->error);
    st->spec_steps = r->spec_steps;
    st->spec_verified = r->spec_verified;
    st->spec_drafted = r->spec_drafted;
    st->spec_accepted = r->spec_accepted;
    st->spec_tokens = r->spec_tokens;
    st->spec_draft_ns = r->spec_draft_ns;
    st->spec_verify_ns = r->spec_verify_ns;
}

/* See cortex.h. */
int cx_sched_request_stats(cx_sched *s, int64_t id, cx_request_stats *out) {
    pthread_mutex_lock(&s->mu);
    sched_req *r = find(s, id);
    if (r) req_stats(r, out);
    pthread_mutex_unlock(&s->mu);
    return r ? 0 : CX_EINVAL;
}

/* See sched.h: the done callback's view of a record (the stepping thread owns it then). */
void sched_req_stats(const sched_req *r, cx_request_stats *st) { req_stats(r, st); }

/* See cortex.h. Called from on_done (or while it runs), the record is freed
 * once on_done returns. */
int cx_sched_release(cx_sched *s, int64_t id) {
    pthread_mutex_lock(&s->mu);
    sched_req **pp = &s->all;
    while (*pp && (*pp)->id != id) pp = &(*pp)->next;
    sched_req *r = *pp;
    int rc = r && sched_is_final(r->state) ? 0 : CX_EINVAL;
    if (!rc && r->reporting) { /* on_done is running: the stepping thread frees it afterwards */
        r->release = 1;
        r = NULL;
    } else if (!rc) {
        *pp = r->next;
    } else {
        r = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    req_free(r);
    return rc;
}

/* See cortex.h. */
void cx_sched_get_stats(cx_sched *s, cx_sched_stats *out) {
    cx_kv_stats kv;
    cx_kv_cache_stats(s->cache, &kv);
    pthread_mutex_lock(&s->mu);
    *out = s->st;
    out->running = s->n_run;
    out->waiting = s->n_wait;
    out->lora_registered = s->n_ad;
    out->lora_resident = 0;
    for (int i = 0; i < s->n_ad; i++) out->lora_resident += sched_lora_resident(s, i);
    out->lora_bytes = s->lora_bytes;
    pthread_mutex_unlock(&s->mu);
    cx_batch_pool_stats(s->batch, &out->pool);
    out->kv_blocks_used = kv.blocks_used;
    out->kv_blocks_max = kv.blocks_max;
    out->kv_blocks_capacity = kv.blocks_capacity;
}

/* See cortex.h. */
cx_kv_cache *cx_sched_cache(cx_sched *s) { return s->cache; }

/* See cortex.h. */
int cx_sched_step(cx_sched *s, cx_err *err) {
    pthread_mutex_lock(&s->mu);
    int threaded = s->threaded;
    pthread_mutex_unlock(&s->mu);
    if (threaded) return cx_fail(err, CX_EINVAL, "cx_sched_step: the scheduler runs on its own thread");
    return sched_step(s, err);
}

/* The run thread: step while there is work, sleep on the condition when
 * idle, leave when stopped (or when draining and idle). */
static void *run_loop(void *arg) {
    cx_sched *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        int live = s->n_wait + s->n_run;
        if (s->stopping && !s->draining) break;
        if (!live) {
            if (s->draining) break;
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        cx_err err;
        sched_step(s, &err); /* a failed pass fails its requests; the loop goes on */
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* See cortex.h. */
int cx_sched_start(cx_sched *s, cx_err *err) {
    pthread_mutex_lock(&s->mu);
    if (s->threaded) {
        pthread_mutex_unlock(&s->mu);
        return cx_fail(err, CX_EINVAL, "cx_sched_start: already started");
    }
    s->stopping = s->draining = 0;
    /* The stepping thread is thread 0 of every pass and the engine's own: on
     * the placement's first CPU when it pins (placement.c), from its first
     * instruction (the pool's workers are on the CPUs after it). */
    int cpu = -1;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr)) {
        pthread_mutex_unlock(&s->mu);
        return cx_fail(err, CX_ENOMEM, "cannot start the scheduler thread");
    }
    int rc = 0;
    if (placement_cpus(1, &cpu)) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        rc = pthread_attr_setaffinity_np(&attr, sizeof one, &one);
    }
    if (!rc) rc = pthread_create(&s->thread, &attr, run_loop, s);
    pthread_attr_destroy(&attr);
    if (!rc) s->threaded = 1;
    pthread_mutex_unlock(&s->mu);
    if (rc && cpu >= 0)
        return cx_fail(err, rc == EINVAL ? CX_EINVAL : CX_ENOMEM, "cannot start the scheduler thread on CPU %d: %s",
                       cpu, strerror(rc));
    return rc ? cx_fail(err, CX_ENOMEM, "cannot start the scheduler thread") : 0;
}

/* See cortex.h. Without drain every live request is cancelled first: they
 * end (and report) on the next step, which the caller's own cx_sched_step
 * or cx_sched_free runs. */
void cx_sched_stop(cx_sched *s, int drain) {
    pthread_mutex_lock(&s->mu);
    if (!s->threaded) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    if (drain) s->draining = 1;
    else {
        s->stopping = 1;
        for (sched_req *r = s->all; r; r = r->next)
            if (!sched_is_final(r->state)) r->cancel = 1;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_mutex_lock(&s->mu);
    s->threaded = s->stopping = s->draining = 0;
    pthread_mutex_unlock(&s->mu);
    cx_err err;
    while (sched_step(s, &err) > 0) {} /* cancelled ones end and report now (a drained scheduler is idle) */
}
