/*
 * lora_peft.c - lora_src_peft: a PEFT LoRA adapter (adapter_config.json +
 * adapter_model.safetensors) read into the neutral lora_src form.
 *
 * PEFT saves, per adapted module of a Hugging Face Llama/Qwen 2 model,
 *   base_model.model.model.layers.{L}.self_attn.{q,k,v,o}_proj.lora_A.weight  [r x in]
 *   base_model.model.model.layers.{L}.mlp.{gate,up,down}_proj.lora_B.weight  [out x r]
 * and applies W + (alpha / r) * B A (alpha / sqrt(r) with use_rslora). The
 * names map to the GGUF base's blk.{L}.attn_q.weight, ... ffn_down.weight.
 * Llama GGUF files hold Wq and Wk with their rows permuted (the converters
 * turn Hugging Face's rotate-half RoPE layout into pairwise RoPE: per head,
 * reshape(2, head_dim/2).swapaxes); a delta B A must be permuted alike, and
 * permuting the rows of B A is permuting the rows of B. Qwen 2 bases keep
 * Hugging Face's layout (NeoX RoPE), so nothing is permuted there.
 *
 * Every tensor in the file must be such a pair member: anything else (an
 * embedding LoRA, DoRA magnitudes, a bias, modules_to_save copies, a layer
 * the base lacks, a module target_modules does not name) is one error naming
 * the file and the tensor, as are shapes that do not fit the base matrix and
 * ranks that differ between A, B and the config.
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lora_peft.h"
#include "lora_src.h"
#include "safetensors.h"
#include "../model.h"
#include "../model_map.h"
#include "../util.h"

/* The adaptable modules: Hugging Face parent and name, GGUF name part. */
enum { PEFT_N_MOD = 7 };
static const struct {
    const char *parent, *hf, *gguf;
} peft_mods[PEFT_N_MOD] = {
    {"self_attn", "q_proj", "attn_q"},   {"self_attn", "k_proj", "attn_k"}, {"self_attn", "v_proj", "attn_v"},
    {"self_attn", "o_proj", "attn_output"}, {"mlp", "gate_proj", "ffn_gate"}, {"mlp", "up_proj", "ffn_up"},
    {"mlp", "down_proj", "ffn_down"},
};

/* The base matrix module `mod` of layer l adapts. */
static const cx_weight *peft_base_weight(const cx_model *m, int l, int mod) {
    const cx_layer *y = &m->layers[l];
    const cx_weight *w[PEFT_N_MOD] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->w_gate, &y->w_up, &y->w_down};
    return w[mod];
}

/* One (layer, module) slot while the file is read: its A and B tensors. */
typedef struct peft_slot {
    const st_tensor *a, *b;
} peft_slot;

#define PEFT_PREFIX "base_model.model."

/* The module index (into peft_mods) of a module name "model.layers.{L}.{parent}.{name}",
 * L without leading zeros, with *layer = L; -1 for any other name. */
static int peft_key_module(const char *key, long *layer) {
    if (strncmp(key, "model.layers.", 13) != 0) return -1;
    const char *q = key + 13, *digits = q;
    long l = 0;
    for (; *q >= '0' && *q <= '9'; q++)
        if (l < 100000000) l = l * 10 + (*q - '0');
    if (q == digits || *q != '.' || (*digits == '0' && q - digits > 1)) return -1;
    const char *parent = q + 1, *dot = strchr(parent, '.');
    if (!dot) return -1;
    *layer = l;
    for (int i = 0; i < PEFT_N_MOD; i++)
        if (strlen(peft_mods[i].parent) == (size_t)(dot - parent) &&
            strncmp(parent, peft_mods[i].parent, (size_t)(dot - parent)) == 0 && strcmp(dot + 1, peft_mods[i].hf) == 0)
            return i;
    return -1;
}

/* Split a tensor name into layer, module and A/B (0/1). 0, or one error
 * naming the file and tensor that says what about the name is unsupported. */
