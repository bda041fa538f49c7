/*
 * fuzz_safetensors.c - libFuzzer target: any byte string given to the
 * safetensors parser (engine/src/lora/safetensors.c) must give either a
 * valid result or one error, never a crash, an out-of-bounds read,
 * undefined behaviour or a leak.
 *
 * On success every property the parser promises is checked: each tensor's
 * bytes lie in the data buffer, its size is its element count times its
 * dtype's size, the tensors tile the buffer with no gap or overlap (their
 * sizes add up to it), names are unique and found by st_find, and every
 * element converts to f32 (ASan checks each read).
 * Seeds: tests/fuzz/corpus/safetensors/ (tests/fuzz/make_seeds.py writes them).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lora/safetensors.h"

/* Keeps the converted values observable so the reads are not optimised away. */
static volatile float g_sink;

/* Abort (a finding) when a property fails: libFuzzer records the input. */
static void require(int cond) {
    if (!cond) abort();
}

/* The libFuzzer entry point: parse, then check what the parser handed out. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    st_file f;
    cx_err err;
    memset(&err, 0, sizeof err);
    int rc = st_parse(data, size, "fuzz.safetensors", &f, &err);
    if (rc != 0) {
        require(rc < 0 && rc == err.code && err.msg[0]);
        return 0;
    }
    require(size >= 8);
    uint64_t hlen;
    memcpy(&hlen, data, 8);
    const uint8_t *buf = data + 8 + hlen;
    uint64_t total = 0;
    for (int i = 0; i < f.n_tensors; i++) {
        const st_tensor *t = &f.tensors[i];
        uint64_t esize = t->dtype == ST_F32 ? 4 : 2;
        require(t->dtype >= ST_F32 && t->dtype <= ST_BF16 && t->n_dims >= 0 && t->n_dims <= ST_MAX_DIMS);
        require(t->nbytes == (uint64_t)t->n_elems * esize);
        require(t->data >= buf && (uint64_t)(t->data - buf) + t->nbytes <= size - 8 - hlen);
        require(st_find(&f, t->name) == t);
        total += t->nbytes;
        float *v = malloc((size_t)t->n_elems * sizeof *v + 1);
        require(v != NULL);
        st_to_f32(t, v);
        if (t->n_elems) g_sink += v[0] + v[t->n_elems - 1];
        free(v);
    }
    require(total == size - 8 - hlen);
    st_close(&f);
    return 0;
}
