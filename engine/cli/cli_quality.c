/*
 * cli_quality.c - `cortex quality` (cli_quality.h): both models evaluate the
 * same token sequences with cx_eval_all (one pass per chunk of positions),
 * and each position's log-softmax distributions are compared in double.
 * The two sides may be one model with two KV formats (--kv-type against
 * --ref-kv-type), scored at depth (--from: a sequence's first positions
 * only build the context).
 */
#include "cli_quality.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "cortex_tools.h"

/* ---- quality: a model against a reference on the same tokens -------------- */

/* Prompts the reference continues greedily when no --text is given. */
static const char *const QUALITY_PROMPTS[] = {
    "Once upon a time", "Echoes of", "The little dog", "I dream of", "In the quiet", "One day, a girl",
    "The sun was", "Deep in the forest", "She said", "My code", "The old man", "Whispers of",
    "Tom and Sue", "Under the stars", "The machine", "A tiny bird",
};
#define N_QUALITY_PROMPTS ((int)(sizeof QUALITY_PROMPTS / sizeof QUALITY_PROMPTS[0]))

/* Positions per cx_eval_all call of each model: up to one full pass (256),
 * fewer for large vocabularies so each logits array stays near 32 MiB. */
#define QUALITY_CHUNK_BYTES ((size_t)32 << 20)

typedef struct quality {
    const cx_model *ref, *mod;
    cx_session *sr, *sm;
    int n_vocab, n_ctx, chunk;
    int from;                 /* positions of a sequence before this one are not scored */
    double *lp_ref, *lp_mod;  /* log-softmax of the current position, n_vocab each */
    float *lr, *lm;           /* logits of a chunk of positions, [chunk][n_vocab] each */
    int32_t *seq;             /* the tokens of the current sequence, [n_ctx] */
    long target, positions, sequences, agree;
    double kl_sum, kl_max, dlogit_max;
} quality;

/* out[i] = x[i] - log(sum_j exp(x[j])), in double so tiny probabilities keep their digits. */
static void log_softmax(const float *x, int n, double *out) {
    double mx = x[0], s = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > mx) mx = x[i];
    for (int i = 0; i < n; i++) s += exp((double)x[i] - mx);
    double lse = mx + log(s);
    for (int i = 0; i < n; i++) out[i] = (double)x[i] - lse;
}

/* The token of rank `rank` (0: the largest logit; the lowest id first on ties,
 * as greedy sampling) among all tokens but `skip`. */
static int ranked_token(const float *x, int n, int rank, int skip) {
    int prev = -1;
    for (int r = 0; r <= rank; r++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            if (i == skip) continue;
            /* only tokens ordered after the previous pick (value desc, id asc) */
            if (prev >= 0 && !(x[i] < x[prev] || (x[i] == x[prev] && i > prev))) continue;
            if (best < 0 || x[i] > x[best]) best = i;
        }
        if (best < 0) return prev; /* fewer tokens than the rank asks: keep the last */
        prev = best;
    }
    return prev;
}

/* Score one position from the two models' logits there: top-1 agreement,
 * KL(ref || model), largest logit difference. */
static void quality_score(quality *q, const float *lr, const float *lm) {
    int V = q->n_vocab;
    log_softmax(lr, V, q->lp_ref);
    log_softmax(lm, V, q->lp_mod);
    double kl = 0, dmax = 0;
    for (int i = 0; i < V; i++) {
        kl += exp(q->lp_ref[i]) * (q->lp_ref[i] - q->lp_mod[i]);
        double d = fabs((double)lr[i] - (double)lm[i]);
        if (d > dmax) dmax = d;
    }
    if (kl < 0) kl = 0; /* rounding when the distributions are identical */
    q->agree += ranked_token(lr, V, 0, -1) == ranked_token(lm, V, 0, -1);
    q->kl_sum += kl;
    if (kl > q->kl_max) q->kl_max = kl;
    if (dmax > q->dlogit_max) q->dlogit_max = dmax;
    q->positions++;
}

/* Teacher-force toks[0..n) (n <= n_ctx) through both models as a new
 * sequence, q->chunk positions per cx_eval_all call (one forward pass each
 * rather than one per token), and score every position. */
static int quality_sequence(quality *q, const int32_t *toks, int n, cx_err *err) {
    cx_session_reset(q->sr);
    cx_session_reset(q->sm);
    q->sequences++;
    size_t V = (size_t)q->n_vocab;
    for (int i = 0; i < n; i += q->chunk) {
        int k = n - i < q->chunk ? n - i : q->chunk;
        if (cx_eval_all(q->sr, toks + i, k, q->lr, err) || cx_eval_all(q->sm, toks + i, k, q->lm, err)) return -1;
        for (int t = 0; t < k; t++)
            if (i + t >= q->from) quality_score(q, q->lr + (size_t)t * V, q->lm + (size_t)t * V);
    }
    return 0;
}

