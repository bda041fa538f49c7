/*
 * gguf.c - GGUF reader and writer.
 *
 * Layout (all little-endian, v2/v3): "GGUF", u32 version, u64 n_tensors,
 * u64 n_kv, then n_kv (string key, u32 type, value), then n_tensors (string
 * name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset), padding to
 * general.alignment (default 32), then the data section. Strings are u64 length
 * + bytes. Arrays are u32 element type + u64 count + elements (may nest).
 * See docs/formats.md.
 */
#include "gguf.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* A bounds-checked read cursor; every read fails cleanly past the end. */
typedef struct cursor {
    const uint8_t *buf;
    uint64_t size, pos;
    const char *label;
    cx_err *err;
} cursor;

static int cur_need(cursor *c, uint64_t n, const char *what) {
    if (n > c->size - c->pos)
        return cx_fail(c->err, CX_EFORMAT, "%s: truncated file: %s at byte %llu needs %llu bytes, %llu left",
                       c->label, what, (unsigned long long)c->pos, (unsigned long long)n,
                       (unsigned long long)(c->size - c->pos));
    return 0;
}

static int cur_u32(cursor *c, uint32_t *v, const char *what) {
    if (cur_need(c, 4, what)) return CX_EFORMAT;
    *v = cx_rd32(c->buf + c->pos);
    c->pos += 4;
    return 0;
}

static int cur_u64(cursor *c, uint64_t *v, const char *what) {
    if (cur_need(c, 8, what)) return CX_EFORMAT;
    *v = cx_rd64(c->buf + c->pos);
    c->pos += 8;
    return 0;
}

static int cur_str(cursor *c, gguf_str *s, const char *what) {
    uint64_t n;
    if (cur_u64(c, &n, what) || cur_need(c, n, what)) return CX_EFORMAT;
    s->ptr = (const char *)c->buf + c->pos;
    s->len = n;
    c->pos += n;
    return 0;
}

/* Size of a fixed-width scalar value type; 0 for strings and arrays. */
static uint64_t scalar_size(uint32_t t) {
    switch (t) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
    case GGUF_U16: case GGUF_I16: return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
    case GGUF_U64: case GGUF_I64: case GGUF_F64: return 8;
    default: return 0;
    }
}

/* Decode a scalar at p of type t into the kv's numeric slot. */
static void read_scalar(const uint8_t *p, uint32_t t, gguf_kv *kv) {
    float f32;
    switch (t) {
    case GGUF_U8: case GGUF_BOOL: kv->num.u = p[0]; break;
    case GGUF_I8: kv->num.i = (int8_t)p[0]; break;
    case GGUF_U16: kv->num.u = cx_rd16(p); break;
    case GGUF_I16: kv->num.i = (int16_t)cx_rd16(p); break;
    case GGUF_U32: kv->num.u = cx_rd32(p); break;
    case GGUF_I32: kv->num.i = (int32_t)cx_rd32(p); break;
    case GGUF_U64: kv->num.u = cx_rd64(p); break;
    case GGUF_I64: kv->num.i = (int64_t)cx_rd64(p); break;
    case GGUF_F32: memcpy(&f32, p, 4); kv->num.f = f32; break;
    case GGUF_F64: memcpy(&kv->num.f, p, 8); break;
    default: break;
    }
}

/* Skip (validating) one array body: element type, count, elements; nesting bounded. */
static int skip_array(cursor *c, uint32_t *et, uint64_t *n, int depth) {
    if (depth > 8)
        return cx_fail(c->err, CX_EFORMAT, "%s: arrays nested deeper than 8 at byte %llu", c->label,
                       (unsigned long long)c->pos);
    if (cur_u32(c, et, "array type") || cur_u64(c, n, "array length")) return CX_EFORMAT;
    if (*et >= GGUF_NTYPES)
        return cx_fail(c->err, CX_EFORMAT, "%s: unknown array element type %u at byte %llu", c->label, *et,
                       (unsigned long long)c->pos);
    uint64_t es = scalar_size(*et);
    if (es) {
        if (*n > (c->size - c->pos) / es) return cur_need(c, UINT64_MAX, "array data");
        c->pos += *n * es;
        return 0;
    }
    for (uint64_t i = 0; i < *n; i++) {
        if (*et == GGUF_STR) {
            gguf_str s;
            if (cur_str(c, &s, "array string")) return CX_EFORMAT;
        } else {
            uint32_t et2;
            uint64_t n2;
            if (skip_array(c, &et2, &n2, depth + 1)) return CX_EFORMAT;
        }
    }
    return 0;
}

