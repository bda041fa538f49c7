/*
 * spec_draft.c - where drafts come from (cx_drafter) and drafting with a
 * model (spec_draft).
 *
 * A drafter is made once per target and shared by every sequence drafting
 * from it: the lookup needs nothing; a draft model (a file, or the target
 * quantized at load: the self-draft) is loaded once. A sequence's own state
 * (the draft model's KV cache, its last tokens) is its cx_spec (spec.c).
 *
 * The draft model's cache follows the sequence lazily: before drafting, it
 * is rolled back to the longest prefix it shares with the sequence (the
 * target rejected what lies past it) and fed the rest, so a draft token the
 * target accepted is never computed twice.
 */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../kv/kv_cache.h"
#include "../model.h"
#include "../pass.h"
#include "../session.h"
#include "../util.h"
#include "cortex_tools.h"
#include "spec.h"

/* See cortex.h. */
cx_spec_params cx_spec_defaults(void) {
    cx_spec_params p;
    memset(&p, 0, sizeof p);
    p.kind = CX_SPEC_NGRAM;
    p.draft_max = 8;
    p.adapt = 1;
    p.ngram_min = 2;
    p.ngram_max = 4;
    p.self_type = CX_TYPE_Q4_0;
    p.n_threads = 1;
    return p;
}

/* See cortex.h. */
const char *cx_spec_kind_name(int kind) {
    static const char *names[] = {"none", "ngram", "self", "model"};
    return kind >= 0 && kind <= CX_SPEC_MODEL ? names[kind] : NULL;
}

/* See cortex.h. */
int cx_spec_parse(const char *text, cx_spec_params *p, cx_err *err) {
    if (!text) return cx_fail(err, CX_EINVAL, "no speculation kind given (none, ngram, self, self:TYPE, model)");
    if (!strcmp(text, "none")) p->kind = CX_SPEC_NONE;
    else if (!strcmp(text, "ngram") || !strcmp(text, "lookup")) p->kind = CX_SPEC_NGRAM;
    else if (!strcmp(text, "model")) p->kind = CX_SPEC_MODEL;
    else if (!strcmp(text, "self")) p->kind = CX_SPEC_SELF;
    else if (!strncmp(text, "self:", 5)) {
        int t = cx_type_from_name(text + 5);
        if (t < 0 || t == CX_TYPE_F32 || t == CX_TYPE_MXFP4)
            return cx_fail(err, CX_EINVAL, "speculation '%s': '%s' is not a type a self-draft can be quantized to "
                           "(q4_0, q8_0, q4_k, q6_k, q4_k_m, f16, bf16)", text, text + 5);
        p->kind = CX_SPEC_SELF;
        p->self_type = t;
    } else {
        return cx_fail(err, CX_EINVAL, "speculation '%s' is not one of none, ngram, self, self:TYPE, model", text);
    }
    return 0;
}

/* CX_EINVAL naming the first difference between the vocabularies of the
 * target and the draft: a draft token must mean the target's token. */
static int check_vocab(const cx_model *t, const cx_model *d, const char *dpath, cx_err *err) {
    const tok_vocab *a = &t->vocab, *b = &d->vocab;
    if (a->n != b->n)
        return cx_fail(err, CX_EINVAL, "%s: the draft's vocabulary has %d tokens, the target's (%s) %d: a draft "
                       "model must share the target's vocabulary", dpath, b->n, t->name, a->n);
    if (a->kind != b->kind)
        return cx_fail(err, CX_EINVAL, "%s: the draft's tokenizer is %s, the target's %s", dpath,
                       d->info.tokenizer, t->info.tokenizer);
    for (int i = 0; i < a->n; i++)
        if (a->len[i] != b->len[i] || memcmp(a->text + a->off[i], b->text + b->off[i], a->len[i]) != 0)
            return cx_fail(err, CX_EINVAL, "%s: token %d is '%.*s' in the draft and '%.*s' in the target (%s): a "
                           "draft model must share the target's vocabulary", dpath, i, (int)(b->len[i] > 40 ? 40 : b->len[i]),
                           b->text + b->off[i], (int)(a->len[i] > 40 ? 40 : a->len[i]), a->text + a->off[i], t->name);
    if (a->bos != b->bos || a->eos != b->eos)
        return cx_fail(err, CX_EINVAL, "%s: the draft's BOS/EOS (%d/%d) differ from the target's (%d/%d)", dpath,
                       b->bos, b->eos, a->bos, a->eos);
    return 0;
}

