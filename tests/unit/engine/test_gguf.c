/*
 * test_gguf.c - the GGUF reader on hand-built images covering every metadata
 * value type (including nested arrays), a writer -> reader round trip, and
 * the one general.file_type mapping (gguf_write.h).
 */
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "cortex_tools.h"
#include "gguf_write.h"
#include "testing.h"

typedef struct img { uint8_t b[4096]; size_t n; } img;

static void put(img *m, const void *p, size_t n) { memcpy(m->b + m->n, p, n); m->n += n; }
static void u32(img *m, uint32_t v) { put(m, &v, 4); }
static void u64(img *m, uint64_t v) { put(m, &v, 8); }
static void str(img *m, const char *s) { u64(m, strlen(s)); put(m, s, strlen(s)); }
static void key(img *m, const char *k, uint32_t type) { str(m, k); u32(m, type); }

/* Every scalar type, a string, arrays of numbers and strings, a nested array,
 * two tensors: parsed values must be exactly what was written. */
static void test_all_types(void) {
    img m = {{0}, 0};
    put(&m, "GGUF", 4);
    u32(&m, 3);
    u64(&m, 2);  /* tensors */
    u64(&m, 15); /* kv */
    uint8_t u8 = 200; int8_t i8 = -100; uint16_t u16 = 60000; int16_t i16 = -30000; int32_t i32 = -2000000000;
    uint64_t v64 = 1ull << 40; int64_t i64 = -(1ll << 40); float f32 = 1.5f; double f64 = -2.25; uint8_t bt = 1;
    key(&m, "a.u8", GGUF_U8); put(&m, &u8, 1);
    key(&m, "a.i8", GGUF_I8); put(&m, &i8, 1);
    key(&m, "a.u16", GGUF_U16); put(&m, &u16, 2);
    key(&m, "a.i16", GGUF_I16); put(&m, &i16, 2);
    key(&m, "a.u32", GGUF_U32); u32(&m, 4000000000u);
    key(&m, "a.i32", GGUF_I32); put(&m, &i32, 4);
    key(&m, "a.f32", GGUF_F32); put(&m, &f32, 4);
    key(&m, "a.bool", GGUF_BOOL); put(&m, &bt, 1);
    key(&m, "a.str", GGUF_STR); str(&m, "hello");
    key(&m, "a.u64", GGUF_U64); put(&m, &v64, 8);
    key(&m, "a.i64", GGUF_I64); put(&m, &i64, 8);
    key(&m, "a.f64", GGUF_F64); put(&m, &f64, 8);
    key(&m, "a.arr_i16", GGUF_ARR); u32(&m, GGUF_I16); u64(&m, 3);
    int16_t arr[3] = {-1, 2, -3}; put(&m, arr, 6);
    key(&m, "a.arr_str", GGUF_ARR); u32(&m, GGUF_STR); u64(&m, 2); str(&m, "x"); str(&m, "yz");
    key(&m, "a.nested", GGUF_ARR); u32(&m, GGUF_ARR); u64(&m, 2);
    u32(&m, GGUF_U8); u64(&m, 2); put(&m, "\x01\x02", 2);
    u32(&m, GGUF_STR); u64(&m, 1); str(&m, "deep");
    /* tensors: f32 [4], q8_0 [32, 2] */
    str(&m, "t.a"); u32(&m, 1); u64(&m, 4); u32(&m, 0); u64(&m, 0);
    str(&m, "t.b"); u32(&m, 2); u64(&m, 32); u64(&m, 2); u32(&m, 8); u64(&m, 32);
    size_t data = (m.n + 31) / 32 * 32;
    m.n = data + 32 + 68;
    gguf_ctx g;
    cx_err err = {0};
    int rc = gguf_parse(m.b, m.n, "mem", &g, &err);
    CHECK(rc == 0, "parse: %s", err.msg);
    if (rc) return;
    CHECK(g.version == 3 && g.n_kv == 15 && g.n_tensors == 2, "counts");
    CHECK(gguf_find(&g, "a.u8")->num.u == 200, "u8");
    CHECK(gguf_find(&g, "a.i8")->num.i == -100, "i8");
    CHECK(gguf_find(&g, "a.u16")->num.u == 60000, "u16");
    CHECK(gguf_find(&g, "a.i16")->num.i == -30000, "i16");
    uint32_t v;
    CHECK(gguf_get_u32(&g, "a.u32", &v) == 1 && v == 4000000000u, "u32");
    CHECK(gguf_find(&g, "a.i32")->num.i == -2000000000, "i32");
    CHECK(gguf_get_u32(&g, "a.i32", &v) == -1, "negative i32 is not a u32");
    float f;
    CHECK(gguf_get_f32(&g, "a.f32", &f) == 1 && f == 1.5f, "f32");
    CHECK(gguf_find(&g, "a.bool")->num.u == 1, "bool");
    gguf_str s;
    CHECK(gguf_get_str(&g, "a.str", &s) == 1 && gguf_str_eq(s, "hello"), "str");
    CHECK(gguf_get_str(&g, "a.u8", &s) == -1, "wrong type reported");
    CHECK(gguf_find(&g, "a.u64")->num.u == (1ull << 40), "u64");
    CHECK(gguf_find(&g, "a.i64")->num.i == -(1ll << 40), "i64");
    CHECK(gguf_find(&g, "a.f64")->num.f == -2.25, "f64");
    const gguf_kv *a = gguf_find(&g, "a.arr_i16");
    CHECK(a->arr_type == GGUF_I16 && a->arr_n == 3 && gguf_arr_num(a, 0) == -1 && gguf_arr_num(a, 2) == -3, "i16 array");
    a = gguf_find(&g, "a.arr_str");
    const uint8_t *p = a->arr_data;
    gguf_str s1 = gguf_arr_next_str(&p), s2 = gguf_arr_next_str(&p);
    CHECK(gguf_str_eq(s1, "x") && gguf_str_eq(s2, "yz"), "string array");
    a = gguf_find(&g, "a.nested");
    CHECK(a->arr_type == GGUF_ARR && a->arr_n == 2, "nested array");
    CHECK(gguf_find(&g, "missing") == NULL, "absent key");
    const gguf_tensor *t = gguf_find_tensor(&g, "t.b");
    CHECK(t && t->n_dims == 2 && t->ne[0] == 32 && t->ne[1] == 2 && t->type == 8 && t->nbytes == 68, "tensor t.b");
    CHECK(t && t->data == m.b + data + 32, "tensor data pointer");
    CHECK(g.data_offset == data && g.alignment == 32, "data section at %llu", (unsigned long long)g.data_offset);
    gguf_free(&g);
}