static int is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

/* Name accessors for the indexes: metadata key i, tensor name i. */
static const gguf_str *kv_name(const gguf_ctx *ctx, uint64_t i) { return &ctx->kv[i].key; }
static const gguf_str *tensor_name(const gguf_ctx *ctx, uint64_t i) { return &ctx->tensors[i].name; }

static uint64_t name_hash(const char *p, uint64_t n) {
    uint64_t h = 14695981039346656037ull;
    for (uint64_t k = 0; k < n; k++) h = (h ^ (uint8_t)p[k]) * 1099511628211ull;
    return h;
}

/*
 * Build a hash index over n names (name(ctx, i)) and return the index of the
 * first name that repeats an earlier one, n if all differ, UINT64_MAX if out of
 * memory. The index then serves every lookup: linear scans let a crafted file
 * with millions of entries take minutes to load (and the pairwise duplicate
 * check took ~50 s on a 2 MB file of distinct keys).
 */
static uint64_t index_build(const gguf_ctx *ctx, const gguf_str *(*name)(const gguf_ctx *, uint64_t), uint64_t n,
                            gguf_index *ix) {
    if (n >= UINT32_MAX / 2) return UINT64_MAX;
    uint64_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    ix->tab = calloc(cap, sizeof *ix->tab); /* entry index + 1; 0 is empty */
    ix->mask = cap - 1;
    if (!ix->tab) return UINT64_MAX;
    for (uint64_t i = 0; i < n; i++) {
        const gguf_str *s = name(ctx, i);
        for (uint64_t h = name_hash(s->ptr, s->len) & ix->mask;; h = (h + 1) & ix->mask) {
            if (!ix->tab[h]) {
                ix->tab[h] = (uint32_t)(i + 1);
                break;
            }
            const gguf_str *o = name(ctx, ix->tab[h] - 1);
            if (o->len == s->len && !memcmp(o->ptr, s->ptr, s->len)) return i;
        }
    }
    return n;
}

/* Entry index of `key` in an index built by index_build, or -1. */
static int64_t index_find(const gguf_ctx *ctx, const gguf_index *ix, const gguf_str *(*name)(const gguf_ctx *, uint64_t),
                          const char *key) {
    if (!ix->tab) return -1;
    uint64_t n = strlen(key);
    for (uint64_t h = name_hash(key, n) & ix->mask; ix->tab[h]; h = (h + 1) & ix->mask) {
        const gguf_str *o = name(ctx, ix->tab[h] - 1);
        if (o->len == n && !memcmp(o->ptr, key, n)) return (int64_t)ix->tab[h] - 1;
    }
    return -1;
}

/* Parse metadata key/values into ctx->kv. */
static int parse_kv(cursor *c, gguf_ctx *ctx) {
    for (uint64_t i = 0; i < ctx->n_kv; i++) {
        gguf_kv *kv = &ctx->kv[i];
        if (cur_str(c, &kv->key, "metadata key") || cur_u32(c, &kv->type, "metadata type")) return CX_EFORMAT;
        if (kv->type >= GGUF_NTYPES)
            return cx_fail(c->err, CX_EFORMAT, "%s: metadata '%.*s' has unknown value type %u", c->label,
                           (int)(kv->key.len > 64 ? 64 : kv->key.len), kv->key.ptr, kv->type);
        if (kv->type == GGUF_STR) {
            if (cur_str(c, &kv->str, "metadata string")) return CX_EFORMAT;
        } else if (kv->type == GGUF_ARR) {
            uint64_t start = c->pos;
            if (skip_array(c, &kv->arr_type, &kv->arr_n, 0)) return CX_EFORMAT;
            kv->arr_data = c->buf + start + 12;
        } else {
            uint64_t es = scalar_size(kv->type);
            if (cur_need(c, es, "metadata value")) return CX_EFORMAT;
            read_scalar(c->buf + c->pos, kv->type, kv);
            c->pos += es;
        }
    }
    uint64_t d = index_build(ctx, kv_name, ctx->n_kv, &ctx->kv_index);
    if (d == UINT64_MAX) return cx_fail(c->err, CX_ENOMEM, "%s: out of memory checking metadata keys", c->label);
    if (d < ctx->n_kv)
        return cx_fail(c->err, CX_EFORMAT, "%s: duplicate metadata key '%.*s'", c->label,
                       (int)(ctx->kv[d].key.len > 64 ? 64 : ctx->kv[d].key.len), ctx->kv[d].key.ptr);
    return 0;
}

