/*
 * safetensors.c - the strict safetensors reader (see safetensors.h for the
 * layout). The JSON header is parsed with jansson (duplicate keys refused);
 * everything else - lengths, dtypes, shapes, offsets and how the tensors
 * tile the data buffer - is checked here before any pointer is handed out.
 */
#include "safetensors.h"

#include <assert.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../model_map.h"
#include "../util.h"

/* Every dtype the format defines, with its element size; `st` is the
 * engine's id for the three it converts, -1 for the others. */
static const struct {
    const char *name;
    int size, st;
} st_dtypes[] = {
    {"F32", 4, ST_F32}, {"F16", 2, ST_F16}, {"BF16", 2, ST_BF16}, {"BOOL", 1, -1}, {"U8", 1, -1},
    {"I8", 1, -1},      {"F8_E5M2", 1, -1}, {"F8_E4M3", 1, -1},   {"I16", 2, -1},  {"U16", 2, -1},
    {"I32", 4, -1},     {"U32", 4, -1},     {"F64", 8, -1},       {"I64", 8, -1},  {"U64", 8, -1},
};

const char *st_dtype_name(int dtype) {
    assert(dtype >= 0 && dtype <= ST_BF16);
    return st_dtypes[dtype].name;
}

/* Element size of a supported dtype. */
static int st_dtype_size(int dtype) {
    return st_dtypes[dtype].size;
}

/* Fill t's dtype from the header's string: CX_EUNSUP for a safetensors dtype
 * the engine does not convert, CX_EFORMAT for a name the format lacks. */
static int st_read_dtype(const json_t *v, st_tensor *t, const char *label, cx_err *err) {
    if (!json_is_string(v)) return cx_fail(err, CX_EFORMAT, "%s: tensor %s: dtype is not a string", label, t->name);
    const char *s = json_string_value(v);
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++) {
        if (strcmp(s, st_dtypes[i].name) != 0) continue;
        if (st_dtypes[i].st < 0)
            return cx_fail(err, CX_EUNSUP, "%s: tensor %s: dtype %s not supported (F32, F16 and BF16 are)", label,
                           t->name, s);
        t->dtype = st_dtypes[i].st;
        return 0;
    }
    return cx_fail(err, CX_EFORMAT, "%s: tensor %s: unknown dtype \"%.32s\"", label, t->name, s);
}

/* Fill t's shape and element count (whose byte size st_read_offsets checks against the data). */
static int st_read_shape(const json_t *v, st_tensor *t, const char *label, cx_err *err) {
    if (!json_is_array(v)) return cx_fail(err, CX_EFORMAT, "%s: tensor %s: shape is not an array", label, t->name);
    size_t n = json_array_size(v);
    if (n > ST_MAX_DIMS)
        return cx_fail(err, CX_ERANGE, "%s: tensor %s: %zu dimensions (at most %d)", label, t->name, n, ST_MAX_DIMS);
    uint64_t elems = 1, limit = (UINT64_MAX / 8) / (uint64_t)st_dtype_size(t->dtype);
    for (size_t i = 0; i < n; i++) {
        const json_t *d = json_array_get(v, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return cx_fail(err, CX_EFORMAT, "%s: tensor %s: shape[%zu] is not a non-negative integer", label, t->name,
                           i);
        uint64_t di = (uint64_t)json_integer_value(d);
        t->shape[i] = (int64_t)di;
        if (di != 0 && elems > limit / di)
            return cx_fail(err, CX_ERANGE, "%s: tensor %s: shape's element count overflows", label, t->name);
        elems *= di;
    }
    t->n_dims = (int)n;
    t->n_elems = (int64_t)elems;
    t->nbytes = elems * (uint64_t)st_dtype_size(t->dtype);
    return 0;
}

/* Check data_offsets [begin, end) against the buffer and the shape; point t->data at it. */
static int st_read_offsets(const json_t *v, st_tensor *t, const uint8_t *data, uint64_t data_size, const char *label,
                           cx_err *err) {
    if (!json_is_array(v) || json_array_size(v) != 2)
        return cx_fail(err, CX_EFORMAT, "%s: tensor %s: data_offsets is not a [begin, end] pair", label, t->name);
    const json_t *jb = json_array_get(v, 0), *je = json_array_get(v, 1);
    if (!json_is_integer(jb) || !json_is_integer(je) || json_integer_value(jb) < 0 || json_integer_value(je) < 0)
        return cx_fail(err, CX_EFORMAT, "%s: tensor %s: data_offsets are not non-negative integers", label, t->name);
    uint64_t b = (uint64_t)json_integer_value(jb), e = (uint64_t)json_integer_value(je);
    if (b > e)
        return cx_fail(err, CX_ERANGE, "%s: tensor %s: data_offsets [%llu, %llu] begin after their end", label,
                       t->name, (unsigned long long)b, (unsigned long long)e);
    if (e > data_size)
        return cx_fail(err, CX_ERANGE, "%s: tensor %s: data_offsets end %llu past the data buffer (%llu bytes)", label,
                       t->name, (unsigned long long)e, (unsigned long long)data_size);
    if (e - b != t->nbytes)
        return cx_fail(err, CX_ERANGE, "%s: tensor %s: data_offsets span %llu bytes, its %s shape needs %llu", label,
                       t->name, (unsigned long long)(e - b), st_dtype_name(t->dtype),
                       (unsigned long long)t->nbytes);
    t->data = data + b;
    return 0;
}

/* Read one tensor entry: an object with exactly dtype, shape and data_offsets. */
static int st_read_tensor(const json_t *v, st_tensor *t, const uint8_t *data, uint64_t data_size, const char *label,
                          cx_err *err) {
    if (!json_is_object(v)) return cx_fail(err, CX_EFORMAT, "%s: tensor %s: entry is not an object", label, t->name);
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return cx_fail(err, CX_EFORMAT, "%s: tensor %s: unexpected key \"%.32s\"", label, t->name, key);
    }
    const json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
                 *off = json_object_get(v, "data_offsets");
    if (!dt || !sh || !off)
        return cx_fail(err, CX_EFORMAT, "%s: tensor %s: missing %s", label, t->name,
                       !dt ? "dtype" : !sh ? "shape" : "data_offsets");
    int rc = st_read_dtype(dt, t, label, err);
    if (rc == 0) rc = st_read_shape(sh, t, label, err);
    if (rc == 0) rc = st_read_offsets(off, t, data, data_size, label, err);
    return rc;
}

