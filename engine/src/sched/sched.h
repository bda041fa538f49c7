/*
 * sched.h - the request scheduler's insides (cortex.h has the API,
 * docs/serving.md the design). Shared by the files of engine/src/sched/:
 *   sched.c        creation, submit, cancel, records, the run thread
 *   sched_step.c   one step: ends, admission, preemption, the pass, sampling
 *   sched_stop.c   stop strings: what text is final and where it ends
 *   sched_lora.c   adapters: registration, references, loading within the budget
 *
 * Speculative decoding (cx_sched_params.drafter; engine/src/spec/spec.h has
 * the step): each slot owns a cx_spec (the draft model's sequence, the
 * adaptive length), reset whenever its request gives the slot up. In a step
 * where at most spec_max_batch sequences decode, form_batch reserves each
 * speculating one's draft room (spec_want, bounded by max_tokens, the
 * context and the token budget); without the lock the drafts are made
 * (spec_draft for the lookup; spec_batch for a draft model: every
 * sequence's drafts in one pass of it per round) and each such segment
 * becomes [last chosen token, draft]
 * with a row of logits per token; the one pass checks them in decode order
 * (batch_eval_rows); spec_accept picks 1..k+1 tokens with the request's
 * sampler, the session keeps the positions of the ones kept, and the
 * tokens go through the same path a sampled token does, in order, up to
 * the first that ends the request. The last token kept is, as always, the
 * one the next step feeds.
 *
 * Locking: `mu` guards the queue, the slots, the record list and the
 * counters. A step takes it to decide what the pass holds, drops it for the
 * pass (cx_batch_eval) and for the callbacks, and takes it again to record
 * the outcome; only the stepping thread changes a running request's
 * sequence, so submit and cancel from other threads never wait for a pass.
 *
 * A request's life (cx_req_state; running = PREFILL or DECODE). The table
 * names the function that makes each edge (in sched_step.c unless a file is
 * named); sched_move asserts that a state moves only along these edges,
 * sched_check the invariants below:
 *
 *                        admit                 sched_step
 *   submit ---> QUEUED ---------> PREFILL --------------------> DECODE ---+
 *                ^  |              |  |                          |  |  ^   | sched_step
 *                |  |              |  |                          |  |  +---+
 *                |  |              |  |         preempt          |  |
 *                +--|--------------+--|--------------------------+  |
 *                   |                 |                             |
 *                   | sched_end       +-------------+---------------+
 *                   v                               | sched_end
 *        CANCELLED, TIMEOUT, FAILED                 v
 *                                     CANCELLED, TIMEOUT, FAILED, FINISHED
 *
 *   edge                       made by                      when
 *   -> QUEUED                  cx_sched_submit (sched.c)    accepted: req_make built the record
 *   QUEUED -> PREFILL          admit                        a slot is free, its blocks fit, its
 *                                                           adapter is resident (slot k taken)
 *   PREFILL -> DECODE,         sched_step                   a token was sampled and nothing stops it
 *   DECODE -> DECODE
 *   running -> QUEUED          preempt, from form_batch     no room in the cache, or the lead left
 *                              or sched_step                out; a pass failed with CX_ENOMEM (the
 *                                                           slot and blocks go back: recomputed later)
 *   any live -> CANCELLED      sched_end from end_expired   cx_sched_cancel (or cx_sched_stop(s, 0))
 *   any live -> TIMEOUT        sched_end from end_expired   past deadline_ns
 *   QUEUED -> FAILED           sched_end from admit (fail)  needs more blocks than the capacity, or
 *                                                           its adapter cannot run
 *   running -> FAILED          sched_end from form_batch    alone and still too big for the budgets;
 *                              or sched_step (fail)         the pass failed
 *   running -> FINISHED        sched_end from sched_step    sample() gave a reason: EOS, a stop id,
 *                                                           a stop string, max_tokens
 *   final -> (freed)           cx_sched_release (sched.c)   on_done has returned (final states are
 *                                                           never left)
 *
 * Invariants (sched_check, with the lock held): r holds a slot (r->slot >= 0,
 * s->run[slot] == r) <=> r is running; r is on s->wait <=> QUEUED;
 * n_run and n_wait count them; reason != CX_STOP_NONE <=> FINISHED (sched_end).
 */
#ifndef CX_SCHED_H
#define CX_SCHED_H

#include <assert.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cortex.h"

