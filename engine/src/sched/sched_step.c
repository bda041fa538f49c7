/*
 * sched_step.c - one step of the scheduler (sched.h, docs/serving.md):
 *
 *   1. ends: cancelled requests and those past their deadline, queued or
 *      running, reach their final state and give their KV blocks back;
 *   2. admission: waiting requests, best effective priority first (the
 *      class plus one per aging_ms waited; FIFO within a class), take free
 *      slots while their blocks fit the cache;
 *   3. batch: every decoding sequence's next token, then prompt chunks of
 *      the prefilling ones in scheduling order, up to max_batch_tokens;
 *      when the pass would need more blocks than the cache's budgets hold,
 *      more than the hot tier can pin, or would leave out the lead (the
 *      first in scheduling order, which every pass advances), the
 *      lowest-priority, latest-arrived sequence is preempted: its blocks
 *      are dropped and it waits again to be recomputed (its prompt and the
 *      tokens it generated, prefilled; f32 prefill equals decode bit for
 *      bit, and full blocks may still be in the prefix cache);
 *   4. the pass: one cx_batch_eval, without the scheduler's lock; with a
 *      drafter, the drafts of the speculating sequences are made first
 *      (sched.h: each such segment is its last token and its draft, every
 *      row's logits kept, summed in decode's order);
 *   5. sampling (or, for a checked draft, the accept/reject rule and the
 *      rollback of the rejected positions), stop conditions and on_token,
 *      token by token; then the ends and on_done.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "../kv/kv_cache.h"
#include "../pass.h"
#include "../session.h"
#include "../spec/spec.h"
#include "sched.h"
#include "../util.h"

/* Effective priority of a waiting request at time now: its class, raised one per aging_ms waited. */
static int64_t effective(const cx_sched *s, const sched_req *r, int64_t now) {
    int64_t age = s->p.aging_ms ? (now - r->t_submit) / ((int64_t)s->p.aging_ms * 1000000) : 0;
    return (int64_t)r->priority + age;
}

/* 1 if a should go before b (higher effective priority, then earlier submission). */
static int before(const cx_sched *s, const sched_req *a, const sched_req *b, int64_t now) {
    int64_t ea = effective(s, a, now), eb = effective(s, b, now);
    if (ea != eb) return ea > eb;
    return a->t_submit != b->t_submit ? a->t_submit < b->t_submit : a->id < b->id;
}

/* Tokens r still has to feed before it can sample: its prompt and generated tokens past its position. */
static int pending(const cx_sched *s, const sched_req *r) {
    int pos = r->slot >= 0 ? cx_session_pos(s->sess[r->slot]) : 0;
    return r->n_prompt + r->n_gen - pos;
}

/* Blocks a sequence at pos allocates to hold n more tokens. */
static int blocks_for(int pos, int n) { return (pos + n + CX_KV_BLOCK - 1) / CX_KV_BLOCK - (pos + CX_KV_BLOCK - 1) / CX_KV_BLOCK; }

/* Blocks a pass writing n tokens from pos touches (each must be in the hot tier during the pass). */
static int blocks_written(int pos, int n) { return (pos + n - 1) / CX_KV_BLOCK - pos / CX_KV_BLOCK + 1; }

/* Blocks the shared cache can still take on within its budgets. */
static int32_t available(cx_sched *s) {
    pthread_mutex_lock(&s->cache->lock);
    int32_t n = kv_blocks_available(s->cache);
    pthread_mutex_unlock(&s->cache->lock);
    return n;
}

/* 1 if the next write of session ss copies its last block first: a partial
 * block it shares, which only a rollback makes (a checked draft filled the
 * block, the prefix index took it, the rejected rows were dropped:
 * kv_truncate leaves the index's copy whole). The copy is one more block,
 * and while it is filled its source stays in the hot tier too. */
static int shares_tail(cx_sched *s, const cx_session *ss) {
    if (!s->spec || ss->pos % CX_KV_BLOCK == 0) return 0;
    pthread_mutex_lock(&s->cache->lock);
    int shared = s->cache->blocks[ss->seq.table[ss->pos / CX_KV_BLOCK]].refs > 1;
    pthread_mutex_unlock(&s->cache->lock);
    return shared;
}