/* What the writer writes, the reader reads back, byte-aligned as the spec says. */
static void test_writer_roundtrip(void) {
    char path[] = "/tmp/cortex-gguf-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    FILE *f = fdopen(fd, "wb");
    gguf_writer *w = gguf_writer_new(0);
    const char *toks[3] = {"a", ("\xE2\x96\x81" "b"), ""};
    float sc[3] = {0, -1, -2};
    int32_t ty[3] = {1, 1, 3};
    gguf_w_str(w, "general.architecture", "llama");
    gguf_w_u32(w, "n", 7);
    gguf_w_f32(w, "f", 0.25f);
    gguf_w_bool(w, "b", 1);
    gguf_w_arr_str(w, "toks", toks, 3);
    gguf_w_arr_f32(w, "scores", sc, 3);
    gguf_w_arr_i32(w, "types", ty, 3);
    int64_t ne1[1] = {3}, ne2[2] = {32, 3};
    gguf_w_tensor(w, "x", 0, 1, ne1);
    gguf_w_tensor(w, "y", 2, 2, ne2);
    cx_err err = {0};
    CHECK(gguf_w_header(w, f, path, NULL, &err) == 0, "header: %s", err.msg);
    float xs[3] = {1, 2, 3};
    fwrite(xs, 4, 3, f);
    gguf_w_pad(w, f, 12);
    uint8_t q[54];
    for (int i = 0; i < 54; i++) q[i] = (uint8_t)i;
    fwrite(q, 1, 54, f);
    gguf_w_pad(w, f, 54);
    long size = ftell(f);
    fclose(f);
    gguf_writer_free(w);
    uint8_t *buf = malloc((size_t)size);
    f = fopen(path, "rb");
    CHECK(fread(buf, 1, (size_t)size, f) == (size_t)size, "read back");
    fclose(f);
    remove(path);
    gguf_ctx g;
    int rc = gguf_parse(buf, (uint64_t)size, path, &g, &err);
    CHECK(rc == 0, "parse written file: %s", err.msg);
    if (!rc) {
        uint32_t n;
        float fv;
        CHECK(gguf_get_u32(&g, "n", &n) == 1 && n == 7, "u32");
        CHECK(gguf_get_f32(&g, "f", &fv) == 1 && fv == 0.25f, "f32");
        const gguf_kv *a = gguf_find(&g, "toks");
        const uint8_t *p = a->arr_data;
        gguf_str s0 = gguf_arr_next_str(&p), s1 = gguf_arr_next_str(&p), s2 = gguf_arr_next_str(&p);
        CHECK(gguf_str_eq(s0, "a") && gguf_str_eq(s1, "\xE2\x96\x81" "b") && s2.len == 0, "string array");
        CHECK(gguf_arr_num(gguf_find(&g, "types"), 2) == 3, "i32 array");
        const gguf_tensor *x = gguf_find_tensor(&g, "x"), *y = gguf_find_tensor(&g, "y");
        CHECK(x && memcmp(x->data, xs, 12) == 0, "tensor x data");
        CHECK(y && y->offset == 32 && memcmp(y->data, q, 54) == 0, "tensor y data at aligned offset");
        CHECK(g.data_offset % 32 == 0, "data section aligned");
        gguf_free(&g);
    }
    free(buf);
}

