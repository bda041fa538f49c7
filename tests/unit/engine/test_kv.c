/*
 * test_kv.c - the paged, tiered KV cache (engine/src/kv/kv_*.c):
 *   - formats: f32/f16 exact round trips, int8/4-bit within half a step per
 *     element, byte planes and zlib pages restore every byte;
 *   - the prefix index (insert, find, backward-shift removal) and slot pools;
 *   - the cache driven directly (rows written, read back through the view):
 *     block tables, lossless and int8 tier round trips, budgets respected
 *     after every pass, LRU and LFU victim orders, refcounts and
 *     copy-on-write of a forked partial block, spilling to a file;
 *   - through the public API on a synthetic model: prefix reuse gives the
 *     logits of computing everything (bit for bit), including the copy-on-write
 *     of the last block when the whole prompt is cached;
 *   - on stories260K (../shared/models; skipped without it, failed in CI):
 *     tiny budgets forcing every block through the tiers: lossless cold pages
 *     change no greedy token over 200; int8 warm pages: agreement over 200
 *     tokens reported, logit error bounded; compression ratios of real pages.
 */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "kv/kv_cache.h"
#include "kv/kv_view.h"
#include "model.h"
#include "pass.h"
#include "session.h"
#include "util.h"

/* Deterministic pseudo-random floats in [-1, 1) (xorshift). */
static float frand(uint64_t *st) {
    *st ^= *st << 13;
    *st ^= *st >> 7;
    *st ^= *st << 17;
    return (float)((*st >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

/* ---- formats, planes, pages ---- */

/* Every format round-trips within its rounding; planes and pages restore every byte. */
/* A pseudo-random byte, near-uniform over 1..255 (noise: about 8 bits of entropy). */
static uint8_t rand_byte(uint64_t *st) { return (uint8_t)(frand(st) * 127.0f + 128.0f); }

static void test_codec(void) {
    const int dim = 64, hd = 32; /* two heads: their codes lie apart (kv_codec.h) */
    uint64_t st = 12345;
    float x[KV_ROWS * 64], y[KV_ROWS * 64];
    for (int i = 0; i < KV_ROWS * dim; i++) x[i] = frand(&st) * (float)(1 + i % 5) * ((i / dim) == 3 ? 0.0f : 1.0f);
    uint8_t slab[KV_ROWS * 64 * 4], planes[KV_ROWS * 64 * 4], back[KV_ROWS * 64 * 4];
    kv_zip zc, zd;
    CHECK(kv_zip_init(&zc, 1, 6) == 0 && kv_zip_init(&zd, 0, 0) == 0, "zlib streams");
    for (int f = 0; f < KV_NFMT; f++) {
        size_t n = kv_slab_bytes(f, dim);
        kv_encode_slab(f, slab, x, dim, hd);
        kv_decode_rows(f, slab, 0, KV_ROWS, y, dim, hd);
        double worst = 0; /* error in steps (the element's scale) */
        int exact = 1;
        int fp8 = f == KV_E4M3 || f == KV_E5M2;
        for (int r = 0; r < KV_ROWS; r++)
            for (int i = 0; i < dim; i++) {
                float a = x[r * dim + i], b = y[r * dim + i], step = kv_step(f, slab, r, i, dim);
                if (f == KV_F32) exact &= a == b;
                else if (f == KV_F16) exact &= b == cx_fp16_to_fp32(cx_fp32_to_fp16(a));
                else if (f == KV_BF16) exact &= b == cx_bf16_to_fp32(cx_fp32_to_bf16(a));
                else if (fp8) { /* the nearest of the 254 finite codes (times the row's scale), ties to even */
                    float s = f == KV_E4M3 ? step : 1.0f;
                    double best = INFINITY;
                    for (int c = 0; c < 256; c++) {
                        float v = (f == KV_E4M3 ? kern_e4m3_value((uint8_t)c) : kern_e5m2_value((uint8_t)c)) * s;
                        if (v == v && !isinf(v) && fabs((double)a - v) < best) best = fabs((double)a - v);
                    }
                    exact &= fabs((double)a - b) == best;
                } else if (step > 0) worst = fabs(a - b) / step > worst ? fabs(a - b) / step : worst;
                else exact &= b == 0 && a == 0;
            }
        CHECK(exact, "%s: decode(encode(x)) is x as the format rounds it", kv_fmt_name(f));
        if (f == KV_F32) { /* the layout: head 1's 32 rows together, after head 0's */
            int laid = 1;
            for (int r = 0; r < KV_ROWS; r++)
                laid &= !memcmp(slab + (size_t)(KV_ROWS + r) * hd * sizeof(float), x + r * dim + hd, hd * sizeof(float));
            CHECK(laid, "f32: a slab's codes lie head by head, each head's rows together");
        }
        if ((f >= KV_Q8 && f <= KV_Q4B) || f == KV_Q4G)
            CHECK(worst <= 0.5 + 1e-5, "%s: error %.6f steps > 1/2", kv_fmt_name(f), worst);
        if (f == KV_Q4H) { /* the rotation keeps lengths: a group's error is at most sqrt(32) half-steps long */
            double worst_l2 = 0;
            for (int r = 0; r < KV_ROWS; r++)
                for (int g = 0; g < dim; g += KV_GROUP) {
                    double e2 = 0, step = kv_step(f, slab, r, g, dim);
                    for (int i = g; i < g + KV_GROUP; i++) e2 += pow(x[r * dim + i] - y[r * dim + i], 2);
                    if (step > 0 && sqrt(e2) / (sqrt((double)KV_GROUP) * step / 2) > worst_l2)
                        worst_l2 = sqrt(e2) / (sqrt((double)KV_GROUP) * step / 2);
                }
            CHECK(worst_l2 <= 1.0 + 1e-4, "q4h: a group's error is %.4f of sqrt(32) half-steps", worst_l2);
        }
        if (kv_fmt_rowwise(f)) { /* rows written one at a time give the same slab */
            uint8_t rows[KV_ROWS * 64 * 4];
            for (int r = 0; r < KV_ROWS; r++) kv_encode_row(f, rows, r, x + r * dim, dim, hd);
            CHECK(!memcmp(rows, slab, n), "%s: row by row equals the whole slab", kv_fmt_name(f));
        }
        kv_planes_split(f, slab, planes, dim);
        kv_planes_join(f, planes, back, dim);
        CHECK(!memcmp(slab, back, n), "%s: planes join back to the slab", kv_fmt_name(f));
        uint8_t z[8192], un[KV_ROWS * 64 * 4];
        size_t seg[KV_ZIP_MAX_SEGMENTS];
        int n_seg = kv_planes_sizes(f, dim, seg);
        size_t total = 0;
        for (int i = 0; i < n_seg; i++) total += seg[i];
        CHECK(total == n, "%s: the planes cover the slab", kv_fmt_name(f));
        size_t zn = kv_zip_pack(&zc, planes, seg, n_seg, z, sizeof z);
        CHECK(zn > 0 && kv_zip_unpack(&zd, z, zn, un, n) == 0 && !memcmp(un, planes, n), "%s: zlib page round trip",
              kv_fmt_name(f));
        CHECK(kv_zip_unpack(&zd, z, zn, un, n - 1) != 0, "%s: a page of the wrong length is refused", kv_fmt_name(f));
    }
    /* A page whose last segment is noise (stored, not Huffman-coded) packs and
     * round-trips, and the next page is compressed at the configured level
     * again (zeros shrink to a few dozen bytes). */
    {
        static uint8_t page[8192], zpage[9000], out[8192];
        for (int i = 4096; i < 8192; i++) page[i] = rand_byte(&st);
        size_t seg2[2] = {4096, 4096}, zn = kv_zip_pack(&zc, page, seg2, 2, zpage, sizeof zpage);
        CHECK(zn > 4096 && kv_zip_unpack(&zd, zpage, zn, out, sizeof out) == 0 && !memcmp(out, page, sizeof page),
              "a page ending in a stored (incompressible) segment packs and round-trips (%zu bytes)", zn);
        memset(page, 0, sizeof page);
        size_t seg1[1] = {8192};
        zn = kv_zip_pack(&zc, page, seg1, 1, zpage, sizeof zpage);
        CHECK(zn > 0 && zn < 200, "the next page is compressed at the configured level again (%zu bytes)", zn);
    }
    kv_zip_free(&zc);
    kv_zip_free(&zd);
    /* every half decodes as util.c's reference converter (bits; NaNs stay NaNs) */
    int same = 1;
    for (uint32_t h = 0; h < 65536; h++) {
        uint8_t row[2 * 48] = {0};
        float out[48], want = cx_fp16_to_fp32((uint16_t)h);
        memcpy(row, &h, 2); /* little-endian, as the format stores it */
        uint8_t f16slab[KV_ROWS * 48 * 2] = {0};
        memcpy(f16slab, row, sizeof row);
        kv_decode_rows(KV_F16, f16slab, 0, 1, out, 48, 48);
        same &= want != want ? out[0] != out[0] : !memcmp(&out[0], &want, sizeof want);
    }
    CHECK(same, "f16 decode equals cx_fp16_to_fp32 for all 65536 halves");
}

/* Every table's kv_unpack gives the scalar table's bits, for every format,
 * both halves of a slab, column offsets and widths that leave SIMD tails,
 * and (FP8) every code byte, NaNs included. */
static void test_unpack(void) {
    const int dim = 192, hd = 96; /* two heads */
    uint64_t st = 777;
    static float x[KV_ROWS * 192];
    static uint8_t slab[KV_ROWS * 192 * 4 + 4096];
    for (int i = 0; i < KV_ROWS * dim; i++) x[i] = frand(&st) * (float)(1 + i % 7) * ((i % 11) == 0 ? 100.0f : 1.0f);
    static const char *isa[] = {"avx2", "avxvnni", "avx512", "avx512vnni", "avx512bf16"};
    const kern_ops *ref = kern_table("scalar");
    for (size_t t = 0; t < sizeof isa / sizeof isa[0]; t++) {
        const kern_ops *k = kern_table(isa[t]);
        if (!k) {
            printf("SKIP kv_unpack %s: the CPU lacks %s\n", isa[t], kern_missing(isa[t]));
            continue;
        }
        int same = 1, cases = 0;
        for (int f = 0; f < KV_NFMT; f++) {
            kv_encode_slab(f, slab, x, dim, hd);
            if (f == KV_E4M3 || f == KV_E5M2)
                for (int i = 0; i < KV_ROWS * dim; i++) slab[i] = (uint8_t)i; /* every code */
            static const int c0s[] = {0, 2, 6, 16, 38}, ncs[] = {2, 8, 14, 16, 40, 58};
            for (int half = 0; half < 2; half++)
                for (size_t a = 0; a < sizeof c0s / sizeof c0s[0]; a++)
                    for (size_t b = 0; b < sizeof ncs / sizeof ncs[0]; b++) {
                        int c0 = c0s[a], nc = ncs[b], r0 = half * KV_BLOCK + (int)(a % 3), n = KV_BLOCK - (int)(a % 3);
                        int head0 = (int)(b % 2) * hd; /* within either head */
                        if (f == KV_Q4G || f == KV_Q4H) { /* whole groups of 32 */
                            c0 = (int)(a % 2) * KV_GROUP;
                            nc = (int)(b % 2 + 1) * KV_GROUP;
                        }
                        float want[KV_BLOCK * 64], got[KV_BLOCK * 64];
                        kern_kv_src src;
                        kv_src(f, slab, dim, hd, r0, head0 + c0, &src);
                        ref->kv_unpack(&src, n, nc, want, 64);
                        k->kv_unpack(&src, n, nc, got, 64);
                        for (int r = 0; r < n; r++)
                            for (int c = 0; c < nc; c++) {
                                float u = want[r * 64 + c], v = got[r * 64 + c];
                                same &= u != u ? v != v : !memcmp(&u, &v, sizeof u);
                            }
                        cases++;
                    }
        }
        CHECK(same, "kv_unpack %s: the scalar bits on every format (%d cases)", isa[t], cases);
    }
    /* the scalar definition against the codec: rows decoded whole equal the
     * unpacked columns, and FP8's exact values */
    int ok = 1;
    for (int f = 0; f < KV_NFMT; f++) {
        static float whole[KV_ROWS * 192], part[KV_ROWS * 192];
        kv_encode_slab(f, slab, x, dim, hd);
        kv_decode_rows(f, slab, 0, KV_ROWS, whole, dim, hd);
        for (int half = 0; half < 2; half++) {
            kern_kv_src src;
            int c0 = (half ? hd : 0) + (f == KV_Q4G || f == KV_Q4H ? 32 : 10), nc = f == KV_Q4G || f == KV_Q4H ? 32 : 20;
            kv_src(f, slab, dim, hd, half * KV_BLOCK, c0, &src);
            ref->kv_unpack(&src, KV_BLOCK, nc, part, (size_t)nc);
            for (int r = 0; r < KV_BLOCK; r++)
                for (int c = 0; c < nc; c++) ok &= part[r * nc + c] == whole[(half * KV_BLOCK + r) * dim + c0 + c];
        }
    }
    CHECK(ok, "a column range unpacked equals those columns of whole decoded rows, every format");
    /* the transform: its own inverse within float rounding, orthonormal, and e0's image */
    {
        float h[32], z[32], e0[32] = {1.0f};
        double worst = 0, n0 = 0, n1 = 0;
        for (int i = 0; i < 32; i++) h[i] = z[i] = frand(&st) * (i == 5 ? 50.0f : 1.0f);
        kern_hadamard32(h);
        for (int i = 0; i < 32; i++) n0 += (double)z[i] * z[i], n1 += (double)h[i] * h[i];
        kern_hadamard32(h);
        for (int i = 0; i < 32; i++) worst = fabs(h[i] - z[i]) > worst ? fabs(h[i] - z[i]) : worst;
        kern_hadamard32(e0);
        int flat = 1;
        for (int i = 0; i < 32; i++) flat &= fabsf(e0[i] - KERN_RSQRT32) == 0.0f;
        CHECK(worst < 50.0 * 4e-7 * 8 && fabs(n1 / n0 - 1) < 1e-5 && flat,
              "Hadamard: H(H x) = x within %.2g (rounding), |Hx| = |x| (%.7f), H e0 = 1/sqrt(32)", worst, n1 / n0);
    }
    CHECK(kern_e4m3_value(0x7e) == 448.0f && kern_e4m3_value(0x01) == 0x1p-9f && kern_e4m3_value(0x08) == 0x1p-6f &&
              kern_e4m3_value(0xb8) == -1.0f && isnan(kern_e4m3_value(0x7f)) && kern_e5m2_value(0x7b) == 57344.0f &&
              kern_e5m2_value(0x01) == 0x1p-16f && isinf(kern_e5m2_value(0x7c)),
          "FP8 values: E4M3 448, 2^-9, 2^-6, -1, NaN; E5M2 57344, 2^-16, inf");
}

/* The prefix index under long probe runs and removals; the slot pool. */
static void test_prefix_index(void) {
    kv_prefix t;
    CHECK(kv_prefix_init(&t, 1000) == 0, "prefix index");
    int32_t toks[KV_BLOCK] = {1, 2, 3};
    uint64_t a = kv_prefix_key(0, toks, KV_BLOCK), b = kv_prefix_key(a, toks, KV_BLOCK);
    toks[15] = 9;
    CHECK(a != b && kv_prefix_key(0, toks, KV_BLOCK) != a, "keys depend on the parent and on every token");
    /* keys forced into long probe runs: equal low bits */
    uint64_t keys[1000];
    for (int i = 0; i < 1000; i++) keys[i] = ((uint64_t)(i + 1) << 32) | (uint64_t)(i % 7);
    int inserted = 0;
    for (int i = 0; i < 1000; i++) inserted += kv_prefix_insert(&t, keys[i], i) == 0;
    CHECK(inserted == 1000, "1000 keys in long probe runs inserted (%d)", inserted);
    CHECK(kv_prefix_insert(&t, keys[5], 99) != 0, "a key present is not inserted twice");
    for (int i = 0; i < 1000; i += 2) kv_prefix_remove(&t, keys[i]);
    int ok = t.n == 500;
    for (int i = 0; i < 1000; i++) ok &= kv_prefix_find(&t, keys[i]) == (i % 2 ? i : -1);
    CHECK(ok, "after removing every other key the rest are found, the removed are not");
    kv_prefix_free(&t);

    kv_slots s;
    CHECK(kv_slots_init(&s, 3, 64) == 0, "slots");
    int32_t x = kv_slots_get(&s), y = kv_slots_get(&s), z = kv_slots_get(&s);
    CHECK(x == 0 && y == 1 && z == 2 && kv_slots_get(&s) == -1, "three slots, then none");
    kv_slots_put(&s, y);
    CHECK(kv_slots_get(&s) == 1 && s.used == 3, "a slot put back is handed out again");
    kv_slots_free(&s);
}

/* ---- the cache driven directly ---- */

static cx_model *tiny; /* test-tiny, f32: 2 layers, kv_dim 32 */

/* The value stored for (layer, keys or values, position, column). */
static float row_value(int layer, int kv, int pos, int i) {
    return sinf(0.37f * (float)pos + 1.3f * (float)i + 0.7f * (float)layer + (float)kv) * (float)(1 + i % 7);
}

/* One pass writing T positions of s with row_value rows and tokens tok(pos);
 * 0 or the kv_prepare error. */
static int put_pass(kv_cache *c, kv_seq *s, int T, int tok_base) {
    cx_err err = {0};
    int pos = s->n_tokens, dim = c->dim;
    int rc = kv_prepare(c, s, pos, T, &err);
    if (rc) return rc;
    float *k = malloc(sizeof(float) * (size_t)(T * dim)), *v = malloc(sizeof(float) * (size_t)(T * dim));
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)T);
    for (int l = 0; l < c->n_layer; l++) {
        for (int t = 0; t < T; t++)
            for (int i = 0; i < dim; i++) {
                k[t * dim + i] = row_value(l, 0, pos + t, i);
                v[t * dim + i] = row_value(l, 1, pos + t, i);
            }
        kv_write(c, s, l, pos, T, k, v);
    }
    for (int t = 0; t < T; t++) toks[t] = tok_base + pos + t;
    kv_commit(c, s, pos, T, toks);
    free(k);
    free(v);
    free(toks);
    return 0;
}

/* T positions in as many passes as the hot tier allows (as cx_eval does). */
static int put(kv_cache *c, kv_seq *s, int T, int tok_base) {
    while (T > 0) {
        int n = pass_chunk(s->n_tokens, T, T, c->slots[KV_HOT].n);
        int rc = put_pass(c, s, n, tok_base);
        if (rc) return rc;
        T -= n;
    }
    return 0;
}

/* Largest |read - written| over every position and layer of s, read through
 * a view (staged on one thread); relative to the row's largest value when
 * `relative` (int8 steps are max/127). */
static double read_error(kv_cache *c, kv_seq *s, kv_view *v) {
    double worst = 0;
    int nb = (s->n_tokens + KV_BLOCK - 1) / KV_BLOCK;
    for (int l = 0; l < c->n_layer; l++) {
        for (int j = 0, n = kv_view_layer(v, c, s, l, nb); j < n; j++) kv_view_stage(v, c, s, l, j, 0);
        for (int p = 0; p < s->n_tokens; p++)
            for (int kv = 0; kv < 2; kv++) {
                float row[256];
                assert(c->dim <= 256);
                for (int h0 = 0; h0 < c->dim; h0 += c->hd) /* a kv head at a time */
                    kv_view_rows(v, kern_table("scalar"), p / KV_BLOCK, kv * KV_BLOCK + p % KV_BLOCK, 1, h0, c->hd, row + h0,
                                 (size_t)c->dim, 0);
                for (int i = 0; i < c->dim; i++) {
                    double e = fabs((double)row[i] - row_value(l, kv, p, i));
                    worst = e > worst ? e : worst;
                }
            }
    }
    CHECK(kv_view_collect(v, c) == 0, "every cold page was read back");
    return worst;
}

/* Is every tier within its budget? */
static int within_budgets(const kv_cache *c) {
    for (int t = 0; t < KV_TIERS; t++)
        if (c->p.budget[t] != CX_KV_UNLIMITED && c->bytes[t] > c->p.budget[t]) return 0;
    return 1;
}

/* A cache on the tiny model with these budgets (in hot blocks' worth for
 * hot/warm, bytes for cold; -1 unlimited). */
static kv_cache *new_cache(int type, int hot_blocks, int warm_blocks, int64_t cold, int policy, int prefix,
                           const char *spill, int max_blocks) {
    cx_kv_params p = cx_kv_defaults();
    p.type = type;
    p.policy = policy;
    p.prefix_cache = prefix;
    p.spill_path = spill;
    size_t hot = (size_t)tiny->info.n_layer * kv_slab_bytes(type, tiny->info.n_head_kv * tiny->info.head_dim);
    size_t warm = (size_t)tiny->info.n_layer * kv_slab_bytes(KV_Q8B, tiny->info.n_head_kv * tiny->info.head_dim);
    p.budget[KV_HOT] = hot_blocks < 0 ? -1 : (int64_t)(hot * (size_t)hot_blocks);
    p.budget[KV_WARM] = warm_blocks < 0 ? -1 : (int64_t)(warm * (size_t)warm_blocks);
    p.budget[KV_COLD] = cold;
    kv_cache *c = NULL;
    cx_err err = {0};
    CHECK(kv_check_params(tiny, &p, &err) == 0 && kv_cache_create(tiny, &p, max_blocks, 0, &c, &err) == 0,
          "cache: %s", err.msg);
    return c;
}

/* Block tables, and rows read back through every tier: exactly when lossless,
 * within half a step for int8; budgets kept after every pass; spilling. */
static void test_table_and_tiers(void) {
    /* default: everything hot f32, one block per 16 positions, O(1) append */
    kv_cache *c = new_cache(KV_F32, -1, -1, -1, CX_KV_LRU, 0, NULL, 8);
    kv_seq s;
    kv_view v;
    kv_seq_init(&s, 100);
    kv_view_init(&v, c, 100, 1);
    CHECK(put(c, &s, 40, 0) == 0 && put(c, &s, 1, 0) == 0, "two passes");
    CHECK(s.n_blocks == 3 && s.n_tokens == 41 && c->blocks[s.table[2]].filled == 9, "41 positions: 3 blocks, 9 rows in the last");
    CHECK(s.table[0] != s.table[1] && s.table[1] != s.table[2], "distinct blocks");
    CHECK(!c->tiering && v.stage == NULL, "unlimited f32: no staging, every block read in place");
    CHECK(read_error(c, &s, &v) == 0, "rows read back exactly");
    kv_release(c, &s);
    CHECK(c->n_free == c->max_blocks, "release frees every block");
    kv_view_free(&v);
    kv_seq_free(&s);
    kv_cache_destroy(c);

    /* lossless tiering: hot holds 2 blocks, no warm tier, cold pages of f32 (and f16) */
    for (int type = KV_F32; type <= KV_F16; type++) {
        c = new_cache(type, 2, 0, -1, CX_KV_LRU, 0, NULL, 12);
        kv_seq_init(&s, 160);
        kv_view_init(&v, c, 160, 2);
        int ok = 1, budgets = 1;
        for (int i = 0; i < 150 && ok; i += 7) {
            ok = put(c, &s, 7, 0) == 0;
            budgets &= within_budgets(c) && c->nblocks[KV_HOT] <= 2;
        }
        CHECK(ok && budgets, "%s: 150 positions through a 2-block hot tier, budgets kept", kv_fmt_name(type));
        CHECK(c->nblocks[KV_COLD] >= 8 && c->st.demotions >= 8, "%s: older blocks are cold (%lld)", kv_fmt_name(type),
              (long long)c->nblocks[KV_COLD]);
        double e = read_error(c, &s, &v);
        CHECK(type == KV_F32 ? e == 0 : e < 4e-3, "%s: cold pages restore exactly what hot held (error %g)",
              kv_fmt_name(type), e);
        CHECK(c->st.restores > 0 && c->st.zip_in > c->st.zip_out, "%s: pages restored, compressed", kv_fmt_name(type));
        kv_view_free(&v);
        kv_seq_free(&s);
        kv_cache_destroy(c);
    }

    /* int8 warm, then cold pages of int8 codes: error within half a step */
    c = new_cache(KV_F32, 1, 3, -1, CX_KV_LRU, 0, NULL, 12);
    kv_seq_init(&s, 160);
    kv_view_init(&v, c, 160, 1);
    int budgets = 1;
    for (int i = 0; i < 150; i += 5) {
        put(c, &s, 5, 0);
        budgets &= within_budgets(c);
    }
    CHECK(budgets && c->nblocks[KV_HOT] == 1 && c->nblocks[KV_WARM] == 3 && c->nblocks[KV_COLD] == 6,
          "hot 1, warm 3, cold 6 blocks (%lld %lld %lld)", (long long)c->nblocks[0], (long long)c->nblocks[1],
          (long long)c->nblocks[2]);
    double e = read_error(c, &s, &v);
    CHECK(e <= 7.0 / 127 * 0.5 * 1.0001, "int8: error %g within half a step (max |x| 7)", e);
    kv_release(c, &s);
    CHECK(c->bytes[0] == 0 && c->bytes[1] == 0 && c->bytes[2] == 0, "released: every tier empty");
    kv_view_free(&v);
    kv_seq_free(&s);
    kv_cache_destroy(c);

    /* a tiny cold budget with a spill file: pages spill and come back exactly */
    const char *spill = fx_path("spill.kv");
    c = new_cache(KV_F32, 1, 0, 16384, CX_KV_LRU, 0, spill, 12);
    kv_seq_init(&s, 160);
    kv_view_init(&v, c, 160, 2);
    budgets = 1;
    for (int i = 0; i < 150; i += 10) {
        put(c, &s, 10, 0);
        budgets &= within_budgets(c);
    }
    CHECK(budgets && c->st.spills > 0 && c->spilled_bytes > 0, "cold budget kept by spilling (%lld spills)",
          (long long)c->st.spills);
    CHECK(read_error(c, &s, &v) == 0, "spilled pages restore exactly");
    kv_view_free(&v);
    kv_seq_free(&s);
    kv_cache_destroy(c);
    CHECK(access(spill, F_OK) != 0, "the spill file is removed with the cache");
}

/* Victim order over three sequences' blocks in a 5-block hot tier: a's
 * first block is read by the most passes and the latest, b's were read 3
 * times long ago, d's once, recently. The 6th block demotes one of them:
 * LRU takes b's first block (oldest read; b's two blocks tie and the lower
 * position goes first), LFU d's (fewest reads). */
static void test_policies(void) {
    for (int policy = CX_KV_LRU; policy <= CX_KV_LFU; policy++) {
        kv_cache *c = new_cache(KV_F32, 5, 0, -1, policy, 0, NULL, 16);
        kv_seq a, b, d;
        kv_seq_init(&a, 64);
        kv_seq_init(&b, 64);
        kv_seq_init(&d, 64);
        put(c, &a, 16, 0); /* a0 */
        put(c, &b, 16, 100); /* b0 */
        put(c, &b, 1, 100);  /* b1; b0 read twice */
        put(c, &b, 1, 100);  /* b0 read 3 times */
        for (int i = 0; i < 3; i++) put(c, &a, 1, 0); /* a1; a0 read 4 times */
        put(c, &d, 16, 200);                          /* d0: read once, the latest */
        int32_t a0 = a.table[0], b0 = b.table[0], b1 = b.table[1], d0 = d.table[0];
        CHECK(c->nblocks[KV_HOT] == 5, "hot is full: a0 a1 b0 b1 d0");
        put(c, &a, 13, 0); /* fills a1 */
        put(c, &a, 1, 0);  /* a2 needs a hot slot */
        int32_t cand[4] = {a0, b0, b1, d0}, gone = -1;
        for (int i = 0; i < 4; i++)
            if (c->blocks[cand[i]].tier != KV_HOT) gone = cand[i];
        if (policy == CX_KV_LRU)
            CHECK(gone == b0, "LRU demotes the block read longest ago (b0; got %d)", gone);
        else
            CHECK(gone == d0, "LFU demotes the block read fewest times (d0; got %d)", gone);
        CHECK(c->nblocks[KV_HOT] == 5 && c->blocks[a0].tier == KV_HOT, "%s keeps the most read block hot",
              policy ? "LFU" : "LRU");
        kv_release(c, &a);
        kv_release(c, &b);
        kv_release(c, &d);
        kv_seq_free(&a);
        kv_seq_free(&b);
        kv_seq_free(&d);
        kv_cache_destroy(c);
    }
}

/* RANDOM: victims are full blocks (the tail leaves last), spread over the
 * sequence rather than the oldest first, the same in two identical runs;
 * nothing is promoted over a victim (only into room). */
static void test_random_policy(void) {
    int32_t hot_idx[2][8];
    int n_hot[2] = {0, 0};
    for (int run = 0; run < 2; run++) {
        kv_cache *c = new_cache(KV_F32, 4, 0, -1, CX_KV_RANDOM, 0, NULL, 16);
        kv_seq a;
        kv_seq_init(&a, 256);
        for (int i = 0; i < 12; i++) put(c, &a, 16, 0); /* 12 full blocks through a 4-block hot tier */
        put(c, &a, 5, 0);                               /* and a partial tail */
        int32_t tail = a.table[a.n_blocks - 1];
        CHECK(c->blocks[tail].tier == KV_HOT, "random: the partial tail stays hot");
        for (int i = 0; i < a.n_blocks - 1 && n_hot[run] < 8; i++)
            if (c->blocks[a.table[i]].tier == KV_HOT) hot_idx[run][n_hot[run]++] = i;
        int64_t promoted = c->st.promotions;
        put(c, &a, 1, 0); /* reads every block again: no room, so no promotion */
        CHECK(c->st.promotions == promoted, "random: no promotion over a victim (%lld -> %lld)", (long long)promoted,
              (long long)c->st.promotions);
        kv_release(c, &a);
        kv_seq_free(&a);
        kv_cache_destroy(c);
    }
    CHECK(n_hot[0] == n_hot[1] && !memcmp(hot_idx[0], hot_idx[1], sizeof(int32_t) * (size_t)n_hot[0]),
          "random: two identical runs keep the same blocks hot");
    int not_newest = 0; /* LRU would keep only the newest full blocks hot */
    for (int i = 0; i < n_hot[0]; i++) not_newest += hot_idx[0][i] < 9;
    CHECK(n_hot[0] >= 1 && not_newest >= 1, "random: hot keeps some older blocks (%d of %d), not only the newest",
          not_newest, n_hot[0]);
}

/* Three sequences decoded in turn under budgets that hold a third of their
 * blocks near the top: blocks stay in their tiers and are read from there
 * (no promotion trades one sequence's blocks for another's on every pass,
 * the LRU thrash of a cyclic scan), moves happen only around new blocks,
 * and every cold read is one restore per layer. Under both
 * policies; then one sequence stops and the others' blocks move up into
 * the room it leaves. */
static void test_round_robin(void) {
    for (int policy = CX_KV_LRU; policy <= CX_KV_LFU; policy++) {
        const char *name = policy == CX_KV_LRU ? "LRU" : "LFU";
        kv_cache *c = new_cache(KV_F32, 3, 3, -1, policy, 0, NULL, 24);
        kv_seq s[3];
        kv_view v;
        kv_view_init(&v, c, 160, 1);
        for (int q = 0; q < 3; q++) {
            kv_seq_init(&s[q], 160);
            CHECK(put(c, &s[q], 64, 1000 * q) == 0, "%s: prefill of sequence %d", name, q);
        }
        int64_t dem0 = c->st.demotions, pro0 = c->st.promotions, cold0 = c->st.hits[KV_COLD], rest0 = c->st.restores;
        int rounds = 40, ok = 1;
        for (int r = 0; r < rounds && ok; r++)
            for (int q = 0; q < 3 && ok; q++) {
                ok = put_pass(c, &s[q], 1, 1000 * q) == 0;
                int nb = (s[q].n_tokens + KV_BLOCK - 1) / KV_BLOCK;
                for (int l = 0; l < c->n_layer; l++) /* the pass's reads, as attention does */
                    for (int j = 0, n = kv_view_layer(&v, c, &s[q], l, nb); j < n; j++) kv_view_stage(&v, c, &s[q], l, j, 0);
                ok = ok && kv_view_collect(&v, c) == 0;
            }
        CHECK(ok && within_budgets(c), "%s: %d rounds of 3 sequences decoded in turn", name, rounds);
        int64_t appended = 3 * 3; /* 64 -> 104 positions: blocks 5, 6, 7 of each sequence */
        int64_t dem = c->st.demotions - dem0, pro = c->st.promotions - pro0;
        /* LRU: the order is the turn order, nothing moves up. LFU: a block
         * just filled (hot because it was written) has fewer reads than the
         * old ones, so at most one older block moves up per new block. */
        CHECK(policy == CX_KV_LRU ? pro == 0 : pro <= appended,
              "%s: no promotions trading blocks between the sequences' turns (%lld for %lld new blocks)", name,
              (long long)pro, (long long)appended);
        CHECK(dem <= 2 * (appended + pro), "%s: demotions only for new blocks and promotions (%lld)", name,
              (long long)dem);
        int64_t cold = c->st.hits[KV_COLD] - cold0, rest = c->st.restores - rest0;
        CHECK(cold > 0 && rest == cold * c->n_layer, "%s: every cold read is one restore per layer (%lld reads, "
              "%lld restores)", name, (long long)cold, (long long)rest);
        CHECK(read_error(c, &s[1], &v) <= 7.0 / 127 * 0.5 * 1.0001, "%s: rows read back within half an int8 step",
              name);
        /* sequence 0 ends: its room goes to the others' blocks read next */
        kv_release(c, &s[0]);
        pro0 = c->st.promotions;
        for (int q = 1; q < 3; q++) put_pass(c, &s[q], 1, 1000 * q);
        CHECK(c->st.promotions > pro0, "%s: blocks move up into the room a finished sequence leaves", name);
        for (int q = 0; q < 3; q++) {
            kv_release(c, &s[q]);
            kv_seq_free(&s[q]);
        }
        kv_view_free(&v);
        kv_cache_destroy(c);
    }
}

/* A fork shares blocks; writing a shared partial block copies it first. */
static void test_refcount_cow(void) {
    kv_cache *c = new_cache(KV_F32, -1, -1, -1, CX_KV_LRU, 0, NULL, 8);
    kv_seq a, b;
    kv_view v;
    kv_seq_init(&a, 64);
    kv_seq_init(&b, 64);
    kv_view_init(&v, c, 64, 1);
    put(c, &a, 20, 0); /* one full block and 4 rows of the next */
    kv_fork(c, &b, &a);
    int32_t full = a.table[0], part = a.table[1];
    CHECK(b.table[0] == full && b.table[1] == part && c->blocks[full].refs == 2 && c->blocks[part].refs == 2,
          "fork shares both blocks (refs 2)");
    put(c, &b, 3, 0); /* b writes the shared partial block: copy-on-write */
    CHECK(b.table[1] != part && c->blocks[part].refs == 1 && c->blocks[b.table[1]].refs == 1 && c->st.cow_copies == 1,
          "the writer gets a private copy; the original keeps one reference");
    CHECK(b.table[0] == full && c->blocks[full].refs == 2, "the full block stays shared");
    CHECK(c->blocks[part].filled == 4 && c->blocks[b.table[1]].filled == 7, "the original is untouched");
    CHECK(read_error(c, &a, &v) == 0 && read_error(c, &b, &v) == 0, "both sequences read their own rows");
    put(c, &a, 1, 0); /* a writes its block, no longer shared: in place */
    CHECK(a.table[1] == part && c->st.cow_copies == 1, "an unshared block is written in place");
    kv_release(c, &a);
    CHECK(c->blocks[full].refs == 1 && c->blocks[part].tier == KV_FREE, "release: shared block kept, own block freed");
    kv_release(c, &b);
    CHECK(c->n_free == c->max_blocks, "all blocks free");
    kv_view_free(&v);
    kv_seq_free(&a);
    kv_seq_free(&b);
    kv_cache_destroy(c);
}

/* ---- the public API: prefix reuse gives the logits of recomputing ---- */

/* cx_eval, recording a failure. */
static void eval_or_fail(cx_session *s, const int32_t *t, int n, const float **l) {
    cx_err err = {0};
    CHECK(cx_eval(s, t, n, l, &err) == 0, "eval: %s", err.msg);
}

/* Sessions sharing a cache reuse prefixes and get the logits of recomputing. */
static void test_prefix_reuse(void) {
    const int V = tiny->info.n_vocab;
    int32_t toks[80];
    for (int i = 0; i < 80; i++) toks[i] = (int32_t)((i * 7919 + 13) % V);
    cx_err err = {0};
    cx_kv_params kp = cx_kv_defaults();
    kp.prefix_cache = 1;
    kp.max_tokens = 512;
    cx_kv_cache *shared;
    CHECK(cx_kv_cache_new(tiny, &kp, &shared, &err) == 0, "shared cache: %s", err.msg);
    cx_session_params sp = cx_session_defaults();
    sp.cache = shared;
    sp.n_threads = 2;
    cx_session *a, *b, *ref;
    CHECK(cx_session_new_ex(tiny, &sp, &a, &err) == 0 && cx_session_new_ex(tiny, &sp, &b, &err) == 0, "sessions");
    CHECK(cx_session_new(tiny, 0, 1, &ref, &err) == 0, "reference session");
    const float *la, *lr;
    float *want = malloc(sizeof(float) * (size_t)V);
    eval_or_fail(a, toks, 50, &la); /* caches blocks 0..2 (48 tokens) */
    /* b: the same 48 tokens then others: 48 reused */
    int32_t mine[70];
    memcpy(mine, toks, sizeof(int32_t) * 48);
    for (int i = 48; i < 70; i++) mine[i] = (int32_t)((i * 31 + 5) % V);
    const float *lb;
    eval_or_fail(b, mine, 70, &lb);
    cx_kv_stats st;
    cx_session_kv_stats(b, &st);
    CHECK(st.last_reused == 48 && st.prefix_hits == 3 && st.prefix_lookups == 3 + 4, "48 tokens reused (%d), hits %lld/%lld",
          st.last_reused, (long long)st.prefix_hits, (long long)st.prefix_lookups);
    memcpy(want, lb, sizeof(float) * (size_t)V);
    eval_or_fail(ref, mine, 70, &lr);
    CHECK(!memcmp(want, lr, sizeof(float) * (size_t)V), "logits with a reused prefix equal recomputing (bit for bit)");
    /* decode continues identically */
    int32_t next = 77;
    eval_or_fail(b, &next, 1, &lb);
    eval_or_fail(ref, &next, 1, &lr);
    CHECK(!memcmp(lb, lr, sizeof(float) * (size_t)V), "the next token's logits too");
    /* the whole prompt cached (32 tokens = 2 blocks): 31 reused, the last recomputed into a copy */
    cx_session_reset(b);
    cx_session_reset(ref);
    eval_or_fail(b, toks, 32, &lb);
    cx_session_kv_stats(b, &st);
    CHECK(st.last_reused == 31 && st.cow_copies >= 1, "a fully cached prompt: 31 reused (%d), last block copied",
          st.last_reused);
    memcpy(want, lb, sizeof(float) * (size_t)V);
    eval_or_fail(ref, toks, 32, &lr);
    CHECK(!memcmp(want, lr, sizeof(float) * (size_t)V), "... and its logits equal recomputing");
    /* fork: two continuations share the prefix */
    cx_session *f;
    CHECK(cx_session_new_ex(tiny, &sp, &f, &err) == 0 && cx_session_fork(f, b, &err) == 0, "fork: %s", err.msg);
    int32_t t1 = 5, t2 = 6;
    eval_or_fail(f, &t1, 1, &lb);
    memcpy(want, lb, sizeof(float) * (size_t)V);
    eval_or_fail(ref, &t1, 1, &lr);
    CHECK(!memcmp(want, lr, sizeof(float) * (size_t)V), "a forked session continues like the original");
    eval_or_fail(b, &t2, 1, &lb);
    CHECK(cx_session_pos(b) == 33 && cx_session_pos(f) == 33, "both at position 33");
    cx_session_free(a);
    cx_session_free(b);
    cx_session_free(f);
    cx_session_free(ref);
    cx_kv_cache_stats(shared, &st);
    CHECK(st.blocks_used == 4 && st.prefix_hit_rate > 0, "after the sessions: the 4 cached prefix blocks remain (%lld)",
          (long long)st.blocks_used);
    cx_kv_cache_free(shared);
    free(want);
}

/* ---- stories260K: tiering and greedy tokens ---- */

typedef struct run_cfg {
    const char *name;
    cx_kv_params kv;
} run_cfg;

/* Greedy decode of n tokens after prompt; tokens to out, and when `teacher`
 * is given, feed those tokens instead and record the largest logit
 * difference against ref_logits ([n][V]) and the top-1 agreement. */
static int greedy(cx_model *m, const cx_kv_params *kv, const int32_t *prompt, int np, int n, int32_t *out,
                  float *logits_out, const int32_t *teacher, const float *ref_logits, double *max_err, int *agree,
                  cx_kv_stats *st_out) {
    cx_session_params sp = cx_session_defaults();
    sp.kv = *kv;
    sp.n_threads = 1; /* a second thread spins: slow on a busy machine, and test_forward covers it */
    cx_session *s;
    cx_err err = {0};
    if (cx_session_new_ex(m, &sp, &s, &err)) {
        CHECK(0, "session: %s", err.msg);
        return -1;
    }
    const int V = m->info.n_vocab;
    const float *l;
    int rc = cx_eval(s, prompt, np, &l, &err);
    for (int i = 0; i < n && rc == 0; i++) {
        int best = 0;
        for (int j = 1; j < V; j++) best = l[j] > l[best] ? j : best;
        out[i] = best;
        if (logits_out) memcpy(logits_out + (size_t)i * V, l, sizeof(float) * (size_t)V);
        if (ref_logits) {
            const float *r = ref_logits + (size_t)i * V;
            for (int j = 0; j < V; j++) *max_err = fabs(l[j] - r[j]) > *max_err ? fabs(l[j] - r[j]) : *max_err;
            *agree += best == teacher[i];
        }
        int32_t feed = teacher ? teacher[i] : best;
        rc = cx_eval(s, &feed, 1, &l, &err);
    }
    CHECK(rc == 0, "eval: %s", err.msg);
    if (st_out) cx_session_kv_stats(s, st_out);
    cx_session_free(s);
    return rc;
}

/* The logits after the prompt, fed in one pass and one token per pass:
 * identical bits (attention reads each format's tile the same way in
 * prefill and decode). */
static int prefill_equals_decode(cx_model *m, const cx_kv_params *kv, const int32_t *prompt, int np) {
    cx_session_params sp = cx_session_defaults();
    sp.kv = *kv;
    cx_session *a = NULL, *b = NULL;
    cx_err err = {0};
    const int V = m->info.n_vocab;
    float *first = malloc(sizeof(float) * (size_t)V);
    const float *l = NULL;
    int same = 0;
    if (first && !cx_session_new_ex(m, &sp, &a, &err) && !cx_session_new_ex(m, &sp, &b, &err) &&
        !cx_eval(a, prompt, np, &l, &err)) {
        memcpy(first, l, sizeof(float) * (size_t)V);
        int rc = 0;
        for (int i = 0; i < np && !rc; i++) rc = cx_eval(b, prompt + i, 1, &l, &err);
        same = !rc && !memcmp(first, l, sizeof(float) * (size_t)V);
    }
    cx_session_free(a);
    cx_session_free(b);
    free(first);
    return same;
}

/* stories260K under tiny budgets: greedy tokens, agreement, logit error. */
static void test_stories(void) {
    char path[512], tok[512];
    if (!fx_real_model("stories260K.bin", "stories260K checks", path, sizeof path) ||
        !fx_real_model("tinystories-tok512.bin", "stories260K checks", tok, sizeof tok))
        return;
    cx_model *m;
    cx_err err = {0};
    if (cx_model_load(path, tok, &m, &err)) {
        CHECK(0, "load: %s", err.msg);
        return;
    }
    enum { N = 200 };
    const int V = m->info.n_vocab;
    int32_t prompt[64];
    int np = 0;
    const char *text = "Once upon a time, there was a little girl named Lily. She";
    CHECK(cx_tokenize(m, text, strlen(text), 1, prompt, 64, &np, &err) == 0, "tokenize");
    int32_t base[N], got[N];
    float *ref = malloc(sizeof(float) * (size_t)N * (size_t)V);
    cx_kv_params p = cx_kv_defaults();
    greedy(m, &p, prompt, np, N, base, ref, NULL, NULL, NULL, NULL, NULL);

    size_t blk = (size_t)m->info.n_layer * kv_slab_bytes(KV_F32, m->info.n_head_kv * m->info.head_dim);
    const char *spill = fx_path("stories.kv");
    /* lossless: no warm tier, hot holds 2 blocks; cold in memory, in a spill file, under LFU */
    for (int v = 0; v < 3; v++) {
        cx_kv_params q = cx_kv_defaults();
        q.budget[KV_HOT] = (int64_t)(2 * blk);
        q.budget[KV_WARM] = 0;
        if (v == 1) {
            q.budget[KV_COLD] = 65536; /* two blocks' pages in memory, the rest spilled */
            q.spill_path = spill;
        }
        if (v == 2) q.policy = CX_KV_LFU;
        cx_kv_stats st;
        double max_err = 0;
        int agree = 0;
        greedy(m, &q, prompt, np, N, got, NULL, base, ref, &max_err, &agree, &st);
        CHECK(!memcmp(got, base, sizeof base) && max_err == 0,
              "lossless cold tier (%s): the same %d greedy tokens, bit-identical logits (max error %g)",
              v == 0 ? "memory" : v == 1 ? "spilled" : "lfu", N, max_err);
        CHECK(st.blocks[KV_COLD] >= 10 && st.restores > 0, "blocks went cold (%lld) and were restored (%lld)",
              (long long)st.blocks[KV_COLD], (long long)st.restores);
        printf("stories260K f32 lossless %-7s: hot %lld cold %lld blocks (%lld spilled B), ratio %.3f, "
               "restores %lld (%.1f us each), hits hot/warm/cold %lld/%lld/%lld\n",
               v == 0 ? "memory" : v == 1 ? "spilled" : "lfu", (long long)st.blocks[0], (long long)st.blocks[2],
               (long long)st.spilled_bytes, st.zip_ratio, (long long)st.restores,
               st.restores ? (double)st.restore_ns / (double)st.restores / 1e3 : 0.0, (long long)st.hits[0],
               (long long)st.hits[1], (long long)st.hits[2]);
    }
    /* f16 hot, then f16 cold pages: the same tokens as f16 without tiering */
    cx_kv_params h = cx_kv_defaults();
    h.type = CX_KV_F16;
    int32_t f16_base[N];
    greedy(m, &h, prompt, np, N, f16_base, NULL, NULL, NULL, NULL, NULL, NULL);
    h.budget[KV_HOT] = (int64_t)blk; /* two f16 blocks */
    h.budget[KV_WARM] = 0;
    greedy(m, &h, prompt, np, N, got, NULL, NULL, NULL, NULL, NULL, NULL);
    CHECK(!memcmp(got, f16_base, sizeof got), "f16 with lossless cold pages: the f16 run's %d greedy tokens", N);
    int same = 0;
    while (same < N && f16_base[same] == base[same]) same++;
    printf("stories260K f16 KV: first %d of %d greedy tokens equal f32's\n", same, N);

    /* the other hot formats, read in place by attention: teacher-forced on the
     * f32 run's tokens. Measured on this prompt (max logit error, agreement):
     * bf16 0.29 197/200, q8 1.65 198, e4m3 4.55 177, e5m2 9.95 152 (FP8's 3
     * and 2 mantissa bits on a 64-wide model); the bounds leave room for
     * another ISA's rounding and catch a broken format (chance agreement). */
    static const int hot_type[4] = {CX_KV_BF16, CX_KV_Q8, CX_KV_E4M3, CX_KV_E5M2};
    static const double hot_bound[4] = {0.6, 2.5, 7.0, 15.0};
    static const int hot_agree[4] = {95, 95, 82, 65};
    for (int t = 0; t < 4; t++) {
        cx_kv_params q = cx_kv_defaults();
        q.type = hot_type[t];
        double max_err = 0;
        int agree = 0, free_same = 0;
        int32_t free_run[N];
        greedy(m, &q, prompt, np, N, got, NULL, base, ref, &max_err, &agree, NULL);
        greedy(m, &q, prompt, np, N, free_run, NULL, NULL, NULL, NULL, NULL, NULL);
        while (free_same < N && free_run[free_same] == base[free_same]) free_same++;
        CHECK(prefill_equals_decode(m, &q, prompt, np), "%s hot: the prompt's last logits are the same bits fed at once "
              "and token by token", cx_kv_type_name(hot_type[t]));
        printf("stories260K %s hot KV: top-1 agreement %d/%d (teacher-forced), max |logit error| %.4f, free-running "
               "greedy identical for the first %d tokens\n",
               cx_kv_type_name(hot_type[t]), agree, N, max_err, free_same);
        CHECK(max_err < hot_bound[t] && agree >= N * hot_agree[t] / 100,
              "%s hot: max logit error %.4f < %.2f, agreement %d/%d >= %d%%", cx_kv_type_name(hot_type[t]), max_err,
              hot_bound[t], agree, N, hot_agree[t]);
    }

    /* int8 warm (and cold pages of int8 codes): teacher-forced on the f32
     * run's tokens, agreement and the largest logit error (logits reach |23|).
     * Measured (prompt above, hot 2 blocks, warm 4): q8 0.61 and 198/200,
     * q4 8.2 and 162/200; the bounds leave room for another ISA's rounding. */
    const char *wname[2] = {"q8", "q4"};
    double bound[2] = {1.0, 12.0};
    for (int w = 0; w < 2; w++) {
        cx_kv_params q = cx_kv_defaults();
        q.warm_type = w ? CX_KV_Q4 : CX_KV_Q8;
        q.budget[KV_HOT] = (int64_t)(2 * blk);
        q.budget[KV_WARM] = (int64_t)(4 * (size_t)m->info.n_layer *
                                      kv_slab_bytes(KV_Q8B, m->info.n_head_kv * m->info.head_dim)); /* 4 q8 blocks */
        double max_err = 0;
        int agree = 0;
        cx_kv_stats st;
        greedy(m, &q, prompt, np, N, got, NULL, base, ref, &max_err, &agree, &st);
        int free_same = 0;
        int32_t free_run[N];
        greedy(m, &q, prompt, np, N, free_run, NULL, NULL, NULL, NULL, NULL, NULL);
        while (free_same < N && free_run[free_same] == base[free_same]) free_same++;
        printf("stories260K %s warm: top-1 agreement %d/%d (teacher-forced), max |logit error| %.4f, free-running "
               "greedy identical for the first %d tokens; warm %lld cold %lld blocks, cold ratio %.2f\n",
               wname[w], agree, N, max_err, free_same, (long long)st.blocks[1], (long long)st.blocks[2], st.zip_ratio);
        CHECK(max_err < bound[w], "%s warm: max logit error %.4f < %.2f", wname[w], max_err, bound[w]);
        CHECK(agree >= N * (w ? 75 : 97) / 100, "%s warm: agreement %d/%d", wname[w], agree, N);
    }
    free(ref);
    cx_model_free(m);
}

/* kv_check (asserts on in every build but NDEBUG): a consistent cache passes,
 * and each kind of drift aborts it (in a child process). */
static void test_kv_check(void) {
#ifndef NDEBUG
    kv_cache *c = new_cache(KV_F32, 2, 1, -1, CX_KV_LRU, 1, NULL, 16); /* hot 2, warm 1, cold unlimited, prefix cache */
    kv_seq s;
    kv_seq_init(&s, 100);
    CHECK(put(c, &s, 90, 0) == 0, "90 positions through three tiers");
    CHECK(c->nblocks[KV_HOT] > 0 && c->nblocks[KV_WARM] > 0 && c->nblocks[KV_COLD] > 0 && c->prefix.n > 0,
          "blocks in every tier (%lld/%lld/%lld), prefix entries %d", (long long)c->nblocks[KV_HOT],
          (long long)c->nblocks[KV_WARM], (long long)c->nblocks[KV_COLD], c->prefix.n);
    kv_check(c); /* consistent: returns */
    static const char *what[] = {"hot bytes off by one", "a cold block uncounted", "cold bytes off by a granule",
                                 "a held block with refcount 0", "a free block lost from n_free", "a prefix entry lost"};
    for (int k = 0; k < (int)(sizeof what / sizeof what[0]); k++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            if (!freopen("/dev/null", "w", stderr)) _exit(3);
            switch (k) {
            case 0: c->bytes[KV_HOT]++; break;
            case 1: c->nblocks[KV_COLD]--; break;
            case 2: c->bytes[KV_COLD] += KV_COLD_GRANULE; break;
            case 3: c->blocks[s.table[0]].refs = 0; break;
            case 4: c->n_free--; break;
            default: c->prefix.n--; break;
            }
            kv_check(c);
            _exit(0);
        }
        int st = 0;
        CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
              "kv_check aborts on %s", what[k]);
    }
    kv_release(c, &s);
    kv_seq_free(&s);
    kv_cache_destroy(c); /* checks once more: cached blocks still indexed, all counters consistent */
