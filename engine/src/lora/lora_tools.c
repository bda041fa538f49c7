/*
 * lora_tools.c - the adapter tools of cortex_tools.h: the target list
 * parser, deterministic synthetic adapters in llama.cpp's GGUF LoRA format
 * (for benchmarks and tests: real trained adapters cannot be downloaded
 * here), and merge-lora, which bakes adapters into a copy of the base (the
 * reference the adapted forward pass is tested against).
 */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../gguf.h"
#include "../gguf_write.h"
#include "../model.h"
#include "../quant.h"
#include "../synth.h"
#include "../util.h"
#include "cortex_tools.h"
#include "lora.h"
#include "lora_src.h"

/* Target names, in LORA order (bit i of a mask is matrix i). */
static const char *const target_names[LORA_NPROJ] = {"q", "k", "v", "o", "gate", "up", "down"};
static const char *const gguf_parts[LORA_NPROJ] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                                   "ffn_gate", "ffn_up", "ffn_down"};

/* See cortex_tools.h. */
int cx_lora_targets_parse(const char *list, unsigned *mask, cx_err *err) {
    *mask = 0;
    if (!strcmp(list, "all")) {
        *mask = CX_LORA_ALL;
        return 0;
    }
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < LORA_NPROJ; i++)
            if (strlen(target_names[i]) == n && !strncmp(p, target_names[i], n)) found = i;
        if (found < 0)
            return cx_fail(err, CX_EINVAL, "unknown adapter target '%.*s' (q, k, v, o, gate, up, down or all)", (int)n,
                           p);
        *mask |= 1u << found;
        p += n + (p[n] == ',');
    }
    if (!*mask) return cx_fail(err, CX_EINVAL, "no adapter targets given");
    return 0;
}

/* RMS of a base matrix's values, whatever its type and layout (a repacked
 * matrix's rows cannot be dequantized one by one): for x ~ N(0, 1),
 * E|W·x|^2 = |W|_F^2, so |W·x| / sqrt(rows·cols) estimates it, with the
 * model's own kernels. -1 when out of memory. */
static double weight_rms(const cx_model *m, const cx_weight *w) {
    const kern_ops *k = m->kern;
    int fmt = kern_act_format(w->type);
    float *x = malloc(sizeof(float) * (size_t)w->cols), *y = malloc(sizeof(float) * (size_t)w->rows);
    void *mem = NULL;
    if (posix_memalign(&mem, 64, kern_act_bytes(fmt, 1, w->cols) + 64)) mem = NULL;
    double rms = -1;
    if (x && y && mem) {
        uint64_t st = 12345;
        synth_fill_normal(&st, x, w->cols, 1.0f);
        kern_act a;
        kern_act_init(&a, fmt, 1, w->cols, mem);
        a.f = x; /* f32 activations are read in place; the 8-bit formats are made from them */
        kern_act_set(k, &a, 0, x);
        kern_gemm_fn gemm = kern_gemm_of(k, w->type, w->layout);
        assert((gemm || w->layout == KERN_LAYOUT_ROWS) && "a repacked layout has its gemm");
        if (gemm) gemm(w->data, w->row_bytes, 0, w->rows, &a, y, w->rows);
        else kern_gemm_generic(k, w->type, w->data, w->row_bytes, 0, w->rows, &a, y, w->rows);
        double s = 0;
        for (int64_t r = 0; r < w->rows; r++) s += (double)y[r] * y[r];
        rms = sqrt(s / ((double)w->rows * (double)w->cols));
        /* three significant digits: kernels of different instruction sets round the sum
         * differently, and the file must not depend on the machine that wrote it */
        double unit = pow(10.0, floor(log10(rms)) - 2);
        if (rms > 0) rms = round(rms / unit) * unit;
    }
    free(x);
    free(y);
    free(mem);
    return rms;
}

/* One synthetic tensor in the plan: the pair's A or B of layer l, matrix p. */
typedef struct syn_tensor {
    char name[96];
    int type, l, p, is_b;
    int64_t ne[2];
    float std;
} syn_tensor;

/* Write tensor t: rows of N(0, std^2) from its own stream, stored as t->type. */
static int syn_write(const gguf_writer *w, FILE *f, const syn_tensor *t, uint64_t seed, float *row, void *qrow) {
    uint64_t st = synth_name_seed(seed, t->name);
    size_t rb = quant_row_bytes(t->type, t->ne[0]);
    for (int64_t r = 0; r < t->ne[1]; r++) {
        synth_fill_normal(&st, row, t->ne[0], t->std);
        quant_quantize_row(t->type, row, qrow, t->ne[0]);
        if (fwrite(qrow, 1, rb, f) != rb) return CX_EIO;
    }
    return gguf_w_pad(w, f, rb * (uint64_t)t->ne[1]);
}

