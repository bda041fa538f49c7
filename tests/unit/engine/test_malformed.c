/*
 * test_malformed.c - malformed model and tokenizer files give exactly one clear
 * error through the public API (cx_model_load) and never a crash.
 *
 * "Clear" means: a non-zero CX_E* code that equals err.code, no model returned,
 * and a one-line message that names the offending file and the problem (each
 * case checks a meaningful substring such as "truncated" or "past the end").
 *
 * Every bad file is built in a scratch directory (mkdtemp) from a valid one:
 *   - a test-tiny GGUF written by the engine's own cx_synth_write, mutated
 *     byte-wise at offsets found by parsing it (kv values, tensor infos);
 *   - a tiny GGUF written by hand with gguf_writer when a case needs a file
 *     the synthesiser cannot produce (a missing key, a q5_K tensor, ...);
 *   - a tiny llama2.c checkpoint + tokenizer written here;
 *   - the real models in CORTEX_MODELS (or ../shared/models) where present;
 *     absent ones print "SKIP: <reason>" and pass, unless CI=true.
 * Each case prints "ok   <case> [<code>] <message>" so the log documents the errors.
 */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cortex_tools.h"
#include "gguf.h"
#include "gguf_write.h"
#include "testing.h"

static char g_dir[256];      /* scratch directory for the bad files */
static uint8_t *g_base;      /* a valid test-tiny f32 GGUF image */
static size_t g_base_size;
static gguf_ctx g_ctx;       /* g_base parsed, to find field offsets */
static char g_base_path[512];
static const char *g_argv0;  /* this binary's path: locates the repo root */

/* ------------------------------------------------------------ helpers */

/* Put "<scratch dir>/<name>" into out: every file of this test lives there. */
static void scratch(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", g_dir, name); }

/* Write n bytes to path; returns 0 on success (a failure is a test failure). */
static int write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(p, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = 0;
    CHECK(ok, "cannot write %s", path);
    return ok ? 0 : -1;
}

/* Read a whole file into a malloc'd buffer; NULL if it cannot be read. */
static uint8_t *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *n = buf ? (size_t)len : 0;
    return buf;
}

/* Stores at a byte offset in host order, which the engine (like GGUF) takes as little-endian. */
static void put32(uint8_t *b, size_t off, uint32_t v) { memcpy(b + off, &v, 4); }
static void put64(uint8_t *b, size_t off, uint64_t v) { memcpy(b + off, &v, 8); }

/* Does msg contain one of the '|'-separated alternatives in `needles`? */
static int has_any(const char *msg, const char *needles) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", needles);
    for (char *save = NULL, *tok = strtok_r(buf, "|", &save); tok; tok = strtok_r(NULL, "|", &save))
        if (strstr(msg, tok)) return 1;
    return 0;
}

/*
 * The core assertion. Load `path` (+ tokenizer `tok`), expect failure with
 * `code` (0: any error code), a one-line message naming `names` (NULL: no file
 * to name) and containing one of `needles`. Prints the message for the log.
 */
static void expect_error(const char *what, const char *path, const char *tok, int code, const char *names,
                         const char *needles) {
    cx_model *m = (cx_model *)(uintptr_t)1;
    cx_err err = {0};
    int rc = cx_model_load(path, tok, &m, &err);
    int before = t_fail;
    CHECK(rc != 0, "%s: loaded successfully, expected an error", what);
    CHECK(rc == err.code, "%s: returned %d but err.code is %d", what, rc, err.code);
    CHECK(m == NULL, "%s: *out not NULL after a failure", what);
    if (code) CHECK(rc == code, "%s: code %d, expected %d (%s)", what, rc, code, err.msg);
    CHECK(err.msg[0] && !strchr(err.msg, '\n'), "%s: message empty or not one line: '%s'", what, err.msg);
    if (names) CHECK(strstr(err.msg, names) != NULL, "%s: message does not name %s: '%s'", what, names, err.msg);
    CHECK(has_any(err.msg, needles), "%s: message lacks '%s': '%s'", what, needles, err.msg);
    if (!rc) cx_model_free(m);
    if (t_fail == before) printf("ok   %-34s [%d] %s\n", what, rc, err.msg);
}

/* Load `path` expecting success (the positive control for a family of cases). */
static void expect_ok(const char *what, const char *path, const char *tok) {
    cx_model *m = NULL;
    cx_err err = {0};
    int rc = cx_model_load(path, tok, &m, &err);
    CHECK(rc == 0 && m, "%s: valid file failed to load: %s", what, err.msg);
    if (!rc) printf("ok   %-34s loads\n", what);
    cx_model_free(m);
}

/* Write a copy of g_base with one 4- or 8-byte field replaced, then expect_error. */
static void expect_mutant(const char *what, size_t off, int width, uint64_t val, int code, const char *needles) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", g_dir, what);
    uint8_t *b = malloc(g_base_size);
    if (!b) return;
    memcpy(b, g_base, g_base_size);
    if (width == 4) put32(b, off, (uint32_t)val);
    else put64(b, off, val);
    if (!write_bytes(path, b, g_base_size)) expect_error(what, path, NULL, code, path, needles);
    free(b);
}

/* Offset in g_base of metadata `key`'s value (for a string: its length field). */
static size_t kv_value_off(const char *key) {
    const gguf_kv *kv = gguf_find(&g_ctx, key);
    CHECK(kv != NULL, "base file lacks %s", key);
    return kv ? (size_t)((const uint8_t *)kv->key.ptr - g_base) + kv->key.len + 4 : 0;
}

/* Offset in g_base of metadata `key`'s 8-byte key-length field. */
static size_t kv_key_off(const char *key) {
    const gguf_kv *kv = gguf_find(&g_ctx, key);
    CHECK(kv != NULL, "base file lacks %s", key);
    return kv ? (size_t)((const uint8_t *)kv->key.ptr - g_base) - 8 : 0;
}