/* qsort order: by data position, then size (so empty tensors sort before a neighbour at the same offset). */
static int st_cmp_pos(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    if (x->data != y->data) return x->data < y->data ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* The tensors must tile [data, data + data_size) exactly, as the format requires. */
static int st_check_tiling(const st_file *f, const uint8_t *data, uint64_t data_size, const char *label, cx_err *err) {
    if (f->n_tensors == 0) {
        if (data_size == 0) return 0;
        return cx_fail(err, CX_EFORMAT, "%s: %llu data bytes but no tensor", label, (unsigned long long)data_size);
    }
    const st_tensor **order = malloc((size_t)f->n_tensors * sizeof *order);
    if (!order) return cx_fail(err, CX_ENOMEM, "%s: out of memory", label);
    for (int i = 0; i < f->n_tensors; i++) order[i] = &f->tensors[i];
    qsort(order, (size_t)f->n_tensors, sizeof *order, st_cmp_pos);
    int rc = 0;
    uint64_t pos = 0;
    for (int i = 0; i < f->n_tensors && rc == 0; i++) {
        uint64_t b = (uint64_t)(order[i]->data - data);
        if (b < pos)
            rc = cx_fail(err, CX_ERANGE, "%s: tensor %s: data_offsets overlap tensor %s", label, order[i]->name,
                         order[i - 1]->name);
        else if (b > pos)
            rc = cx_fail(err, CX_EFORMAT, "%s: tensor %s: %llu bytes before it belong to no tensor", label,
                         order[i]->name, (unsigned long long)(b - pos));
        pos = b + order[i]->nbytes;
    }
    if (rc == 0 && pos != data_size)
        rc = cx_fail(err, CX_EFORMAT, "%s: %llu bytes after the last tensor belong to no tensor", label,
                     (unsigned long long)(data_size - pos));
    free(order);
    return rc;
}

/* __metadata__: an object whose values are all strings. */
static int st_read_meta(const json_t *v, st_file *f, const char *label, cx_err *err) {
    if (!json_is_object(v)) return cx_fail(err, CX_EFORMAT, "%s: __metadata__ is not an object", label);
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        if (!json_is_string(val))
            return cx_fail(err, CX_EFORMAT, "%s: __metadata__ value \"%.64s\" is not a string", label, key);
    }
    f->n_meta = (int)json_object_size(v);
    return 0;
}

