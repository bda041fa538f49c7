/*
 * gguf_write.c - the GGUF v3 writer (see gguf_write.h): metadata and tensor
 * infos collected in growable byte buffers, written in one go by
 * gguf_w_header, tensor data streamed by the caller.
 */
#include "gguf_write.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "util.h"

/* A growable byte buffer that remembers an allocation failure and then drops
 * further writes (the header reports it once). */
typedef struct gw_buf { uint8_t *p; size_t n, cap; int oom; } gw_buf;

/* Append n bytes. */
static void gw_put(gw_buf *b, const void *src, size_t n) {
    if (b->oom || n == 0) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

/* Little-endian scalars and GGUF strings (u64 length + bytes). */
static void gw_u32(gw_buf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    gw_put(b, x, 4);
}
static void gw_u64(gw_buf *b, uint64_t v) { gw_u32(b, (uint32_t)v); gw_u32(b, (uint32_t)(v >> 32)); }
static void gw_f32(gw_buf *b, float f) { uint32_t u; memcpy(&u, &f, 4); gw_u32(b, u); }
static void gw_str(gw_buf *b, const char *s, uint64_t n) { gw_u64(b, n); gw_put(b, s, (size_t)n); }

struct gguf_writer {
    gw_buf kv, ti;          /* metadata entries; tensor infos */
    uint64_t n_kv, n_tensors, next_offset, alignment;
};

/* See gguf_write.h. */
gguf_writer *gguf_writer_new(uint64_t alignment) {
    gguf_writer *w = calloc(1, sizeof *w);
    if (w) w->alignment = alignment ? alignment : GGUF_DEFAULT_ALIGNMENT;
    return w;
}

/* See gguf_write.h: the buffers and the writer. */
void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    free(w->kv.p);
    free(w->ti.p);
    free(w);
}

/* x rounded up to the writer's alignment. */
static uint64_t gw_align(const gguf_writer *w, uint64_t x) { return (x + w->alignment - 1) / w->alignment * w->alignment; }

/* Start an entry: key string and value type. */
static void gw_key(gguf_writer *w, const char *key, uint32_t type) {
    gw_str(&w->kv, key, strlen(key));
    gw_u32(&w->kv, type);
    w->n_kv++;
}

/* See gguf_write.h: whole entries, key then typed value. */
void gguf_w_str(gguf_writer *w, const char *key, const char *val) { gw_key(w, key, GGUF_STR); gw_str(&w->kv, val, strlen(val)); }
void gguf_w_u32(gguf_writer *w, const char *key, uint32_t val) { gw_key(w, key, GGUF_U32); gw_u32(&w->kv, val); }
void gguf_w_f32(gguf_writer *w, const char *key, float val) { gw_key(w, key, GGUF_F32); gw_f32(&w->kv, val); }
void gguf_w_bool(gguf_writer *w, const char *key, int val) {
    uint8_t b = val ? 1 : 0;
    gw_key(w, key, GGUF_BOOL);
    gw_put(&w->kv, &b, 1);
}

/* See gguf_write.h: the array header; elements follow. */
void gguf_w_arr_begin(gguf_writer *w, const char *key, uint32_t elem_type, uint64_t n) {
    gw_key(w, key, GGUF_ARR);
    gw_u32(&w->kv, elem_type);
    gw_u64(&w->kv, n);
}
/* See gguf_write.h: one array element, appended to the entry being built. */
void gguf_w_elem_u32(gguf_writer *w, uint32_t v) { gw_u32(&w->kv, v); }
void gguf_w_elem_u64(gguf_writer *w, uint64_t v) { gw_u64(&w->kv, v); }
void gguf_w_elem_f32(gguf_writer *w, float v) { gw_f32(&w->kv, v); }
void gguf_w_elem_str(gguf_writer *w, const char *s, uint64_t len) { gw_str(&w->kv, s, len); }
void gguf_w_elem_bytes(gguf_writer *w, const void *p, size_t n) { gw_put(&w->kv, p, n); }