/* Offsets of one tensor info's fields in g_base. */
typedef struct tinfo { size_t name_len, n_dims, ne[GGUF_MAX_DIMS], type, offset; } tinfo;

/* Locate the fields of tensor `name`'s info record in g_base. */
static tinfo tensor_fields(const char *name) {
    tinfo f = {0};
    const gguf_tensor *t = gguf_find_tensor(&g_ctx, name);
    CHECK(t != NULL, "base file lacks tensor %s", name);
    if (!t) return f;
    size_t p = (size_t)((const uint8_t *)t->name.ptr - g_base);
    f.name_len = p - 8;
    f.n_dims = p + t->name.len;
    for (uint32_t d = 0; d < t->n_dims; d++) f.ne[d] = f.n_dims + 4 + 8 * d;
    f.type = f.n_dims + 4 + 8 * t->n_dims;
    f.offset = f.type + 4;
    return f;
}

/*
 * Directory of the real models, or NULL: $CORTEX_MODELS, else ../shared/models
 * from the repo root, found as the working directory (tests/run.sh) or from
 * the binary path (<root>/build/tests/test_malformed).
 */
static const char *models_dir(void) {
    static char buf[400];
    const char *d = getenv("CORTEX_MODELS");
    struct stat st;
    if (d && *d && stat(d, &st) == 0 && S_ISDIR(st.st_mode)) return d;
    if (stat("../shared/models", &st) == 0 && S_ISDIR(st.st_mode)) return "../shared/models";
    const char *slash = g_argv0 ? strrchr(g_argv0, '/') : NULL;
    if (slash) {
        snprintf(buf, sizeof buf, "%.*s/../../../shared/models", (int)(slash - g_argv0), g_argv0);
        if (stat(buf, &st) == 0 && S_ISDIR(st.st_mode)) return buf;
    }
    return NULL;
}

/* Path of real model file `name` in out, or 0 after printing SKIP (failing under CI=true). */
static int real_model(const char *name, char *out, size_t cap) {
    const char *d = models_dir();
    if (d) {
        snprintf(out, cap, "%s/%s", d, name);
        if (access(out, R_OK) == 0) return 1;
    }
    const char *ci = getenv("CI");
    int in_ci = ci && !strcmp(ci, "true");
    printf("SKIP: real model %s not found (set CORTEX_MODELS or provide ../shared/models)\n", name);
    CHECK(!in_ci, "CI=true but real model %s is missing", name);
    return 0;
}

/* ------------------------------------------------- hand-written GGUF models */

/* What write_tiny writes: a valid 1-layer model unless a knob breaks it. */
typedef struct tiny_spec {
    int n_embd, n_ff, n_vocab, emb_rows; /* emb_rows: rows of token_embd (0: n_vocab) */
    const char *arch, *tok_model;
    const char *skip_key;                 /* metadata key to leave out */
    const char *skip_tensor;              /* tensor to leave out */
    const char *odd_tensor;               /* tensor stored as odd_type */
    uint32_t odd_type;
    uint32_t alignment;                   /* general.alignment to write (0: none) */
    const char *str_key, *str_val;        /* an extra string entry (NULL: none) */
    const char *u32_key;                  /* an extra integer entry of value u32_val */
    uint32_t u32_val;
    const char *extra_tensor;             /* an extra 1-D tensor of n_embd floats */
} tiny_spec;

/* The valid defaults: embd 32, ff 256 (so a K-quant ffn_down is possible), vocab 260. */
static tiny_spec tiny_default(void) {
    tiny_spec s = {32, 256, 260, 0, "llama", "llama", NULL, NULL, NULL, 0, 0, NULL, NULL, NULL, 0, NULL};
    return s;
}

/*
 * Write a small GGUF llama model by hand with the engine's gguf_writer: the
 * synthesiser cannot leave out a key or a tensor or use an unsupported type.
 * Weights are 0, norms 1. Returns 0 on success.
 */
