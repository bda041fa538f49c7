/*
 * lora_src.c - reading llama.cpp's GGUF LoRA files into the neutral form
 * of lora_src.h, and freeing that form (whichever reader filled it).
 *
 * The file is a GGUF whose general.type is "adapter" and adapter.type
 * "lora"; adapter.lora.alpha is the alpha of every pair (absent or 0: the
 * scale is the user's alone, as llama.cpp reads it). Each adapted matrix
 * "<base>" has "<base>.lora_a" with ggml shape [n_in, rank] (rank rows of
 * n_in) and "<base>.lora_b" with shape [rank, n_out]. The pairs are copied
 * out as f32 and the file is unmapped: the adapter's memory is what the
 * layout code (lora.c) keeps, never the file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../gguf.h"
#include "../model_map.h"
#include "../quant.h"
#include "../util.h"
#include "lora_src.h"

/* See lora_src.h. */
void lora_src_free(lora_src *s) {
    for (int i = 0; i < s->n_pairs; i++) {
        free(s->pairs[i].own_a);
        free(s->pairs[i].own_b);
    }
    free(s->pairs);
    if (s->map) model_unmap_file(s->map, s->map_size);
    memset(s, 0, sizeof *s);
}

/* 1 if name ends with suffix. */
static int ends_with(gguf_str name, const char *suffix) {
    size_t n = strlen(suffix);
    return name.len >= n && !memcmp(name.ptr + name.len - n, suffix, n);
}

/* A 2-D tensor as f32: in place for an F32 one (GGUF aligns tensor data to
 * at least 32 bytes), else a malloc'd copy in *own. NULL after an error. */
static const float *tensor_f32(const gguf_tensor *t, const char *label, const char *name, float **own, cx_err *err) {
    if (t->type == CX_TYPE_F32) return (const float *)(const void *)t->data;
    if (!quant_supported((int)t->type) || t->ne[0] % quant_block_size((int)t->type)) {
        cx_fail(err, CX_EUNSUP, "%s: tensor '%s' is %s, which an adapter cannot hold (F32, F16, Q8_0)", label, name,
                gguf_type_name(t->type));
        return NULL;
    }
    float *f = *own = malloc(sizeof(float) * (size_t)t->ne[0] * (size_t)t->ne[1]);
    if (!f) {
        cx_fail(err, CX_ENOMEM, "%s: out of memory for tensor '%s'", label, name);
        return NULL;
    }
    size_t row = quant_row_bytes((int)t->type, t->ne[0]);
    for (int64_t r = 0; r < t->ne[1]; r++)
        quant_dequantize_row((int)t->type, t->data + (size_t)r * row, f + (size_t)r * (size_t)t->ne[0], t->ne[0]);
    return f;
}

/* Check the metadata that makes the file an adapter; 0 or CX_EFORMAT. */
static int check_kind(const gguf_ctx *g, const char *label, float *alpha, cx_err *err) {
    gguf_str s;
    if (gguf_get_str(g, "general.type", &s) != 1 || !gguf_str_eq(s, "adapter"))
        return cx_fail(err, CX_EFORMAT, "%s: not a LoRA adapter (general.type is not \"adapter\")", label);
    if (gguf_get_str(g, "adapter.type", &s) != 1 || !gguf_str_eq(s, "lora"))
        return cx_fail(err, CX_EUNSUP, "%s: adapter.type is not \"lora\" (only LoRA adapters are supported)", label);
    *alpha = 0.0f;
    if (gguf_get_f32(g, "adapter.lora.alpha", alpha) < 0)
        return cx_fail(err, CX_EFORMAT, "%s: adapter.lora.alpha is not a number", label);
    return 0;
}