/* Take r off the waiting queue (lock held), keeping the others' order. */
static void unqueue(cx_sched *s, sched_req *r) {
    assert(r->state == CX_REQ_QUEUED && r->slot < 0 && "only a queued request is on the waiting queue");
    for (int i = 0; i < s->n_wait; i++)
        if (s->wait[i] == r) {
            memmove(s->wait + i, s->wait + i + 1, sizeof *s->wait * (size_t)(s->n_wait - i - 1));
            s->n_wait--;
            return;
        }
    assert(0 && "a queued request is on the waiting queue");
}

/* Free r's slot (lock held): its session's blocks go back to the cache. */
static void unslot(cx_sched *s, sched_req *r) {
    if (r->slot < 0) return;
    assert(r->slot < s->p.max_seqs && s->run[r->slot] == r && s->n_run > 0 && "a slot's request is in s->run");
    assert((r->state == CX_REQ_PREFILL || r->state == CX_REQ_DECODE) && "only a running request holds a slot");
    cx_session_reset(s->sess[r->slot]);
    if (s->spec) cx_spec_reset(s->spec[r->slot]); /* the next request of the slot drafts from scratch */
    sched_lora_unslot(s, r);
    s->run[r->slot] = NULL;
    s->n_run--;
    r->slot = -1;
}

/* See sched.h. */
void sched_end(cx_sched *s, sched_req *r, cx_req_state state, cx_stop_reason reason) {
    assert(sched_is_final(state) && !sched_is_final(r->state) && "a live request ends once");
    assert((state == CX_REQ_FINISHED) == (reason != CX_STOP_NONE) && "a reason <=> finished normally");
    assert(s->n_ended < s->p.max_queue + 2 * s->p.max_seqs && "ended[] holds every request that can end in a step");
    if (r->slot >= 0) unslot(s, r);
    else unqueue(s, r);
    sched_lora_unref(s, r);
    sched_move(r, state);
    r->reason = reason;
    r->t_end = cx_now_ns();
    r->reporting = 1;
    s->st.finished += state == CX_REQ_FINISHED;
    s->st.cancelled += state == CX_REQ_CANCELLED;
    s->st.timed_out += state == CX_REQ_TIMEOUT;
    s->st.failed += state == CX_REQ_FAILED;
    s->ended[s->n_ended++] = r;
}

/* See sched.h. */
void sched_check(const cx_sched *s) {
#ifndef NDEBUG
    int running = 0;
    for (int k = 0; k < s->p.max_seqs; k++) {
        const sched_req *r = s->run[k];
        if (!r) continue;
        running++;
        assert(r->slot == k && "a running request knows its slot");
        assert((r->state == CX_REQ_PREFILL || r->state == CX_REQ_DECODE) && "a request has a slot <=> it is running");
        assert(r->n_prompt + r->n_gen <= s->p.n_ctx && "a request's tokens fit its context");
    }
    assert(running == s->n_run && "n_run counts the requests in slots");
    assert(s->n_wait >= 0 && s->n_wait <= s->p.max_queue + s->p.max_seqs && "the waiting queue within its array");
    for (int i = 0; i < s->n_wait; i++)
        assert(s->wait[i]->state == CX_REQ_QUEUED && s->wait[i]->slot == -1 && "a request is waiting <=> queued, no slot");
#else
    (void)s;
#endif
}

/* Fail r with a message (lock held). */
static void fail(cx_sched *s, sched_req *r, const char *msg) {
    snprintf(r->error, sizeof r->error, "%.*s", (int)sizeof r->error - 1, msg);
    sched_end(s, r, CX_REQ_FAILED, CX_STOP_NONE);
}