static int write_tiny(const char *path, const tiny_spec *s) {
    const int E = s->n_embd, F = s->n_ff, V = s->n_vocab, H = 2;
    char (*pieces)[16] = calloc((size_t)V, 16);
    const char **pp = calloc((size_t)V, sizeof *pp);
    float *scores = calloc((size_t)V, sizeof *scores);
    int32_t *types = calloc((size_t)V, sizeof *types);
    gguf_writer *w = gguf_writer_new(0);
    FILE *f = NULL;
    cx_err err = {0};
    int rc = -1;
    if (!pieces || !pp || !scores || !types || !w) goto done;
    for (int i = 0; i < V; i++) {
        if (i < 3) snprintf(pieces[i], 16, "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
        else if (i < 259) snprintf(pieces[i], 16, "<0x%02X>", i - 3);
        else snprintf(pieces[i], 16, "\xE2\x96\x81p%d", i);
        types[i] = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1;
        scores[i] = -(float)i;
        pp[i] = pieces[i];
    }
#define KEEP(k) (!s->skip_key || strcmp(s->skip_key, (k)) != 0)
    if (KEEP("general.architecture")) gguf_w_str(w, "general.architecture", s->arch);
    if (s->alignment) gguf_w_u32(w, "general.alignment", s->alignment);
    if (KEEP("llama.context_length")) gguf_w_u32(w, "llama.context_length", 64);
    if (KEEP("llama.embedding_length")) gguf_w_u32(w, "llama.embedding_length", (uint32_t)E);
    if (KEEP("llama.feed_forward_length")) gguf_w_u32(w, "llama.feed_forward_length", (uint32_t)F);
    if (KEEP("llama.block_count")) gguf_w_u32(w, "llama.block_count", 1);
    if (KEEP("llama.attention.head_count")) gguf_w_u32(w, "llama.attention.head_count", (uint32_t)H);
    if (KEEP("llama.attention.head_count_kv")) gguf_w_u32(w, "llama.attention.head_count_kv", (uint32_t)H);
    if (KEEP("llama.attention.layer_norm_rms_epsilon")) gguf_w_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    if (KEEP("tokenizer.ggml.model")) gguf_w_str(w, "tokenizer.ggml.model", s->tok_model);
    if (KEEP("tokenizer.ggml.tokens")) gguf_w_arr_str(w, "tokenizer.ggml.tokens", pp, (uint64_t)V);
    if (KEEP("tokenizer.ggml.scores")) gguf_w_arr_f32(w, "tokenizer.ggml.scores", scores, (uint64_t)V);
    if (KEEP("tokenizer.ggml.token_type")) gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, (uint64_t)V);
    if (s->str_key) gguf_w_str(w, s->str_key, s->str_val);
    if (s->u32_key) gguf_w_u32(w, s->u32_key, s->u32_val);
#undef KEEP
    struct { const char *name; int nd; int64_t ne0, ne1; } T[] = {
        {"token_embd.weight", 2, E, s->emb_rows ? s->emb_rows : V}, {"output_norm.weight", 1, E, 1},
        {"blk.0.attn_norm.weight", 1, E, 1}, {"blk.0.attn_q.weight", 2, E, E}, {"blk.0.attn_k.weight", 2, E, E},
        {"blk.0.attn_v.weight", 2, E, E}, {"blk.0.attn_output.weight", 2, E, E}, {"blk.0.ffn_norm.weight", 1, E, 1},
        {"blk.0.ffn_gate.weight", 2, E, F}, {"blk.0.ffn_up.weight", 2, E, F}, {"blk.0.ffn_down.weight", 2, F, E},
        {s->extra_tensor ? s->extra_tensor : "", 1, E, 1},
    };
    enum { NT = sizeof T / sizeof T[0] };
    uint32_t ty[NT];
    for (int i = 0; i < NT; i++) {
        int64_t ne[2] = {T[i].ne0, T[i].ne1};
        ty[i] = s->odd_tensor && !strcmp(s->odd_tensor, T[i].name) ? s->odd_type : CX_TYPE_F32;
        if (!T[i].name[0]) continue; /* no extra tensor */
        if (!s->skip_tensor || strcmp(s->skip_tensor, T[i].name)) gguf_w_tensor(w, T[i].name, ty[i], T[i].nd, ne);
    }
    f = fopen(path, "wb");
    if (!f || gguf_w_header(w, f, path, NULL, &err)) goto done;
    for (int i = 0; i < NT; i++) {
        if (!T[i].name[0] || (s->skip_tensor && !strcmp(s->skip_tensor, T[i].name))) continue;
        int64_t ne[2] = {T[i].ne0, T[i].ne1};
        uint64_t nb = gguf_tensor_nbytes(ty[i], T[i].nd, ne);
        float one = T[i].nd == 1 && ty[i] == CX_TYPE_F32 ? 1.0f : 0.0f;
        for (uint64_t k = 0; k < nb; k += 4) {
            uint8_t q[4];
            memcpy(q, &one, 4);
            if (fwrite(q, 1, nb - k < 4 ? nb - k : 4, f) == 0) goto done;
        }
        if (gguf_w_pad(w, f, nb)) goto done;
    }
    rc = 0;
done:
    if (f && fclose(f) != 0) rc = -1;
    CHECK(rc == 0, "cannot write hand-made GGUF %s", path);
    gguf_writer_free(w);
    free(pieces);
    free(pp);
    free(scores);
    free(types);
    return rc;
}

/* Write a tiny spec to the scratch file `name` and expect the given error. */
static void expect_tiny(const char *what, const tiny_spec *s, int code, const char *needles) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", g_dir, what);
    if (!write_tiny(path, s)) expect_error(what, path, NULL, code, path, needles);
}

/* ----------------------------------------- hand-written llama2.c checkpoints */

/* The tiny llama2.c shape: dim 8, hidden 16, 1 layer, 2 heads, vocab 32, seq 8. */
static const int32_t L2C_HDR[7] = {8, 16, 1, 2, 2, 32, 8};

/* Bytes of a llama2.c checkpoint with header h (shared classifier): 28 + floats. */
static size_t l2c_size(const int32_t *h) {
    size_t E = (size_t)h[0], F = (size_t)h[1], L = (size_t)h[2], hd = E / (size_t)h[3];
    size_t KV = (size_t)h[4] * hd, V = (size_t)h[5];
    return 28 + 4 * (V * E + L * (E + 2 * E * E + 2 * KV * E + E + 3 * F * E) + E + (size_t)h[6] * hd);
}

/* A malloc'd valid tiny checkpoint image (all weights 0) of *n bytes. */
static uint8_t *l2c_image(size_t *n) {
    *n = l2c_size(L2C_HDR);
    uint8_t *b = calloc(1, *n);
    if (b) memcpy(b, L2C_HDR, sizeof L2C_HDR);
    return b;
}

/* A malloc'd llama2.c tokenizer image of n_tok pieces (a, b, ... after 3 specials). */
static uint8_t *l2c_tokenizer(int n_tok, size_t *n) {
    uint8_t *b = malloc(4 + (size_t)n_tok * 16);
    if (!b) return NULL;
    size_t p = 0;
    put32(b, p, 8);
    p += 4;
    for (int i = 0; i < n_tok; i++) {
        char piece[8];
        snprintf(piece, sizeof piece, "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : "x");
        if (i >= 3) piece[0] = (char)('a' + (i - 3) % 26);
        float score = -(float)i;
        uint32_t len = (uint32_t)strlen(piece);
        memcpy(b + p, &score, 4);
        put32(b, p + 4, len);
        memcpy(b + p + 8, piece, len);
        p += 8 + len;
    }
    *n = p;
    return b;
}

/* Bytes taken by the first k tokens (with the 4-byte header) of a tokenizer image. */
static size_t l2c_tok_prefix(const uint8_t *t, size_t n, int k) {
    size_t p = 4;
    for (int i = 0; i < k && p + 8 <= n; i++) {
        uint32_t len;
        memcpy(&len, t + p + 4, 4);
        p += 8 + len;
    }
    return p < n ? p : n;
}

/* Write checkpoint image `img` with header field `field` set to `val` (or unchanged
 * if field < 0), cut/grown to `size` bytes, and expect an error naming it. */
static void expect_l2c(const char *what, const uint8_t *img, size_t img_size, int field, int32_t val, size_t size,
                       const char *tok, int code, const char *needles) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.bin", g_dir, what);
    uint8_t *b = calloc(1, size ? size : 1);
    if (!b) return;
    memcpy(b, img, size < img_size ? size : img_size);
    if (field >= 0 && size >= 28) put32(b, (size_t)field * 4, (uint32_t)val);
    if (!write_bytes(path, b, size)) expect_error(what, path, tok, code, path, needles);
    free(b);
}