static int peft_parse_name(const char *name, const cx_model *m, const peft_config *cfg, const char *label, int *layer,
                           int *mod, int *is_b, cx_err *err) {
    static const char *const kinds[][2] = {
        {"lora_embedding_A", "an embedding LoRA"},
        {"lora_embedding_B", "an embedding LoRA"},
        {"lora_magnitude_vector", "DoRA's magnitude vector"},
        {"modules_to_save", "a full copy of a module (modules_to_save)"},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strstr(name, kinds[i][0]))
            return cx_fail(err, CX_EUNSUP, "%s: tensor %s: %s is not supported", label, name, kinds[i][1]);
    size_t n = strlen(name), pl = strlen(PEFT_PREFIX), sl = strlen(".lora_A.weight");
    if (n <= pl + sl || strncmp(name, PEFT_PREFIX, pl) != 0 ||
        (strcmp(name + n - sl, ".lora_A.weight") != 0 && strcmp(name + n - sl, ".lora_B.weight") != 0))
        return cx_fail(err, CX_EFORMAT,
                       "%s: tensor %s: unknown tensor (expected base_model.model.<module>.lora_A/lora_B.weight)", label,
                       name);
    *is_b = name[n - sl + 6] == 'B';
    char key[256];
    if (n - sl - pl >= sizeof key) return cx_fail(err, CX_EFORMAT, "%s: tensor %s: name too long", label, name);
    memcpy(key, name + pl, n - sl - pl);
    key[n - sl - pl] = 0;
    long l = 0;
    if ((*mod = peft_key_module(key, &l)) < 0)
        return cx_fail(err, CX_EUNSUP,
                       "%s: tensor %s: module %s is not supported (model.layers.N.self_attn.q/k/v/o_proj, "
                       "mlp.gate/up/down_proj)", label, name, key);
    if (l >= m->info.n_layer)
        return cx_fail(err, CX_ERANGE, "%s: tensor %s: layer %ld, the base model has %d", label, name, l,
                       m->info.n_layer);
    if (!peft_config_targets(cfg, key))
        return cx_fail(err, CX_EFORMAT, "%s: tensor %s: module %s is not in the config's target_modules", label, name,
                       key);
    *layer = (int)l;
    return 0;
}

/* Permute the rows of b [n_out x rank] as the GGUF converters permute a
 * Llama Wq/Wk of n_head heads: row h*hd + 2i + j takes row h*hd + j*hd/2 + i. */
static void peft_permute_rows(float *b, int64_t n_out, int rank, int n_head, float *tmp) {
    int64_t hd = n_out / n_head;
    assert(hd * n_head == n_out && hd % 2 == 0);
    memcpy(tmp, b, (size_t)(n_out * rank) * sizeof *b);
    for (int h = 0; h < n_head; h++)
        for (int64_t i = 0; i < hd / 2; i++)
            for (int j = 0; j < 2; j++)
                memcpy(b + (h * hd + 2 * i + j) * rank, tmp + (h * hd + j * (hd / 2) + i) * rank,
                       (size_t)rank * sizeof *b);
}

/* Check one slot's A and B against each other, the config and the base
 * matrix, and fill pair p with f32 copies (B permuted where the base is). */
