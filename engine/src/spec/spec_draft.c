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

#include "../model.h"
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
    char mib[32];
    snprintf(mib, sizeof mib, "%.0f MiB", (double)d->draft->info.weight_bytes / (1 << 20));
    snprintf(d->desc, sizeof d->desc, "self:%s (%s, quantized at load)", cx_type_name(d->p.self_type), mib);
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
        if (!rc)
            snprintf(d->desc, sizeof d->desc, "model %s (%s, %.0f MiB)", cx_basename(p->draft_path),
                     cx_type_name(d->draft->info.main_type), (double)d->draft->info.weight_bytes / (1 << 20));
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

/* Probability of the draft's most likely token under its logits. */
static float top_prob(const float *l, int V) {
    float max = l[0];
    for (int i = 1; i < V; i++) max = l[i] > max ? l[i] : max;
    double z = 0;
    for (int i = 0; i < V; i++) z += exp((double)l[i] - max);
    return (float)(1.0 / z);
}

/* Draft with the model: its cache rolled back to what it shares with hist,
 * fed the rest, then up to k tokens, each fed back but the last. Greedy:
 * argmaxes (q a point mass); else draws from the draft's distribution under
 * the target's sampling settings (q kept for the rule). */
static int draft_model(cx_spec *sp, const int32_t *hist, int n, int k, int32_t *draft, cx_err *err) {
    cx_session *ds = sp->ds;
    if (n - 1 + k > cx_session_n_ctx(ds)) k = cx_session_n_ctx(ds) - n + 1; /* a draft model of a shorter context */
    if (k < 1) return 0;
    int have = cx_session_pos(ds), same = 0;
    while (same < have && same < n && sp->dtok[same] == hist[same]) same++;
    if (same > n - 1) same = n - 1; /* the last token is fed again: its logits are needed */
    int rc = cx_session_truncate(ds, same, err);
    const float *logits = NULL;
    if (!rc) rc = cx_eval(ds, hist + same, n - same, &logits, err);
    if (rc) return rc;
    memcpy(sp->dtok + same, hist + same, sizeof *hist * (size_t)(n - same));
    sp->caught_up = n - same;
    int c = 0, V = sp->V;
    for (; c < k; c++) {
        int x;
        int32_t *qid = sp->q_id + (size_t)c * (size_t)V;
        float *qp = sp->q_p + (size_t)c * (size_t)V;
        if (sp->greedy) {
            if (sp->d->p.p_min > 0 && top_prob(logits, V) < sp->d->p.p_min) break;
            x = 0;
            for (int i = 1; i < V; i++)
                if (logits[i] > logits[x]) x = i;
            sp->q_n[c] = 0; /* a point mass */
        } else {
            const int32_t *ids;
            const float *p;
            int m = cx_sampler_dist(sp->dsmp, logits, &ids, &p);
            x = cx_sampler_draw(sp->dsmp, ids, p, m);
            float px = 0;
            for (int i = 0; i < m; i++)
                if (ids[i] == x) px = p[i];
            if (px < sp->d->p.p_min) break;
            memcpy(qid, ids, sizeof *ids * (size_t)m);
            memcpy(qp, p, sizeof *p * (size_t)m);
            sp->q_n[c] = m;
        }
        draft[c] = x;
        if (c + 1 < k) {
            if ((rc = cx_eval(ds, &draft[c], 1, &logits, err))) return rc;
            sp->dtok[n + c] = draft[c];
        }
    }
    return c;
}

/* See spec.h. */
int spec_draft(cx_spec *sp, const int32_t *hist, int n, int k, int32_t *draft, cx_err *err) {
    assert(k >= 1 && k <= sp->d->p.draft_max && n >= 1);
    if (sp->q_n) memset(sp->q_n, 0, sizeof *sp->q_n * (size_t)k);
    sp->caught_up = 0;
    if (sp->d->p.kind == CX_SPEC_NGRAM)
        return spec_ngram_draft(hist, n, sp->d->p.ngram_min, sp->d->p.ngram_max, k, draft);
    return draft_model(sp, hist, n, k, draft, err);
}
