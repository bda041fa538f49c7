/*
 * gguf_write.h - the one GGUF v3 writer, shared by synth.c (synthetic models)
 * and quantize.c (conversions), and the general.file_type both write.
 *
 * Metadata entries and tensor infos are collected in memory (they are small);
 * gguf_w_header writes magic, version, counts, entries, tensor infos and the
 * padding up to the data section; the caller then streams each tensor's bytes
 * in declaration order, calling gguf_w_pad after each. All numbers are written
 * little-endian, as the specification says, whatever the host.
 */
#ifndef CX_GGUF_WRITE_H
#define CX_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cortex.h"

typedef struct gguf_writer gguf_writer;

/* A writer whose tensors start at multiples of `alignment` (0: the GGUF
 * default, 32). NULL when out of memory. */
gguf_writer *gguf_writer_new(uint64_t alignment);
void gguf_writer_free(gguf_writer *w);

/* Whole metadata entries. Allocation failures are remembered and reported
 * by gguf_w_header, so callers need not check each call. */
void gguf_w_str(gguf_writer *w, const char *key, const char *val);
void gguf_w_u32(gguf_writer *w, const char *key, uint32_t val);
void gguf_w_f32(gguf_writer *w, const char *key, float val);
void gguf_w_bool(gguf_writer *w, const char *key, int val);
void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *vals, uint64_t n);
void gguf_w_arr_f32(gguf_writer *w, const char *key, const float *vals, uint64_t n);
void gguf_w_arr_i32(gguf_writer *w, const char *key, const int32_t *vals, uint64_t n);

/* An array entry built element by element: gguf_w_arr_begin, then exactly n
 * elements of elem_type through the gguf_w_elem_* calls (a string element is
 * gguf_w_elem_u64(length) and its bytes, or gguf_w_elem_str). */
void gguf_w_arr_begin(gguf_writer *w, const char *key, uint32_t elem_type, uint64_t n);
void gguf_w_elem_u32(gguf_writer *w, uint32_t v);
void gguf_w_elem_u64(gguf_writer *w, uint64_t v);
void gguf_w_elem_f32(gguf_writer *w, float v);
void gguf_w_elem_str(gguf_writer *w, const char *s, uint64_t len);
void gguf_w_elem_bytes(gguf_writer *w, const void *p, size_t n);

/* One entry copied as it lies in another GGUF file (key, type and value
 * bytes, `n` in all): quantize keeps the input's metadata byte for byte. */
void gguf_w_entry_raw(gguf_writer *w, const void *entry, size_t n);

/* Declare the next tensor; returns its offset in the data section. Data must
 * later be written in declaration order. */
uint64_t gguf_w_tensor(gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne);

/* Write header, metadata, tensor infos and padding up to the data section;
 * *data_start (if not NULL) gets the data section's offset in the file. */
int gguf_w_header(gguf_writer *w, FILE *f, const char *label, uint64_t *data_start, cx_err *err);
/* Pad after `nbytes` of tensor data so the next tensor starts aligned; 0 or CX_EIO. */
int gguf_w_pad(const gguf_writer *w, FILE *f, uint64_t nbytes);

/* general.file_type (llama.cpp's llama_ftype) of a file type the engine
 * writes: a CX_TYPE_* weight type or CX_FTYPE_Q4_K_M; -1 for any other, which
 * synth and quantize then refuse. llama.cpp has no all-q4_K type: plain q4_k
 * files say MOSTLY_Q4_K_S (14), the nearest. */
int gguf_file_type(int ftype);

#endif