/* ------------------------------------------------------------ GGUF cases */

/* Proves the mutation base itself is valid, so each failure below is the mutation's. */
static void case_base_loads(void) { expect_ok("gguf-base(test-tiny)", g_base_path, NULL); }

/* Wrong magic: without a tokenizer the file is reported as neither GGUF nor usable llama2.c. */
static void case_wrong_magic(void) {
    expect_mutant("wrong-magic", 0, 4, 0x58554747u /* "GGUX" */, CX_EINVAL, "not a GGUF file");
    char path[512], tok[512];
    scratch(path, sizeof path, "wrong-magic-short.bin");
    scratch(tok, sizeof tok, "any-tokenizer.bin");
    size_t tn;
    uint8_t *t = l2c_tokenizer(32, &tn);
    /* With a tokenizer, a short file cannot be a checkpoint either: the magic is named. */
    if (t && !write_bytes(tok, t, tn) && !write_bytes(path, "GGUXjunk", 8))
        expect_error("wrong-magic-short+tokenizer", path, tok, CX_EFORMAT, path, "wrong magic");
    free(t);
}

/* GGUF versions other than 2 and 3 are refused as unsupported; version 2 still loads. */
static void case_version(void) {
    expect_mutant("version-1", 4, 4, 1, CX_EUNSUP, "GGUF version 1");
    expect_mutant("version-4", 4, 4, 4, CX_EUNSUP, "GGUF version 4");
    char path[512];
    scratch(path, sizeof path, "version-2.gguf");
    uint8_t *b = malloc(g_base_size);
    if (!b) return;
    memcpy(b, g_base, g_base_size);
    put32(b, 4, 2);
    if (!write_bytes(path, b, g_base_size)) expect_ok("version-2", path, NULL);
    free(b);
}

/* Load g_base cut to `cut` bytes; the error must name the file and fit the cut point. */
static int try_cut(const char *path, size_t cut, int verbose) {
    size_t data = (size_t)g_ctx.data_offset;
    const char *want = cut == 0 ? "empty file" : cut < 4 ? "not a GGUF file"
                     : cut < data ? "truncated|more than the file can hold" : "past the end";
    if (write_bytes(path, g_base, cut)) return -1;
    cx_model *m = NULL;
    cx_err err = {0};
    int rc = cx_model_load(path, NULL, &m, &err), before = t_fail;
    CHECK(rc != 0 && rc == err.code && !m, "cut at %zu of %zu: rc %d (%s)", cut, g_base_size, rc, err.msg);
    CHECK(strstr(err.msg, path) && has_any(err.msg, want), "cut at %zu: message '%s' lacks '%s'", cut, err.msg, want);
    if (m) cx_model_free(m);
    if (verbose) printf("     cut at %7zu: [%d] %s\n", cut, rc, err.msg);
    return t_fail == before ? 0 : -1;
}

/* A file cut anywhere (every 97th header byte, plus cuts in the data) fails cleanly. */
static void case_truncated(void) {
    char path[512];
    scratch(path, sizeof path, "truncated.gguf");
    size_t data = (size_t)g_ctx.data_offset, n = 0;
    int bad = 0;
    for (size_t cut = 0; cut < data; cut += 97, n++) bad |= try_cut(path, cut, cut < 3 * 97 || cut + 97 >= data);
    const gguf_tensor *last = &g_ctx.tensors[g_ctx.n_tensors - 1];
    size_t info_end = (size_t)((const uint8_t *)last->name.ptr - g_base) + last->name.len + 4 + 8 * last->n_dims + 12;
    size_t more[] = {1, 3, 5, 24, info_end, data, data + 1, data + 4096, g_base_size / 2, g_base_size - 32,
                     g_base_size - 1};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++, n++) bad |= try_cut(path, more[i], 1);
    if (!bad) printf("ok   %-34s all %zu cuts fail cleanly\n", "truncated", n);
}

/* Tensor offsets beyond the file, near 2^64 (overflow) and unaligned are rejected. */
static void case_tensor_offset(void) {
    tinfo f = tensor_fields("blk.1.ffn_down.weight");
    const gguf_tensor *t = gguf_find_tensor(&g_ctx, "blk.1.ffn_down.weight");
    expect_mutant("tensor-offset-past-end", f.offset, 8, (uint64_t)1 << 40, CX_ERANGE, "past the end");
    /* Regression: the message used to wrap data + offset and report a range inside the file. */
    expect_mutant("tensor-offset-near-2^64", f.offset, 8, UINT64_MAX - 31, CX_ERANGE,
                  "data [18446744073709551615, 18446744073709551615) lies past the end");
    expect_mutant("tensor-offset-unaligned", f.offset, 8, t ? t->offset + 4 : 4, CX_EFORMAT, "alignment");
}

/* A tensor whose size (from its shape) runs past the end of the file is rejected. */
static void case_tensor_size(void) {
    tinfo f = tensor_fields("token_embd.weight");
    expect_mutant("tensor-size-past-end", f.ne[1], 8, 512 * 100, CX_ERANGE, "past the end");
}