/* Step 1 (lock held): cancellations and deadlines, queued or running. */
static void end_expired(cx_sched *s, int64_t now) {
    for (int i = s->n_wait - 1; i >= 0; i--) {
        sched_req *r = s->wait[i];
        if (r->cancel) sched_end(s, r, CX_REQ_CANCELLED, CX_STOP_NONE);
        else if (r->deadline_ns && now >= r->deadline_ns) sched_end(s, r, CX_REQ_TIMEOUT, CX_STOP_NONE);
    }
    for (int k = 0; k < s->p.max_seqs; k++) {
        sched_req *r = s->run[k];
        if (!r) continue;
        if (r->cancel) sched_end(s, r, CX_REQ_CANCELLED, CX_STOP_NONE);
        else if (r->deadline_ns && now >= r->deadline_ns) sched_end(s, r, CX_REQ_TIMEOUT, CX_STOP_NONE);
    }
}

/* Step 2 (lock held): admit the best waiting requests while slots and blocks last. A request
 * that cannot fit even an empty cache fails (it would wait forever). */
static void admit(cx_sched *s, int64_t now) {
    int32_t avail = available(s);
    /* Only running sequences hold blocks (unslot resets a session), so with none running the whole
     * capacity is free or droppable; otherwise a request that fits could wait here forever. */
    assert((s->n_run > 0 || avail == s->cache->capacity) && "KV blocks held with no sequence running");
    int reserve = s->n_run; /* each running sequence may need one more block soon */
    while (s->n_run < s->p.max_seqs && s->n_wait > 0) {
        int best = 0;
        for (int i = 1; i < s->n_wait; i++)
            if (before(s, s->wait[i], s->wait[best], now)) best = i;
        sched_req *r = s->wait[best];
        int need = blocks_for(0, r->n_prompt + r->n_gen + 1);
        if (need > s->cache->capacity) {
            char msg[200];
            snprintf(msg, sizeof msg, "the request needs %d KV blocks of %d positions; the cache's budgets hold %d",
                     need, CX_KV_BLOCK, s->cache->capacity);
            fail(s, r, msg);
            continue;
        }
        if (s->hold && s->n_run > 0) break; /* a pass ran out of room: nobody joins until one succeeds (progress) */
        if (need > avail - reserve && s->n_run > 0) break; /* strict priority: no overtaking by smaller ones */
        if (need > avail && s->n_run == 0) break;           /* cached prefixes are dropped as blocks are taken */
        int k = 0;
        while (s->run[k]) k++;
        cx_err err = {0};
        int got = sched_lora_acquire(s, r, k, now, &err);
        if (got == 1) break; /* its adapter waits for room in the adapter budget */
        if (got < 0) {
            fail(s, r, err.msg);
            continue;
        }
        assert(k < s->p.max_seqs && cx_session_pos(s->sess[k]) == 0 && "a free slot's session is empty");
        unqueue(s, r);
        s->run[k] = r;
        r->slot = k;
        s->sess[k]->no_prefix = r->no_prefix; /* for every pass of this request, recomputation included */
        s->n_run++;
        sched_move(r, CX_REQ_PREFILL);
        if (!r->t_start) r->t_start = now;
        avail -= need;
        reserve++;
    }
}

/* Preempt r (lock held): its blocks go back, it waits again and will be recomputed. */
static void preempt(cx_sched *s, sched_req *r) {
    assert(r && r->slot >= 0 && "only a running request is preempted");
    unslot(s, r);
    sched_move(r, CX_REQ_QUEUED);
    r->n_preempted++;
    s->st.preemptions++;
    assert(s->n_wait < s->p.max_queue + s->p.max_seqs && "wait has room for max_queue + max_seqs");
    s->wait[s->n_wait++] = r;
}

/* The running request first in scheduling order (highest effective priority,
 * earliest submission) when first = 1: the lead, which every pass advances;
 * else the last: the victim, preempted first. NULL if none runs; the lead is
 * never the victim while another runs. */
static sched_req *running_end(cx_sched *s, int64_t now, int first) {
    sched_req *e = NULL;
    for (int k = 0; k < s->p.max_seqs; k++) {
        sched_req *r = s->run[k];
        if (r && (!e || (first ? before(s, r, e, now) : before(s, e, r, now)))) e = r;
    }
    return e;
}