/* See cortex_tools.h. */
int cx_lora_synth_write(const cx_model *m, const cx_lora_synth_params *p, const char *path, cx_err *err) {
    const cx_model_info *h = &m->info;
    int rc = model_require_weights(m, err);
    if (rc) return rc;
    if (p->rank < 1 || p->rank > 4096) return cx_fail(err, CX_EINVAL, "adapter rank %d is out of range (1..4096)", p->rank);
    if (!(p->targets & CX_LORA_ALL)) return cx_fail(err, CX_EINVAL, "no adapter targets given");
    if (p->type != CX_TYPE_F32 && p->type != CX_TYPE_F16 && p->type != CX_TYPE_Q8_0)
        return cx_fail(err, CX_EINVAL, "an adapter file holds f32, f16 or q8_0 tensors, not %s", cx_type_name(p->type));
    int n_t = 0, per_layer = 0;
    for (int i = 0; i < LORA_NPROJ; i++) per_layer += (p->targets >> i) & 1;
    syn_tensor *plan = calloc((size_t)h->n_layer * (size_t)per_layer * 2, sizeof *plan);
    int64_t widest = h->n_ff > h->n_embd ? h->n_ff : h->n_embd;
    if (widest < (int64_t)h->n_head * h->head_dim) widest = (int64_t)h->n_head * h->head_dim;
    if (widest < p->rank) widest = p->rank;
    float *row = malloc(sizeof(float) * (size_t)widest);
    void *qrow = malloc(quant_row_bytes(CX_TYPE_F32, widest));
    gguf_writer *w = gguf_writer_new(0);
    char *tmp = malloc(strlen(path) + 5);
    FILE *f = NULL;
    if (!plan || !row || !qrow || !w || !tmp) {
        rc = cx_fail(err, CX_ENOMEM, "out of memory");
        goto done;
    }
    float scale = p->alpha > 0 ? p->alpha / (float)p->rank : 1.0f;
    float strength = p->strength > 0 ? p->strength : 0.25f;
    for (int l = 0; l < h->n_layer; l++)
        for (int pj = 0; pj < LORA_NPROJ; pj++) {
            if (!((p->targets >> pj) & 1)) continue;
            const cx_layer *y = &m->layers[l];
            const cx_weight *base[LORA_NPROJ] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->w_gate, &y->w_up, &y->w_down};
            const cx_weight *bw = base[pj];
            if (!bw->data) {
                rc = cx_fail(err, CX_EUNSUP, "%s: target %s: the model's feed-forward is a mixture of experts "
                             "(adapters may change attn_q/k/v/output only)", h->name, gguf_parts[pj]);
                goto done;
            }
            /* A ~ N(0, 1/n_in) keeps |A·x| ~ |x|; each entry of scale·B·A then has
             * std scale·std_B·sqrt(rank/n_in): solve for the asked RMS */
            double rms = weight_rms(m, bw);
            if (rms < 0) {
                rc = cx_fail(err, CX_ENOMEM, "out of memory");
                goto done;
            }
            double std_b = strength * rms * sqrt((double)bw->cols / p->rank) / scale;
            for (int is_b = 0; is_b < 2; is_b++) {
                syn_tensor *t = &plan[n_t++];
                snprintf(t->name, sizeof t->name, "blk.%d.%s.weight.lora_%c", l, gguf_parts[pj], is_b ? 'b' : 'a');
                t->l = l;
                t->p = pj;
                t->is_b = is_b;
                t->ne[0] = is_b ? p->rank : bw->cols;
                t->ne[1] = is_b ? bw->rows : p->rank;
                t->type = t->ne[0] % quant_block_size(p->type) ? CX_TYPE_F32 : p->type;
                t->std = is_b ? (float)std_b : (float)(1.0 / sqrt((double)bw->cols));
            }
        }
    char name[160];
    snprintf(name, sizeof name, "cortex synth-lora rank %d seed %llu", p->rank, (unsigned long long)p->seed);
    gguf_w_str(w, "general.architecture", m->arch);
    gguf_w_str(w, "general.type", "adapter");
    gguf_w_str(w, "general.name", name);
    gguf_w_str(w, "adapter.type", "lora");
    if (p->alpha > 0) gguf_w_f32(w, "adapter.lora.alpha", p->alpha);
    for (int i = 0; i < n_t; i++) gguf_w_tensor(w, plan[i].name, (uint32_t)plan[i].type, 2, plan[i].ne);
    sprintf(tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "wb"))) {
        rc = cx_fail(err, CX_EIO, "%s: cannot create: %s", tmp, strerror(errno));
        goto done;
    }
    if ((rc = gguf_w_header(w, f, path, NULL, err))) goto done;
    for (int i = 0; i < n_t; i++)
        if (syn_write(w, f, &plan[i], p->seed, row, qrow)) {
            rc = cx_fail(err, CX_EIO, "%s: write failed in tensor %s: %s", tmp, plan[i].name, strerror(errno));
            goto done;
        }
    int closed = fclose(f);
    f = NULL;
    if (closed) rc = cx_fail(err, CX_EIO, "%s: write failed: %s", tmp, strerror(errno));
    else if (rename(tmp, path)) rc = cx_fail(err, CX_EIO, "%s: cannot rename into place: %s", path, strerror(errno));