/* Dimensions 2^40+1, 0, a product over 2^48, and n_dims 0 or 5 are all rejected. */
static void case_absurd_dims(void) {
    tinfo f = tensor_fields("token_embd.weight");
    expect_mutant("dim-2^40+1", f.ne[0], 8, ((uint64_t)1 << 40) + 1, CX_ERANGE, "absurd dimension");
    expect_mutant("dim-zero", f.ne[1], 8, 0, CX_ERANGE, "absurd dimension");
    uint8_t *b = malloc(g_base_size);
    char path[512];
    scratch(path, sizeof path, "dim-product-2^60.gguf");
    if (b) {
        memcpy(b, g_base, g_base_size);
        put64(b, f.ne[0], (uint64_t)1 << 30);
        put64(b, f.ne[1], (uint64_t)1 << 30);
        if (!write_bytes(path, b, g_base_size))
            expect_error("dim-product-2^60", path, NULL, CX_ERANGE, path, "absurd dimension");
        free(b);
    }
    expect_mutant("n_dims-5", f.n_dims, 4, 5, CX_EFORMAT, "5 dimensions");
    expect_mutant("n_dims-0", f.n_dims, 4, 0, CX_EFORMAT, "0 dimensions");
}

/* Metadata or tensor counts the file cannot possibly hold are rejected before allocating. */
static void case_absurd_counts(void) {
    expect_mutant("n_kv-2^60", 16, 8, (uint64_t)1 << 60, CX_ERANGE, "more than the file can hold");
    expect_mutant("n_tensors-2^60", 8, 8, (uint64_t)1 << 60, CX_ERANGE, "more than the file can hold");
    expect_mutant("n_kv-plus-one", 16, 8, g_ctx.n_kv + 1, 0, "truncated|unknown|tensor");
}

/* An unknown ggml type id is a format error; q4_K on a 64-wide row breaks its block size. */
static void case_tensor_type(void) {
    tinfo f = tensor_fields("blk.0.attn_q.weight");
    expect_mutant("tensor-type-99", f.type, 4, 99, CX_EFORMAT, "unknown tensor type 99");
    expect_mutant("tensor-type-q4_K-bad-row", f.type, 4, 12, CX_EFORMAT, "q4_K block size 256");
}

/* Strings (key, value, tensor name, vocabulary entry) whose length runs past the end. */
static void case_string_length(void) {
    expect_mutant("string-value-too-long", kv_value_off("general.name"), 8, (uint64_t)1 << 62, CX_EFORMAT,
                  "truncated file: metadata string");
    expect_mutant("key-length-too-long", kv_key_off("llama.block_count"), 8, UINT64_MAX, CX_EFORMAT,
                  "truncated file: metadata key");
    tinfo f = tensor_fields("output_norm.weight");
    expect_mutant("tensor-name-too-long", f.name_len, 8, g_base_size, CX_EFORMAT, "truncated file: tensor name");
    /* tokens array value: u32 element type, u64 count, then the first string's length. */
    expect_mutant("vocab-string-too-long", kv_value_off("tokenizer.ggml.tokens") + 12, 8, (uint64_t)1 << 50,
                  CX_EFORMAT, "truncated file: array string");
    expect_mutant("array-count-too-big", kv_value_off("tokenizer.ggml.scores") + 4, 8, (uint64_t)1 << 61,
                  CX_EFORMAT, "truncated file: array data");
}

/* Unknown value types, unknown array element types and duplicate keys are format errors. */
static void case_metadata_types(void) {
    expect_mutant("kv-type-13", kv_value_off("general.name") - 4, 4, 13, CX_EFORMAT, "unknown value type 13");
    expect_mutant("array-elem-type-99", kv_value_off("tokenizer.ggml.scores"), 4, 99, CX_EFORMAT,
                  "unknown array element type 99");
    /* "general.file_type" and "llama.block_count" have the same length: rename one. */
    size_t k = kv_key_off("general.file_type") + 8;
    char path[512];
    scratch(path, sizeof path, "duplicate-key.gguf");
    uint8_t *b = malloc(g_base_size);
    if (!b) return;
    memcpy(b, g_base, g_base_size);
    memcpy(b + k, "llama.block_count", 17);
    if (!write_bytes(path, b, g_base_size))
        expect_error("duplicate-key", path, NULL, CX_EFORMAT, path, "duplicate metadata key 'llama.block_count'");
    free(b);
}

/* Append a GGUF string (u64 length + bytes) at b + *p. */
static void put_str(uint8_t *b, size_t *p, const char *s) {
    size_t n = strlen(s);
    put64(b, *p, n);
    memcpy(b + *p + 8, s, n);
    *p += 8 + n;
}

/*
 * Regression: 120000 distinct keys (or 50000 distinct tensors) then a repeat of
 * the first. The duplicate check used to compare all pairs, so this 2 MB file
 * took ~50 s to reject (gguf.c now hashes); the repeat must still be found.
 */