#endif
}

/* The unit checks, the synthetic model's, then the real model's. */
/* Logits of `m` after np prompt tokens in one call, then `steps` decode
 * steps, with KV params kv; `definition` sets attention's test knobs: q4h
 * rows rotated back as unpacked (the format's definition), q8 keys unpacked
 * to floats. */
static int att_logits(cx_model *m, const cx_kv_params *kv, const int32_t *toks, int np, int steps, int definition,
                      float *out) {
    cx_session_params sp = cx_session_defaults();
    sp.kv = *kv;
    cx_session *s;
    cx_err err = {0};
    if (cx_session_new_ex(m, &sp, &s, &err)) {
        CHECK(0, "session: %s", err.msg);
        return -1;
    }
    s->ws.att.rows_rotated_back = definition;
    s->ws.att.keys_unpacked = definition;
    const float *l = NULL;
    int rc = cx_eval(s, toks, np, &l, &err);
    for (int i = 0; i < steps && !rc; i++) rc = cx_eval(s, toks + np + i, 1, &l, &err);
    CHECK(rc == 0, "eval: %s", err.msg);
    if (!rc) memcpy(out, l, sizeof(float) * (size_t)m->info.n_vocab);
    cx_session_free(s);
    return rc;
}

/* q4h blocks hold each 32 values rotated by the Walsh-Hadamard transform;
 * attention reads them as stored and rotates the item's queries and the
 * values' sum once (q . Hk = Hq . k), where the format's definition rotates
 * every row back. The two agree within float rounding, with q4h blocks
 * alone, and beside f16 ones in the same tile (q4h hot over f16 warm, f16
 * hot over q4h warm: the tile's values are summed in runs). q8 keys are
 * scored in int8 where they are stored (attn_scores_i8), against the
 * definition's f32 scores of the unpacked keys. The gate-micro shape:
 * head_dim 32, two query heads per kv head; 300 positions, five 64-key
 * tiles, the last one partial. */