done:
    if (f) fclose(f);
    if (rc && tmp) remove(tmp);
    free(plan);
    free(row);
    free(qrow);
    free(tmp);
    gguf_writer_free(w);
    return rc;
}

/* ---- merge-lora ---- */

/* The adapters being baked in: every pair of every source, by tensor name. */
typedef struct merge_ctx {
    lora_src *src;
    const float *scales;
    int n;
    double *acc;             /* one row's change, in double */
} merge_ctx;

/* 1 if some adapter changes tensor `name`. */
static int merge_wants(void *ctx, const char *name) {
    merge_ctx *c = ctx;
    for (int i = 0; i < c->n; i++)
        for (int k = 0; k < c->src[i].n_pairs; k++)
            if (!strcmp(c->src[i].pairs[k].name, name)) return 1;
    return 0;
}

/* Row r of the tensor += sum over adapters of s·(B[r] · A), summed in double. */
static void merge_edit(void *ctx, const char *name, int64_t r, float *vals, int64_t n) {
    merge_ctx *c = ctx;
    memset(c->acc, 0, sizeof(double) * (size_t)n);
    for (int i = 0; i < c->n; i++)
        for (int k = 0; k < c->src[i].n_pairs; k++) {
            const lora_pair *p = &c->src[i].pairs[k];
            if (strcmp(p->name, name)) continue;
            double s = (p->alpha > 0 ? p->alpha / p->rank : 1.0) * c->scales[i];
            for (int j = 0; j < p->rank; j++) {
                double bj = s * p->b[r * p->rank + j];
                const float *a = p->a + (size_t)j * (size_t)n;
                for (int64_t x = 0; x < n; x++) c->acc[x] += bj * a[x];
            }
        }
    for (int64_t x = 0; x < n; x++) vals[x] = (float)(vals[x] + c->acc[x]);
}

/* See cortex_tools.h. */
int cx_lora_merge(const char *in, const char *tokenizer, const char *const *adapters, const float *scales, int n,
                  const char *out, int ftype, cx_err *err) {
    if (n < 1) return cx_fail(err, CX_EINVAL, "merge-lora needs at least one adapter");
    cx_model *m = NULL;
    int rc = cx_model_load(in, tokenizer, &m, err);
    if (rc) return rc;
    merge_ctx c = {calloc((size_t)n, sizeof(lora_src)), scales, 0, NULL};
    int64_t widest = m->info.n_ff > m->info.n_embd ? m->info.n_ff : m->info.n_embd;
    if (widest < (int64_t)m->info.n_head * m->info.head_dim) widest = (int64_t)m->info.n_head * m->info.head_dim;
    c.acc = malloc(sizeof(double) * (size_t)widest);
    if (!c.src || !c.acc) rc = cx_fail(err, CX_ENOMEM, "out of memory");
    for (; !rc && c.n < n; c.n++)
        if ((rc = lora_read_checked(m, adapters[c.n], &c.src[c.n], err))) break;
    if (!rc) {
        cx_row_edit e = {&c, merge_wants, merge_edit};
        rc = cx_quantize_file_ex(in, tokenizer, out, ftype, &e, NULL, err);
    }
    for (int i = 0; i < c.n; i++) lora_src_free(&c.src[i]);
    free(c.src);
    free(c.acc);
    cx_model_free(m);
    return rc;
}