/* 1 if r decodes this step: it has sampled, its next token is the one pending (and
 * under lora_split, it shares the step's adapter set). */
static int decodes(const cx_sched *s, const sched_req *r, const sched_req *split) {
    return r && r->n_gen > 0 && pending(s, r) == 1 && (!split || sched_lora_same(r, split));
}

/* Step 3 (lock held): the pass's segments into b_*. Returns the number of segments.
 *
 * Progress: every pass feeds the lead at least one token. Decode tokens go
 * first (the lead's too, when it decodes); then prompt chunks in scheduling
 * order, so a prefilling lead takes the first chunk, and the budget has room
 * for it (max_batch_tokens >= max_seqs, and at most max_seqs - 1 others
 * decode). What can still keep it out are the cache's limits: the new blocks
 * must fit what the budgets hold (kv_blocks_available) and the blocks the
 * pass writes must fit the hot tier. While either fails, or the lead is out,
 * the victim (never the lead while another runs) is preempted; a lead alone
 * that does not fit can never fit and fails.
 *
 * Speculation: while at most spec_max_batch sequences decode, a speculating
 * one reserves room for its draft (b_k: spec_want, at most what max_tokens,
 * the context and the budget leave; the budget keeps a token for every
 * running sequence, so the lead still fits). Drafts are the first thing
 * given up: when the pass does not fit with them, it is formed again
 * without any before anyone is preempted; and none are made while `hold`
 * says the last pass ran out of room. A rollback may leave a sequence's last
 * block shared with the prefix index (shares_tail): its next write copies
 * it, counted here; a lone sequence that has no room for the copy drops that
 * block's rows instead and computes them again, as a preempted one would. */