static void test_attention_in_place(void) {
    cx_shape sh = fx_shape("gate-micro", 512);
    cx_model *m = fx_synth_model(&sh, CX_TYPE_F32, 11, "gate-micro.gguf", NULL);
    if (!m) return;
    const int V = m->info.n_vocab, np = 300, steps = 4;
    int32_t toks[304];
    for (int i = 0; i < np + steps; i++) toks[i] = (int32_t)(3 + (i * 7919 + 13) % (V - 3));
    size_t blk = (size_t)m->info.n_layer * kv_slab_bytes(KV_F16, m->info.n_head_kv * m->info.head_dim);
    float *a = malloc(sizeof(float) * (size_t)V), *b = malloc(sizeof(float) * (size_t)V);
    /* each format alone, and beside another in the same tiles (a few blocks
     * hot, the rest warm); bound: q4h the float rounding, q8 the queries'
     * int8 rounding (one scale per head, as q8 rows) */
    static const struct {
        const char *name;
        int hot, warm; /* warm -1: no tier budget (all blocks hot) */
        double bound;
    } cfg[] = {
        {"q4h", CX_KV_Q4H, -1, 1e-5},
        {"q4h hot, f16 warm", CX_KV_Q4H, CX_KV_F16, 1e-5},
        {"f16 hot, q4h warm", CX_KV_F16, CX_KV_Q4H, 1e-5},
        {"q8", CX_KV_Q8, -1, 2e-3},
        {"q8 hot, f16 warm", CX_KV_Q8, CX_KV_F16, 2e-3},
    };
    for (size_t c = 0; c < sizeof cfg / sizeof *cfg; c++) {
        cx_kv_params kv = cx_kv_defaults();
        kv.type = cfg[c].hot;
        if (cfg[c].warm >= 0) {
            kv.warm_type = cfg[c].warm;
            kv.budget[KV_HOT] = (int64_t)(3 * blk);
        }
        if (att_logits(m, &kv, toks, np, steps, 0, a) || att_logits(m, &kv, toks, np, steps, 1, b)) break;
        double rms = rel_rms(a, b, V);
        printf("%s: logits, in place against the definition (rows rotated back, keys unpacked): relative RMS %.3g\n",
               cfg[c].name, rms);
        CHECK(rms > 0 && rms <= cfg[c].bound, "%s: attention in place within rounding of the definition (relative RMS "
              "%.3g, 0 < it <= %g)", cfg[c].name, rms, cfg[c].bound);
        if (cfg[c].warm < 0)
            CHECK(prefill_equals_decode(m, &kv, toks, np), "%s hot: the prompt's last logits are the same bits fed at "
                  "once and token by token", cfg[c].name);
    }
    free(a);
    free(b);
    cx_model_free(m);
}

static void run_all(void) {
    test_codec();
    test_unpack();
    test_prefix_index();
    cx_shape sh = fx_shape("test-tiny", 256);
    if ((tiny = fx_synth_model(&sh, CX_TYPE_F32, 7, "tiny.gguf", NULL))) {
        test_table_and_tiers();
        test_policies();
        test_random_policy();
        test_round_robin();
        test_refcount_cow();
        test_prefix_reuse();
        test_kv_check();
        cx_model_free(tiny);
    }
    test_attention_in_place();
    test_stories();
    fx_cleanup();
}

TEST_MAIN(run_all())
