/*
 * model_gguf.c - a GGUF image into a cx_model (model_from_gguf): the
 * architecture (llama, qwen2, gpt-oss) and its hyper-parameters, metadata
 * this engine would compute wrong refused by name, every tensor found with
 * the shape the hyper-parameters imply and a type the kernels compute with,
 * weight views pointed into the image and the small vectors (norms, biases,
 * RoPE factors) copied as f32. A file with no tensors loads its vocabulary
 * alone. llama2c.c is the same for llama2.c checkpoints; model.c maps the
 * file and calls one of them.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "quant.h"
#include "util.h"

typedef struct gguf_loader {
    cx_model *m;
    const gguf_ctx *g;
    const char *L;
    cx_err *err;
    float *norm_next; /* where the next norm, bias or factor vector is copied */
    const char *arch; /* the metadata key prefix: general.architecture */
} gguf_loader;

/* Find tensor `name` of shape want[0..n_dims) (ggml order: want[0] is the
 * row length) in a supported type; the message names the tensor and both shapes. */
static int get_tensor_nd(gguf_loader *ld, const char *name, int n_dims, const int64_t *want, int optional,
                         const gguf_tensor **out) {
    const gguf_tensor *t = gguf_find_tensor(ld->g, name);
    *out = t;
    if (!t) return optional ? 0 : cx_fail(ld->err, CX_EFORMAT, "%s: required tensor '%s' is missing", ld->L, name);
    int bad = (int)t->n_dims != n_dims;
    for (int d = 0; d < n_dims && !bad; d++) bad = t->ne[d] != want[d];
    if (bad) {
        char got[80], exp[80];
        int a = 0, b = 0;
        for (int d = 0; d < (int)t->n_dims && d < 4; d++)
            a += snprintf(got + a, sizeof got - (size_t)a, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
        for (int d = 0; d < n_dims; d++)
            b += snprintf(exp + b, sizeof exp - (size_t)b, "%s%lld", d ? ", " : "", (long long)want[d]);
        return cx_fail(ld->err, CX_EFORMAT, "%s: tensor '%s' has shape [%s] (%u dims), expected [%s]", ld->L, name, got,
                       t->n_dims, exp);
    }
    if (!quant_supported((int)t->type))
        return cx_fail(ld->err, CX_EUNSUP, "%s: tensor '%s' has type %s, which this engine does not support yet "
                       "(f32, f16, bf16, q8_0, q4_0, q4_K, q6_K, mxfp4)", ld->L, name, gguf_type_name(t->type));
    if (want[0] % quant_block_size((int)t->type))
        return cx_fail(ld->err, CX_EFORMAT, "%s: tensor '%s' rows of %lld weights do not fill whole %s blocks of %d",
                       ld->L, name, (long long)want[0], gguf_type_name(t->type), quant_block_size((int)t->type));
    cx_model *m = ld->m;
    model_add_tensor(m, name, (int)t->type, (int)t->n_dims, t->ne, ld->g->data_offset + t->offset, t->nbytes);
    return 0;
}

/* Find tensor `name` of shape [cols, rows] (rows 0 means 1-D) in a supported type. */
static int get_tensor(gguf_loader *ld, const char *name, int64_t cols, int64_t rows, int optional,
                      const gguf_tensor **out) {
    int64_t want[2] = {cols, rows};
    return get_tensor_nd(ld, name, rows ? 2 : 1, want, optional, out);
}

static int load_matrix(gguf_loader *ld, const char *name, int64_t cols, int64_t rows, int optional, cx_weight *w) {
    const gguf_tensor *t;
    int rc = get_tensor(ld, name, cols, rows, optional, &t);
    if (rc || !t) return rc;
    w->data = t->data;
    w->type = (int)t->type;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = quant_row_bytes(w->type, cols);
    return 0;
}

/* The n_expert matrices of the 3-D tensor `name` (ggml shape [cols, rows,
 * n_expert]) as one weight of n_expert x rows rows: expert e is the row
 * range e*rows .. e*rows+rows-1 (ggml stores the experts one after another). */
static int load_experts(gguf_loader *ld, const char *name, int64_t cols, int64_t rows, int64_t n_expert, cx_weight *w) {
    int64_t want[3] = {cols, rows, n_expert};
    const gguf_tensor *t;
    int rc = get_tensor_nd(ld, name, 3, want, 0, &t);
    if (rc) return rc;
    w->data = t->data;
    w->type = (int)t->type;
    w->rows = rows * n_expert;
    w->expert_rows = rows;
    ld->m->info.expert_bytes += t->nbytes;
    w->cols = cols;
    w->row_bytes = quant_row_bytes(w->type, cols);
    return 0;
}

/* A 2-D tensor of `count` vectors of n values (the experts' biases,
 * [n, count]), copied as f32 like load_vec; *out stays NULL if optional and absent. */
static int load_vecs(gguf_loader *ld, const char *name, int64_t n, int64_t count, int optional, const float **out) {
    const gguf_tensor *t;
    int rc = get_tensor(ld, name, n, count, optional, &t);
    if (rc || !t) return rc;
    quant_dequantize_row((int)t->type, t->data, ld->norm_next, n * count);
    *out = ld->norm_next;
    ld->norm_next += n * count;
    return 0;
}

/* A 1-D tensor of n values (norm weights, biases, RoPE factors), copied as
 * f32 into the model's vector storage; *out stays NULL if optional and absent. */
static int load_vec(gguf_loader *ld, const char *name, int64_t n, int optional, const float **out) {
    const gguf_tensor *t;
    int rc = get_tensor(ld, name, n, 0, optional, &t);
    if (rc || !t) return rc;
    quant_dequantize_row((int)t->type, t->data, ld->norm_next, n);
    *out = ld->norm_next;
    ld->norm_next += n;
    return 0;
}

static int load_norm(gguf_loader *ld, const char *name, int64_t n, const float **out) {
    return load_vec(ld, name, n, 0, out);
}

/* Read an integer hyper-parameter "<arch>.<key>"; absent + required is an error. */
static int hp_u32(gguf_loader *ld, const char *key, int required, uint32_t dflt, int *out) {
    char full[96];
    snprintf(full, sizeof full, "%s.%s", ld->arch, key);
    uint32_t v = dflt;
    int r = gguf_get_u32(ld->g, full, &v);
    if (r < 0) return cx_fail(ld->err, CX_EFORMAT, "%s: metadata '%s' is not an integer in range", ld->L, full);
    if (r == 0 && required) return cx_fail(ld->err, CX_EFORMAT, "%s: required metadata '%s' is missing", ld->L, full);
    if (v > (1u << 30)) return cx_fail(ld->err, CX_ERANGE, "%s: absurd value %u for '%s'", ld->L, v, full);
    *out = (int)v;
    return 0;
}

/* Read a float hyper-parameter "<arch>.<key>", dflt if absent. */
static int hp_f32(gguf_loader *ld, const char *key, float dflt, float *out) {
    char full[96];
    snprintf(full, sizeof full, "%s.%s", ld->arch, key);
    *out = dflt;
    if (gguf_get_f32(ld->g, full, out) < 0)
        return cx_fail(ld->err, CX_EFORMAT, "%s: metadata '%s' is not a number", ld->L, full);
    return 0;
}

#define MODEL_NTYPES 40 /* every supported type's ggml id is below this (mxfp4: 39) */

/* The type of the layer matrices; if they mix types, CX_FTYPE_Q4_K_M when the
 * file says it is llama.cpp's Q4_K_M (general.file_type 15), else the type
 * holding most of their weights (lowest type id on ties). */
static int main_type(cx_model *m, const gguf_ctx *g) {
    uint64_t weights[MODEL_NTYPES] = {0};
    int first = m->layers[0].wq.type, mixed = 0;
    for (int l = 0; l < m->info.n_layer; l++) {
        cx_weight *ws[MODEL_LAYER_MATS];
        int n = model_layer_matrices(&m->layers[l], ws);
        for (int i = 0; i < n; i++) {
            assert(ws[i]->type >= 0 && ws[i]->type < MODEL_NTYPES);
            weights[ws[i]->type] += (uint64_t)ws[i]->rows * (uint64_t)ws[i]->cols;
            mixed |= ws[i]->type != first;
        }
    }
    if (!mixed) return first;
    uint32_t ftype = 0;
    if (gguf_get_u32(g, "general.file_type", &ftype) == 1 && ftype == 15) return CX_FTYPE_Q4_K_M;
    int best = first;
    for (int t = 0; t < MODEL_NTYPES; t++)
        if (weights[t] > weights[best]) best = t;
    return best;
}

/* Fill m from a GGUF with no tensors: the vocabulary alone, whatever the
 * architecture (tokenizing needs nothing else); sessions refuse such a model
 * (model_require_weights). */
static int model_vocab_only(cx_model *m, const gguf_ctx *g, const char *L, cx_err *err) {
    gguf_str s;
    if (gguf_get_str(g, "general.name", &s) == 1)
        snprintf(m->name, sizeof m->name, "%.*s", (int)(s.len > 127 ? 127 : s.len), s.ptr);
    if (gguf_get_str(g, "general.architecture", &s) == 1)
        snprintf(m->arch, sizeof m->arch, "%.*s", (int)(s.len > 31 ? 31 : s.len), s.ptr);
    int rc = tok_load_gguf(&m->vocab, g, L, err);
    if (rc) return rc;
    m->info.vocab_only = 1;
    m->info.n_vocab = m->vocab.n;
    m->info.main_type = -1;
    return 0;
}

/* The metadata gpt-oss files carry, after "gpt-oss.": all of them are read
 * (vocab_size and rope.scaling.finetuned change nothing here); any other
 * key of the architecture is refused by name, since llama.cpp would compute
 * something this engine does not. */
static const char *GPTOSS_KEYS[] = {
    "context_length", "embedding_length", "feed_forward_length", "block_count", "attention.head_count",
    "attention.head_count_kv", "attention.key_length", "attention.value_length", "attention.layer_norm_rms_epsilon",
    "attention.sliding_window", "rope.freq_base", "rope.dimension_count", "rope.scaling.type", "rope.scaling.factor",
    "rope.scaling.original_context_length", "rope.scaling.attn_factor", "rope.scaling.finetuned", "expert_count",
    "expert_used_count", "expert_feed_forward_length", "vocab_size", NULL};

/* llama and qwen2 metadata that changes the computation beyond what this
 * engine does for them, refused by name (other keys are harmless there). */
static const char *LLAMA_REFUSED[] = {
    "attention.sliding_window", "attn_logit_softcapping", "final_logit_softcapping", "rope.scaling.yarn_log_multiplier",
    "rope.scaling.yarn_ext_factor", "rope.scaling.yarn_attn_factor", "rope.scaling.yarn_beta_fast",
    "rope.scaling.yarn_beta_slow", "expert_shared_count", "expert_weights_scale", "expert_weights_norm",
    "expert_gating_func", "interleave_moe_layer_step", "leading_dense_block_count",
    "expert_shared_feed_forward_length", NULL};

/* CX_EUNSUP naming the first key of the architecture's prefix that is not
 * in `known` (gpt-oss), or the first key in `refused` that is present. */
static int model_refuse_keys(gguf_loader *ld, const char *const *known, const char *const *refused) {
    char key[96];
    size_t pl = strlen(ld->arch);
    for (uint64_t i = 0; known && i < ld->g->n_kv; i++) {
        gguf_str k = ld->g->kv[i].key;
        if (k.len <= pl + 1 || memcmp(k.ptr, ld->arch, pl) || k.ptr[pl] != '.') continue;
        int ok = 0;
        for (int j = 0; known[j] && !ok; j++) ok = strlen(known[j]) == k.len - pl - 1 && !memcmp(known[j], k.ptr + pl + 1, k.len - pl - 1);
        if (!ok)
            return cx_fail(ld->err, CX_EUNSUP, "%s: metadata '%.*s' is not supported", ld->L, (int)(k.len > 80 ? 80 : k.len),
                           k.ptr);
    }
    for (int j = 0; refused && refused[j]; j++) {
        snprintf(key, sizeof key, "%s.%s", ld->arch, refused[j]);
        if (gguf_find(ld->g, key)) return cx_fail(ld->err, CX_EUNSUP, "%s: metadata '%s' is not supported", ld->L, key);
    }
    return 0;
}

/* rope.scaling.*: none; linear (rope_freq_scale); YaRN, with ggml's defaults
 * (ext_factor 1, beta_fast 32, beta_slow 1; the original context defaults
 * to context_length, the attention factor to 1). Others are refused by name. */
static int model_rope_scaling(gguf_loader *ld) {
    cx_model *m = ld->m;
    cx_model_info *h = &m->info;
    char key[96];
    snprintf(key, sizeof key, "%s.rope.scaling.type", ld->arch);
    gguf_str st;
    int r = gguf_get_str(ld->g, key, &st);
    h->rope_scaling = "none";
    if (r < 0) return cx_fail(ld->err, CX_EFORMAT, "%s: %s is not a string", ld->L, key);
    if (r == 0 || gguf_str_eq(st, "none")) return 0;
    int yarn = gguf_str_eq(st, "yarn");
    if (!yarn && !gguf_str_eq(st, "linear"))
        return cx_fail(ld->err, CX_EUNSUP, "%s: RoPE scaling '%.*s' (%s) is not supported (none, linear, yarn, and Llama "
                       "3's rope_freqs.weight are)", ld->L, (int)(st.len > 32 ? 32 : st.len), st.ptr, key);
    float f = 1.0f;
    if (hp_f32(ld, "rope.scaling.factor", 1.0f, &f)) return CX_EFORMAT;
    if (!(f >= 1.0f && f <= 1024.0f))
        return cx_fail(ld->err, CX_ERANGE, "%s: %s.rope.scaling.factor %g is out of range", ld->L, ld->arch, f);
    h->rope_freq_scale = 1.0f / f;
    h->rope_scaling = "linear";
    if (!yarn) return 0;
    h->rope_scaling = "yarn";
    m->yarn_factor = f;
    m->yarn_beta_fast = 32.0f;
    m->yarn_beta_slow = 1.0f;
    if (hp_u32(ld, "rope.scaling.original_context_length", 0, (uint32_t)h->n_ctx, &m->yarn_orig_ctx) ||
        hp_f32(ld, "rope.scaling.attn_factor", 1.0f, &m->yarn_attn_factor))
        return CX_EFORMAT;
    if (m->yarn_orig_ctx < 1 || !(m->yarn_attn_factor > 0 && m->yarn_attn_factor < 100))
        return cx_fail(ld->err, CX_ERANGE, "%s: YaRN original context %d or attention factor %g out of range", ld->L,
                       m->yarn_orig_ctx, m->yarn_attn_factor);
    return 0;
}

/*
 * Metadata that changes the computation beyond what this engine does is
 * refused by name: RoPE scaling other than linear and YaRN (LongRoPE, ...;
 * Llama 3's scaling arrives as rope_freqs.weight factors), a value length
 * other than the key length (head_dim), and per architecture what it does
 * not use (model_refuse_keys). Reads the experts' counts and width and the
 * sliding window (gpt-oss).
 */
static int model_check_arch_keys(gguf_loader *ld, int gptoss) {
    cx_model_info *h = &ld->m->info;
    int rc = model_rope_scaling(ld);
    if (rc) return rc;
    int v = 0;
    if (hp_u32(ld, "attention.value_length", 0, (uint32_t)h->head_dim, &v)) return CX_EFORMAT;
    if (v != h->head_dim)
        return cx_fail(ld->err, CX_EUNSUP, "%s: %s.attention.value_length = %d differs from the key length %d: not supported",
                       ld->L, ld->arch, v, h->head_dim);
    if ((rc = model_refuse_keys(ld, gptoss ? GPTOSS_KEYS : NULL, gptoss ? NULL : LLAMA_REFUSED))) return rc;
    if (!strcmp(ld->arch, "qwen2") && (rc = model_refuse_keys(ld, NULL, (const char *[]){"expert_count", NULL})))
        return rc;
    if (hp_u32(ld, "expert_count", gptoss, 0, &h->n_expert) || hp_u32(ld, "expert_used_count", h->n_expert > 0, 0,
                                                                       &h->n_expert_used) ||
        hp_u32(ld, "expert_feed_forward_length", gptoss, (uint32_t)h->n_ff, &h->n_ff_expert) ||
        hp_u32(ld, "attention.sliding_window", gptoss, 0, &h->sliding_window))
        return CX_EFORMAT;
    if (h->n_expert > MODEL_MAX_EXPERTS || (h->n_expert > 0 && (h->n_expert_used < 1 || h->n_expert_used > h->n_expert)) ||
        (h->n_expert == 0 && h->n_expert_used))
        return cx_fail(ld->err, CX_EFORMAT, "%s: %s.expert_used_count %d with expert_count %d (1 <= used <= count <= %d)",
                       ld->L, ld->arch, h->n_expert_used, h->n_expert, MODEL_MAX_EXPERTS);
    if (h->n_ff_expert < 1 || h->n_ff_expert > (1 << 20))
        return cx_fail(ld->err, CX_ERANGE, "%s: absurd expert feed-forward length %d", ld->L, h->n_ff_expert);
    if (!h->n_expert) h->n_ff_expert = 0;
    if (gptoss && h->sliding_window < 1)
        return cx_fail(ld->err, CX_ERANGE, "%s: %s.attention.sliding_window %d must be at least 1", ld->L, ld->arch,
                       h->sliding_window);
    return 0;
}

/* A layer's mixture of experts: the router (and its bias), the three stacked
 * expert tensors (ggml [cols, rows, n_expert]) and their biases, all
 * required for gpt-oss (biases optional otherwise). */
static int load_moe(gguf_loader *ld, int l, int gptoss, cx_layer *y) {
    const cx_model_info *h = &ld->m->info;
    int64_t E = h->n_embd, F = h->n_ff_expert, X = h->n_expert;
    char n[64];
    int rc;
#define NAME(part, kind) (snprintf(n, sizeof n, "blk.%d.%s.%s", l, part, kind), n)
    if ((rc = load_matrix(ld, NAME("ffn_gate_inp", "weight"), E, X, 0, &y->router)) ||
        (rc = load_vec(ld, NAME("ffn_gate_inp", "bias"), X, !gptoss, &y->router_b)) ||
        (rc = load_experts(ld, NAME("ffn_gate_exps", "weight"), E, F, X, &y->gate_exps)) ||
        (rc = load_experts(ld, NAME("ffn_up_exps", "weight"), E, F, X, &y->up_exps)) ||
        (rc = load_experts(ld, NAME("ffn_down_exps", "weight"), F, E, X, &y->down_exps)) ||
        (rc = load_vecs(ld, NAME("ffn_gate_exps", "bias"), F, X, !gptoss, &y->gate_exps_b)) ||
        (rc = load_vecs(ld, NAME("ffn_up_exps", "bias"), F, X, !gptoss, &y->up_exps_b)) ||
        (rc = load_vecs(ld, NAME("ffn_down_exps", "bias"), E, X, !gptoss, &y->down_exps_b)))
        return rc;
#undef NAME
    return 0;
}

/* See model.h. */
int model_from_gguf(cx_model *m, const char *L, cx_err *err) {
    gguf_ctx g;
    int rc = gguf_parse(m->map, m->map_size, L, &g, err);
    if (rc) return rc;
    gguf_loader ld = {m, &g, L, err, NULL, "llama"};
    cx_model_info *h = &m->info;
    h->format = "gguf";
    h->format_version = g.version;
    gguf_str s;
    if (gguf_get_str(&g, "tokenizer.chat_template", &s) == 1) { /* a copy: a NUL-terminated string for the API */
        m->chat_template = malloc(s.len + 1);
        if (!m->chat_template) {
            rc = cx_fail(err, CX_ENOMEM, "%s: out of memory for the chat template", L);
            goto done;
        }
        memcpy(m->chat_template, s.ptr, s.len);
        m->chat_template[s.len] = 0;
        h->chat_template = m->chat_template;
    }
    if (g.n_tensors == 0) { /* a vocabulary-only file, as llama.cpp ships its tokenizer tests */
        rc = model_vocab_only(m, &g, L, err);
        goto done;
    }
    if (gguf_get_str(&g, "general.architecture", &s) != 1) {
        rc = cx_fail(err, CX_EFORMAT, "%s: general.architecture is missing", L);
        goto done;
    }
    if (!gguf_str_eq(s, "llama") && !gguf_str_eq(s, "qwen2") && !gguf_str_eq(s, "gpt-oss")) {
        rc = cx_fail(err, CX_EUNSUP, "%s: architecture '%.*s' is not supported (only 'llama', 'qwen2' and 'gpt-oss')", L,
                     (int)(s.len > 32 ? 32 : s.len), s.ptr);
        goto done;
    }
    snprintf(m->arch, sizeof m->arch, "%.*s", (int)s.len, s.ptr);
    ld.arch = m->arch;
    int qwen2 = gguf_str_eq(s, "qwen2"), gptoss = gguf_str_eq(s, "gpt-oss");
    /* llama.cpp's converter permutes llama's Q/K rows for pairwise RoPE, not qwen2's or gpt-oss's */
    h->rope_neox = qwen2 || gptoss;
    m->moe_gating = gptoss ? MODEL_GATING_TOPK_SOFTMAX : MODEL_GATING_SOFTMAX;
    m->moe_act = gptoss ? MODEL_ACT_SWIGLU_OAI : MODEL_ACT_SILU;
    if (gguf_get_str(&g, "general.name", &s) == 1)
        snprintf(m->name, sizeof m->name, "%.*s", (int)(s.len > 127 ? 127 : s.len), s.ptr);
    int rope_dim = 0;
    if ((rc = hp_u32(&ld, "embedding_length", 1, 0, &h->n_embd)) || (rc = hp_u32(&ld, "feed_forward_length", 1, 0, &h->n_ff)) ||
        (rc = hp_u32(&ld, "block_count", 1, 0, &h->n_layer)) || (rc = hp_u32(&ld, "attention.head_count", 1, 0, &h->n_head)) ||
        (rc = hp_u32(&ld, "context_length", 0, 2048, &h->n_ctx)) ||
        (rc = hp_f32(&ld, "attention.layer_norm_rms_epsilon", 1e-5f, &h->rms_eps)) ||
        (rc = hp_f32(&ld, "rope.freq_base", 10000.0f, &h->rope_base)))
        goto done;
    if ((rc = hp_u32(&ld, "attention.head_count_kv", 0, (uint32_t)h->n_head, &h->n_head_kv)) ||
        (rc = hp_u32(&ld, "attention.key_length", 0, 0, &h->head_dim))) /* 0 (absent): n_embd / n_head */
        goto done;
    if ((rc = tok_load_gguf(&m->vocab, &g, L, err))) goto done;
    h->n_vocab = m->vocab.n;
    if ((rc = model_check_hparams(h, L, err))) goto done;
    if (h->head_dim == 0) h->head_dim = h->n_embd / h->n_head;
    if ((rc = hp_u32(&ld, "rope.dimension_count", 0, (uint32_t)h->head_dim, &rope_dim))) goto done;
    if (rope_dim != h->head_dim) {
        rc = cx_fail(err, CX_EUNSUP, "%s: partial RoPE (%d of %d dimensions) is not supported", L, rope_dim, h->head_dim);
        goto done;
    }
    if ((rc = model_check_arch_keys(&ld, gptoss))) goto done;
    if (h->rope_neox && h->head_dim > MODEL_MAX_HEAD_DIM) {
        rc = cx_fail(err, CX_EUNSUP, "%s: NeoX RoPE over heads of %d dimensions (above %d) is not supported", L,
                     h->head_dim, MODEL_MAX_HEAD_DIM);
        goto done;
    }
    int64_t E = h->n_embd, F = h->n_ff, KV = (int64_t)h->n_head_kv * h->head_dim, V = h->n_vocab;
    int64_t QD = (int64_t)h->n_head * h->head_dim; /* the query side: E unless the file gives head_dim */
    int64_t X = h->n_expert, FX = h->n_ff_expert;
    /* per layer: two norms, Q/K/V/output biases, sinks, the router's and experts' biases */
    size_t per_layer = (size_t)(3 * E + QD + 2 * KV + h->n_head + X + X * (2 * FX + E));
    m->layers = calloc((size_t)h->n_layer, sizeof *m->layers);
    m->norms = malloc(sizeof(float) * ((size_t)E + per_layer * (size_t)h->n_layer + (size_t)h->head_dim));
    m->tensors = calloc(4 + 20 * (size_t)h->n_layer, sizeof *m->tensors);
    if (!m->layers || !m->norms || !m->tensors) {
        rc = cx_fail(err, CX_ENOMEM, "%s: out of memory", L);
        goto done;
    }
    ld.norm_next = m->norms;
    const gguf_tensor *emb = gguf_find_tensor(&g, "token_embd.weight");
    if (emb && emb->n_dims == 2 && emb->ne[0] == E && emb->ne[1] != V) {
        rc = cx_fail(err, CX_EFORMAT, "%s: vocabulary has %lld tokens but token_embd.weight has %lld rows (vocab/model mismatch)",
                     L, (long long)V, (long long)emb->ne[1]);
        goto done;
    }
    if ((rc = load_matrix(&ld, "token_embd.weight", E, V, 0, &m->tok_embd)) ||
        (rc = load_norm(&ld, "output_norm.weight", E, &m->out_norm)) ||
        (rc = load_matrix(&ld, "output.weight", E, V, 1, &m->output)))
        goto done;
    h->tied_output = m->output.data == NULL;
    if (h->tied_output) m->output = m->tok_embd;
    if ((rc = load_vec(&ld, "rope_freqs.weight", h->head_dim / 2, 1, &m->rope_factors))) goto done;
    h->rope_freq_factors = m->rope_factors != NULL;
    for (int l = 0; l < h->n_layer; l++) {
        cx_layer *y = &m->layers[l];
        char n[9][64];
        /* gpt-oss names the feed-forward norm post_attention_norm */
        static const char *parts[9] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                       "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
        for (int i = 0; i < 9; i++)
            snprintf(n[i], sizeof n[i], "blk.%d.%s.weight", l, i == 5 && gptoss ? "post_attention_norm" : parts[i]);
        if ((rc = load_norm(&ld, n[0], E, &y->attn_norm)) || (rc = load_matrix(&ld, n[1], E, QD, 0, &y->wq)) ||
            (rc = load_matrix(&ld, n[2], E, KV, 0, &y->wk)) || (rc = load_matrix(&ld, n[3], E, KV, 0, &y->wv)) ||
            (rc = load_matrix(&ld, n[4], QD, E, 0, &y->wo)) || (rc = load_norm(&ld, n[5], E, &y->ffn_norm)))
            goto done;
        if (h->n_expert ? (rc = load_moe(&ld, l, gptoss, y))
                        : ((rc = load_matrix(&ld, n[6], E, F, 0, &y->w_gate)) || (rc = load_matrix(&ld, n[7], E, F, 0, &y->w_up)) ||
                           (rc = load_matrix(&ld, n[8], F, E, 0, &y->w_down))))
            goto done;
        char b[5][64];
        static const char *bparts[5] = {"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias", "attn_sinks.weight"};
        for (int i = 0; i < 5; i++) snprintf(b[i], sizeof b[i], "blk.%d.%s", l, bparts[i]);
        int qkv_opt = !qwen2 && !gptoss;
        if ((rc = load_vec(&ld, b[0], QD, qkv_opt, &y->bq)) || (rc = load_vec(&ld, b[1], KV, qkv_opt, &y->bk)) ||
            (rc = load_vec(&ld, b[2], KV, qkv_opt, &y->bv)) || (rc = load_vec(&ld, b[3], E, !gptoss, &y->bo)) ||
            (gptoss && (rc = load_vec(&ld, b[4], h->n_head, 0, &y->sinks))))
            goto done;
        /* gpt-oss: even layers see a sliding window, odd ones everything (llama.cpp's pattern 2) */
        y->window = gptoss && l % 2 == 0 ? h->sliding_window : 0;
        h->attn_sinks |= y->sinks != NULL;
        if (!y->bq != !y->bk || !y->bq != !y->bv) {
            rc = cx_fail(err, CX_EFORMAT, "%s: layer %d has some but not all of the Q, K and V biases", L, l);
            goto done;
        }
        h->qkv_bias |= y->bq != NULL;
    }
    if ((uint64_t)m->n_tensors != g.n_tensors) { /* every tensor is used, or the model would run wrong */
        for (uint64_t i = 0; i < g.n_tensors; i++) {
            int used = 0;
            const gguf_tensor *t = &g.tensors[i];
            for (int k = 0; k < m->n_tensors && !used; k++)
                used = strlen(m->tensors[k].name) == t->name.len && !memcmp(m->tensors[k].name, t->name.ptr, t->name.len);
            if (!used) {
                rc = cx_fail(err, CX_EUNSUP, "%s: tensor '%.*s' is not supported by this engine (architecture %s)", L,
                             (int)(t->name.len > 64 ? 64 : t->name.len), t->name.ptr, m->arch);
                goto done;
            }
        }
    }
    h->main_type = main_type(m, &g);
done:
    gguf_free(&g);
    return rc;
}

