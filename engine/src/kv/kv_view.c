/*
 * kv_view.c - see kv_view.h.
 */
#include "kv_view.h"
#include "../util.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* See kv_view.h. Staging and decompressors exist only when blocks can be cold. */
int kv_view_init(kv_view *v, const kv_cache *c, int n_ctx, int n_threads) {
    memset(v, 0, sizeof *v);
    v->max_blocks = (n_ctx + KV_BLOCK - 1) / KV_BLOCK;
    v->dim = c->dim;
    v->hd = c->hd;
    v->n_threads = n_threads;
    v->slab = malloc(sizeof(uint8_t *) * (size_t)v->max_blocks);
    v->fmt = malloc((size_t)v->max_blocks);
    v->todo = malloc(sizeof(int32_t) * (size_t)v->max_blocks);
    size_t count_bytes = (size_t)n_threads * KV_VIEW_COUNT_STRIDE * sizeof(int64_t);
    if (posix_memalign((void **)&v->count, 64, count_bytes)) v->count = NULL;
    else memset(v->count, 0, count_bytes);
    if (!v->slab || !v->fmt || !v->todo || !v->count) goto fail;
    if (c->tiering) {
        v->stage_stride = (kv_page_max_slab(c) + 63) & ~(size_t)63;
        if (posix_memalign((void **)&v->stage, 64, v->stage_stride * (size_t)v->max_blocks)) goto fail;
        v->scratch_bytes = (kv_page_scratch(c) + 63) & ~(size_t)63;
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
    free(v->slab);
    free(v->fmt);
    free(v->todo);
    free(v->count);
    memset(v, 0, sizeof *v);
}

/* See kv_view.h. */
int kv_view_layer(kv_view *v, const kv_cache *c, const kv_seq *s, int layer, int nb) {
    assert(nb <= s->n_blocks && nb <= v->max_blocks);
    v->n_todo = 0;
    for (int i = 0; i < nb; i++) {
        int32_t id = s->table[i];
        const kv_block *b = &c->blocks[id];
        v->fmt[i] = b->fmt;
        if (b->tier == KV_COLD) {
            assert(v->stage && "cold blocks exist only in tiered caches, which have staging");
            v->todo[v->n_todo++] = i;
            v->slab[i] = v->stage + (size_t)i * v->stage_stride;
        } else {
            v->slab[i] = kv_block_slab(c, id, layer);
        }
    }
    return v->n_todo;
}

/* See kv_view.h. A page that cannot be read stages as zeros (all-zero codes
 * and scales read as 0 in every format) and is counted; the caller reports
 * it after the pass. */
void kv_view_stage(kv_view *v, const kv_cache *c, const kv_seq *s, int layer, int j, int tid) {
    assert(tid >= 0 && tid < v->n_threads && j >= 0 && j < v->n_todo);
    int64_t *count = v->count + (size_t)tid * KV_VIEW_COUNT_STRIDE;
    int i = v->todo[j];
    int32_t id = s->table[i];
    uint8_t *out = v->stage + (size_t)i * v->stage_stride;
    int64_t t0 = cx_now_ns();
    if (kv_page_read(c, id, layer, &v->zip[tid], v->scratch + (size_t)tid * v->scratch_bytes, out)) {
        memset(out, 0, kv_slab_bytes(v->fmt[i], v->dim));
        count[2]++;
        return;
    }
    count[0]++;
    count[1] += cx_now_ns() - t0;
}

/* See kv_view.h. */
int kv_view_rows(const kv_view *v, const kern_ops *k, int i, int r0, int n, int c0, int nc, float *out, size_t ld,
                 int keep_rotation) {
    assert(i >= 0 && i < v->max_blocks && n >= 1 && (r0 < KV_BLOCK) == (r0 + n - 1 < KV_BLOCK) && "one half per call");
    assert(nc >= 2 && c0 / v->hd == (c0 + nc - 1) / v->hd && "one kv head's columns per call");
    kern_kv_src src;
    kv_src(v->fmt[i], v->slab[i], v->dim, v->hd, r0, c0, &src);
    int rotated = keep_rotation && src.hadamard;
    if (rotated) src.hadamard = 0;
    k->kv_unpack(&src, n, nc, out, ld);
    return rotated;
}

/* See kv_view.h: where kv_src says the head's rows start (the codec alone
 * knows the layout). */
const float *kv_view_f32(const kv_view *v, int i, int kv, int kvh) {
    if (v->fmt[i] != KV_F32) return NULL;
    kern_kv_src src;
    kv_src(KV_F32, v->slab[i], v->dim, v->hd, kv * KV_BLOCK, kvh * v->hd, &src);
    return (const float *)(const void *)src.codes;
}

/* Every cache line of bytes p..p+n-1, into L2 (locality 1: prefetcht2; L2
 * on AMD and Intel alike), not L1: an L1 prefetch holds one of the core's
 * few L1 miss buffers until its line arrives, so a tile's worth of them
 * stalled the very loads attention waited on (a q8 decode at 16,384 spent
 * 10% in this function with prefetcht0), while L2 queues many more misses.
 * tlattn tg128 after 8,192 q8, 2 threads: 38-40 tok/s with prefetcht0,
 * 52-66 with this (docs/performance.md). */
static void prefetch_span(const void *p, size_t n) {
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63, end = (uintptr_t)p + n;
    for (; a < end; a += 64) __builtin_prefetch((const void *)a, 0, 1);
}

/* See kv_view.h. */
void kv_view_prefetch(const kv_view *v, int i, int c0, int nc) {
    assert(i >= 0 && i < v->max_blocks && nc >= 2);
    for (int half = 0; half < 2; half++) {
        kern_kv_src src;
        kv_src(v->fmt[i], v->slab[i], v->dim, v->hd, half * KV_BLOCK, c0, &src);
        size_t span = src.elem == KERN_KV_I4 ? (size_t)nc / 2 : (size_t)nc * (src.row_bytes / (size_t)v->hd);
        if (span == src.row_bytes) prefetch_span(src.codes, KV_BLOCK * src.row_bytes); /* a whole head: one run */
        for (int r = 0; r < KV_BLOCK; r++) {
            if (span < src.row_bytes) prefetch_span(src.codes + (size_t)r * src.row_bytes, span);
            if (src.group_scale) prefetch_span(src.group_scale + (size_t)r * src.group_stride, sizeof(float) * (size_t)(nc / KV_GROUP));
        }
        if (src.row_scale) prefetch_span(src.row_scale, sizeof(float) * KV_BLOCK);
        else if (src.col_scale) prefetch_span(src.col_scale, sizeof(float) * (size_t)nc);
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