/* A draft's weight bytes for its description: MiB, or KiB below one MiB. */
static void size_text(uint64_t bytes, char *out, size_t n) {
    if (bytes < (1 << 20)) snprintf(out, n, "%.0f KiB", (double)bytes / 1024);
    else snprintf(out, n, "%.0f MiB", (double)bytes / (1 << 20));
}

/* The self-draft: the target's file quantized to `type` in tmp_dir, loaded
 * as the target was (same kernels, same weights memory), then unlinked: a
 * copy in huge pages lives in memory only, a mapping keeps the unlinked
 * file's pages until it is freed. */
static int make_self_draft(cx_drafter *d, cx_err *err) {
    const cx_model *m = d->target;
    int mt = m->info.main_type;
    if (mt != CX_TYPE_F32 && mt != CX_TYPE_F16 && mt != CX_TYPE_BF16)
        return cx_fail(err, CX_EUNSUP, "%s: a self-draft quantizes an f32, f16 or bf16 target, and this one is %s "
                       "already (use a draft model or the n-gram lookup)", m->name, cx_type_name(mt));
    if (d->p.self_type == mt)
        return cx_fail(err, CX_EINVAL, "%s: a self-draft of type %s is the target itself", m->name, cx_type_name(mt));
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/cortex-selfdraft-XXXXXX", d->p.tmp_dir ? d->p.tmp_dir : "/tmp");
    if (n < 0 || (size_t)n >= sizeof path) return cx_fail(err, CX_EINVAL, "self-draft: the directory name is too long");
    int fd = mkstemp(path);
    if (fd < 0) return cx_fail(err, CX_EIO, "self-draft: cannot make a file in %s: %s", d->p.tmp_dir ? d->p.tmp_dir : "/tmp", strerror(errno));
    close(fd);
    int rc = cx_quantize_file(m->path, m->tok_path, path, d->p.self_type, NULL, err);
    if (!rc) {
        cx_model_params mp = m->params;
        mp.isa = m->info.isa; /* the same kernel table */
        rc = cx_model_load_ex(path, NULL, &mp, &d->draft, err);
    }
    unlink(path);
    if (rc) return rc;
    char size[32];
    size_text(d->draft->info.weight_bytes, size, sizeof size);
    snprintf(d->desc, sizeof d->desc, "self:%s (%s, quantized at load)", cx_type_name(d->p.self_type), size);
    return 0;
}