/* Stop-string matching state of one request (sched_stop.c). */
typedef struct sched_stops {
    char **s;          /* the strings (owned) */
    size_t *len;
    int n;
    size_t max_len;
} sched_stops;

struct sched_adapter;

/* One request, from submission until cx_sched_release. */
typedef struct sched_req {
    int64_t id;
    cx_req_state state;        /* moved only by sched_move (see the diagram above) */
    cx_stop_reason reason;     /* CX_STOP_NONE unless FINISHED */
    int priority, adapter;
    float adapter_scale;
    struct sched_adapter *ad;  /* its adapter's registration (adapter != 0), referenced until it ends */
    int ignore_eos;
    int no_prefix;             /* cx_request.no_prefix_cache: its session takes no cached prefix blocks */
    int speculate;             /* cx_request.speculate, 0 without a drafter (and after a draft failed) */
    int cancel;                /* cx_sched_cancel asked (read at step boundaries) */
    int reporting;             /* ended, on_done not yet returned: release is deferred */
    int release;               /* cx_sched_release asked while reporting */
    int slot;                  /* running: its session slot; else -1 */
    int32_t *toks;             /* [n_prompt + max_tokens]: the prompt, then what was generated */
    int n_prompt, n_gen, max_tokens;
    int32_t *stop_ids;
    int n_stop_ids;
    sched_stops stops;
    cx_sampler *smp;           /* its own: penalties and RNG continue across preemption */
    int64_t *itl;              /* [max_tokens] gaps between tokens */
    char *text;                /* generated bytes (cap text_cap) */
    size_t text_len, text_cap, emitted; /* emitted: bytes handed to on_token so far */
    int n_cached, n_preempted;
    int spec_steps, spec_verified, spec_drafted, spec_accepted, spec_tokens; /* cx_request_stats' */
    int64_t spec_draft_ns, spec_verify_ns;
    int64_t t_submit, t_start, t_first, t_last, t_end, deadline_ns;
    void *user;
    cx_token_cb on_token;
    cx_done_cb on_done;
    char error[256];
    struct sched_req *next;    /* every record not yet released */
} sched_req;

struct cx_sched {
    const cx_model *m;
    cx_sched_params p;
    cx_kv_cache *cache;
    cx_batch *batch;
    size_t max_piece;          /* longest byte string one token decodes to */

    cx_session **sess;         /* [max_seqs] one per slot, on the shared cache */
    sched_req **run;           /* [max_seqs] the request in each slot, or NULL */
    sched_req **wait;          /* [max_queue + max_seqs] waiting (preempted ones come back here) */
    int n_wait, n_run;
    int hold;                  /* the last pass ran out of KV room: admit only into an empty run set until one succeeds */
    sched_req *all;            /* records not yet released */
    int64_t next_id;

    /* one step's scratch, allocated once: segment i of the pass */
    cx_session **b_sess;
    const int32_t **b_tok;
    int *b_n, *b_slot;
    int *b_nout;               /* rows of logits it asks for (k + 1 for a draft of k, else 1) */
    int *b_k;                  /* -1: not a speculative step; else its draft room, then its draft's length */
    int *b_pos;                /* its session's position before the pass */
    int64_t *b_dns;            /* nanoseconds drafting it */
    const float **b_rows;      /* its first row of logits */

    /* speculative decoding (cx_sched_params.drafter) */
    cx_spec **spec;            /* [max_seqs] one per slot; NULL without a drafter */
    int *spec_want;            /* [max_seqs] this step's spec_want per slot (-1: not asked yet) */
    int32_t *spec_out;         /* [max_seqs * (CX_SPEC_MAX_DRAFT + 1)] the tokens spec_accept chose */
    struct spec_batch *drafts; /* a model drafter's: the step's drafts made together (NULL: the lookup) */
    int *b_dj;                 /* [max_seqs] segment i's index in drafts (-1: it drafts nothing this step) */
    int64_t draft_passes;      /* this step's passes of the draft model */
    sched_req **ended;         /* [max_queue + 2 * max_seqs] requests that ended this step */
    int n_ended;

    pthread_mutex_t mu;
    pthread_cond_t cv;         /* work arrived, or the thread should stop */
    pthread_t thread;
    int threaded, stopping, draining;

    cx_sched_stats st;

    /* adapters (sched_lora.c) */
    struct sched_adapter **ad;
    int n_ad, cap_ad;
    int64_t lora_bytes;        /* resident adapters' memory */
};

