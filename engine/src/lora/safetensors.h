/*
 * safetensors.h - a strict reader of Hugging Face's safetensors format over a
 * byte buffer (normally an mmap of the file).
 *
 * Layout: an 8-byte little-endian header length N, N bytes of JSON (an object:
 * tensor name -> {"dtype", "shape", "data_offsets": [begin, end]}, plus an
 * optional "__metadata__" object of strings), then the data buffer; offsets
 * are relative to the buffer's start. As the format's own implementation
 * demands, the tensors tile the buffer exactly: no overlap, no gap, nothing
 * after the last one. Every length, offset and shape is checked before use,
 * so any byte string is safe to parse (tests/fuzz/fuzz_safetensors.c).
 * Tensor data is never copied: st_tensor.data points into the buffer.
 */
#ifndef CX_SAFETENSORS_H
#define CX_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "cortex.h"

#define ST_MAX_DIMS 8
/* The safetensors reference refuses headers over 100 MB; so does this reader. */
#define ST_MAX_HEADER (100u * 1000u * 1000u)

/* The element types the engine converts to f32 (every other safetensors dtype is refused by name). */
enum { ST_F32 = 0, ST_F16 = 1, ST_BF16 = 2 };

typedef struct st_tensor {
    const char *name;           /* NUL-terminated, owned by the st_file */
    int dtype;                  /* ST_F32, ST_F16 or ST_BF16 */
    int n_dims;                 /* 0 (a scalar) .. ST_MAX_DIMS */
    int64_t shape[ST_MAX_DIMS]; /* outermost first, as in the file (row-major) */
    int64_t n_elems;            /* product of shape (1 for a scalar) */
    const uint8_t *data;        /* inside the parsed buffer */
    uint64_t nbytes;            /* n_elems * element size */
} st_tensor;

typedef struct st_file {
    const uint8_t *map;         /* st_open's mapping (NULL after st_parse) */
    size_t map_size;
    int n_tensors;
    st_tensor *tensors;         /* in the header's order */
    char *names;                /* storage behind every tensor name */
    int n_meta;                 /* entries in __metadata__ (values not kept) */
} st_file;

/* Parse and validate a whole safetensors image; `label` names it in errors.
 * 0, or a CX_E* code with one message naming the label and, where one is at
 * fault, the tensor. On failure *out holds nothing to free. */
int st_parse(const uint8_t *buf, size_t size, const char *label, st_file *out, cx_err *err);
/* Map the file at path read-only and st_parse it. */
int st_open(const char *path, st_file *out, cx_err *err);
/* Free what st_parse/st_open allocated (and unmap); *f is zeroed. Safe on a zeroed st_file. */
void st_close(st_file *f);
/* The tensor called name, or NULL. */
const st_tensor *st_find(const st_file *f, const char *name);
/* Widen t's elements to f32 into dst (t->n_elems floats). */
void st_to_f32(const st_tensor *t, float *dst);
/* "F32", "F16" or "BF16". */
const char *st_dtype_name(int dtype);

#endif
