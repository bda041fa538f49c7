/*
 * lora.c - loading a LoRA adapter for a base model (cx_lora_load) and its
 * bookkeeping: the file's pairs (lora_src.h) are matched to the model's
 * matrices by GGUF name, checked against their shapes, and laid out in one
 * allocation for the forward pass (lora.h).
 */
#include <assert.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../model.h"
#include "../quant.h"
#include "../util.h"
#include "../kernels/lora_kern.h"
#include "lora.h"
#include "lora_src.h"

/* GGUF name suffix of each LORA_* matrix, after "blk.L.". */
static const char *const proj_names[LORA_NPROJ] = {"attn_q.weight",   "attn_k.weight", "attn_v.weight",
                                                   "attn_output.weight", "ffn_gate.weight", "ffn_up.weight",
                                                   "ffn_down.weight"};

/* The model's matrix `proj` of layer l. */
static const cx_weight *base_of(const cx_model *m, int l, int proj) {
    const cx_layer *y = &m->layers[l];
    const cx_weight *w[LORA_NPROJ] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->w_gate, &y->w_up, &y->w_down};
    return w[proj];
}

/* See lora.h. */
int lora_parse_name(const char *name, int n_layer, int *l, int *proj) {
    int off = 0;
    if (sscanf(name, "blk.%d.%n", l, &off) != 1 || off == 0 || *l < 0 || *l >= n_layer) return -1;
    for (int p = 0; p < LORA_NPROJ; p++)
        if (!strcmp(name + off, proj_names[p])) {
            *proj = p;
            return 0;
        }
    return -1;
}

/* See cortex.h. */
cx_lora_params cx_lora_defaults(void) {
    cx_lora_params p = {.type = -1};
    return p;
}

/* See lora.h: FNV-1a over the ids and scales' bits. */
uint64_t lora_set_salt(const cx_lora_use *uses, int n) {
    if (n == 0) return 0;
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < n; i++) {
        uint64_t v[2] = {uses[i].lora->info.id, 0};
        memcpy(&v[1], &uses[i].scale, sizeof uses[i].scale);
        const uint8_t *b = (const uint8_t *)v;
        for (size_t k = 0; k < sizeof v; k++) h = (h ^ b[k]) * 1099511628211ULL;
    }
    return h ? h : 1;
}

/* 1 if path names a PEFT adapter: a directory, or a .safetensors file (anything else is read as GGUF). */
static int lora_is_peft(const char *path) {
    struct stat st;
    size_t n = strlen(path);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return 1;
    return n >= 12 && !strcmp(path + n - 12, ".safetensors");
}

/* Where pair p goes in m (*l, *proj), after checking its name and shape. */
static int check_pair(const cx_model *m, const char *label, const lora_pair *p, int *l, int *proj, cx_err *err) {
    if (lora_parse_name(p->name, m->info.n_layer, l, proj))
        return cx_fail(err, CX_EFORMAT, "%s: tensor '%s' names no matrix of the model an adapter can change "
                       "(blk.0..%d attn_q/k/v/output, ffn_gate/up/down)", label, p->name, m->info.n_layer - 1);
    const cx_weight *w = base_of(m, *l, *proj);
    if (!w->data) /* a mixture of experts: no dense feed-forward matrices to adapt */
        return cx_fail(err, CX_EUNSUP, "%s: tensor '%s' adapts a dense feed-forward matrix; this model's feed-forward is "
                       "a mixture of experts (adapters may change attn_q/k/v/output only)", label, p->name);
    if (p->rank < 1 || p->rank > 4096)
        return cx_fail(err, CX_ERANGE, "%s: tensor '%s' has rank %d (1..4096)", label, p->name, p->rank);
    if (p->n_in != w->cols || p->n_out != w->rows)
        return cx_fail(err, CX_EFORMAT, "%s: tensor '%s' adapts a %lld x %lld matrix, but the model's is %lld x %lld",
                       label, p->name, (long long)p->n_out, (long long)p->n_in, (long long)w->rows,
                       (long long)w->cols);
    return 0;
}

/* 0 if every value of pair p is finite and within f16's range (real
 * adapters are far inside it; a value outside would make q8_0 scales
 * infinite), else CX_EFORMAT naming the tensor. */