static int peft_make_pair(const peft_slot *s, int l, int mod, const cx_model *m, const peft_config *cfg, int permute,
                          const char *label, lora_pair *p, cx_err *err) {
    const st_tensor *a = s->a, *b = s->b;
    if (!a || !b)
        return cx_fail(err, CX_EFORMAT, "%s: tensor %s has no lora_%s partner", label, (a ? a : b)->name,
                       a ? "B" : "A");
    if (a->n_dims != 2 || b->n_dims != 2)
        return cx_fail(err, CX_EFORMAT, "%s: tensor %s: %d dimensions, a LoRA matrix has 2", label,
                       (a->n_dims != 2 ? a : b)->name, (a->n_dims != 2 ? a : b)->n_dims);
    const cx_weight *w = peft_base_weight(m, l, mod);
    int64_t rank = a->shape[0];
    if (rank < 1 || rank > INT_MAX)
        return cx_fail(err, CX_ERANGE, "%s: tensor %s: rank %lld", label, a->name, (long long)rank);
    if (b->shape[1] != rank)
        return cx_fail(err, CX_EFORMAT, "%s: tensor %s: rank %lld, its lora_A has rank %lld", label, b->name,
                       (long long)b->shape[1], (long long)rank);
    if (a->shape[1] != w->cols)
        return cx_fail(err, CX_EFORMAT, "%s: tensor %s: shape [%lld, %lld], the base matrix needs [%lld, %lld]", label,
                       a->name, (long long)a->shape[0], (long long)a->shape[1], (long long)rank, (long long)w->cols);
    if (b->shape[0] != w->rows)
        return cx_fail(err, CX_EFORMAT, "%s: tensor %s: shape [%lld, %lld], the base matrix needs [%lld, %lld]", label,
                       b->name, (long long)b->shape[0], (long long)b->shape[1], (long long)w->rows, (long long)rank);
    char key[128];
    snprintf(key, sizeof key, "model.layers.%d.%s.%s", l, peft_mods[mod].parent, peft_mods[mod].hf);
    int want = peft_config_rank(cfg, key);
    if (want != rank)
        return cx_fail(err, CX_EFORMAT, "%s: tensor %s: rank %lld, adapter_config.json says %d", label, a->name,
                       (long long)rank, want);
    snprintf(p->name, sizeof p->name, "blk.%d.%s.weight", l, peft_mods[mod].gguf);
    p->rank = (int)rank;
    p->n_in = w->cols;
    p->n_out = w->rows;
    float alpha = peft_config_alpha(cfg, key);
    /* rsLoRA scales by alpha / sqrt(r): the pair's alpha / rank must equal that. */
    p->alpha = cfg->use_rslora ? alpha * sqrtf((float)rank) : alpha;
    p->a = p->own_a = malloc((size_t)a->n_elems * sizeof *p->own_a); /* f32 copies: safetensors may hold f16/bf16 */
    p->b = p->own_b = malloc((size_t)b->n_elems * sizeof *p->own_b);
    int perm = permute && (mod == 0 || mod == 1); /* q_proj, k_proj */
    float *tmp = perm ? malloc((size_t)b->n_elems * sizeof *tmp) : NULL;
    if (!p->own_a || !p->own_b || (perm && !tmp)) {
        free(tmp);
        return cx_fail(err, CX_ENOMEM, "%s: out of memory for tensor %s", label, a->name);
    }
    st_to_f32(a, p->own_a);
    st_to_f32(b, p->own_b);
    if (tmp) {
        int n_head = mod == 0 ? m->info.n_head : m->info.n_head_kv;
        if (w->rows % n_head != 0 || (w->rows / n_head) % 2 != 0) {
            free(tmp);
            return cx_fail(err, CX_EUNSUP, "%s: tensor %s: %lld rows do not split into %d heads of even size", label,
                           b->name, (long long)w->rows, n_head);
        }
        peft_permute_rows(p->own_b, w->rows, (int)rank, n_head, tmp);
        free(tmp);
    }
    return 0;
}

/* The config's and the weights' paths for `path`: a directory holding both,
 * or the .safetensors file with the config beside it. */
static int peft_paths(const char *path, char *cfg, char *st, size_t cap, cx_err *err) {
    struct stat sb;
    if (stat(path, &sb) != 0) return cx_fail(err, CX_EIO, "%s: cannot open: %s", path, strerror(errno));
    int n;
    if (S_ISDIR(sb.st_mode)) {
        n = snprintf(st, cap, "%s/adapter_model.safetensors", path);
        snprintf(cfg, cap, "%s/adapter_config.json", path);
        if (n > 0 && (size_t)n < cap && stat(st, &sb) != 0) {
            char bin[4096];
            snprintf(bin, sizeof bin, "%s/adapter_model.bin", path);
            if (stat(bin, &sb) == 0)
                return cx_fail(err, CX_EUNSUP, "%s: only adapter_model.safetensors is read, not the pickled "
                               "adapter_model.bin (save with safe_serialization=True)", path);
            return cx_fail(err, CX_EIO, "%s: no adapter_model.safetensors in this directory", path);
        }
    } else {
        const char *slash = strrchr(path, '/');
        int dl = slash ? (int)(slash - path) : 1;
        n = snprintf(st, cap, "%s", path);
        snprintf(cfg, cap, "%.*s/adapter_config.json", dl, slash ? path : ".");
    }
    if (n < 0 || (size_t)n + 32 >= cap) return cx_fail(err, CX_EINVAL, "%s: path too long", path);
    return 0;
}

