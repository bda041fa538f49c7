/*
 * test_tokenizer.c - SentencePiece BPE properties: merges by score, byte
 * fallback, the dummy-prefix rule, and exact round trips of arbitrary bytes
 * (valid and invalid UTF-8) on a hand-built vocabulary and on the real
 * aidreams vocabulary when ../shared/models is present.
 */
#include <stdlib.h>
#include <string.h>

#include "cortex.h"
#include "testing.h"
#include "tok_roundtrip.h"
#include "tokenizer.h"
#include "util.h"

/* A small vocabulary: specials, 256 bytes, and pieces with chosen scores. */
static void build_small(tok_vocab *v) {
    static const char *extra[] = {" ", "a", "b", "c", "ab", "bc", " a", " ab", "abc", "\xC3\xA9", " \xC3\xA9t", "\xC3\xA9t", "t"};
    static const float sc[] = {-1, -2, -3, -4, -10, -5, -6, -20, -30, -7, -8, -9, -11};
    enum { NX = sizeof extra / sizeof extra[0], N = 3 + 256 + NX };
    const char *pieces[N];
    uint32_t lens[N];
    float scores[N];
    uint8_t types[N];
    static char bytes[256][7];
    pieces[0] = "<unk>"; pieces[1] = "<s>"; pieces[2] = "</s>";
    types[0] = TOK_UNKNOWN; types[1] = types[2] = TOK_CONTROL;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        pieces[3 + b] = bytes[b];
        types[3 + b] = TOK_BYTE;
    }
    for (int i = 0; i < NX; i++) {
        pieces[259 + i] = extra[i];
        types[259 + i] = TOK_NORMAL;
    }
    for (int i = 0; i < N; i++) {
        lens[i] = (uint32_t)strlen(pieces[i]);
        scores[i] = i >= 259 ? sc[i - 259] : 0;
    }
    cx_err err = {0};
    int rc = tok_build(v, N, pieces, lens, scores, types, 1, 2, 0, &err);
    CHECK(rc == 0, "tok_build: %s", err.msg);
}

static int id_of(const tok_vocab *v, const char *piece) {
    for (int i = 0; i < v->n; i++)
        if (v->len[i] == strlen(piece) && !memcmp(v->text + v->off[i], piece, v->len[i]) && v->type[i] == TOK_NORMAL)
            return i;
    return -1;
}

static int encode(const tok_vocab *v, const char *s, size_t n, int bos, int32_t *ids) {
    int k = 0;
    cx_err err = {0};
    int rc = tok_encode(v, s, n, bos, ids, 4096, &k, &err);
    CHECK(rc == 0, "encode: %s", err.msg);
    return k;
}

/* Merges follow scores, not left-to-right greed: "abc" -> " a" + "bc" since
 * "bc" (-5) beats "ab" (-10) and " a" (-6) ... */
static void test_merge_order(void) {
    tok_vocab v;
    build_small(&v);
    int32_t ids[64];
    int n = encode(&v, "abc", 3, 1, ids);
    /* symbols: ' ' a b c. Candidate pairs: " a"(-6), "ab"(-10), "bc"(-5): bc first,
     * then " a"(-6); " abc" is not a piece, so the result is [" a", "bc"]. */
    CHECK(n == 3 && ids[0] == 1 && ids[1] == id_of(&v, " a") && ids[2] == id_of(&v, "bc"),
          "abc -> BOS ' a' 'bc' (got n=%d: %d %d %d)", n, ids[0], n > 1 ? ids[1] : -1, n > 2 ? ids[2] : -1);
    /* Multi-byte characters merge as units: " ét" is a piece. */
    n = encode(&v, "\xC3\xA9t", 3, 0, ids);
    CHECK(n == 1 && ids[0] == id_of(&v, " \xC3\xA9t"), "' ét' is one piece (n=%d)", n);
    /* An unknown character falls back to its UTF-8 bytes. */
    n = encode(&v, "\xE2\x82\xAC", 3, 0, ids); /* euro sign */
    CHECK(n == 4 && ids[0] == id_of(&v, " ") && ids[1] == 3 + 0xE2 && ids[2] == 3 + 0x82 && ids[3] == 3 + 0xAC,
          "euro -> ' ' + 3 byte tokens (n=%d)", n);
    /* Empty text: only BOS, or nothing. */
    CHECK(encode(&v, "", 0, 1, ids) == 1 && ids[0] == 1, "empty text -> BOS");
    CHECK(encode(&v, "", 0, 0, ids) == 0, "empty text without BOS -> nothing");
    /* Too small an output buffer is an error that reports the size needed. */
    int k = 0;
    cx_err err = {0};
    CHECK(tok_encode(&v, "abcabc", 6, 1, ids, 2, &k, &err) == CX_ERANGE && k > 2, "small buffer: %s", err.msg);
    tok_free(&v);
}