/* Copy the tensor names into one block and read every entry of the header object. */
static int st_read_header(const json_t *root, const uint8_t *data, uint64_t data_size, const char *label, st_file *f,
                          cx_err *err) {
    size_t n = 0, name_bytes = 0;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)root, key, val) {
        if (strcmp(key, "__metadata__") == 0) continue;
        n++;
        name_bytes += strlen(key) + 1;
    }
    if (n > INT32_MAX / 2) return cx_fail(err, CX_ERANGE, "%s: %zu tensors", label, n);
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    f->names = malloc(name_bytes ? name_bytes : 1);
    if (!f->tensors || !f->names) return cx_fail(err, CX_ENOMEM, "%s: out of memory", label);
    char *np = f->names;
    json_object_foreach((json_t *)root, key, val) {
        int rc;
        if (strcmp(key, "__metadata__") == 0) {
            rc = st_read_meta(val, f, label, err);
        } else {
            st_tensor *t = &f->tensors[f->n_tensors++];
            size_t len = strlen(key) + 1;
            memcpy(np, key, len);
            t->name = np;
            np += len;
            if (len == 1) return cx_fail(err, CX_EFORMAT, "%s: a tensor has an empty name", label);
            rc = st_read_tensor(val, t, data, data_size, label, err);
        }
        if (rc) return rc;
    }
    assert(f->n_tensors == (int)n);
    return st_check_tiling(f, data, data_size, label, err);
}

int st_parse(const uint8_t *buf, size_t size, const char *label, st_file *out, cx_err *err) {
    memset(out, 0, sizeof *out);
    if (size < 8) return cx_fail(err, CX_EFORMAT, "%s: %zu bytes, too short for the header length", label, size);
    if (memcmp(buf, "GGUF", 4) == 0) return cx_fail(err, CX_EFORMAT, "%s: a GGUF file, not safetensors", label);
    uint64_t hlen = cx_rd64(buf);
    if (hlen < 2) return cx_fail(err, CX_EFORMAT, "%s: header length %llu is too small", label,
                                 (unsigned long long)hlen);
    if (hlen > ST_MAX_HEADER)
        return cx_fail(err, CX_ERANGE, "%s: header length %llu over the format's limit (%u)", label,
                       (unsigned long long)hlen, ST_MAX_HEADER);
    if (hlen > size - 8)
        return cx_fail(err, CX_ERANGE, "%s: header length %llu runs past the end of the file (%zu bytes)", label,
                       (unsigned long long)hlen, size);
    if (buf[8] != '{') return cx_fail(err, CX_EFORMAT, "%s: header does not start with '{'", label);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return cx_fail(err, CX_EFORMAT, "%s: header JSON: %s (line %d, column %d)", label, jerr.text, jerr.line,
                       jerr.column);
    int rc;
    if (!json_is_object(root)) rc = cx_fail(err, CX_EFORMAT, "%s: header is not a JSON object", label);
    else rc = st_read_header(root, buf + 8 + hlen, size - 8 - hlen, label, out, err);
    json_decref(root);
    if (rc) st_close(out);
    return rc;
}

int st_open(const char *path, st_file *out, cx_err *err) {
    const uint8_t *map;
    size_t size;
    memset(out, 0, sizeof *out);
    int rc = model_map_file(path, &map, &size, err);
    if (rc) return rc;
    rc = st_parse(map, size, path, out, err);
    if (rc) {
        model_unmap_file(map, size);
        return rc;
    }
    out->map = map;
    out->map_size = size;
    return 0;
}

void st_close(st_file *f) {
    free(f->tensors);
    free(f->names);
    if (f->map) model_unmap_file(f->map, f->map_size);
    memset(f, 0, sizeof *f);
}

const st_tensor *st_find(const st_file *f, const char *name) {
    for (int i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

void st_to_f32(const st_tensor *t, float *dst) {
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case ST_F32:
        for (int64_t i = 0; i < t->n_elems; i++) {
            uint32_t u = cx_rd32(p + 4 * i);
            memcpy(&dst[i], &u, 4);
        }
        break;
    case ST_F16:
        for (int64_t i = 0; i < t->n_elems; i++) dst[i] = cx_fp16_to_fp32(cx_rd16(p + 2 * i));
        break;
    case ST_BF16:
        for (int64_t i = 0; i < t->n_elems; i++) {
            uint32_t u = (uint32_t)cx_rd16(p + 2 * i) << 16; /* bf16 is the top half of an f32 */
            memcpy(&dst[i], &u, 4);
        }
        break;
    default:
        assert(!"unknown dtype");
    }
}