/* Parse and validate tensor infos: dims, type, size, alignment, bounds, names. */
static int parse_tensors(cursor *c, gguf_ctx *ctx) {
    const char *L = c->label;
    for (uint64_t i = 0; i < ctx->n_tensors; i++) {
        gguf_tensor *t = &ctx->tensors[i];
        uint64_t off;
        if (cur_str(c, &t->name, "tensor name") || cur_u32(c, &t->n_dims, "tensor n_dims")) return CX_EFORMAT;
        int nl = (int)(t->name.len > 64 ? 64 : t->name.len);
        if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
            return cx_fail(c->err, CX_EFORMAT, "%s: tensor '%.*s' has %u dimensions (1..4 allowed)", L, nl,
                           t->name.ptr, t->n_dims);
        uint64_t nelem = 1;
        for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            uint64_t ne;
            if (cur_u64(c, &ne, "tensor dimension")) return CX_EFORMAT;
            if (ne == 0 || ne > ((uint64_t)1 << 40) || nelem > (((uint64_t)1 << 48) / ne))
                return cx_fail(c->err, CX_ERANGE, "%s: tensor '%.*s' has an absurd dimension ne[%u] = %llu", L,
                               nl, t->name.ptr, d, (unsigned long long)ne);
            t->ne[d] = (int64_t)ne;
            nelem *= ne;
        }
        if (cur_u32(c, &t->type, "tensor type") || cur_u64(c, &off, "tensor offset")) return CX_EFORMAT;
        uint64_t bb = gguf_type_block_bytes(t->type), be = gguf_type_block_elems(t->type);
        if (!bb)
            return cx_fail(c->err, CX_EFORMAT, "%s: tensor '%.*s' has unknown tensor type %u", L, nl,
                           t->name.ptr, t->type);
        if ((uint64_t)t->ne[0] % be)
            return cx_fail(c->err, CX_EFORMAT, "%s: tensor '%.*s' row length %lld is not a multiple of the %s block size %llu",
                           L, nl, t->name.ptr, (long long)t->ne[0], gguf_type_name(t->type), (unsigned long long)be);
        t->nbytes = nelem / be * bb;
        t->offset = off;
        if (off % ctx->alignment)
            return cx_fail(c->err, CX_EFORMAT, "%s: tensor '%.*s' offset %llu is not a multiple of the alignment %llu",
                           L, nl, t->name.ptr, (unsigned long long)off, (unsigned long long)ctx->alignment);
    }
    uint64_t d = index_build(ctx, tensor_name, ctx->n_tensors, &ctx->tensor_index);
    if (d == UINT64_MAX) return cx_fail(c->err, CX_ENOMEM, "%s: out of memory checking tensor names", L);
    if (d < ctx->n_tensors)
        return cx_fail(c->err, CX_EFORMAT, "%s: duplicate tensor name '%.*s'", L,
                       (int)(ctx->tensors[d].name.len > 64 ? 64 : ctx->tensors[d].name.len), ctx->tensors[d].name.ptr);
    return 0;
}