/* Read and parse adapter_config.json. */
static int peft_load_config(const char *path, peft_config *cfg, cx_err *err) {
    const uint8_t *map;
    size_t size;
    int rc = model_map_file(path, &map, &size, err);
    if (rc) return rc;
    rc = peft_config_parse((const char *)map, size, path, cfg, err);
    model_unmap_file(map, size);
    return rc;
}

/* Sort the file's tensors into (layer, module) slots, then make the pairs in
 * layer order, modules in peft_mods order. */
static int peft_read_pairs(const st_file *f, const char *label, const cx_model *m, const peft_config *cfg,
                           lora_src *out, cx_err *err) {
    int n_slots = m->info.n_layer * PEFT_N_MOD;
    peft_slot *slots = calloc((size_t)n_slots, sizeof *slots);
    if (!slots) return cx_fail(err, CX_ENOMEM, "%s: out of memory", label);
    int rc = 0, n_used = 0;
    for (int i = 0; i < f->n_tensors && rc == 0; i++) {
        int l = 0, mod = 0, is_b = 0;
        rc = peft_parse_name(f->tensors[i].name, m, cfg, label, &l, &mod, &is_b, err);
        if (rc) break;
        peft_slot *s = &slots[l * PEFT_N_MOD + mod];
        n_used += !s->a && !s->b;
        if (is_b) s->b = &f->tensors[i];
        else s->a = &f->tensors[i];
    }
    if (rc == 0 && n_used == 0) rc = cx_fail(err, CX_EFORMAT, "%s: no LoRA tensors", label);
    if (rc == 0 && !(out->pairs = calloc((size_t)n_used, sizeof *out->pairs)))
        rc = cx_fail(err, CX_ENOMEM, "%s: out of memory", label);
    int permute = strcmp(m->info.arch, "llama") == 0;
    for (int i = 0; i < n_slots && rc == 0; i++) {
        if (!slots[i].a && !slots[i].b) continue;
        rc = peft_make_pair(&slots[i], i / PEFT_N_MOD, i % PEFT_N_MOD, m, cfg, permute, label,
                            &out->pairs[out->n_pairs], err);
        out->n_pairs++; /* counted even on failure: lora_src_free frees what it holds */
    }
    free(slots);
    return rc;
}

int lora_src_peft(const char *path, const cx_model *m, lora_src *out, cx_err *err) {
    memset(out, 0, sizeof *out);
    snprintf(out->label, sizeof out->label, "%s", path);
    int rc = model_require_weights(m, err);
    if (rc) return rc;
    if (strcmp(m->info.arch, "llama") != 0 && strcmp(m->info.arch, "qwen2") != 0)
        return cx_fail(err, CX_EUNSUP, "%s: PEFT adapters need a llama or qwen2 base, not %s", path, m->info.arch);
    char cfg_path[4096], st_path[4096];
    if ((rc = peft_paths(path, cfg_path, st_path, sizeof cfg_path, err))) return rc;
    st_file f;
    if ((rc = st_open(st_path, &f, err))) return rc;
    peft_config cfg;
    rc = peft_load_config(cfg_path, &cfg, err);
    if (rc == 0) {
        rc = peft_read_pairs(&f, st_path, m, &cfg, out, err);
        peft_config_free(&cfg);
    }
    st_close(&f);
    if (rc) lora_src_free(out);
    return rc;
}