static void case_many_names(void) {
    enum { NKV = 120000, NT = 50000 };
    size_t cap = 24 + (size_t)NKV * 20 + 64, p = 24;
    uint8_t *b = calloc(1, cap);
    char path[512], name[16];
    if (!b) return;
    memcpy(b, "GGUF", 4);
    put32(b, 4, 3);
    put64(b, 8, 0);
    put64(b, 16, NKV);
    for (int i = 0; i < NKV; i++) {
        snprintf(name, sizeof name, "k%06d", i == NKV - 1 ? 0 : i);
        put_str(b, &p, name);
        put32(b, p, GGUF_BOOL);
        b[p + 4] = 1;
        p += 5;
    }
    scratch(path, sizeof path, "many-keys-one-duplicate.gguf");
    if (!write_bytes(path, b, p))
        expect_error("many-keys-one-duplicate", path, NULL, CX_EFORMAT, path, "duplicate metadata key 'k000000'");
    free(b);

    cap = 24 + (size_t)NT * 40 + 64;
    p = 24;
    b = calloc(1, cap);
    if (!b) return;
    memcpy(b, "GGUF", 4);
    put32(b, 4, 3);
    put64(b, 8, NT);
    put64(b, 16, 0);
    for (int i = 0; i < NT; i++) { /* [1] f32 tensors, all at offset 0 */
        snprintf(name, sizeof name, "t%06d", i == NT - 1 ? 0 : i);
        put_str(b, &p, name);
        put32(b, p, 1);
        put64(b, p + 4, 1);
        put32(b, p + 12, CX_TYPE_F32);
        put64(b, p + 16, 0);
        p += 24;
    }
    p = (p + 31) / 32 * 32 + 32; /* aligned data section holding one float */
    scratch(path, sizeof path, "many-tensors-one-duplicate.gguf");
    if (!write_bytes(path, b, p))
        expect_error("many-tensors-one-duplicate", path, NULL, CX_EFORMAT, path, "duplicate tensor name 't000000'");
    free(b);
}

/* The hand-made model is valid, so each knob below is what breaks it. */
static void case_tiny_loads(void) {
    char path[512];
    scratch(path, sizeof path, "tiny-valid.gguf");
    tiny_spec s = tiny_default();
    if (!write_tiny(path, &s)) expect_ok("gguf-hand-made", path, NULL);
}

/* A known ggml type the engine cannot compute with is CX_EUNSUP naming the type. */
static void case_unsupported_type(void) {
    tiny_spec s = tiny_default();
    s.odd_tensor = "blk.0.ffn_down.weight"; /* [256, 32]: rows fit q5_K's 256-blocks */
    s.odd_type = 13;
    expect_tiny("tensor-type-q5_K", &s, CX_EUNSUP, "type q5_K");
    s.odd_tensor = "blk.0.attn_q.weight";
    s.odd_type = 3;
    expect_tiny("tensor-type-q4_1", &s, CX_EUNSUP, "type q4_1");
}

/* token_embd with one row more than the vocabulary has tokens: a vocab/model mismatch. */
static void case_gguf_vocab_mismatch(void) {
    tiny_spec s = tiny_default();
    s.emb_rows = s.n_vocab + 1;
    expect_tiny("gguf-vocab-mismatch", &s, CX_EFORMAT, "vocab/model mismatch");
}

/* A required metadata key that is absent is named in the error. */
static void case_missing_key(void) {
    tiny_spec s = tiny_default();
    s.skip_key = "llama.block_count";
    expect_tiny("missing-block_count", &s, CX_EFORMAT, "'llama.block_count' is missing");
    s.skip_key = "tokenizer.ggml.tokens";
    expect_tiny("missing-tokens", &s, CX_EFORMAT, "tokenizer.ggml.tokens is missing");
    s.skip_key = "general.architecture";
    expect_tiny("missing-architecture", &s, CX_EFORMAT, "general.architecture is missing");
}

/* A required tensor that is absent is named in the error. */
static void case_missing_tensor(void) {
    tiny_spec s = tiny_default();
    s.skip_tensor = "blk.0.ffn_up.weight";
    expect_tiny("missing-tensor", &s, CX_EFORMAT, "'blk.0.ffn_up.weight' is missing");
}

/* Other architectures / tokenizers and a bad alignment are refused clearly. */
static void case_unsupported_model(void) {
    tiny_spec s = tiny_default();
    s.arch = "gpt2";
    expect_tiny("architecture-gpt2", &s, CX_EUNSUP, "architecture 'gpt2' is not supported");
    s = tiny_default();
    s.tok_model = "bert";
    expect_tiny("tokenizer-bert", &s, CX_EUNSUP, "tokenizer model 'bert' is not supported");
    s = tiny_default();
    s.tok_model = "gpt2"; /* byte-level BPE without its merges */
    expect_tiny("tokenizer-gpt2-no-merges", &s, CX_EFORMAT, "tokenizer.ggml.merges is missing");
    s = tiny_default();
    s.str_key = "llama.rope.scaling.type", s.str_val = "longrope";
    expect_tiny("rope-scaling-longrope", &s, CX_EUNSUP,
                "RoPE scaling 'longrope' (llama.rope.scaling.type) is not supported");
    s = tiny_default();
    s.u32_key = "llama.attention.value_length", s.u32_val = 8;
    expect_tiny("value-length-8", &s, CX_EUNSUP, "llama.attention.value_length = 8 differs from the key length 16");
    s = tiny_default();
    s.u32_key = "llama.attention.key_length", s.u32_val = 8; /* heads of 8: attn_q must be [32, 16] */
    expect_tiny("key-length-8", &s, CX_EFORMAT, "'blk.0.attn_q.weight' has shape [32, 32] (2 dims), expected [32, 16]");
    s = tiny_default();
    s.u32_key = "llama.expert_count", s.u32_val = 8; /* experts need their count per token */
    expect_tiny("experts", &s, CX_EFORMAT, "required metadata 'llama.expert_used_count' is missing");
    s = tiny_default();
    s.u32_key = "llama.expert_shared_count", s.u32_val = 1;
    expect_tiny("shared-experts", &s, CX_EUNSUP, "metadata 'llama.expert_shared_count' is not supported");
    s = tiny_default();
    s.extra_tensor = "blk.0.attn_k_norm.weight";
    expect_tiny("unused-tensor", &s, CX_EUNSUP, "tensor 'blk.0.attn_k_norm.weight' is not supported by this engine");
    s = tiny_default();
    s.extra_tensor = "blk.0.attn_q.bias"; /* a Q bias without K and V biases */
    expect_tiny("partial-bias", &s, CX_EFORMAT, "some but not all of the Q, K and V biases");
    s = tiny_default();
    s.arch = "qwen2"; /* its hyper-parameters are under qwen2.*, which this file lacks */
    expect_tiny("qwen2-keys", &s, CX_EFORMAT, "'qwen2.embedding_length' is missing");
    s = tiny_default();
    s.alignment = 3;
    expect_tiny("alignment-3", &s, CX_EFORMAT, "general.alignment must be");
}