static int form_batch(cx_sched *s, int64_t now) {
    const int hot = s->cache->slots[KV_HOT].n; /* blocks one pass may write (kv_prepare_batch pins them hot) */
    int spec_ok = s->spec != NULL && !s->hold; /* after a pass that ran out of room, none until one succeeds */
    for (int k = 0; spec_ok && k < s->p.max_seqs; k++) s->spec_want[k] = -1; /* spec_want once per slot and step */
    for (;;) {
        int n = 0, budget = s->p.max_batch_tokens, need = 0, written = 0, lead_in = 0, drafts = 0, n_dec = 0;
        const sched_req *lead = running_end(s, now, 1);
        const sched_req *split = s->p.lora_split ? lead : NULL; /* lora_split: only the lead's adapter this step */
        for (int k = 0; k < s->p.max_seqs; k++) n_dec += decodes(s, s->run[k], split);
        int spec_now = spec_ok && n_dec <= s->p.spec_max_batch;
        int draft_budget = s->p.max_batch_tokens - s->n_run; /* >= 0: max_batch_tokens >= max_seqs */
        for (int k = 0; k < s->p.max_seqs; k++) { /* decode first: one token each, and the drafts' room */
            sched_req *r = s->run[k];
            if (!decodes(s, r, split)) continue;
            int pos = cx_session_pos(s->sess[k]), want = -1;
            if (spec_now && r->speculate) {
                int room = r->max_tokens - r->n_gen - 1;                   /* k + 1 tokens within max_tokens */
                if (room > s->p.n_ctx - pos - 1) room = s->p.n_ctx - pos - 1; /* positions pos..pos+k in the context */
                if (room > draft_budget) room = draft_budget;
                if (r->speculate > 0 && room > r->speculate) room = r->speculate;
                if (room < 0) room = 0;
                if (s->spec_want[k] < 0) s->spec_want[k] = spec_want(s->spec[k], room);
                want = s->spec_want[k] < room ? s->spec_want[k] : room;
                draft_budget -= want;
                drafts += want;
            }
            int T = want > 0 ? 1 + want : 1; /* the blocks its draft may write are counted now */
            s->b_slot[n] = k;
            s->b_tok[n] = r->toks + pos;
            s->b_n[n] = 1;
            s->b_nout[n] = 1;
            s->b_k[n] = want;
            s->b_pos[n++] = pos;
            int copy = shares_tail(s, s->sess[k]);
            need += blocks_for(pos, T) + copy;
            written += blocks_written(pos, T) + copy;
            budget -= T;
            lead_in |= r == lead;
        }
        for (;;) { /* then prompt chunks, in scheduling order */
            sched_req *next = NULL;
            for (int k = 0; k < s->p.max_seqs; k++) {
                sched_req *r = s->run[k];
                int taken = 0;
                for (int i = 0; i < n; i++) taken |= s->b_slot[i] == k;
                if (r && !taken && (!split || sched_lora_same(r, split)) && (next == NULL || before(s, r, next, now)))
                    next = r;
            }
            if (!next || budget <= 0 || written >= hot) break;
            int k = next->slot, pos = cx_session_pos(s->sess[k]);
            int T = pass_chunk(pos, pending(s, next), s->p.chunk && s->p.chunk < budget ? s->p.chunk : budget, hot - written);
            /* A chunk cut short ends on a block boundary, so the next one can still meet the prefix cache. */
            if (T < pending(s, next) && (pos + T) % CX_KV_BLOCK && (pos + T) / CX_KV_BLOCK * CX_KV_BLOCK > pos)
                T = (pos + T) / CX_KV_BLOCK * CX_KV_BLOCK - pos;
            s->b_slot[n] = k;
            s->b_tok[n] = next->toks + pos;
            s->b_n[n] = T;
            s->b_nout[n] = 1;
            s->b_k[n] = -1;
            s->b_pos[n++] = pos;
            need += blocks_for(pos, T);
            written += blocks_written(pos, T);
            budget -= T;
            lead_in |= next == lead;
        }
        if (n == 0 || (need <= available(s) && written <= hot && lead_in)) {
            assert(n <= s->n_run && budget >= 0 && "one segment per running sequence, within max_batch_tokens");
            return n;
        }
        if (drafts > 0) { /* the drafts give way first */
            spec_ok = 0;
            continue;
        }
        sched_req *v = running_end(s, now, 0);
        if (s->n_run == 1 && shares_tail(s, s->sess[v->slot])) { /* alone, with no room for the copy: its rows in */
            cx_session *vs = s->sess[v->slot];                      /* that block are computed again instead */
            cx_session_truncate(vs, cx_session_pos(vs) / CX_KV_BLOCK * CX_KV_BLOCK, NULL);
            continue;
        }
        if (s->n_run == 1) { /* alone and still too big: the cache cannot hold this request */
            char msg[200];
            snprintf(msg, sizeof msg, "the KV cache's budgets (%d blocks of %d positions) cannot hold this request's %d "
                     "tokens", s->cache->capacity, CX_KV_BLOCK, v->n_prompt + v->n_gen + 1);
            fail(s, v, msg);
        } else {
            preempt(s, v);
        }
    }
}

/* Append token tok's bytes to r's text (its buffer was sized for max_tokens of the longest piece). */
static void append_text(const cx_sched *s, sched_req *r, int prev, int tok) {
    char tmp[2];
    const char *bytes;
    size_t len = cx_token_piece(s->m, prev, tok, tmp, &bytes);
    assert(r->text_len + len < r->text_cap && "the text buffer holds max_tokens of the longest piece");
    memcpy(r->text + r->text_len, bytes, len);
    r->text_len += len;
    r->text[r->text_len] = 0;
}

/* 1 if tok is one of r's stop ids. */
static int is_stop_id(const sched_req *r, int tok) {
    for (int i = 0; i < r->n_stop_ids; i++)
        if (r->stop_ids[i] == tok) return 1;
    return 0;
}

/* Step 5 for token tok chosen for r from `logits` (its sampler has accepted
 * it): appended, stop conditions, the token's event. Returns the reason it
 * stops (CX_STOP_*, or CX_STOP_NONE to go on). Runs without the lock: only
 * the stepping thread touches a running request. */