/* Tokens from greedy generation with the reference: BOS + a prompt, then the
 * reference's best token (never EOS: the next best continues), one decode
 * step each; the sequence is then scored as a whole. A sequence ends when the
 * context fills or the position budget does; round r over the prompts takes
 * the (r+1)-th best token at its first generated position, so no sequence
 * repeats. */
static int quality_greedy(quality *q, cx_err *err) {
    int eos = cx_token_eos(q->ref);
    for (long seq = 0; q->positions < q->target; seq++) {
        const char *p = QUALITY_PROMPTS[seq % N_QUALITY_PROMPTS];
        int round = (int)(seq / N_QUALITY_PROMPTS), n = 0;
        int32_t ids[128];
        if (cx_tokenize(q->ref, p, strlen(p), 1, ids, 128, &n, err)) return -1;
        long room = q->target - q->positions + q->from;
        int len = room < q->n_ctx ? (int)room : q->n_ctx;
        cx_session_reset(q->sr);
        const float *lr;
        for (int i = 0, tok = ids[0]; i < len; i++) {
            q->seq[i] = tok;
            if (i + 1 == len) break;
            if (cx_eval(q->sr, &tok, 1, &lr, err)) return -1;
            tok = i + 1 < n ? ids[i + 1] : ranked_token(lr, q->n_vocab, i + 1 == n ? round : 0, eos);
        }
        if (quality_sequence(q, q->seq, len, err)) return -1;
    }
    return 0;
}

/* Tokens from a text: BOS + the next context-sized chunk, until the text or
 * the position budget runs out. */
static int quality_text(quality *q, const int32_t *ids, int n_ids, cx_err *err) {
    int at = 0;
    while (at < n_ids && q->positions < q->target) {
        long room = q->target - q->positions + q->from, len = 1 + (long)(n_ids - at);
        if (len > room) len = room;
        if (len > q->n_ctx) len = q->n_ctx;
        if (len <= q->from) break; /* the text's rest is too short to reach the depth */
        q->seq[0] = cx_token_bos(q->ref);
        memcpy(q->seq + 1, ids + at, sizeof(int32_t) * (size_t)(len - 1));
        at += (int)len - 1;
        if (quality_sequence(q, q->seq, (int)len, err)) return -1;
    }
    return 0;
}

/* Print s as a JSON string. */
static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

/* The table (or JSON line) of a finished comparison. */
static void quality_print(const quality *q, const opts *o) {
    const char *rt = cx_type_name(cx_model_get_info(q->ref)->main_type);
    const char *mt = cx_type_name(cx_model_get_info(q->mod)->main_type);
    double agree = q->positions ? (double)q->agree / (double)q->positions : 0;
    double kl_mean = q->positions ? q->kl_sum / (double)q->positions : 0;
    if (o->json) {
        printf("{\"ref\":");
        json_str(o->ref);
        printf(",\"model\":");
        json_str(o->model);
        printf(",\"ref_type\":\"%s\",\"model_type\":\"%s\",\"ref_kv_type\":\"%s\",\"kv_type\":\"%s\",\"source\":\"%s\","
               "\"n_ctx\":%d,\"from\":%d,\"positions\":%ld,\"sequences\":%ld,\"top1_agreement\":%.6f,\"kl_mean\":%.6e,"
               "\"kl_max\":%.6e,\"max_abs_logit_diff\":%.6e}\n",
               rt, mt, cx_kv_type_name(o->ref_kv_type), cx_kv_type_name(o->kv.type), o->text ? "text" : "greedy",
               q->n_ctx, q->from, q->positions, q->sequences, agree, kl_mean, q->kl_max, q->dlogit_max);
        return;
    }
    printf("reference: %s (%s, KV %s)\nmodel:     %s (%s, KV %s)\n", o->ref, rt, cx_kv_type_name(o->ref_kv_type), o->model,
           mt, cx_kv_type_name(o->kv.type));
    if (q->from) printf("depth:     positions %d.. of each sequence scored\n", q->from);
    if (o->text) printf("tokens:    %s, teacher-forced, context %d\n", o->text, q->n_ctx);
    else printf("tokens:    greedy from the reference over %d fixed prompts, teacher-forced, context %d\n",
                N_QUALITY_PROMPTS, q->n_ctx);
    printf("%10s %10s %14s %12s %12s %14s\n", "positions", "sequences", "top-1 agree", "mean KL", "max KL",
           "max |dlogit|");
    printf("%10ld %10ld %12.2f %% %12.3e %12.3e %14.3e\n", q->positions, q->sequences, 100 * agree, kl_mean, q->kl_max,
           q->dlogit_max);
}

/* cortex quality --ref REF --model MODEL: teacher-forced comparison of the
 * next-token distributions of two models sharing a vocabulary. */