/* The dummy prefix is removed after BOS and at the start, and only there. */
static void test_leading_space(void) {
    tok_vocab v;
    build_small(&v);
    int32_t ids[64];
    char out[256];
    int n = encode(&v, "a b", 3, 1, ids);
    size_t k = decode(&v, ids, n, out);
    CHECK(k == 3 && !memcmp(out, "a b", 3), "'a b' round-trips (got '%.*s')", (int)k, out);
    n = encode(&v, " a", 2, 1, ids); /* user's own leading space survives */
    k = decode(&v, ids, n, out);
    CHECK(k == 2 && !memcmp(out, " a", 2), "' a' round-trips (got '%.*s')", (int)k, out);
    char tmp[2];
    const char *p;
    int sp_a = id_of(&v, " a");
    CHECK(tok_piece(&v, 1, sp_a, tmp, &p) == 1 && p[0] == 'a', "' a' after BOS drops the space");
    CHECK(tok_piece(&v, sp_a, sp_a, tmp, &p) == 2, "' a' mid-text keeps the space");
    CHECK(tok_piece(&v, -1, 1, tmp, &p) == 0 && tok_piece(&v, 5, 2, tmp, &p) == 0, "BOS/EOS decode to nothing");
    CHECK(tok_piece(&v, 5, 3 + 0xFF, tmp, &p) == 1 && (uint8_t)p[0] == 0xFF, "byte token gives the raw byte");
    CHECK(tok_piece(&v, 5, 99999, tmp, &p) == 0, "out-of-range id decodes to nothing");
    tok_free(&v);
}

/* The real aidreams vocabulary, when the shared models are here. */
static void test_real_vocab(void) {
    const char *dir = getenv("CORTEX_MODELS");
    char path[1024], gpath[1024];
    snprintf(path, sizeof path, "%s/aidreams-tok512.bin", dir ? dir : "../shared/models");
    snprintf(gpath, sizeof gpath, "%s/aidreams260K.gguf", dir ? dir : "../shared/models");
    FILE *f = fopen(path, "rb");
    if (!f) {
        const char *ci = getenv("CI");
        CHECK(!(ci && !strcmp(ci, "true")), "models missing in CI: %s", path);
        printf("SKIP: %s not found (set CORTEX_MODELS); real-vocabulary checks skipped\n", path);
        return;
    }
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    tok_vocab v;
    cx_err err = {0};
    CHECK(tok_load_llama2c(&v, buf, n, 512, path, &err) == 0, "load: %s", err.msg);
    roundtrip_random(&v, "aidreams tokenizer.bin", 1, 0);
    /* Same vocabulary through the GGUF path gives the same ids. */
    cx_model *m;
    CHECK(cx_model_load(gpath, NULL, &m, &err) == 0, "load gguf: %s", err.msg);
    if (m) {
        const char *s = "Echoes of vectors unfold, a gentle hum.\n\tNaïve 日本 \xff\xfe end ";
        int32_t a[256], b[256];
        int na = encode(&v, s, strlen(s), 1, a), nb = 0;
        CHECK(cx_tokenize(m, s, strlen(s), 1, b, 256, &nb, &err) == 0, "gguf tokenize: %s", err.msg);
        CHECK(na == nb && !memcmp(a, b, sizeof(int32_t) * (size_t)na), "bin and gguf vocabularies agree");
        char out[512];
        size_t k = cx_detokenize(m, b, nb, out, sizeof out);
        CHECK(k == strlen(s) && !strcmp(out, s), "cx_detokenize round-trips");
        cx_model_free(m);
    }
    /* A tokenizer file shorter than the model's vocabulary is an error. */
    CHECK(tok_load_llama2c(&v, buf, n, 513, path, &err) == CX_EFORMAT && strstr(err.msg, "mismatch"),
          "vocab 513 vs 512 pieces: %s", err.msg);
    CHECK(tok_load_llama2c(&v, buf, n, 511, path, &err) == CX_EFORMAT && strstr(err.msg, "does not match"),
          "vocab 511 vs 512 pieces: %s", err.msg);
    tok_free(&v);
}

/* A user-defined token is split out of the text; the dummy prefix goes at
 * the start and after it (as llama.cpp does), and decoding takes it back. */
static void test_user_token(void) {
    const char *pieces[3 + 256 + 2];
    uint32_t lens[3 + 256 + 2];
    uint8_t types[3 + 256 + 2];
    static char bytes[256][7];
    pieces[0] = "<unk>", pieces[1] = "<s>", pieces[2] = "</s>";
    types[0] = TOK_UNKNOWN, types[1] = types[2] = TOK_CONTROL;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        pieces[3 + b] = bytes[b];
        types[3 + b] = TOK_BYTE;
    }
    pieces[259] = " a", types[259] = TOK_NORMAL;
    pieces[260] = "<user>", types[260] = TOK_USER;
    for (int i = 0; i < 261; i++) lens[i] = (uint32_t)strlen(pieces[i]);
    tok_vocab v;
    cx_err err = {0};
    CHECK(tok_build(&v, 261, pieces, lens, NULL, types, 1, 2, 0, &err) == 0, "build: %s", err.msg);
    int32_t ids[16];
    int n = encode(&v, "a<user>a", 8, 1, ids);
    CHECK(n == 4 && ids[0] == 1 && ids[1] == 259 && ids[2] == 260 && ids[3] == 259,
          "BOS, ' a', <user>, ' a' (%d tokens)", n);
    char out[32];
    size_t k = decode(&v, ids, n, out);
    CHECK(k == 8 && !memcmp(out, "a<user>a", 8), "decodes back without the dummy spaces (%zu bytes)", k);
    n = encode(&v, "<user> a", 8, 0, ids);
    k = decode(&v, ids, n, out);
    CHECK(k == 8 && !memcmp(out, "<user> a", 8), "a real space after the token survives (%zu bytes)", k);
    tok_free(&v);
}

TEST_MAIN({
    test_user_token();
    test_merge_order();
    test_leading_space();
    tok_vocab v;
    build_small(&v);
    roundtrip_random(&v, "small vocabulary", 1, 0);
    tok_free(&v);
    test_real_vocab();
})