static cx_stop_reason take(cx_sched *s, sched_req *r, int tok, const float *logits, int64_t now) {
    int at = r->n_prompt + r->n_gen, prev = r->toks[at - 1];
    r->toks[at] = tok;
    if (r->n_gen) r->itl[r->n_gen - 1] = now - r->t_last;
    else r->t_first = now;
    r->t_last = now;
    r->n_gen++;
    cx_stop_reason reason = CX_STOP_NONE;
    size_t old = r->text_len;
    if (cx_token_is_eog(s->m, tok) && !r->ignore_eos) reason = CX_STOP_EOS;
    else if (is_stop_id(r, tok)) reason = CX_STOP_TOKEN;
    else {
        append_text(s, r, prev, tok);
        long p = r->stops.n ? sched_stops_find(&r->stops, r->text, r->text_len, old) : -1;
        if (p >= 0) {
            r->text_len = (size_t)p;
            r->text[p] = 0;
            reason = CX_STOP_STRING;
        }
    }
    if (!reason && r->n_gen >= r->max_tokens) reason = CX_STOP_LENGTH;
    size_t final = reason ? r->text_len : sched_stops_safe(&r->stops, r->text, r->text_len);
    if (final < r->emitted) final = r->emitted; /* released bytes stay released */
    if (r->on_token) {
        cx_token_event ev = {r->id, tok, r->n_gen - 1, r->text + r->emitted, final - r->emitted, now, logits};
        r->on_token(r->user, &ev);
    }
    r->emitted = final;
    return reason;
}

/* Step 5 for one sequence whose pass ended at its last token: sample, then take. */
static cx_stop_reason sample(cx_sched *s, sched_req *r, const float *logits, int64_t now) {
    int tok = cx_sampler_sample(r->smp, logits);
    cx_sampler_accept(r->smp, tok);
    return take(s, r, tok, logits, now);
}

/* Step 4's drafting, without the lock, for every speculative segment (b_k[i]
 * >= 0 holds its room): each draft continues its request's tokens up to the
 * last chosen one (at b_pos[i]). The lookup drafts each in turn; a draft
 * model drafts all of them together (spec_batch: one pass of the draft
 * model per round). A draft of k >= 1 tokens (at least draft_min) makes the
 * segment that token and the draft, k + 1 rows of logits, and *verify 1.
 * b_k[i] becomes k (0: the step decodes one token), b_dns[i] its drafting
 * time. A draft model that fails (its memory) leaves the requests of the
 * step without drafts from then on. */
static void draft_all(cx_sched *s, int n, int *verify) {
    if (s->drafts) spec_batch_clear(s->drafts);
    for (int i = 0; i < n; i++) {
        if (s->b_k[i] < 0) continue;
        int slot = s->b_slot[i], want = s->b_k[i], P = s->b_pos[i];
        sched_req *r = s->run[slot];
        cx_spec *sp = s->spec[slot];
        assert(P == r->n_prompt + r->n_gen - 1 && "a decoding session holds all but the last chosen token");
        s->b_dj[i] = -1;
        s->b_dns[i] = 0;
        if (want > 0 && s->drafts) {
            s->b_dj[i] = spec_batch_add(s->drafts, sp, r->smp, r->toks, P + 1, want, sp->feed + 1);
        } else if (want > 0) {
            int64_t t1 = cx_now_ns();
            s->b_k[i] = spec_draft(sp, r->smp, r->toks, P + 1, want, sp->feed + 1, NULL);
            s->b_dns[i] = cx_now_ns() - t1;
            assert(s->b_k[i] >= 0 && "the lookup does not fail");
        } else {
            s->b_k[i] = 0;
        }
    }
    int failed = 0;
    if (s->drafts) {
        cx_err derr;
        int64_t p0 = spec_batch_passes(s->drafts);
        failed = spec_batch_run(s->drafts, &derr) != 0;
        s->draft_passes += spec_batch_passes(s->drafts) - p0;
        for (int i = 0; i < n; i++)
            if (s->b_k[i] >= 0 && s->b_dj[i] >= 0)
                s->b_k[i] = failed ? 0 : spec_batch_got(s->drafts, s->b_dj[i], &s->b_dns[i]);
    }
    for (int i = 0; i < n; i++) {
        if (s->b_k[i] < 0) continue;
        cx_spec *sp = s->spec[s->b_slot[i]];
        int k = s->b_k[i];
        if (failed && s->b_dj[i] >= 0) { /* the draft model failed: the request goes on without drafts */
            cx_spec_reset(sp);
            s->run[s->b_slot[i]]->speculate = 0;
        }
        if (k < sp->d->p.draft_min) k = 0;
        if (k > 0) {
            sp->feed[0] = s->run[s->b_slot[i]]->toks[s->b_pos[i]];
            s->b_tok[i] = sp->feed;
            s->b_n[i] = s->b_nout[i] = k + 1;
            *verify = 1;
        }
        s->b_k[i] = k;
    }
}