static int check_values(const char *label, const lora_pair *p, cx_err *err) {
    const float *v[2] = {p->a, p->b};
    size_t n[2] = {(size_t)p->rank * (size_t)p->n_in, (size_t)p->n_out * (size_t)p->rank};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < n[k]; i++)
            if (!(fabsf(v[k][i]) <= 65504.0f))
                return cx_fail(err, CX_EFORMAT, "%s: tensor '%s.lora_%c' holds %g at element %zu (adapters hold finite "
                               "values within +-65504)", label, p->name, k ? 'b' : 'a', (double)v[k][i], i);
    return 0;
}

/* See lora.h. */
int lora_read_checked(const cx_model *m, const char *path, lora_src *src, cx_err *err) {
    int rc = lora_is_peft(path) ? lora_src_peft(path, m, src, err) : lora_src_gguf(path, src, err);
    if (rc) return rc;
    uint8_t *seen = calloc((size_t)m->info.n_layer * LORA_NPROJ, 1);
    if (!seen) rc = cx_fail(err, CX_ENOMEM, "%s: out of memory", path);
    for (int i = 0; !rc && i < src->n_pairs; i++) {
        int l, proj;
        if ((rc = check_pair(m, src->label, &src->pairs[i], &l, &proj, err)) ||
            (rc = check_values(src->label, &src->pairs[i], err)))
            break;
        if (seen[(size_t)l * LORA_NPROJ + (size_t)proj]++)
            rc = cx_fail(err, CX_EFORMAT, "%s: tensor '%s' is adapted twice", src->label, src->pairs[i].name);
    }
    free(seen);
    if (rc) lora_src_free(src);
    return rc;
}

/* Give every checked pair its place in a->mats: shape, rank, scale. */
static void place_pairs(cx_lora *a, const lora_src *src) {
    for (int i = 0; i < src->n_pairs; i++) {
        const lora_pair *p = &src->pairs[i];
        int l = 0, proj = 0;
        int bad = lora_parse_name(p->name, a->m->info.n_layer, &l, &proj);
        assert(!bad);
        (void)bad;
        lora_mat *mt = &a->mats[(size_t)l * LORA_NPROJ + (size_t)proj];
        mt->rank = p->rank;
        mt->n_in = p->n_in;
        mt->n_out = p->n_out;
        mt->scale = p->alpha > 0 ? p->alpha / (float)p->rank : 1.0f;
    }
}

/* Types and sizes of every matrix; the largest rank sum over one input. */
static size_t plan(cx_lora *a, int type) {
    const cx_model_info *h = &a->m->info;
    size_t bytes = 0;
    static const int group_of[LORA_NPROJ] = {0, 0, 0, 1, 2, 2, 3};
    for (int l = 0; l < h->n_layer; l++) {
        int sum[4] = {0};
        for (int p = 0; p < LORA_NPROJ; p++) {
            lora_mat *mt = &a->mats[(size_t)l * LORA_NPROJ + (size_t)p];
            if (!mt->rank) continue;
            sum[group_of[p]] += mt->rank;
            /* q8_0/q4_0 rows need whole blocks of 32 inputs; a matrix without them keeps f32 */
            mt->a_type = type != CX_TYPE_F32 && mt->n_in % 32 == 0 ? type : CX_TYPE_F32;
            /* q8_0 and q4_0: B as integer groups (integer dot products, lora_kern.h) */
            mt->b_type = type == CX_TYPE_Q8_0 ? KERN_LORA_I8 : type == CX_TYPE_Q4_0 ? KERN_LORA_I4 : type;
            mt->a_row_bytes = quant_row_bytes(mt->a_type, mt->n_in);
            bytes += (mt->a_row_bytes * (size_t)mt->rank + 63) / 64 * 64;
            bytes += (kern_lora_b_bytes(mt->b_type, mt->n_out, mt->rank) + 63) / 64 * 64;
        }
        for (int g = 0; g < 4; g++)
            if (sum[g] > a->group_rank) a->group_rank = sum[g];
    }
    return bytes;
}

/* Copy the pairs into the one allocation, A as rows, B as panels; q8_0 with
 * the model's SIMD activation quantizer (a load is mostly this). 0, or -1
 * out of memory. */