int gguf_parse(const uint8_t *buf, uint64_t size, const char *label, gguf_ctx *ctx, cx_err *err) {
    cursor c = {buf, size, 0, label, err};
    memset(ctx, 0, sizeof *ctx);
    ctx->base = buf;
    ctx->size = size;
    if (size < 4 || memcmp(buf, "GGUF", 4) != 0)
        return cx_fail(err, CX_EFORMAT, "%s: not a GGUF file (wrong magic)", label);
    c.pos = 4;
    if (cur_u32(&c, &ctx->version, "version")) return CX_EFORMAT;
    if (ctx->version != 2 && ctx->version != 3)
        return cx_fail(err, CX_EUNSUP, "%s: GGUF version %u is not supported (2 and 3 are)", label, ctx->version);
    if (cur_u64(&c, &ctx->n_tensors, "tensor count") || cur_u64(&c, &ctx->n_kv, "metadata count")) return CX_EFORMAT;
    /* Each kv takes >= 12 bytes and each tensor info >= 28: bound counts by the file. */
    if (ctx->n_kv > (size - c.pos) / 12 || ctx->n_tensors > (size - c.pos) / 28)
        return cx_fail(err, CX_ERANGE, "%s: header claims %llu tensors and %llu metadata entries, more than the file can hold",
                       label, (unsigned long long)ctx->n_tensors, (unsigned long long)ctx->n_kv);
    ctx->kv = calloc(ctx->n_kv ? ctx->n_kv : 1, sizeof *ctx->kv);
    ctx->tensors = calloc(ctx->n_tensors ? ctx->n_tensors : 1, sizeof *ctx->tensors);
    if (!ctx->kv || !ctx->tensors) {
        gguf_free(ctx);
        return cx_fail(err, CX_ENOMEM, "%s: out of memory reading the header", label);
    }
    int rc = parse_kv(&c, ctx);
    ctx->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (!rc) {
        const gguf_kv *a = gguf_find(ctx, "general.alignment");
        if (a) {
            if (a->type != GGUF_U32 || !is_pow2(a->num.u) || a->num.u > 65536)
                rc = cx_fail(err, CX_EFORMAT, "%s: general.alignment must be a u32 power of two <= 65536", label);
            else
                ctx->alignment = a->num.u;
        }
    }
    if (!rc) rc = parse_tensors(&c, ctx);
    if (!rc) {
        uint64_t data = (c.pos + ctx->alignment - 1) / ctx->alignment * ctx->alignment;
        if (data > size && ctx->n_tensors) {
            rc = cx_fail(err, CX_EFORMAT, "%s: truncated file: data section would start at %llu, file has %llu bytes",
                         label, (unsigned long long)data, (unsigned long long)size);
        }
        ctx->data_offset = data;
        for (uint64_t i = 0; !rc && i < ctx->n_tensors; i++) {
            gguf_tensor *t = &ctx->tensors[i];
            uint64_t avail = data <= size ? size - data : 0;
            /* Saturate the reported range: an offset near 2^64 must not wrap into the file. */
            uint64_t start = t->offset > UINT64_MAX - data ? UINT64_MAX : data + t->offset;
            uint64_t end = t->nbytes > UINT64_MAX - start ? UINT64_MAX : start + t->nbytes;
            if (t->offset > avail || t->nbytes > avail - t->offset)
                rc = cx_fail(err, CX_ERANGE, "%s: tensor '%.*s' data [%llu, %llu) lies past the end of the file (%llu bytes)",
                             label, (int)(t->name.len > 64 ? 64 : t->name.len), t->name.ptr,
                             (unsigned long long)start, (unsigned long long)end, (unsigned long long)size);
            else
                t->data = buf + data + t->offset;
        }
    }
    if (rc) gguf_free(ctx);
    return rc;
}

void gguf_free(gguf_ctx *ctx) {
    free(ctx->kv);
    free(ctx->tensors);
    free(ctx->kv_index.tab);
    free(ctx->tensor_index.tab);
    ctx->kv_index.tab = ctx->tensor_index.tab = NULL;
    ctx->kv = NULL;
    ctx->tensors = NULL;
    ctx->n_kv = ctx->n_tensors = 0;
}

int gguf_str_eq(gguf_str s, const char *z) {
    size_t n = strlen(z);
    return s.len == n && memcmp(s.ptr, z, n) == 0;
}

const gguf_kv *gguf_find(const gguf_ctx *ctx, const char *key) {
    int64_t i = index_find(ctx, &ctx->kv_index, kv_name, key);
    return i < 0 ? NULL : &ctx->kv[i];
}

const gguf_tensor *gguf_find_tensor(const gguf_ctx *ctx, const char *name) {
    int64_t i = index_find(ctx, &ctx->tensor_index, tensor_name, name);
    return i < 0 ? NULL : &ctx->tensors[i];
}

static int is_int_type(uint32_t t) {
    return t == GGUF_U8 || t == GGUF_I8 || t == GGUF_U16 || t == GGUF_I16 || t == GGUF_U32 || t == GGUF_I32 ||
           t == GGUF_U64 || t == GGUF_I64;
}
static int is_signed(uint32_t t) { return t == GGUF_I8 || t == GGUF_I16 || t == GGUF_I32 || t == GGUF_I64; }

int gguf_get_u32(const gguf_ctx *ctx, const char *key, uint32_t *out) {
    const gguf_kv *kv = gguf_find(ctx, key);
    if (!kv) return 0;
    if (!is_int_type(kv->type)) return -1;
    if (is_signed(kv->type) ? (kv->num.i < 0 || kv->num.i > (int64_t)UINT32_MAX) : kv->num.u > UINT32_MAX) return -1;
    *out = is_signed(kv->type) ? (uint32_t)kv->num.i : (uint32_t)kv->num.u;
    return 1;
}

