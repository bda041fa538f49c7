/*
 * gguf.h - GGUF (v2, v3) reader over a byte buffer (the writer: gguf_write.h).
 *
 * The reader never copies tensor data: tensors point into the caller's buffer
 * (normally an mmap of the file). Every length, count and offset read from the
 * file is checked against the buffer before use, so any byte string is safe to
 * parse (see tests/fuzz/fuzz_gguf.c).
 */
#ifndef CX_GGUF_H
#define CX_GGUF_H

#include <stdint.h>
#include <stdio.h>

#include "cortex.h"

/* GGUF metadata value types, as numbered by the specification. */
enum {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STR = 8, GGUF_ARR = 9, GGUF_U64 = 10,
    GGUF_I64 = 11, GGUF_F64 = 12, GGUF_NTYPES
};

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4

typedef struct gguf_str {
    const char *ptr; /* not NUL-terminated: points into the buffer */
    uint64_t len;
} gguf_str;

typedef struct gguf_kv {
    gguf_str key;
    uint32_t type;
    union { uint64_t u; int64_t i; double f; } num; /* scalar numbers and bool */
    gguf_str str;                                    /* GGUF_STR */
    uint32_t arr_type;                               /* GGUF_ARR: element type */
    uint64_t arr_n;                                  /* element count */
    const uint8_t *arr_data;                         /* first element's bytes */
} gguf_kv;

typedef struct gguf_tensor {
    gguf_str name;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* unused dims are 1 */
    uint32_t type;
    uint64_t offset;           /* relative to the data section */
    uint64_t nbytes;
    const uint8_t *data;
} gguf_tensor;

/* Open-addressing hash index over names: slot -> entry index + 1 (0 empty). */
typedef struct gguf_index {
    uint32_t *tab;
    uint64_t mask;
} gguf_index;

typedef struct gguf_ctx {
    uint32_t version;
    uint64_t n_kv, n_tensors;
    gguf_kv *kv;
    gguf_tensor *tensors;
    uint64_t alignment;
    uint64_t data_offset; /* absolute offset of the data section */
    const uint8_t *base;
    uint64_t size;
    gguf_index kv_index, tensor_index; /* O(1) gguf_find / gguf_find_tensor */
} gguf_ctx;

/* Parse and validate a whole GGUF image; `label` names it in error messages. */
int gguf_parse(const uint8_t *buf, uint64_t size, const char *label, gguf_ctx *out, cx_err *err);
void gguf_free(gguf_ctx *ctx);

const gguf_kv *gguf_find(const gguf_ctx *ctx, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_ctx *ctx, const char *name);
int gguf_str_eq(gguf_str s, const char *z);

/* Typed getters: 1 if present and convertible, 0 if absent, -1 if of a wrong type. */
int gguf_get_u32(const gguf_ctx *ctx, const char *key, uint32_t *out);
int gguf_get_f32(const gguf_ctx *ctx, const char *key, float *out);
int gguf_get_str(const gguf_ctx *ctx, const char *key, gguf_str *out);

/* Read element i of a numeric array kv as double; the caller checks i < arr_n. */
double gguf_arr_num(const gguf_kv *kv, uint64_t i);
/* Walk a string array: *p starts at kv->arr_data; returns the next string. */
gguf_str gguf_arr_next_str(const uint8_t **p);

/* The whole metadata entry of kv as it lies in the buffer (key length, key,
 * type, value): *entry points at it, the return value is its size. For a
 * byte-for-byte copy into another file (gguf_w_entry_raw). */
size_t gguf_kv_entry(const gguf_kv *kv, const uint8_t **entry);
/* Bytes of one block / elements per block of a ggml type; 0 if unknown. */
uint64_t gguf_type_block_bytes(uint32_t type);
uint64_t gguf_type_block_elems(uint32_t type);
/* Name of any ggml type id, including ones the engine cannot run. */
const char *gguf_type_name(uint32_t type);

/* Bytes a tensor of this type and shape occupies. */
uint64_t gguf_tensor_nbytes(uint32_t type, int n_dims, const int64_t *ne);

#endif