int cli_quality(opts *o) {
    if (!o->ref) {
        die("quality needs --ref REF_MODEL (see cortex quality --help)");
        return 2;
    }
    if (!o->model) o->model = o->ref; /* one model, two KV formats */
    quality q = {0};
    cx_model *ref = cli_load_model(o, o->ref), *mod = ref ? cli_load_model(o, o->model) : NULL;
    char *text = NULL;
    int32_t *ids = NULL;
    int rc = 1, n_ids = 0;
    cx_err err = {0};
    if (!mod) goto out;
    const cx_model_info *ri = cx_model_get_info(ref), *mi = cx_model_get_info(mod);
    if (ri->n_vocab != mi->n_vocab || cx_token_bos(ref) != cx_token_bos(mod) || cx_token_eos(ref) != cx_token_eos(mod)) {
        die("%s has %d tokens (BOS %d, EOS %d) but %s has %d (BOS %d, EOS %d): the models must share "
            "one vocabulary", o->ref, ri->n_vocab, cx_token_bos(ref), cx_token_eos(ref), o->model, mi->n_vocab,
            cx_token_bos(mod), cx_token_eos(mod));
        goto out;
    }
    for (int t = 0; t < ri->n_vocab; t++) { /* same size, same pieces: one vocabulary */
        char ta[2], tb[2];
        const char *pa, *pb;
        size_t na = cx_token_piece(ref, -1, t, ta, &pa), nb = cx_token_piece(mod, -1, t, tb, &pb);
        if (na != nb || memcmp(pa, pb, na)) {
            die("%s and %s have different vocabularies (token %d is '%.*s' in one, '%.*s' in the "
                "other): the models must share one vocabulary", o->ref, o->model, t, (int)(na > 24 ? 24 : na), pa,
                (int)(nb > 24 ? 24 : nb), pb);
            goto out;
        }
    }
    if (o->text) {
        size_t len = 0;
        if (!(text = cli_read_file(o->text, &len))) {
            die("%s: cannot read text file: %s", o->text, strerror(errno));
            goto out;
        }
        if (!(ids = cli_encode(ref, text, len, 0, &n_ids))) goto out;
        if (n_ids == 0) {
            die("%s: the text file is empty", o->text);
            goto out;
        }
    }
    q.ref = ref;
    q.mod = mod;
    q.n_vocab = ri->n_vocab;
    q.n_ctx = ri->n_ctx < mi->n_ctx ? ri->n_ctx : mi->n_ctx;
    if (o->ctx > q.n_ctx) {
        die("--ctx %ld is more than the models' context (%d)", o->ctx, q.n_ctx);
        goto out;
    }
    if (o->ctx) q.n_ctx = (int)o->ctx;
    else if (q.n_ctx > CX_DEFAULT_CTX) q.n_ctx = CX_DEFAULT_CTX;
    if (o->from >= q.n_ctx) {
        die("--from %ld leaves no position to score in a context of %d", o->from, q.n_ctx);
        goto out;
    }
    q.from = (int)o->from;
    q.target = o->positions;
    size_t per_row = sizeof(float) * (size_t)q.n_vocab;
    q.chunk = QUALITY_CHUNK_BYTES / per_row < 256 ? (int)(QUALITY_CHUNK_BYTES / per_row) : 256;
    if (q.chunk < 1) q.chunk = 1;
    q.lp_ref = malloc(sizeof(double) * (size_t)q.n_vocab);
    q.lp_mod = malloc(sizeof(double) * (size_t)q.n_vocab);
    q.lr = malloc(per_row * (size_t)q.chunk);
    q.lm = malloc(per_row * (size_t)q.chunk);
    q.seq = malloc(sizeof(int32_t) * (size_t)q.n_ctx);
    if (!q.lp_ref || !q.lp_mod || !q.lr || !q.lm || !q.seq) {
        die("out of memory");
        goto out;
    }
    cx_session_params rp = cx_session_defaults(), mp = cx_session_defaults();
    rp.n_ctx = mp.n_ctx = q.n_ctx;
    rp.n_threads = mp.n_threads = (int)o->threads;
    rp.kv.type = o->ref_kv_type;
    mp.kv.type = o->kv.type;
    if (cx_session_new_ex(ref, &rp, &q.sr, &err) || cx_session_new_ex(mod, &mp, &q.sm, &err) ||
        (o->text ? quality_text(&q, ids, n_ids, &err) : quality_greedy(&q, &err))) {
        die("%s", err.msg);
        goto out;
    }
    quality_print(&q, o);
    rc = 0;
out:
    free(q.lp_ref);
    free(q.lp_mod);
    free(q.lr);
    free(q.lm);
    free(q.seq);
    cx_session_free(q.sr);
    cx_session_free(q.sm);
    free(ids);
    free(text);
    cx_model_free(mod);
    cx_model_free(ref);
    return rc;
}