/* See gguf_write.h: whole arrays. */
void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *vals, uint64_t n) {
    gguf_w_arr_begin(w, key, GGUF_STR, n);
    for (uint64_t i = 0; i < n; i++) gw_str(&w->kv, vals[i], strlen(vals[i]));
}
void gguf_w_arr_f32(gguf_writer *w, const char *key, const float *vals, uint64_t n) {
    gguf_w_arr_begin(w, key, GGUF_F32, n);
    for (uint64_t i = 0; i < n; i++) gw_f32(&w->kv, vals[i]);
}
void gguf_w_arr_i32(gguf_writer *w, const char *key, const int32_t *vals, uint64_t n) {
    gguf_w_arr_begin(w, key, GGUF_I32, n);
    for (uint64_t i = 0; i < n; i++) gw_u32(&w->kv, (uint32_t)vals[i]);
}

/* See gguf_write.h. */
void gguf_w_entry_raw(gguf_writer *w, const void *entry, size_t n) {
    gw_put(&w->kv, entry, n);
    w->n_kv++;
}

/* See gguf_write.h: name, dims, type, offset; the next tensor starts aligned. */
uint64_t gguf_w_tensor(gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne) {
    uint64_t off = w->next_offset;
    gw_str(&w->ti, name, strlen(name));
    gw_u32(&w->ti, (uint32_t)n_dims);
    for (int d = 0; d < n_dims; d++) gw_u64(&w->ti, (uint64_t)ne[d]);
    gw_u32(&w->ti, type);
    gw_u64(&w->ti, off);
    w->next_offset = gw_align(w, off + gguf_tensor_nbytes(type, n_dims, ne));
    w->n_tensors++;
    return off;
}

/* Write `pad` zero bytes; 0 or -1. */
static int gw_zeros(FILE *f, uint64_t pad) {
    static const uint8_t zeros[256];
    while (pad) {
        size_t k = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
        if (fwrite(zeros, 1, k, f) != k) return -1;
        pad -= k;
    }
    return 0;
}

/* See gguf_write.h. */
int gguf_w_header(gguf_writer *w, FILE *f, const char *label, uint64_t *data_start, cx_err *err) {
    gw_buf h = {0};
    gw_put(&h, "GGUF", 4);
    gw_u32(&h, 3);
    gw_u64(&h, w->n_tensors);
    gw_u64(&h, w->n_kv);
    int rc = 0;
    if (h.oom || w->kv.oom || w->ti.oom) {
        rc = cx_fail(err, CX_ENOMEM, "%s: out of memory building the header", label);
    } else {
        uint64_t n = h.n + w->kv.n + w->ti.n, start = gw_align(w, n);
        if (fwrite(h.p, 1, h.n, f) != h.n || fwrite(w->kv.p, 1, w->kv.n, f) != w->kv.n ||
            fwrite(w->ti.p, 1, w->ti.n, f) != w->ti.n || gw_zeros(f, start - n))
            rc = cx_fail(err, CX_EIO, "%s: write failed: %s", label, strerror(errno));
        else if (data_start)
            *data_start = start;
    }
    free(h.p);
    return rc;
}

/* See gguf_write.h. */
int gguf_w_pad(const gguf_writer *w, FILE *f, uint64_t nbytes) {
    return gw_zeros(f, gw_align(w, nbytes) - nbytes) ? CX_EIO : 0;
}

/* See gguf_write.h. */
int gguf_file_type(int ftype) {
    switch (ftype) {
    case CX_TYPE_F32: return 0;
    case CX_TYPE_F16: return 1;
    case CX_TYPE_BF16: return 32; /* MOSTLY_BF16 */
    case CX_TYPE_Q4_0: return 2;
    case CX_TYPE_Q8_0: return 7;
    case CX_TYPE_Q4_K: return 14;
    case CX_TYPE_Q6_K: return 18;
    case CX_TYPE_MXFP4: return 38; /* MOSTLY_MXFP4_MOE: llama.cpp's only mxfp4 file type */
    case CX_FTYPE_Q4_K_M: return 15;
    default: return -1;
    }
}
