/*
 * kv_view.c - see kv_view.h.
 */
#include "kv_view.h"
#include "../util.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* See kv_view.h. Staging exists only when some block can be other than hot
 * f32; decompressors only when blocks can be cold. */
int kv_view_init(kv_view *v, const kv_cache *c, int n_ctx, int n_threads) {
    memset(v, 0, sizeof *v);
    v->max_blocks = (n_ctx + KV_BLOCK - 1) / KV_BLOCK;
    v->dim = c->dim;
    v->n_threads = n_threads;
    v->k = malloc(sizeof(float *) * (size_t)v->max_blocks);
    v->v = malloc(sizeof(float *) * (size_t)v->max_blocks);
    v->todo = malloc(sizeof(int32_t) * (size_t)v->max_blocks);
    size_t count_bytes = (size_t)n_threads * KV_VIEW_COUNT_STRIDE * sizeof(int64_t);
    if (posix_memalign((void **)&v->count, 64, count_bytes)) v->count = NULL;
    else memset(v->count, 0, count_bytes);
    if (!v->k || !v->v || !v->todo || !v->count) goto fail;
    if (c->fmt[KV_HOT] != KV_F32 || c->tiering) {
        v->stage = malloc(sizeof(float) * (size_t)v->max_blocks * KV_ROWS * (size_t)c->dim);
        if (!v->stage) goto fail;
    }
    if (c->tiering) {
        v->scratch_bytes = (kv_page_scratch(c) + kv_page_max_slab(c) + 63) & ~(size_t)63;
        v->scratch = malloc(v->scratch_bytes * (size_t)n_threads);
        v->zip = calloc((size_t)n_threads, sizeof *v->zip);
        if (!v->scratch || !v->zip) goto fail;
        for (int t = 0; t < n_threads; t++)
            if (kv_zip_init(&v->zip[t], 0, 0)) goto fail;
    }
    return 0;
fail:
    kv_view_free(v);
    return -1;
}

/* See kv_view.h. */
void kv_view_free(kv_view *v) {
    if (v->zip)
        for (int t = 0; t < v->n_threads; t++) kv_zip_free(&v->zip[t]);
    free(v->zip);
    free(v->scratch);
    free(v->stage);
    free(v->k);
    free(v->v);
    free(v->todo);
    free(v->count);
    memset(v, 0, sizeof *v);
}

/* See kv_view.h. */
int kv_view_layer(kv_view *v, const kv_cache *c, const kv_seq *s, int layer, int nb) {
    assert(nb <= s->n_blocks && nb <= v->max_blocks);
    size_t half = (size_t)KV_BLOCK * (size_t)v->dim;
    v->n_todo = 0;
    for (int i = 0; i < nb; i++) {
        int32_t id = s->table[i];
        const kv_block *b = &c->blocks[id];
        if (b->tier == KV_HOT && b->fmt == KV_F32) {
            const float *slab = (const float *)kv_block_slab(c, id, layer);
            v->k[i] = slab;
            v->v[i] = slab + half;
        } else {
            assert(v->stage);
            v->todo[v->n_todo++] = i;
            v->k[i] = v->stage + (size_t)i * 2 * half;
            v->v[i] = v->k[i] + half;
        }
    }
    return v->n_todo;
}

/* See kv_view.h. A page that cannot be read stages as zeros and is counted;
 * the caller reports it after the pass. */
void kv_view_stage(kv_view *v, const kv_cache *c, const kv_seq *s, int layer, int tid, int n) {
    assert(tid < v->n_threads);
    int64_t *count = v->count + (size_t)tid * KV_VIEW_COUNT_STRIDE;
    for (int j = tid; j < v->n_todo; j += n) {
        int i = v->todo[j];
        int32_t id = s->table[i];
        const kv_block *b = &c->blocks[id];
        float *out = v->stage + (size_t)i * KV_ROWS * (size_t)v->dim;
        const void *raw;
        if (b->tier == KV_COLD) {
            uint8_t *scratch = v->scratch + (size_t)tid * v->scratch_bytes;
            uint8_t *slab = scratch + kv_page_scratch(c);
            int64_t t0 = cx_now_ns();
            if (kv_page_read(c, id, layer, &v->zip[tid], scratch, slab)) {
                memset(out, 0, sizeof(float) * KV_ROWS * (size_t)v->dim);
                count[2]++;
                continue;
            }
            count[0]++;
            count[1] += cx_now_ns() - t0;
            raw = slab;
        } else {
            raw = kv_block_slab(c, id, layer);
        }
        kv_decode_rows(b->fmt, raw, 0, KV_ROWS, out, v->dim);
    }
}

/* See kv_view.h. */
int64_t kv_view_collect(kv_view *v, kv_cache *c) {
    int64_t failed = 0;
    for (int t = 0; t < v->n_threads; t++) {
        int64_t *count = v->count + (size_t)t * KV_VIEW_COUNT_STRIDE;
        c->st.restores += count[0];
        c->st.restore_ns += count[1];
        failed += count[2];
        count[0] = count[1] = count[2] = 0;
    }
    return failed;
}
