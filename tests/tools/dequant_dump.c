/*
 * dequant_dump.c - write the engine's dequantization of every tensor of a
 * GGUF file (quant_dequantize_row, row by row), for tests/reference/
 * mxfp4_ref.py to compare with a dequantizer written independently from the
 * format's specification.
 *
 * usage: dequant_dump FILE.gguf OUT
 * Output (little-endian): u32 magic 'DQDP' (0x50445144), u32 tensor count;
 * per tensor: u32 name length, the name's bytes, u32 ggml type, u64 element
 * count n, n float32 values in file order. A tensor of a type the engine
 * cannot compute with is an error (exit 1, one line naming it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"
#include "gguf.h"
#include "model_map.h"
#include "quant.h"

#define MAGIC 0x50445144u

/* Write tensor t: header, then each row dequantized. */
static int write_tensor(FILE *f, const gguf_tensor *t, float *row) {
    int64_t cols = t->ne[0], rows = 1;
    for (uint32_t d = 1; d < t->n_dims; d++) rows *= t->ne[d];
    uint32_t len = (uint32_t)t->name.len, type = t->type;
    uint64_t n = (uint64_t)cols * (uint64_t)rows;
    if (fwrite(&len, 4, 1, f) != 1 || fwrite(t->name.ptr, 1, len, f) != len || fwrite(&type, 4, 1, f) != 1 ||
        fwrite(&n, 8, 1, f) != 1)
        return -1;
    size_t rb = quant_row_bytes((int)t->type, cols);
    for (int64_t r = 0; r < rows; r++) {
        quant_dequantize_row((int)t->type, t->data + (size_t)r * rb, row, cols);
        if (fwrite(row, sizeof(float), (size_t)cols, f) != (size_t)cols) return -1;
    }
    return 0;
}

/* Parse FILE, check every tensor's type, write OUT. */
int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: dequant_dump FILE.gguf OUT\n");
        return 2;
    }
    cx_err err = {0};
    const uint8_t *map;
    size_t size;
    gguf_ctx g;
    if (model_map_file(argv[1], &map, &size, &err) || gguf_parse(map, size, argv[1], &g, &err)) {
        fprintf(stderr, "dequant_dump: %s\n", err.msg);
        return 1;
    }
    int64_t widest = 1;
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const gguf_tensor *t = &g.tensors[i];
        if (!quant_supported((int)t->type)) {
            fprintf(stderr, "dequant_dump: %s: tensor '%.*s' has type %s, which the engine cannot dequantize\n",
                    argv[1], (int)t->name.len, t->name.ptr, gguf_type_name(t->type));
            return 1;
        }
        if (t->ne[0] > widest) widest = t->ne[0];
    }
    float *row = malloc(sizeof(float) * (size_t)widest);
    FILE *f = fopen(argv[2], "wb");
    uint32_t hdr[2] = {MAGIC, (uint32_t)g.n_tensors};
    int rc = row && f && fwrite(hdr, 4, 2, f) == 2 ? 0 : -1;
    for (uint64_t i = 0; !rc && i < g.n_tensors; i++) rc = write_tensor(f, &g.tensors[i], row);
    if (f && fclose(f) != 0) rc = -1;
    if (rc) fprintf(stderr, "dequant_dump: writing %s failed\n", argv[2]);
    free(row);
    gguf_free(&g);
    model_unmap_file(map, size);
    return rc ? 1 : 0;
}