/* ------------------------------------------------------- llama2.c cases */

/* Header fields out of range, a wrong file size and bad tokenizers, on a tiny checkpoint. */
static void case_llama2c(void) {
    size_t n, tn;
    uint8_t *img = l2c_image(&n), *tk = l2c_tokenizer(32, &tn);
    char tok[512], path[512];
    scratch(tok, sizeof tok, "tiny-tok32.bin");
    scratch(path, sizeof path, "tiny-l2c.bin");
    if (!img || !tk || write_bytes(tok, tk, tn) || write_bytes(path, img, n)) goto done;
    expect_ok("llama2c-hand-made", path, tok);
    expect_l2c("l2c-4-bytes-short", img, n, -1, 0, n - 4, tok, CX_EFORMAT, "implies");
    expect_l2c("l2c-4-bytes-long", img, n, -1, 0, n + 4, tok, CX_EFORMAT, "implies");
    expect_l2c("l2c-header-only", img, n, -1, 0, 28, tok, CX_EFORMAT, "implies");
    expect_l2c("l2c-too-short", img, n, -1, 0, 27, tok, CX_EFORMAT, "too short");
    expect_l2c("l2c-dim-negative", img, n, 0, -64, n, tok, CX_ERANGE, "absurd embedding length -64");
    expect_l2c("l2c-dim-2^30", img, n, 0, 1 << 30, n, tok, CX_ERANGE, "absurd embedding length");
    expect_l2c("l2c-hidden-negative", img, n, 1, -1, n, tok, CX_ERANGE, "absurd feed-forward length");
    expect_l2c("l2c-layers-2^30", img, n, 2, 1 << 30, n, tok, CX_ERANGE, "absurd layer count");
    expect_l2c("l2c-heads-zero", img, n, 3, 0, n, tok, CX_ERANGE, "head count 0");
    expect_l2c("l2c-kv-heads-3", img, n, 4, 3, n, tok, CX_ERANGE, "kv head count 3");
    expect_l2c("l2c-vocab-INT32_MIN", img, n, 5, INT32_MIN, n, tok, CX_ERANGE, "absurd vocabulary size");
    expect_l2c("l2c-seq-INT32_MAX", img, n, 6, INT32_MAX, n, tok, CX_ERANGE, "absurd context length");
    /* The largest header every check allows: its implied size must not overflow. */
    int32_t big[7] = {65536, 1 << 20, 1024, 1, 1, 1 << 24, 1 << 24};
    uint8_t *bimg = malloc(n);
    if (bimg) {
        memcpy(bimg, img, n);
        memcpy(bimg, big, sizeof big);
        expect_l2c("l2c-huge-but-legal-header", bimg, n, -1, 0, n, tok, CX_EFORMAT, "implies");
        free(bimg);
    }
    /* Tokenizer problems name the tokenizer file. */
    struct { const char *what; size_t size; int patch_len; const char *needles; } T[] = {
        {"l2c-tok-truncated", l2c_tok_prefix(tk, tn, 20), 0, "token 20 of 32 is missing (vocab/model mismatch?)"},
        {"l2c-tok-3-bytes", 3, 0, "truncated tokenizer file"},
        {"l2c-tok-trailing-bytes", tn + 5, 0, "does not match the model's vocabulary"},
        {"l2c-tok-negative-length", tn, 1, "beyond the end of the file"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char tp[512];
        snprintf(tp, sizeof tp, "%s/%s.bin", g_dir, T[i].what);
        uint8_t *b = calloc(1, T[i].size);
        if (!b) continue;
        memcpy(b, tk, T[i].size < tn ? T[i].size : tn);
        if (T[i].patch_len) put32(b, 4 + 4, (uint32_t)-5); /* token 0's length */
        if (!write_bytes(tp, b, T[i].size)) expect_error(T[i].what, path, tp, CX_EFORMAT, tp, T[i].needles);
        free(b);
    }
    /* A tokenizer with fewer pieces than the model's vocabulary. */
    uint8_t *t31 = l2c_tokenizer(31, &tn);
    char tp[512];
    scratch(tp, sizeof tp, "tiny-tok31.bin");
    if (t31 && !write_bytes(tp, t31, tn))
        expect_error("l2c-tok-31-of-32", path, tp, CX_EFORMAT, tp, "vocab/model mismatch");
    free(t31);
    scratch(tp, sizeof tp, "no-such-tokenizer.bin");
    expect_error("l2c-tok-nonexistent", path, tp, CX_EIO, tp, "cannot open");
done:
    free(img);
    free(tk);
}

/* The real aidreams260K.bin with a truncated or wrong-size companion file. */
static void case_real_llama2c(void) {
    char bin[512], tok[512], path[512];
    if (!real_model("aidreams260K.bin", bin, sizeof bin) || !real_model("aidreams-tok512.bin", tok, sizeof tok)) return;
    size_t bn, tn;
    uint8_t *b = read_bytes(bin, &bn), *t = read_bytes(tok, &tn);
    CHECK(b && t, "cannot read %s / %s", bin, tok);
    if (b && t) {
        expect_ok("aidreams260K.bin", bin, tok);
        scratch(path, sizeof path, "aidreams-tok-300-of-512.bin");
        if (!write_bytes(path, t, l2c_tok_prefix(t, tn, 300)))
            expect_error("real-tokenizer-300-tokens", bin, path, CX_EFORMAT, path, "token 300 of 512 is missing");
        scratch(path, sizeof path, "aidreams-tok-cut-in-a-piece.bin");
        if (!write_bytes(path, t, l2c_tok_prefix(t, tn, 300) + 9))
            expect_error("real-tokenizer-cut-in-piece", bin, path, CX_EFORMAT, path, "beyond the end of the file");
        scratch(path, sizeof path, "aidreams-cut.bin");
        if (!write_bytes(path, b, bn - 256))
            expect_error("real-l2c-truncated", path, tok, CX_EFORMAT, path, "implies");
        /* The right tokenizer given to a GGUF is ignored; a GGUF cut in half still fails. */
        char gg[512];
        if (real_model("aidreams260K.gguf", gg, sizeof gg)) {
            size_t gn;
            uint8_t *g = read_bytes(gg, &gn);
            scratch(path, sizeof path, "aidreams-half.gguf");
            if (g && !write_bytes(path, g, gn / 2))
                expect_error("real-gguf-half", path, tok, CX_ERANGE, path, "past the end");
            free(g);
        }
    }
    free(b);
    free(t);
}

/* --------------------------------------------------------- path cases */

/* Empty files, directories, missing files and an empty path each give one clear error. */
static void case_paths(void) {
    char path[512];
    scratch(path, sizeof path, "empty.gguf");
    if (!write_bytes(path, "", 0)) expect_error("empty-file", path, NULL, CX_EFORMAT, path, "empty file");
    expect_error("directory", g_dir, NULL, CX_EIO, g_dir, "not a regular file");
    scratch(path, sizeof path, "does-not-exist.gguf");
    expect_error("nonexistent", path, NULL, CX_EIO, path, "cannot open");
    expect_error("empty-path", "", NULL, CX_EINVAL, NULL, "no model path");
}

/* --------------------------------------------------- tokenizer and eval */

/* Empty text tokenizes to just BOS (or nothing without it); cx_eval rejects ids
 * outside the vocabulary without touching the session. */
static void case_tokenize_and_eval(void) {
    cx_model *m = NULL;
    cx_err err = {0};
    if (cx_model_load(g_base_path, NULL, &m, &err)) {
        CHECK(0, "base model does not load: %s", err.msg);
        return;
    }
    int32_t ids[4] = {-7, -7, -7, -7};
    int n = -1;
    CHECK(cx_tokenize(m, "", 0, 1, ids, 4, &n, &err) == 0, "tokenize empty: %s", err.msg);
    CHECK(n == 1 && ids[0] == cx_token_bos(m), "empty text with BOS gave %d ids, first %d", n, ids[0]);
    CHECK(cx_tokenize(m, "", 0, 0, ids, 4, &n, &err) == 0 && n == 0, "empty text without BOS gave %d ids", n);
    CHECK(cx_tokenize(m, "", 0, 1, ids, 0, &n, &err) == CX_ERANGE && n == 1, "empty text, cap 0: n %d", n);

    cx_session *s = NULL;
    if (cx_session_new(m, 16, 1, &s, &err)) {
        CHECK(0, "session: %s", err.msg);
        cx_model_free(m);
        return;
    }
    int nv = cx_model_get_info(m)->n_vocab;
    int32_t bad[] = {-1, nv, INT32_MAX, INT32_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int32_t two[2] = {cx_token_bos(m), bad[i]};
        const float *logits = NULL;
        int rc = cx_eval(s, two, 2, &logits, &err);
        CHECK(rc == CX_EINVAL && err.code == rc && strstr(err.msg, "outside the vocabulary"),
              "eval of token %d: rc %d '%s'", bad[i], rc, err.msg);
        CHECK(cx_session_pos(s) == 0, "rejected eval moved the position to %d", cx_session_pos(s));
        if (i == 0) printf("ok   %-34s [%d] %s\n", "eval-token-out-of-vocab", rc, err.msg);
    }
    const float *logits = NULL;
    int32_t bos = cx_token_bos(m);
    CHECK(cx_eval(s, &bos, 1, &logits, &err) == 0 && logits && cx_session_pos(s) == 1,
          "session unusable after rejected evals: %s", err.msg);
    cx_session_free(s);
    cx_model_free(m);
}

/* ---------------------------------------------------------------- main */

/* Make the scratch directory and the mutation base; 0 on success. */
static int setup(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/cortex-malformed-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        CHECK(0, "mkdtemp %s failed", g_dir);
        return -1;
    }
    scratch(g_base_path, sizeof g_base_path, "base-test-tiny.gguf");
    cx_err err = {0};
    const cx_shape *sh = cx_shape_find("test-tiny");
    CHECK(sh != NULL, "no test-tiny shape");
    if (!sh || cx_synth_write(sh, CX_TYPE_F32, 1, g_base_path, &err)) {
        CHECK(0, "cx_synth_write: %s", err.msg);
        return -1;
    }
    g_base = read_bytes(g_base_path, &g_base_size);
    if (!g_base || gguf_parse(g_base, g_base_size, "base", &g_ctx, &err)) {
        CHECK(0, "cannot read back the base: %s", err.msg);
        return -1;
    }
    return 0;
}

/* nftw callback: remove one entry (children come first with FTW_DEPTH). */
static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

/* Free the base and remove the scratch directory with everything in it. */
static void teardown(void) {
    gguf_free(&g_ctx);
    free(g_base);
    if (g_dir[0] && strstr(g_dir, "cortex-malformed-") && nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "warning: could not remove %s\n", g_dir);
}

TEST_MAIN({
    g_argv0 = argv[0];
    if (setup() == 0) {
        case_base_loads();
        case_wrong_magic();
        case_version();
        case_truncated();
        case_tensor_offset();
        case_tensor_size();
        case_absurd_dims();
        case_absurd_counts();
        case_tensor_type();
        case_string_length();
        case_metadata_types();
        case_many_names();
        case_tiny_loads();
        case_unsupported_type();
        case_gguf_vocab_mismatch();
        case_missing_key();
        case_missing_tensor();
        case_unsupported_model();
        case_llama2c();
        case_real_llama2c();
        case_paths();
        case_tokenize_and_eval();
    }
    teardown();
})
