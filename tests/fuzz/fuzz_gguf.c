/*
 * fuzz_gguf.c - libFuzzer target: any byte string given to the GGUF parser and
 * to the whole GGUF model loader must give either a valid result or one error,
 * never a crash, an out-of-bounds read, undefined behaviour or a leak.
 *
 * Per input:
 *   1. gguf_parse over the bytes; on success walk every kv (string arrays with
 *      gguf_arr_next_str, numeric arrays with gguf_arr_num) and touch the first
 *      and last byte of every tensor's data, so ASan checks every pointer the
 *      parser hands out really lies inside the buffer.
 *   2. model_from_gguf on a cx_model whose map points at the bytes (nothing is
 *      written to disk); on success check the views and encode a short text.
 *      The model is then freed as cx_model_free does, minus the munmap.
 * Seeds: tests/fuzz/corpus/gguf/ (tests/fuzz/make_seeds.py writes them).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "model.h"
#include "tokenizer.h"

/* Keeps the touched bytes observable so the reads are not optimised away. */
static volatile uint64_t g_sink;

/* Abort (a finding) when a property fails: libFuzzer records the input. */
static void require(int cond) {
    if (!cond) abort();
}

/* Is [p, p+n) inside the fuzz input [base, base+size)? */
static int inside(const void *p, uint64_t n, const uint8_t *base, uint64_t size) {
    const uint8_t *q = p;
    return q >= base && (uint64_t)(q - base) <= size && n <= size - (uint64_t)(q - base);
}

/* Read every value the parser exposes: all must lie within the input. */
static void walk_gguf(const gguf_ctx *g, const uint8_t *data, size_t size) {
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *kv = &g->kv[i];
        require(inside(kv->key.ptr, kv->key.len, data, size));
        if (kv->type == GGUF_STR) require(inside(kv->str.ptr, kv->str.len, data, size));
        if (kv->type != GGUF_ARR) continue;
        if (kv->arr_type == GGUF_STR) {
            const uint8_t *p = kv->arr_data;
            for (uint64_t j = 0; j < kv->arr_n; j++) {
                gguf_str s = gguf_arr_next_str(&p);
                require(inside(s.ptr, s.len, data, size));
                if (s.len) g_sink += (uint8_t)s.ptr[0] + (uint8_t)s.ptr[s.len - 1];
            }
        } else if (kv->arr_type != GGUF_ARR) {
            for (uint64_t j = 0; j < kv->arr_n; j++) {
                double v = gguf_arr_num(kv, j);
                g_sink += v == v; /* NaN is a legal float value */
            }
        }
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        require(t->n_dims >= 1 && t->n_dims <= GGUF_MAX_DIMS && t->nbytes > 0);
        require(inside(t->name.ptr, t->name.len, data, size));
        require(inside(t->data, t->nbytes, data, size));
        g_sink += t->data[0] + t->data[t->nbytes - 1];
    }
    require(gguf_find(g, "general.alignment") || g->alignment == GGUF_DEFAULT_ALIGNMENT);
}

/* The weight views of a loaded model lie in the input. */
static void check_weights(const cx_model *m, const uint8_t *data, size_t size) {
    const cx_model_info *h = &m->info;
    require(inside(m->tok_embd.data, m->tok_embd.row_bytes * (uint64_t)m->tok_embd.rows, data, size));
    require(inside(m->output.data, m->output.row_bytes * (uint64_t)m->output.rows, data, size));
    for (int l = 0; l < h->n_layer; l++) {
        const cx_layer *y = &m->layers[l];
        const cx_weight *w[7] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->w_gate, &y->w_up, &y->w_down};
        for (int k = 0; k < 7; k++) require(inside(w[k]->data, w[k]->row_bytes * (uint64_t)w[k]->rows, data, size));
        g_sink += (uint64_t)(y->attn_norm[0] != 0) + (uint64_t)(y->ffn_norm[h->n_embd - 1] != 0);
    }
}

/* After a successful load: weight views in the input (none for a
 * vocabulary-only file, which has no tensors), a usable vocabulary. */
static void check_model(const cx_model *m, const uint8_t *data, size_t size) {
    const cx_model_info *h = &m->info;
    require(h->n_vocab == m->vocab.n);
    require(h->vocab_only ? !m->layers && m->n_tensors == 0 : h->n_layer >= 1 && m->layers && m->norms);
    if (!h->vocab_only) check_weights(m, data, size);
    int32_t ids[64];
    int n = 0;
    cx_err err;
    if (tok_encode(&m->vocab, "Hello w\xc3\xb6rld \xff!<s>", 18, TOK_ADD_BOS | TOK_PARSE_SPECIAL, ids, 64, &n, &err) == 0)
        for (int i = 0; i < n; i++) require(ids[i] >= 0 && ids[i] < m->vocab.n);
}

/* The libFuzzer entry point: one input, both paths. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_ctx g;
    cx_err err;
    memset(&err, 0, sizeof err);
    int rc = gguf_parse(data, size, "fuzz.gguf", &g, &err);
    if (rc == 0) {
        walk_gguf(&g, data, size);
        gguf_free(&g);
    } else {
        require(rc < 0 && rc == err.code && err.msg[0]);
    }

    cx_model m;
    memset(&m, 0, sizeof m);
    memset(&err, 0, sizeof err);
    m.map = data;
    m.map_size = size;
    rc = model_from_gguf(&m, "fuzz.gguf", &err);
    if (rc == 0) check_model(&m, data, size);
    else require(rc < 0 && rc == err.code && err.msg[0]);
    tok_free(&m.vocab);
    free(m.layers);
    free(m.norms);
    free(m.tensors);
    return 0;
}