/* See cortex.h. */
int cx_drafter_new(const cx_model *m, const cx_spec_params *p, cx_drafter **out, cx_err *err) {
    *out = NULL;
    if (p->kind < CX_SPEC_NGRAM || p->kind > CX_SPEC_MODEL)
        return cx_fail(err, CX_EINVAL, "speculation kind %d is not ngram, self or model", p->kind);
    if (p->draft_max < 1 || p->draft_max > CX_SPEC_MAX_DRAFT)
        return cx_fail(err, CX_EINVAL, "draft-max %d is out of range (1..%d)", p->draft_max, CX_SPEC_MAX_DRAFT);
    if (p->draft_min < 0 || p->draft_min > p->draft_max)
        return cx_fail(err, CX_EINVAL, "draft-min %d is out of range (0..draft-max %d)", p->draft_min, p->draft_max);
    if (!(p->p_min >= 0 && p->p_min <= 1)) return cx_fail(err, CX_EINVAL, "draft p-min %g is not in [0, 1]", p->p_min);
    if (p->kind == CX_SPEC_NGRAM && (p->ngram_min < 1 || p->ngram_max < p->ngram_min || p->ngram_max > 64))
        return cx_fail(err, CX_EINVAL, "n-gram lengths %d..%d are out of range (1 <= min <= max <= 64)", p->ngram_min,
                       p->ngram_max);
    if (p->kind == CX_SPEC_MODEL && (!p->draft_path || !*p->draft_path))
        return cx_fail(err, CX_EINVAL, "speculation with a draft model needs its file (--draft MODEL)");
    int rc = model_require_weights(m, err);
    if (rc) return rc;
    cx_drafter *d = calloc(1, sizeof *d);
    if (!d) return cx_fail(err, CX_ENOMEM, "out of memory");
    d->p = *p;
    d->p.draft_path = d->p.draft_tokenizer = d->p.tmp_dir = NULL; /* the caller's strings */
    d->target = m;
    if (p->kind == CX_SPEC_NGRAM) {
        snprintf(d->desc, sizeof d->desc, "ngram %d..%d", p->ngram_min, p->ngram_max);
    } else if (p->kind == CX_SPEC_SELF) {
        d->p.tmp_dir = p->tmp_dir;
        rc = make_self_draft(d, err);
        d->p.tmp_dir = NULL;
    } else {
        cx_model_params mp = m->params;
        mp.isa = m->info.isa;
        rc = cx_model_load_ex(p->draft_path, p->draft_tokenizer, &mp, &d->draft, err);
        if (!rc) rc = model_require_weights(d->draft, err);
        if (!rc) rc = check_vocab(m, d->draft, p->draft_path, err);
        char size[32];
        if (!rc) size_text(d->draft->info.weight_bytes, size, sizeof size);
        if (!rc)
            snprintf(d->desc, sizeof d->desc, "model %s (%s, %s)", cx_basename(p->draft_path),
                     cx_type_name(d->draft->info.main_type), size);
    }
    if (rc) {
        cx_drafter_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

/* See cortex.h. */
void cx_drafter_free(cx_drafter *d) {
    if (!d) return;
    cx_model_free(d->draft);
    free(d);
}

const cx_model *cx_drafter_model(const cx_drafter *d) { return d->draft; }
const char *cx_drafter_describe(const cx_drafter *d) { return d->desc; }

/* The start of drafting with the model: *k capped to the draft's context,
 * the draft's cache rolled back to the longest prefix it shares with
 * hist[0..n) (never the last token: its logits are needed), and what the
 * draft must be fed to catch up, hist[*same..n), recorded as what it holds.
 * 0, or a CX_E* code. */
static int draft_start(cx_spec *sp, const int32_t *hist, int n, int *k, int *same, cx_err *err) {
    cx_session *ds = sp->ds;
    if (n - 1 + *k > cx_session_n_ctx(ds)) *k = cx_session_n_ctx(ds) - n + 1; /* a draft model of a shorter context */
    if (*k < 1) return *k = 0;
    int have = cx_session_pos(ds), j = 0;
    while (j < have && j < n && sp->dtok[j] == hist[j]) j++;
    if (j > n - 1) j = n - 1; /* the last token is fed again: its logits are needed */
    int rc = cx_session_truncate(ds, j, err);
    if (rc) return rc;
    memcpy(sp->dtok + j, hist + j, sizeof *hist * (size_t)(n - j));
    sp->caught_up = n - j;
    *same = j;
    return 0;
}

/* Draft token c, the proposal for the target's row c: what the target's
 * sampler would draw there were the draft's logits its own, with the very
 * noise that draw will read (sampler_draft_pick; greedy: the argmax), so a
 * draft that agrees with the target proposes the token the target draws.
 * -1: the draft stops here (it gives that token less than p_min). */
static int draft_pick(const cx_spec *sp, cx_sampler *smp, const float *logits, int c) {
    float p_min = sp->d->p.p_min, q = 1;
    int x = sampler_draft_pick(smp, logits, c, p_min > 0 ? &q : NULL);
    return q < p_min ? -1 : x;
}

/* Draft with the model: caught up (draft_start), then up to k tokens, each
 * fed back but the last. */
static int draft_model(cx_spec *sp, cx_sampler *smp, const int32_t *hist, int n, int k, int32_t *draft, cx_err *err) {
    int same = 0, c = 0, rc = draft_start(sp, hist, n, &k, &same, err);
    const float *logits = NULL;
    if (!rc && k > 0) rc = cx_eval(sp->ds, hist + same, n - same, &logits, err);
    for (; !rc && c < k; c++) {
        int x = draft_pick(sp, smp, logits, c);
        if (x < 0) break;
        draft[c] = x;
        if (c + 1 < k) {
            rc = cx_eval(sp->ds, &draft[c], 1, &logits, err);
            sp->dtok[n + c] = x;
        }
    }
    return rc ? rc : c;
}

/*
 * Drafting several sequences with their draft model at once (the
 * scheduler's step 4): every pass of the draft model takes one segment of
 * each sequence still drafting, so k rounds of S sequences are k passes of
 * S rows, not S * k passes of one.
 *
 * Each sequence has a feed: first its catch-up (draft_start), then each
 * token it drafted while more are wanted. A pass takes one token of every
 * feed, then longer catch-ups in chunks of what the batch and the
 * session's hot tier leave; a sequence whose feed the pass ended picks its
 * next token at once from its row of logits (which the next pass
 * overwrites). A prompt's catch-up (a request's first draft) is fed in
 * passes of its own. Each pass's time is shared among its sequences by the
 * rows each had in it; a sequence's own work (its rollback, its picks) is
 * its own.
 */
#define CATCHUP (CX_SPEC_MAX_DRAFT + 1) /* most tokens a step leaves a draft to catch up: its accepted ones and one */

struct spec_batch {
    cx_batch *b;              /* over the draft model */
    int cap, max_tokens, n;   /* n: sequences added since spec_batch_clear */
    int64_t passes;           /* of the draft model, since spec_batch_new */
    /* per sequence added (spec_batch_add) */
    cx_spec **sp;
    cx_sampler **smp;         /* the target's sampler whose draws it proposes */
    const int32_t **hist;
    int *hn, *k, *got;        /* its history's length; tokens wanted (then drafted, when run); drafted so far */
    int32_t **draft;
    const int32_t **feed;     /* what it is still to be fed ... */
    int *left;                /* ... how many tokens (0: its next token is picked, or it is done) */
    int64_t *ns;              /* its share of the passes' time */
    /* per segment of a pass */
    int *seg;                 /* the sequence */
    cx_session **ss;
    const int32_t **tok;
    int *tn, *nout;
    const float **rows;
};

/* See spec.h. */
void spec_batch_free(spec_batch *w) {
    if (!w) return;
    cx_batch_free(w->b);
    free(w->sp);
    free(w->smp);
    free((void *)w->hist);
    free(w->hn);
    free(w->k);
    free(w->got);
    free(w->draft);
    free((void *)w->feed);
    free(w->left);
    free(w->ns);
    free(w->seg);
    free(w->ss);
    free((void *)w->tok);
    free(w->tn);
    free(w->nout);
    free((void *)w->rows);
    free(w);
}

/* See spec.h. */
int spec_batch_new(const cx_drafter *d, int cap, int max_tokens, spec_batch **out, cx_err *err) {
    *out = NULL;
    assert(d->draft && cap >= 1 && max_tokens >= cap && "a model drafter, a token of every sequence per pass");
    spec_batch *w = calloc(1, sizeof *w);
    if (!w) return cx_fail(err, CX_ENOMEM, "out of memory");
    w->cap = cap;
    w->max_tokens = max_tokens;
    size_t n = (size_t)cap;
    w->sp = calloc(n, sizeof *w->sp);
    w->smp = calloc(n, sizeof *w->smp);
    w->hist = calloc(n, sizeof *w->hist);
    w->hn = calloc(n, sizeof *w->hn);
    w->k = calloc(n, sizeof *w->k);
    w->got = calloc(n, sizeof *w->got);
    w->draft = calloc(n, sizeof *w->draft);
    w->feed = calloc(n, sizeof *w->feed);
    w->left = calloc(n, sizeof *w->left);
    w->ns = calloc(n, sizeof *w->ns);
    w->seg = calloc(n, sizeof *w->seg);
    w->ss = calloc(n, sizeof *w->ss);
    w->tok = calloc(n, sizeof *w->tok);
    w->tn = calloc(n, sizeof *w->tn);
    w->nout = calloc(n, sizeof *w->nout);
    w->rows = calloc(n, sizeof *w->rows);
    int ok = w->sp && w->smp && w->hist && w->hn && w->k && w->got && w->draft && w->feed && w->left && w->ns && w->seg &&
             w->ss && w->tok && w->tn && w->nout && w->rows;
    /* a row of logits per sequence and pass: cap rows, not max_tokens */
    int rc = ok ? batch_new_rows(d->draft, max_tokens, cap, d->p.n_threads > 0 ? d->p.n_threads : 1, &w->b, err)
                : cx_fail(err, CX_ENOMEM, "out of memory for drafting %d sequences", cap);
    if (rc) {
        spec_batch_free(w);
        return rc;
    }
    *out = w;
    return 0;
}

/* See spec.h. */
void spec_batch_clear(spec_batch *w) { w->n = 0; }

/* See spec.h. */
int spec_batch_add(spec_batch *w, cx_spec *sp, cx_sampler *smp, const int32_t *hist, int n, int k, int32_t *draft) {
    assert(w->n < w->cap && "at most the sequences the batch was made for");
    assert(k >= 1 && k <= sp->d->p.draft_max && n >= 1 && sp->ds && "a model drafter's sequence with a draft to make");
    int j = w->n++;
    w->sp[j] = sp;
    w->smp[j] = smp;
    w->hist[j] = hist;
    w->hn[j] = n;
    w->k[j] = k;
    w->draft[j] = draft;
    return j;
}

/* Sequence i's feed ended with the last pass (its row of logits `l`): its
 * next draft token (the time it takes charged to it); a token more wanted
 * becomes its feed. */
static void batch_pick(spec_batch *w, int i, const float *l) {
    cx_spec *sp = w->sp[i];
    int64_t t0 = cx_now_ns();
    int c = w->got[i], x = draft_pick(sp, w->smp[i], l, c);
    w->ns[i] += cx_now_ns() - t0;
    if (x < 0) return; /* the draft stops short */
    w->draft[i][c] = x;
    w->got[i] = ++c;
    if (c < w->k[i]) { /* fed back for the next token */
        sp->dtok[w->hn[i] + c - 1] = x;
        w->feed[i] = &w->draft[i][c - 1];
        w->left[i] = 1;
    }
}

/* See spec.h. */
int spec_batch_run(spec_batch *w, cx_err *err) {
    int rc = 0;
    for (int i = 0; i < w->n && !rc; i++) {
        cx_spec *sp = w->sp[i];
        int same = 0;
        w->got[i] = w->left[i] = 0;
        int64_t t0 = cx_now_ns();
        rc = draft_start(sp, w->hist[i], w->hn[i], &w->k[i], &same, err);
        w->ns[i] = cx_now_ns() - t0;
        w->feed[i] = w->hist[i] + same;
        w->left[i] = w->k[i] > 0 ? w->hn[i] - same : 0;
    }
    while (!rc) {
        /* A prompt's catch-up (longer than a step's: CATCHUP) goes in passes of its own, in prefill's order as
         * the target prefilled those positions; the rest (a step's catch-up, drafted tokens fed back) in passes
         * summed in decode's order, as the target's verify passes compute those positions. */
        int segs = 0, budget = w->max_tokens, rows = 0, prompt = 0;
        for (int i = 0; i < w->n; i++) prompt |= w->left[i] > CATCHUP;
        for (int i = 0; i < w->n; i++)
            if (prompt ? w->left[i] > CATCHUP : w->left[i] > 0) {
                w->seg[segs++] = i;
                budget--;
            }
        if (segs == 0) break;
        for (int j = 0; j < segs; j++) { /* a token each, then the rest in turn, within the batch and each hot tier */
            int i = w->seg[j];
            cx_session *ds = w->sp[i]->ds;
            int T = pass_chunk(ds->pos, w->left[i], 1 + budget, ds->cache->slots[KV_HOT].n);
            assert(T >= 1 && "the hot tier holds at least the blocks of one pass (kv_cache_new)");
            budget -= T - 1;
            rows += T;
            w->tn[j] = T;
            w->ss[j] = ds;
            w->tok[j] = w->feed[i];
            w->nout[j] = 1;
        }
        int64_t t0 = cx_now_ns();
        if ((rc = batch_eval_rows(w->b, w->ss, w->tok, w->tn, w->nout, segs, !prompt, w->rows, err))) break;
        w->passes++;
        int64_t dt = cx_now_ns() - t0;
        for (int j = 0; j < segs; j++) {
            int i = w->seg[j];
            w->ns[i] += dt * w->tn[j] / rows;
            w->feed[i] += w->tn[j];
            if ((w->left[i] -= w->tn[j]) == 0) batch_pick(w, i, w->rows[j]);
        }
    }
    return rc;
}

/* See spec.h. */
int64_t spec_batch_passes(const spec_batch *w) { return w->passes; }

/* See spec.h. */
int spec_batch_got(const spec_batch *w, int j, int64_t *ns) {
    assert(j >= 0 && j < w->n);
    if (ns) *ns = w->ns[j];
    return w->got[j];
}

/* See spec.h. */
int spec_draft(cx_spec *sp, cx_sampler *smp, const int32_t *hist, int n, int k, int32_t *draft, cx_err *err) {
    assert(k >= 1 && k <= sp->d->p.draft_max && n >= 1);
    sp->caught_up = 0;
    if (sp->d->p.kind == CX_SPEC_NGRAM)
        return spec_ngram_draft(hist, n, sp->d->p.ngram_min, sp->d->p.ngram_max, k, draft);
    return draft_model(sp, smp, hist, n, k, draft, err);
}