/* sched_lora.c (all with the lock held) */
/* Take a reference on r's adapter at submission: CX_EINVAL if it is not registered or being removed. */
int sched_lora_ref(cx_sched *s, sched_req *r, cx_err *err);
/* At admission into slot k: make r's adapter resident (loading, unloading idle ones over the
 * budget) and set the slot session's adapters (none for adapter 0). 0: done; 1: not now (the
 * budget is held by running adapters); a CX_E* code (negative) with err filled: r cannot run. */
int sched_lora_acquire(cx_sched *s, sched_req *r, int k, int64_t now, cx_err *err);
/* r leaves its slot (end or preemption). */
void sched_lora_unslot(cx_sched *s, sched_req *r);
/* r reached its final state: drop its reference (a removal waiting on it completes). */
void sched_lora_unref(cx_sched *s, sched_req *r);
/* The id registered under name, or 0. */
int sched_lora_find_locked(const cx_sched *s, const char *name);
/* 1 if adapter number i is loaded. */
int sched_lora_resident(const cx_sched *s, int i);
/* Free every adapter (cx_sched_free). */
void sched_lora_free_all(cx_sched *s);
/* 1 if r's adapter set equals q's (lora_split batches). */
int sched_lora_same(const sched_req *r, const sched_req *q);

/* sched_step.c: one step (the caller holds nothing). Returns live requests or CX_E*. */
int sched_step(cx_sched *s, cx_err *err);
/* Move r to final `state` (lock held): counters, end time, off the queue or out of its slot (blocks freed). */
void sched_end(cx_sched *s, sched_req *r, cx_req_state state, cx_stop_reason reason);

/* 1 if a request in this state has ended (the last four states). */
static inline int sched_is_final(cx_req_state state) {
    switch (state) {
    case CX_REQ_QUEUED:
    case CX_REQ_PREFILL:
    case CX_REQ_DECODE:
        return 0;
    case CX_REQ_FINISHED:
    case CX_REQ_CANCELLED:
    case CX_REQ_TIMEOUT:
    case CX_REQ_FAILED:
        return 1;
    }
    return 1;
}

/* 1 if the diagram above has an edge from `from` to `to`. */
static inline int sched_edge(cx_req_state from, cx_req_state to) {
    switch (from) {
    case CX_REQ_QUEUED: /* admitted, or ended while waiting: never FINISHED (nothing was sampled) */
        return to == CX_REQ_PREFILL || to == CX_REQ_CANCELLED || to == CX_REQ_TIMEOUT || to == CX_REQ_FAILED;
    case CX_REQ_PREFILL: /* first token (or the one after a recomputation), preempted, or ended */
    case CX_REQ_DECODE:
        return to == CX_REQ_DECODE || to == CX_REQ_QUEUED || sched_is_final(to);
    case CX_REQ_FINISHED:
    case CX_REQ_CANCELLED:
    case CX_REQ_TIMEOUT:
    case CX_REQ_FAILED:
        return 0;
    }
    return 0;
}

/* Move r to state `to` (lock held), along an edge of the diagram; r's slot
 * must already agree with it (held in PREFILL and DECODE, -1 otherwise). */
static inline void sched_move(sched_req *r, cx_req_state to) {
    assert(sched_edge(r->state, to) && "a request's state moves only along the diagram's edges (sched.h)");
    assert((r->slot >= 0) == (to == CX_REQ_PREFILL || to == CX_REQ_DECODE) &&
           "a request holds a slot <=> it is prefilling or decoding");
    r->state = to;
}

/* Assert the invariants above over the queue and the slots (lock held;
 * O(max_seqs + n_wait)). Nothing under NDEBUG. */
void sched_check(const cx_sched *s);

/* sched.c: the statistics of record r (for on_done and cx_sched_request_stats). */
void sched_req_stats(const sched_req *r, cx_request_stats *st);

/* sched_stop.c */
/* Copy n stop strings into st (empty strings are refused: CX_EINVAL). */
int sched_stops_init(sched_stops *st, const char *const *strs, int n, cx_err *err);
void sched_stops_free(sched_stops *st);
/* Where the first stop string ends the text: its start offset, searching
 * occurrences that end at or after `from`; -1 if none. */
long sched_stops_find(const sched_stops *st, const char *text, size_t len, size_t from);
/* How many bytes of text are final: all but the longest tail that is a
 * proper prefix of some stop string (it may still grow into one). */
size_t sched_stops_safe(const sched_stops *st, const char *text, size_t len);

#endif