/* Fill one pair from the A tensor `ta` (name "<base>.lora_a") and its B. */
static int read_pair(const gguf_ctx *g, const gguf_tensor *ta, float alpha, const char *label, lora_pair *p,
                     cx_err *err) {
    size_t base_len = ta->name.len - strlen(".lora_a");
    if (base_len >= sizeof p->name)
        return cx_fail(err, CX_EFORMAT, "%s: tensor name '%.*s' is too long", label, (int)ta->name.len, ta->name.ptr);
    memcpy(p->name, ta->name.ptr, base_len);
    p->name[base_len] = 0;
    char bname[sizeof p->name + 8];
    snprintf(bname, sizeof bname, "%s.lora_b", p->name);
    const gguf_tensor *tb = gguf_find_tensor(g, bname);
    if (!tb) return cx_fail(err, CX_EFORMAT, "%s: '%s.lora_a' has no '%s'", label, p->name, bname);
    if (ta->n_dims != 2 || tb->n_dims != 2)
        return cx_fail(err, CX_EFORMAT, "%s: the lora_a/lora_b tensors of '%s' are not 2-D", label, p->name);
    if (ta->ne[1] != tb->ne[0])
        return cx_fail(err, CX_EFORMAT, "%s: '%s' has rank %lld in lora_a but %lld in lora_b", label, p->name,
                       (long long)ta->ne[1], (long long)tb->ne[0]);
    if (ta->ne[1] < 1 || ta->ne[1] > 4096)
        return cx_fail(err, CX_ERANGE, "%s: '%s' has rank %lld (1..4096)", label, p->name, (long long)ta->ne[1]);
    p->rank = (int)ta->ne[1];
    p->n_in = ta->ne[0];
    p->n_out = tb->ne[1];
    p->alpha = alpha;
    char aname[sizeof p->name + 8];
    snprintf(aname, sizeof aname, "%s.lora_a", p->name);
    if (!(p->a = tensor_f32(ta, label, aname, &p->own_a, err))) return err ? err->code : CX_EFORMAT;
    if (!(p->b = tensor_f32(tb, label, bname, &p->own_b, err))) return err ? err->code : CX_EFORMAT;
    return 0;
}

/* See lora_src.h. */
int lora_src_gguf(const char *path, lora_src *out, cx_err *err) {
    memset(out, 0, sizeof *out);
    snprintf(out->label, sizeof out->label, "%s", path);
    const uint8_t *map;
    size_t size;
    int rc = model_map_file(path, &map, &size, err);
    if (rc) return rc;
    gguf_ctx g;
    rc = gguf_parse(map, size, path, &g, err);
    if (rc) {
        model_unmap_file(map, size);
        return rc;
    }
    float alpha = 0.0f;
    rc = check_kind(&g, path, &alpha, err);
    int n_a = 0;
    for (uint64_t i = 0; !rc && i < g.n_tensors; i++) {
        const gguf_tensor *t = &g.tensors[i];
        if (ends_with(t->name, ".lora_a")) n_a++;
        else if (ends_with(t->name, ".lora_b")) {
            char aname[160];
            snprintf(aname, sizeof aname, "%.*s_a", (int)t->name.len - 2, t->name.ptr);
            if (!gguf_find_tensor(&g, aname))
                rc = cx_fail(err, CX_EFORMAT, "%s: '%.*s' has no '%s'", path, (int)t->name.len, t->name.ptr, aname);
        } else
            rc = cx_fail(err, CX_EFORMAT, "%s: tensor '%.*s' is neither a lora_a nor a lora_b", path,
                         (int)t->name.len, t->name.ptr);
    }
    if (!rc && n_a == 0) rc = cx_fail(err, CX_EFORMAT, "%s: the adapter has no tensors", path);
    if (!rc && !(out->pairs = calloc((size_t)n_a, sizeof *out->pairs)))
        rc = cx_fail(err, CX_ENOMEM, "%s: out of memory", path);
    for (uint64_t i = 0; !rc && i < g.n_tensors; i++)
        if (ends_with(g.tensors[i].name, ".lora_a")) {
            rc = read_pair(&g, &g.tensors[i], alpha, path, &out->pairs[out->n_pairs], err);
            out->n_pairs++; /* counted even when it failed: lora_src_free frees what it holds */
        }
    gguf_free(&g);
    out->map = map; /* F32 pairs point into it until lora_src_free */
    out->map_size = size;
    if (rc) lora_src_free(out);
    return rc;
}
