/*
 * fuzz_kv_codec.c - libFuzzer target: KV-cache slab decoding of arbitrary
 * bytes (a cold page read back from a spill file is bytes the process did
 * not just write), every kernel table against the scalar definition.
 *
 * Byte 0 picks the format (mod KV_NFMT), byte 1 the heads (1-4) and their
 * width (even; a multiple of 32 for the grouped 4-bit formats); the next bytes are the slab
 * (codes and scales: NaNs, infinities, subnormal scales and every FP8 code
 * included; zero-padded to the slab's size), and the rest pick column ranges
 * and are fed to the page decompressor. Properties, any failure aborts:
 *   - kv_decode_rows reads the whole slab (ASan: within its bytes);
 *   - every table's kv_unpack gives the scalar table's floats on every
 *     column range of one head in each half (NaN where it gives NaN:
 *     payloads may differ), and those are the whole rows' columns;
 *   - byte planes split and join back to the same bytes;
 *   - kv_zip_unpack of arbitrary bytes either fails or fills exactly the
 *     slab's bytes (never writes past them).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kv/kv_codec.h"
#include "kv/kv_zip.h"

#define MAX_DIM 256

static void require(int cond) {
    if (!cond) abort();
}

static int same_float(float a, float b) { return a != a ? b != b : !memcmp(&a, &b, sizeof a); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    int fmt = data[0] % KV_NFMT, grouped = fmt == KV_Q4G || fmt == KV_Q4H;
    /* 1 to 4 heads of hd values (whole groups of 32 for the grouped formats), at most MAX_DIM in all */
    int unit = grouped ? KV_GROUP : 2, heads = 1 + data[1] / 64, hd = unit * (1 + data[1] % (MAX_DIM / 4 / unit));
    int dim = heads * hd;
    data += 2, size -= 2;
    size_t n = kv_slab_bytes(fmt, dim);
    /* aligned as a cache slot is (scales are read as floats) */
    uint8_t *slab = aligned_alloc(64, (n + 63) & ~(size_t)63), *planes = malloc(n), *back = malloc(n);
    float *rows = malloc(sizeof(float) * KV_ROWS * MAX_DIM), *want = malloc(sizeof(float) * KV_BLOCK * MAX_DIM),
          *got = malloc(sizeof(float) * KV_BLOCK * MAX_DIM);
    require(slab && planes && back && rows && want && got);
    size_t take = size < n ? size : n;
    memset(slab, 0, n);
    memcpy(slab, data, take);
    data += take, size -= take;

    kv_decode_rows(fmt, slab, 0, KV_ROWS, rows, dim, hd);

    static const char *isa[] = {"avx2", "avxvnni", "avx512", "avx512vnni", "avx512bf16"};
    const kern_ops *ref = kern_table("scalar");
    for (int half = 0; half < 2; half++) {
        uint8_t pick = size ? data[0] : 0; /* columns within one head (kv_src) */
        int units = hd / unit, head = pick % heads, u0 = (pick / 4) % units;
        int c0 = head * hd + unit * u0, nc = unit * (1 + (pick / 7) % (units - u0));
        int r0 = half * KV_BLOCK + (pick % 3), rn = KV_BLOCK - (pick % 3);
        if (size) data++, size--;
        kern_kv_src src;
        kv_src(fmt, slab, dim, hd, r0, c0, &src);
        ref->kv_unpack(&src, rn, nc, want, (size_t)nc);
        for (int r = 0; r < rn; r++) /* the range equals those columns of the whole rows */
            for (int c = 0; c < nc; c++) require(same_float(want[r * nc + c], rows[(r0 + r) * dim + c0 + c]));
        for (size_t t = 0; t < sizeof isa / sizeof isa[0]; t++) {
            const kern_ops *k = kern_table(isa[t]);
            if (!k) continue;
            k->kv_unpack(&src, rn, nc, got, (size_t)nc);
            for (int i = 0; i < rn * nc; i++) require(same_float(want[i], got[i]));
        }
    }

    kv_planes_split(fmt, slab, planes, dim);
    kv_planes_join(fmt, planes, back, dim);
    require(!memcmp(slab, back, n));

    kv_zip z;
    if (kv_zip_init(&z, 0, 0) == 0) {
        memset(back, 0xa5, n);
        (void)kv_zip_unpack(&z, data, size, back, n); /* fails or fills: ASan checks the bounds */
        kv_zip_free(&z);
    }
    free(slab);
    free(planes);
    free(back);
    free(rows);
    free(want);
    free(got);
    return 0;
}