static int lay_out(cx_lora *a, const lora_src *src) {
    uint8_t *at = a->mem;
    int64_t widest = a->m->info.n_ff > a->m->info.n_embd ? a->m->info.n_ff : a->m->info.n_embd;
    if (widest < (int64_t)a->m->info.n_head * a->m->info.head_dim) widest = (int64_t)a->m->info.n_head * a->m->info.head_dim;
    void *scratch = NULL;
    if (posix_memalign(&scratch, 64, kern_act_bytes(KERN_ACT_Q8_32, 1, widest) + 64)) return -1;
    for (int i = 0; i < src->n_pairs; i++) {
        const lora_pair *p = &src->pairs[i];
        int l = 0, proj = 0;
        int bad = lora_parse_name(p->name, a->m->info.n_layer, &l, &proj);
        assert(!bad);
        (void)bad;
        lora_mat *mt = &a->mats[(size_t)l * LORA_NPROJ + (size_t)proj];
        mt->a = at;
        for (int r = 0; r < mt->rank; r++) {
            const float *x = p->a + (size_t)r * (size_t)p->n_in;
            uint8_t *row = at + (size_t)r * mt->a_row_bytes;
            if (mt->a_type == CX_TYPE_Q8_0) kern_q8_0_from_f32(a->m->kern, x, p->n_in, row, scratch);
            else if (mt->a_type == CX_TYPE_Q4_0) quant_quantize_row(CX_TYPE_Q4_0, x, row, p->n_in);
            else memcpy(row, x, sizeof(float) * (size_t)p->n_in);
        }
        at += (mt->a_row_bytes * (size_t)mt->rank + 63) / 64 * 64;
        mt->b = at;
        kern_lora_pack_b(mt->b_type, p->b, p->n_out, p->rank, at, a->m->kern);
        at += (kern_lora_b_bytes(mt->b_type, mt->n_out, mt->rank) + 63) / 64 * 64;
    }
    free(scratch);
    return 0;
}

/* See cortex.h. */
void cx_lora_free(cx_lora *a) {
    if (!a) return;
    free(a->mats);
    free(a->mem);
    free(a);
}

/* The in-memory type p asks for, resolved against the base's matrices. */
static int resolve_type(const cx_model *m, const cx_lora_params *p, cx_err *err) {
    int type = p ? p->type : -1;
    if (type == -1) {
        int wt = m->layers[0].wq.type;
        return wt == CX_TYPE_F32 || wt == CX_TYPE_F16 || wt == CX_TYPE_BF16 ? CX_TYPE_F32 : CX_TYPE_Q8_0;
    }
    if (type != CX_TYPE_F32 && type != CX_TYPE_Q8_0 && type != CX_TYPE_Q4_0)
        return cx_fail(err, CX_EINVAL, "an adapter is held as f32, q8_0 or q4_0, not type %d", type);
    return type;
}

/* See cortex.h. */
int cx_lora_load(const cx_model *m, const char *path, const cx_lora_params *p, cx_lora **out, cx_err *err) {
    static atomic_uint_fast64_t next_id = 1;
    int64_t t0 = cx_now_ns();
    *out = NULL;
    int rc = model_require_weights(m, err);
    if (rc) return rc;
    int type = resolve_type(m, p, err);
    if (type < 0) return type;
    lora_src src;
    if ((rc = lora_read_checked(m, path, &src, err))) return rc;
    cx_lora *a = calloc(1, sizeof *a);
    if (a) a->mats = calloc((size_t)m->info.n_layer * LORA_NPROJ, sizeof *a->mats);
    if (!a || !a->mats) {
        rc = cx_fail(err, CX_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    a->m = m;
    place_pairs(a, &src);
    size_t bytes = plan(a, type);
    if (posix_memalign(&a->mem, 64, bytes ? bytes : 64)) {
        a->mem = NULL;
        rc = cx_fail(err, CX_ENOMEM, "%s: out of memory for the adapter (%zu MiB)", path, bytes >> 20);
        goto done;
    }
    if (lay_out(a, &src)) {
        rc = cx_fail(err, CX_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    cx_lora_info *in = &a->info;
    snprintf(in->path, sizeof in->path, "%s", path);
    in->n_matrices = src.n_pairs;
    in->rank_min = src.pairs[0].rank;
    for (int i = 0; i < src.n_pairs; i++) {
        if (src.pairs[i].rank < in->rank_min) in->rank_min = src.pairs[i].rank;
        if (src.pairs[i].rank > in->rank_max) in->rank_max = src.pairs[i].rank;
    }
    in->alpha = src.pairs[0].alpha;
    in->type = type;
    in->bytes = bytes + sizeof *a + (size_t)m->info.n_layer * LORA_NPROJ * sizeof *a->mats;
    in->id = atomic_fetch_add(&next_id, 1);
done:
    lora_src_free(&src);
    if (rc) {
        cx_lora_free(a);
        return rc;
    }
    a->info.load_ns = cx_now_ns() - t0;
    *out = a;
    return 0;
}

/* See cortex.h. */
void cx_lora_get_info(const cx_lora *a, cx_lora_info *out) { *out = a->info; }