/* A speculative step's tokens (spec.h, "one step"), summed into the step's totals. */
typedef struct spec_sum {
    int64_t steps, verified, drafted, accepted, tokens, draft_ns;
} spec_sum;

/* Step 5 for segment i, a speculative step: without a draft, sample as any
 * decode step does; with one, the rule picks 1..k+1 tokens from its rows,
 * the session keeps the positions of the last chosen token and the accepted
 * draft (its last chosen token is the next step's feed), and the tokens are
 * taken in order up to the first that ends the request. Then the step's
 * counts and times go to the cx_spec (its adaptive length) and the request.
 * pass_ns and rows: the pass's time and rows (a share of it is this
 * sequence's). */
static cx_stop_reason spec_end(cx_sched *s, sched_req *r, int i, int64_t now, int64_t pass_ns, int rows, spec_sum *sum) {
    int slot = s->b_slot[i], k = s->b_k[i], n_new = 1, accepted = 0, kept = 1;
    cx_spec *sp = s->spec[slot];
    const float *row = s->b_rows[i];
    cx_stop_reason reason;
    if (k == 0) {
        reason = sample(s, r, row, now);
    } else {
        int32_t *out = s->spec_out + (size_t)slot * (CX_SPEC_MAX_DRAFT + 1);
        n_new = spec_accept(sp, s->m, r->smp, sp->feed + 1, k, row, out, &accepted);
        int rc = cx_session_truncate(s->b_sess[i], s->b_pos[i] + n_new, NULL);
        assert(rc == 0 && "the positions kept were just evaluated");
        (void)rc;
        reason = take(s, r, out[0], row, now);
        for (kept = 1; kept < n_new && !reason; kept++)
            reason = take(s, r, out[kept], row + (size_t)kept * (size_t)sp->V, now);
    }
    int64_t share = rows > 0 ? pass_ns * (k + 1) / rows : pass_ns;
    spec_observe(sp, k, accepted, n_new, s->b_dns[i], share, rows);
    r->spec_steps++;
    r->spec_verified += k > 0;
    r->spec_drafted += k;
    r->spec_accepted += accepted;
    r->spec_tokens += kept;
    r->spec_draft_ns += s->b_dns[i];
    r->spec_verify_ns += share;
    sum->steps++;
    sum->verified += k > 0;
    sum->drafted += k;
    sum->accepted += accepted;
    sum->tokens += kept;
    sum->draft_ns += s->b_dns[i];
    return reason;
}

/* Call on_done for every request that ended this step, then free those
 * released meanwhile (cx_sched_release defers while a record reports). */
static void report_ends(cx_sched *s) {
    for (int i = 0; i < s->n_ended; i++) {
        sched_req *r = s->ended[i];
        if (r->on_done) {
            cx_request_stats st;
            sched_req_stats(r, &st);
            r->on_done(r->user, &st);
        }
        pthread_mutex_lock(&s->mu);
        r->reporting = 0;
        int release = r->release;
        pthread_mutex_unlock(&s->mu);
        if (release) cx_sched_release(s, r->id);
    }
    s->n_ended = 0;
}