/* general.alignment moves the data section and is validated. */
static void test_alignment(void) {
    img m = {{0}, 0};
    put(&m, "GGUF", 4);
    u32(&m, 2);
    u64(&m, 1);
    u64(&m, 1);
    key(&m, "general.alignment", GGUF_U32); u32(&m, 64);
    str(&m, "t"); u32(&m, 1); u64(&m, 16); u32(&m, 0); u64(&m, 0);
    size_t data = (m.n + 63) / 64 * 64;
    m.n = data + 64;
    gguf_ctx g;
    cx_err err = {0};
    CHECK(gguf_parse(m.b, m.n, "mem", &g, &err) == 0 && g.data_offset == data && g.alignment == 64,
          "alignment 64: %s", err.msg);
    gguf_free(&g);
    memcpy(m.b + 24 + 8 + strlen("general.alignment") + 4, "\x30\x00\x00\x00", 4); /* 48: not a power of two */
    CHECK(gguf_parse(m.b, m.n, "mem", &g, &err) == CX_EFORMAT && strstr(err.msg, "alignment"), "bad alignment: %s",
          err.msg);
}

/* Element-by-element arrays, raw entries and a non-default alignment: what
 * quantize writes, read back. */
static void test_writer_elements(void) {
    char path[] = "/tmp/cortex-gguf-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    FILE *f = fdopen(fd, "wb");
    gguf_writer *w = gguf_writer_new(64);
    gguf_w_arr_begin(w, "toks", GGUF_STR, 2);
    gguf_w_elem_str(w, "ab", 2);
    gguf_w_elem_u64(w, 4);
    gguf_w_elem_bytes(w, "\xE2\x96\x81", 3);
    gguf_w_elem_bytes(w, "c", 1);
    gguf_w_arr_begin(w, "sc", GGUF_F32, 1);
    gguf_w_elem_f32(w, -1.5f);
    img e = {{0}, 0};
    key(&e, "raw", GGUF_U32);
    u32(&e, 99);
    gguf_w_entry_raw(w, e.b, e.n);
    int64_t ne[1] = {3};
    CHECK(gguf_w_tensor(w, "a", 0, 1, ne) == 0 && gguf_w_tensor(w, "b", 0, 1, ne) == 64, "offsets follow alignment 64");
    gguf_w_u32(w, "general.alignment", 64);
    cx_err err = {0};
    uint64_t start = 0;
    CHECK(gguf_w_header(w, f, path, &start, &err) == 0 && start % 64 == 0, "header: %s", err.msg);
    float xs[3] = {1, 2, 3};
    for (int t = 0; t < 2; t++) {
        fwrite(xs, 4, 3, f);
        CHECK(gguf_w_pad(w, f, 12) == 0, "pad");
    }
    long size = ftell(f);
    fclose(f);
    gguf_writer_free(w);
    CHECK((uint64_t)size == start + 128, "file ends after two aligned tensors (%ld bytes)", size);
    uint8_t *buf = malloc((size_t)size);
    f = fopen(path, "rb");
    CHECK(buf && fread(buf, 1, (size_t)size, f) == (size_t)size, "read back");
    fclose(f);
    remove(path);
    gguf_ctx g;
    int rc = gguf_parse(buf, (uint64_t)size, path, &g, &err);
    CHECK(rc == 0, "parse: %s", err.msg);
    if (!rc) {
        const uint8_t *p = gguf_find(&g, "toks")->arr_data;
        gguf_str s0 = gguf_arr_next_str(&p), s1 = gguf_arr_next_str(&p);
        CHECK(gguf_str_eq(s0, "ab") && gguf_str_eq(s1, "\xE2\x96\x81" "c"), "element strings");
        CHECK(gguf_arr_num(gguf_find(&g, "sc"), 0) == -1.5, "element f32");
        uint32_t v;
        CHECK(gguf_get_u32(&g, "raw", &v) == 1 && v == 99, "raw entry");
        CHECK(g.data_offset == start && gguf_find_tensor(&g, "b")->offset == 64, "data section and tensor b");
        gguf_free(&g);
    }
    free(buf);
}