int gguf_get_f32(const gguf_ctx *ctx, const char *key, float *out) {
    const gguf_kv *kv = gguf_find(ctx, key);
    if (!kv) return 0;
    if (kv->type == GGUF_F32 || kv->type == GGUF_F64) *out = (float)kv->num.f;
    else if (is_int_type(kv->type)) *out = is_signed(kv->type) ? (float)kv->num.i : (float)kv->num.u;
    else return -1;
    return 1;
}

int gguf_get_str(const gguf_ctx *ctx, const char *key, gguf_str *out) {
    const gguf_kv *kv = gguf_find(ctx, key);
    if (!kv) return 0;
    if (kv->type != GGUF_STR) return -1;
    *out = kv->str;
    return 1;
}

double gguf_arr_num(const gguf_kv *kv, uint64_t i) {
    gguf_kv tmp;
    uint64_t es = scalar_size(kv->arr_type);
    read_scalar(kv->arr_data + i * es, kv->arr_type, &tmp);
    if (kv->arr_type == GGUF_F32 || kv->arr_type == GGUF_F64) return tmp.num.f;
    return is_signed(kv->arr_type) ? (double)tmp.num.i : (double)tmp.num.u;
}

gguf_str gguf_arr_next_str(const uint8_t **p) {
    gguf_str s;
    s.len = cx_rd64(*p);
    s.ptr = (const char *)*p + 8;
    *p += 8 + s.len;
    return s;
}

/* ggml block geometry. Types the engine cannot compute with still have a size so
 * that files using them parse and can be reported; the model loader rejects them. */
typedef struct { const char *name; uint64_t bytes, elems; } type_geom;
static const type_geom GEOM[] = {
    [0] = {"f32", 4, 1},     [1] = {"f16", 2, 1},      [2] = {"q4_0", 18, 32},  [3] = {"q4_1", 20, 32},
    [6] = {"q5_0", 22, 32},  [7] = {"q5_1", 24, 32},   [8] = {"q8_0", 34, 32},  [9] = {"q8_1", 36, 32},
    [10] = {"q2_K", 84, 256}, [11] = {"q3_K", 110, 256}, [12] = {"q4_K", 144, 256}, [13] = {"q5_K", 176, 256},
    [14] = {"q6_K", 210, 256}, [15] = {"q8_K", 292, 256}, [24] = {"i8", 1, 1},   [25] = {"i16", 2, 1},
    [26] = {"i32", 4, 1},    [27] = {"i64", 8, 1},     [28] = {"f64", 8, 1},    [30] = {"bf16", 2, 1},
    [39] = {"mxfp4", 17, 32},
};
#define NGEOM (sizeof GEOM / sizeof GEOM[0])

uint64_t gguf_type_block_bytes(uint32_t t) { return t < NGEOM ? GEOM[t].bytes : 0; }
uint64_t gguf_type_block_elems(uint32_t t) { return t < NGEOM ? GEOM[t].elems : 0; }
const char *gguf_type_name(uint32_t t) { return t < NGEOM && GEOM[t].name ? GEOM[t].name : "unknown"; }

/* See gguf.h. */
uint64_t gguf_tensor_nbytes(uint32_t type, int n_dims, const int64_t *ne) {
    uint64_t n = 1;
    for (int d = 0; d < n_dims; d++) n *= (uint64_t)ne[d];
    return n / gguf_type_block_elems(type) * gguf_type_block_bytes(type);
}

/* Bytes of a value of `type` starting at p. The parser has already checked
 * that every value lies inside the file, so this walk cannot overrun. */
static uint64_t gguf_value_bytes(const uint8_t *p, uint32_t type) {
    switch (type) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
    case GGUF_U16: case GGUF_I16: return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
    case GGUF_U64: case GGUF_I64: case GGUF_F64: return 8;
    case GGUF_STR: return 8 + cx_rd64(p);
    case GGUF_ARR: {
        uint32_t et = cx_rd32(p);
        uint64_t n = cx_rd64(p + 4), pos = 12;
        if (et != GGUF_STR && et != GGUF_ARR) return pos + n * gguf_value_bytes(p + pos, et);
        for (uint64_t i = 0; i < n; i++) pos += gguf_value_bytes(p + pos, et);
        return pos;
    }
    default: assert(!"value type was validated by the parser"); return 0;
    }
}

/* See gguf.h: the u64 key length precedes the key, the u32 type follows it. */
size_t gguf_kv_entry(const gguf_kv *kv, const uint8_t **entry) {
    *entry = (const uint8_t *)kv->key.ptr - 8;
    const uint8_t *value = (const uint8_t *)kv->key.ptr + kv->key.len + 4;
    return (size_t)(value - *entry) + (size_t)gguf_value_bytes(value, kv->type);
}
