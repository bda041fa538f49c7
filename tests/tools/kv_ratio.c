/*
 * kv_ratio.c - how well real KV pages compress: greedy-decode a model (the
 * prompt below, then up to N tokens), take every full block's slabs as the
 * f32 cache holds them, encode each in every format the cache stores, and
 * deflate it as the cold tier does (byte planes, each plane ending a deflate
 * block, raw deflate) at zlib levels 1, 6 and 9; then the planes as one
 * block, and the slab without planes, at level 1. Prints one line per
 * format: the ratios to the format's own bytes, and to the f32 bytes.
 *
 *   build/tests/kv_ratio MODEL [TOKENIZER] [N]
 *
 * docs/kv-cache.md quotes its output for stories260K and aidreams260K.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cortex.h"
#include "kv/kv_cache.h"

/* Raw-deflate size of the n_seg segments at p, at a zlib level (kv_zip). */
static size_t deflated(const uint8_t *p, const size_t *seg, int n_seg, int level) {
    kv_zip z;
    memset(&z, 0, sizeof z);
    size_t n = 0;
    for (int i = 0; i < n_seg; i++) n += seg[i];
    uint8_t *out = malloc(kv_zip_bound(n));
    size_t got = out && kv_zip_init(&z, 1, level) == 0 ? kv_zip_pack(&z, p, seg, n_seg, out, kv_zip_bound(n)) : 0;
    kv_zip_free(&z);
    free(out);
    return got;
}

/* Decode, then measure every format on every full block's pages. */
int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: kv_ratio MODEL [TOKENIZER] [N]\n");
        return 2;
    }
    cx_model *m;
    cx_err err = {0};
    if (cx_model_load(argv[1], argc > 2 ? argv[2] : NULL, &m, &err)) {
        fprintf(stderr, "kv_ratio: %s\n", err.msg);
        return 1;
    }
    const cx_model_info *mi = cx_model_get_info(m);
    cx_kv_params kp = cx_kv_defaults();
    kp.max_tokens = mi->n_ctx;
    cx_kv_cache *c;
    cx_session_params sp = cx_session_defaults();
    cx_session *s;
    if (cx_kv_cache_new(m, &kp, &c, &err) || (sp.cache = c, cx_session_new_ex(m, &sp, &s, &err))) {
        fprintf(stderr, "kv_ratio: %s\n", err.msg);
        return 1;
    }
    const char *text = "Once upon a time, there was a little girl named Lily. She";
    int32_t prompt[64];
    int np = 0;
    const float *l;
    if (cx_tokenize(m, text, strlen(text), 1, prompt, 64, &np, &err) || cx_eval(s, prompt, np, &l, &err)) {
        fprintf(stderr, "kv_ratio: %s\n", err.msg);
        return 1;
    }
    int n = argc > 3 ? atoi(argv[3]) : 400;
    if (n > mi->n_ctx - np - 1) n = mi->n_ctx - np - 1;
    for (int i = 0; i < n; i++) {
        int32_t best = 0;
        for (int j = 1; j < mi->n_vocab; j++) best = l[j] > l[best] ? j : best;
        if (cx_eval(s, &best, 1, &l, &err)) break;
    }
    int dim = c->dim, levels[3] = {1, 6, 9};
    size_t f32_bytes = kv_slab_bytes(KV_F32, dim);
    printf("%s: %d positions, kv_dim %d, pages of one layer of a block (32 rows)\n", mi->name, np + n, dim);
    for (int f = 0; f < KV_NFMT; f++) {
        size_t bytes = kv_slab_bytes(f, dim);
        uint8_t *slab = malloc(bytes), *planes = malloc(bytes);
        float *rows = malloc(sizeof(float) * KV_ROWS * (size_t)dim);
        double raw = 0, z[3] = {0}, one = 0, flat = 0;
        size_t seg[KV_ZIP_MAX_SEGMENTS];
        int n_seg = kv_planes_sizes(f, dim, seg);
        int pages = 0;
        for (int32_t id = 0; id < c->max_blocks; id++) {
            if (c->blocks[id].tier != KV_HOT || c->blocks[id].filled < KV_BLOCK) continue;
            for (int layer = 0; layer < c->n_layer; layer++) {
                kv_decode_rows(c->fmt[KV_HOT], kv_block_slab(c, id, layer), 0, KV_ROWS, rows, dim, c->hd);
                kv_encode_slab(f, slab, rows, dim, c->hd);
                kv_planes_split(f, slab, planes, dim);
                raw += (double)bytes;
                pages++;
                for (int k = 0; k < 3; k++) z[k] += (double)deflated(planes, seg, n_seg, levels[k]);
                one += (double)deflated(planes, &bytes, 1, 1);
                flat += (double)deflated(slab, &bytes, 1, 1);
            }
        }
        printf("%-4s %4d pages of %5zu B: planes level 1 %.3f, 6 %.3f, 9 %.3f; as one block %.3f; no planes %.3f; "
               "vs f32 %.2f\n",
               kv_fmt_name(f), pages, bytes, raw / z[0], raw / z[1], raw / z[2], raw / one, raw / flat,
               (double)pages * (double)f32_bytes / z[0]);
        free(slab);
        free(planes);
        free(rows);
    }
    cx_session_free(s);
    cx_kv_cache_free(c);
    cx_model_free(m);
    return 0;
}