/* One general.file_type mapping for synth and quantize: llama.cpp's numbers
 * for what the engine writes, -1 (refused by both) for anything else. */
static void test_file_type(void) {
    CHECK(gguf_file_type(CX_TYPE_F32) == 0 && gguf_file_type(CX_TYPE_F16) == 1 && gguf_file_type(CX_TYPE_Q4_0) == 2 &&
          gguf_file_type(CX_TYPE_Q8_0) == 7 && gguf_file_type(CX_TYPE_Q4_K) == 14 &&
          gguf_file_type(CX_TYPE_Q6_K) == 18 && gguf_file_type(CX_FTYPE_Q4_K_M) == 15, "known file types");
    const int unknown[] = {3, 6, 13, 15, 99, -1, 1014};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        CHECK(gguf_file_type(unknown[i]) == -1, "type %d unknown", unknown[i]);
    cx_err err = {0};
    char path[] = "/tmp/cortex-gguf-ftype-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    CHECK(cx_synth_write(cx_shape_find("test-tiny"), 3, 1, path, &err) == CX_EINVAL && strstr(err.msg, "type"),
          "synth refuses type 3: %s", err.msg);
    CHECK(cx_quantize_file(path, NULL, "/tmp/cortex-gguf-ftype-out.gguf", 3, NULL, &err) == CX_EINVAL &&
          strstr(err.msg, "file type"), "quantize refuses type 3: %s", err.msg);
    remove(path);
}

TEST_MAIN({
    test_all_types();
    test_writer_elements();
    test_file_type();
    test_writer_roundtrip();
    test_alignment();
})
