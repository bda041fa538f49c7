/*
 * roofline.c - bytes read per decoded token, the bandwidth roofline, and the
 * sentence that puts a run's decode speed against it (see roofline.h).
 */
#include "roofline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortex_tools.h"
#include "hw_store.h"
#include "store_read.h"
#include "hx_err.h"

void roof_model_from_numbers(roof_model *out, double weight_bytes, double embd_bytes, double n_vocab, int tied_output,
                             int n_layer, int n_head_kv, int head_dim) {
    double row = n_vocab > 0 ? embd_bytes / n_vocab : 0;
    /* Untied: the embedding is only looked up (one row). Tied: the classifier
     * reads it whole, and the lookup reads one row of it besides. */
    out->weight_bytes = weight_bytes - (tied_output ? 0 : embd_bytes) + row;
    out->kv_bytes_per_pos = 2.0 * n_layer * n_head_kv * head_dim * ROOF_KV_ELEM_BYTES;
    out->weight_flops = 0; /* unknown from these numbers */
    out->flops_per_pos = 0;
}

/* See roofline.h. */
int roof_weights(const cx_tensor_info *t, int n, int tied_output, int n_expert_used, roof_model *out, char *err,
                 size_t errlen) {
    double bytes = 0, flops = 0;
    int have_embd = 0;
    for (int i = 0; i < n; i++) {
        double elems = 1, share = 1;
        for (int d = 0; d < t[i].n_dims; d++) elems *= (double)t[i].ne[d];
        if (!strcmp(t[i].name, "token_embd.weight")) {
            have_embd = 1;
            double rows = t[i].n_dims > 1 ? (double)t[i].ne[1] : 1;
            /* Untied: only looked up (one row). Tied: the classifier reads it whole, the lookup one row besides. */
            bytes += (double)t[i].nbytes / rows + (tied_output ? (double)t[i].nbytes : 0);
            flops += tied_output ? 2 * elems : 0;
            continue;
        }
        if (strstr(t[i].name, "_exps.")) { /* experts along the last dimension: only the selected ones are read */
            int64_t n_expert = t[i].ne[t[i].n_dims > 0 ? t[i].n_dims - 1 : 0];
            if (n_expert_used <= 0 || n_expert_used > n_expert)
                return hx_fail(err, errlen, "%s holds %lld experts, but the model says each token uses %d",
                               t[i].name, (long long)n_expert, n_expert_used);
            share = (double)n_expert_used / (double)n_expert;
        }
        bytes += (double)t[i].nbytes * share;
        if (t[i].n_dims >= 2) flops += 2 * elems * share;
    }
    if (!have_embd) return hx_fail(err, errlen, "the model has no token_embd.weight tensor");
    out->weight_bytes = bytes;
    out->weight_flops = flops;
    return 0;
}

/* See roofline.h. */
int roof_model_of(const cx_model *m, int kv_type, roof_model *out, char *err, size_t errlen) {
    const cx_model_info *mi = cx_model_get_info(m);
    cx_tensor_info *t = malloc(sizeof *t * (size_t)(mi->n_tensors > 0 ? mi->n_tensors : 1));
    if (!t) return hx_fail(err, errlen, "out of memory");
    int n = 0;
    for (int i = 0; i < mi->n_tensors; i++)
        if (cx_model_tensor(m, i, &t[n]) == 0) n++;
    memset(out, 0, sizeof *out);
    int rc = roof_weights(t, n, mi->tied_output, mi->n_expert_used, out, err, errlen);
    free(t);
    if (rc) return -1;
    out->kv_bytes_per_pos = cx_kv_bytes_per_pos(m, kv_type);
    if (out->kv_bytes_per_pos < 0) return hx_fail(err, errlen, "KV type %d has no hot blocks", kv_type);
    out->flops_per_pos = 2.0 * 2.0 * mi->n_layer * mi->n_head * mi->head_dim;
    return 0;
}

double roof_bytes_per_token(const roof_model *rm, double ctx_mean, int shared) {
    return rm->weight_bytes / (shared > 1 ? shared : 1) + rm->kv_bytes_per_pos * ctx_mean;
}

double roof_tps(double read_gbs, double bytes_per_token) {
    if (!(read_gbs > 0) || !(bytes_per_token > 0)) return NAN;
    return read_gbs * 1e9 / bytes_per_token;
}

double roof_flops_per_token(const roof_model *rm, double ctx_mean) {
    return rm->weight_flops > 0 ? rm->weight_flops + rm->flops_per_pos * ctx_mean : NAN;
}

void roof_apply(rep_result *reps, int n_reps, const roof_model *rm, double read_gbs, int shared) {
    for (int r = 0; r < n_reps; r++) {
        double ctx = rep_get_metric(&reps[r], "decode_ctx_mean"), dec = rep_get_metric(&reps[r], "decode_tps");
        if (isnan(ctx) || isnan(dec)) continue;
        double bpt = roof_bytes_per_token(rm, ctx, shared), rt = roof_tps(read_gbs, bpt);
        rep_set_metric(&reps[r], "bytes_per_token", bpt);
        double fpt = roof_flops_per_token(rm, ctx);
        if (!isnan(fpt)) rep_set_metric(&reps[r], "flops_per_token", fpt);
        if (isnan(rt)) continue;
        rep_set_metric(&reps[r], "roofline_tps", rt);
        rep_set_metric(&reps[r], "roofline_frac", dec / rt);
    }
}

/* A run's figures against the roofline, stored or worked out now. */
typedef struct roof_view {
    double decode, rt, frac, bpt, gbs;
    int64_t hw_id;
    int threads, late; /* late: the hw row was measured after the run */
} roof_view;

/* Fill v for a run: 1 with a roofline, 0 nothing to say, -1 no hw row. */
static int roof_view_of(store *s, int64_t run, roof_view *v) {
    memset(v, 0, sizeof *v);
    v->decode = store_metric_median(s, run, "decode_tps");
    v->bpt = store_metric_median(s, run, "bytes_per_token");
    v->rt = store_metric_median(s, run, "roofline_tps");
    v->frac = store_metric_median(s, run, "roofline_frac");
    v->gbs = NAN;
    if (isnan(v->decode) || isnan(v->bpt)) return 0;
    store_run r;
    if (store_run_load(s, run, &r) == 1) {
        v->threads = r.threads;
        v->hw_id = r.hw_id;
    }
    if (!isnan(v->rt) && !isnan(v->frac)) {
        v->gbs = v->rt * v->bpt / 1e9;
        return 1;
    }
    hw_ref h;
    if (hw_store_lookup(s, NULL, r.env_id, v->threads, &h) != 1) return -1;
    v->late = 1;
    v->hw_id = h.id;
    v->gbs = h.read_gbs;
    v->rt = roof_tps(h.read_gbs, v->bpt);
    v->frac = v->decode / v->rt;
    return 1;
}

int roof_describe(store *db, int64_t run, char *buf, size_t n) {
    roof_view v;
    int rc = roof_view_of(db, run, &v);
    if (rc != 1) return rc;
    snprintf(buf, n, "decode %.2f tok/s = %.0f%% of roofline %.2f tok/s (%.3f MB read per token at %.2f GB/s,"
                     " hw row %lld%s)",
             v.decode, 100 * v.frac, v.rt, v.bpt / 1e6, v.gbs, (long long)v.hw_id,
             v.late ? ", measured after this run" : "");
    return 1;
}

void roof_fraction(store *db, int64_t run, double *decode_tps, double *frac) {
    roof_view v;
    int rc = roof_view_of(db, run, &v);
    *decode_tps = v.decode;
    *frac = rc == 1 ? v.frac : NAN;
}