/* See sched.h. */
int sched_step(cx_sched *s, cx_err *err) {
    int64_t t0 = cx_now_ns();
    pthread_mutex_lock(&s->mu);
    end_expired(s, t0);
    admit(s, t0);
    int n = form_batch(s, t0);
    sched_check(s);
    for (int i = 0; i < n; i++) s->b_sess[i] = s->sess[s->b_slot[i]];
    pthread_mutex_unlock(&s->mu);

    int rc = 0, tokens = 0, prefill = 0, verify = 0, rows = 0;
    spec_sum sum = {0};
    s->draft_passes = 0;
    if (s->spec) draft_all(s, n, &verify);
    for (int i = 0; i < n; i++) rows += s->b_n[i];
    int64_t t1 = cx_now_ns(), t2 = t1;
    if (n > 0) {
        rc = batch_eval_rows(s->batch, s->b_sess, s->b_tok, s->b_n, s->b_nout, n, verify, s->b_rows, err);
        t2 = cx_now_ns();
    }
    if (rc) { /* out of room after all (a copy-on-write, a fragmented cold region): make room, and admit nobody
               * until a pass succeeds, so each failed pass shrinks the running set; anything else fails the pass */
        pthread_mutex_lock(&s->mu);
        s->hold = rc == CX_ENOMEM;
        if (rc == CX_ENOMEM && s->n_run > 1) preempt(s, running_end(s, t0, 0));
        else
            for (int i = 0; i < n; i++)
                if (s->run[s->b_slot[i]]) fail(s, s->run[s->b_slot[i]], err ? err->msg : "the forward pass failed");
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < n; i++) /* a sequence still running keeps none of its draft's positions */
            if (s->b_k[i] > 0 && cx_session_pos(s->b_sess[i]) > s->b_pos[i])
                cx_session_truncate(s->b_sess[i], s->b_pos[i], NULL);
        n = 0;
    }
    if (n > 0) s->hold = 0; /* only touched by the stepping thread */
    for (int i = 0; i < n; i++) {
        sched_req *r = s->run[s->b_slot[i]];
        cx_session *ss = s->b_sess[i];
        tokens += s->b_n[i];
        if (s->b_k[i] >= 0) { /* a decoding sequence's speculative step */
            cx_stop_reason reason = spec_end(s, r, i, t2, t2 - t1, rows, &sum);
            pthread_mutex_lock(&s->mu);
            if (reason) sched_end(s, r, CX_REQ_FINISHED, reason);
            else sched_move(r, CX_REQ_DECODE);
            pthread_mutex_unlock(&s->mu);
            continue;
        }
        if (r->n_gen == 0 || s->b_n[i] > 1) {
            prefill += s->b_n[i];
            cx_kv_stats kv;
            cx_session_kv_stats(ss, &kv);
            r->n_cached += kv.last_reused;
        }
        if (cx_session_pos(ss) != r->n_prompt + r->n_gen) continue; /* more prompt to come */
        cx_stop_reason reason = sample(s, r, s->b_rows[i], t2);
        pthread_mutex_lock(&s->mu);
        if (reason) sched_end(s, r, CX_REQ_FINISHED, reason);
        else sched_move(r, CX_REQ_DECODE);
        pthread_mutex_unlock(&s->mu);
    }
    int64_t t3 = cx_now_ns();
    pthread_mutex_lock(&s->mu);
    if (n > 0) {
        s->st.steps++;
        s->st.prefill_tokens += prefill;
        s->st.decode_tokens += tokens - prefill;
        s->st.eval_ns += t2 - t1;
        s->st.step_ns += t3 - t0;
        s->st.spec_steps += sum.steps;
        s->st.spec_verified += sum.verified;
        s->st.spec_passes += verify;
        s->st.spec_drafted += sum.drafted;
        s->st.spec_draft_passes += s->draft_passes;
        s->st.spec_accepted += sum.accepted;
        s->st.spec_tokens += sum.tokens;
        s->st.spec_draft_ns += sum.draft_ns;
        s->st.spec_verify_ns += verify ? t2 - t1 : 0;
    }
    sched_check(s);
    pthread_mutex_unlock(&s->mu);
    report_ends(s);
    pthread_mutex_lock(&s->mu);
    int live = s->n_wait + s->n_run;
    pthread_mutex_unlock(&s->mu);
    return live;
}
