/*
 * test_bpe.c - byte-level BPE: GPT-2's byte mapping, ranked merges, the
 * pre-tokenizers (every name compiles, words cover the text, the splits that
 * tell them apart), ignore_merges, malformed vocabularies refused with one
 * clear error, and decode(encode(x)) == x for random text on a hand-built
 * vocabulary and on the real ../shared/vocab ones when present.
 */
#include <stdlib.h>
#include <string.h>

#include "cortex.h"
#include "gguf_write.h"
#include "model.h"
#include "testing.h"
#include "tok_roundtrip.h"
#include "tokenizer.h"

/* GPT-2's mapped form of byte b, as UTF-8 into out (NUL-terminated). */
static void map_byte(int b, char out[3]) {
    int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    int cp = b;
    if (!printable) {
        cp = 256;
        for (int x = 0; x < b; x++)
            if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) cp++;
    }
    if (cp < 0x80) { out[0] = (char)cp; out[1] = 0; }
    else { out[0] = (char)(0xC0 | cp >> 6); out[1] = (char)(0x80 | (cp & 63)); out[2] = 0; }
}

/* A small BPE vocabulary: the 256 byte tokens, then merged pieces, with the
 * merges that build them; `pre` names the pre-tokenizer. */
static int build_small(tok_vocab *v, const char *pre, const char *const *merges, int nm, cx_err *err) {
    static const char *extra[] = {"\xC4\xA0t", "he", "\xC4\xA0the", "ab", "abc", "<|end|>"};
    enum { NX = sizeof extra / sizeof extra[0], N = 256 + NX };
    static char bytes[256][3];
    const char *pieces[N];
    uint32_t lens[N], mlens[16];
    uint8_t types[N];
    for (int b = 0; b < 256; b++) {
        map_byte(b, bytes[b]);
        pieces[b] = bytes[b];
        types[b] = TOK_NORMAL;
    }
    for (int i = 0; i < NX; i++) {
        pieces[256 + i] = extra[i];
        types[256 + i] = i == NX - 1 ? TOK_CONTROL : TOK_NORMAL;
    }
    for (int i = 0; i < N; i++) lens[i] = (uint32_t)strlen(pieces[i]);
    for (int i = 0; i < nm; i++) mlens[i] = (uint32_t)strlen(merges[i]);
    return tok_build_bpe(v, N, pieces, lens, types, nm, merges, mlens, pre, strlen(pre), -1, N - 1, err);
}

static const char *MERGES[] = {"\xC4\xA0 t", "h e", "\xC4\xA0t he", "a b"};

/* Encode s with flags; returns the count (ids in out). */
static int enc(const tok_vocab *v, const char *s, int flags, int32_t *out) {
    int n = 0;
    cx_err err = {0};
    int rc = tok_encode(v, s, strlen(s), flags, out, 256, &n, &err);
    CHECK(rc == 0, "encode '%s': %s", s, err.msg);
    return n;
}

static void test_mapping(void) {
    char m[3], out[4];
    int ok = 1;
    for (int b = 0; b < 256; b++) {
        map_byte(b, m);
        int64_t k = tok_bpe_unmap(m, strlen(m), out);
        ok &= k == 1 && (uint8_t)out[0] == b;
    }
    CHECK(ok, "every byte's mapped character unmaps to the byte");
    CHECK(tok_bpe_unmap("\xC4\xA0", 2, out) == 1 && out[0] == ' ', "U+0120 is the space");
    CHECK(tok_bpe_unmap("\xE4\xB8\x80", 3, out) == -1, "a character outside the mapping is refused");
    CHECK(tok_bpe_unmap(" ", 1, out) == -1, "a plain space is not a mapped character");
}

static void test_merges(void) {
    tok_vocab v;
    cx_err err = {0};
    CHECK(build_small(&v, "gpt-2", MERGES, 4, &err) == 0, "build: %s", err.msg);
    int32_t ids[256];
    int n = enc(&v, " the", 0, ids);
    CHECK(n == 1 && ids[0] == 256 + 2, "' the' merges to one token by rank (%d tokens)", n);
    n = enc(&v, "abc", 0, ids);
    CHECK(n == 2 && ids[0] == 256 + 3 && ids[1] == 'c', "gpt-2 merges 'abc' to 'ab' + 'c' (%d tokens)", n);
    n = enc(&v, "x<|end|>y", TOK_PARSE_SPECIAL, ids);
    CHECK(n == 3 && ids[1] == 256 + 5, "a control token is split out when asked");
    n = enc(&v, "x<|end|>y", 0, ids);
    CHECK(n > 3, "and kept as text otherwise (%d tokens)", n);
    char many[256] = "";
    for (int i = 0; i < 25; i++) strcat(many, "x<|end|>"); /* more fragments than the first allocation */
    n = enc(&v, many, TOK_PARSE_SPECIAL, ids);
    int alternate = n == 50;
    for (int i = 0; i < n && alternate; i++) alternate = ids[i] == (i % 2 ? 256 + 5 : 'x');
    CHECK(alternate, "25 control tokens among text: 50 alternating ids (%d)", n);
    roundtrip_random(&v, "small BPE vocabulary", TOK_PARSE_SPECIAL, 0);
    tok_free(&v);
    /* Llama 3 takes a word that is a whole token as is (ignore_merges). */
    CHECK(build_small(&v, "llama-bpe", MERGES, 4, &err) == 0, "build llama-bpe: %s", err.msg);
    n = enc(&v, "abc", 0, ids);
    CHECK(n == 1 && ids[0] == 256 + 4, "llama-bpe: 'abc' is one token though no merge forms it (%d tokens)", n);
    tok_free(&v);
}

static void test_malformed(void) {
    tok_vocab v;
    cx_err err = {0};
    const char *bad1[] = {"abc"};
    CHECK(build_small(&v, "gpt-2", bad1, 1, &err) == CX_EFORMAT && strstr(err.msg, "merge 0 'abc' is not two pieces"),
          "merge without a space: %s", err.msg);
    const char *bad2[] = {"a \xE4\xB8\x80"};
    CHECK(build_small(&v, "gpt-2", bad2, 1, &err) == CX_EFORMAT && strstr(err.msg, "outside GPT-2's byte mapping"),
          "merge with an unmapped character: %s", err.msg);
    CHECK(build_small(&v, "klingon", MERGES, 4, &err) == CX_EUNSUP &&
              strstr(err.msg, "pre-tokenizer 'klingon' (tokenizer.ggml.pre) is not supported"),
          "unknown pre-tokenizer: %s", err.msg);
}

/* The words of s under pre-tokenizer `name`, joined by '|'. */
static void words(const char *name, const char *s, char *out, size_t cap) {
    tok_pre *p;
    int im, ab;
    cx_err err = {0};
    out[0] = 0;
    if (tok_pre_new(name, strlen(name), &p, &im, &ab, &err)) { CHECK(0, "%s: %s", name, err.msg); return; }
    tok_span *w;
    int n;
    CHECK(tok_pre_split(p, s, strlen(s), &w, &n, &err) == 0, "%s split: %s", name, err.msg);
    size_t o = 0;
    for (int i = 0; i < n && o + w[i].len + 2 < cap; i++) {
        if (i) out[o++] = '|';
        memcpy(out + o, s + w[i].start, w[i].len);
        o += w[i].len;
    }
    out[o] = 0;
    free(w);
    tok_pre_free(p);
}

static void test_pre(void) {
    const char *text = "Hello, World! it's 12345 \xe4\xbd\xa0\xe5\xa5\xbd\r\n\n  x\xff\xfe  ";
    int all_ok = 1, count = 0;
    const char *name;
    for (int k = 0; (name = tok_pre_name_at(k)); k++, count++) {
        const char *const *nm = &name;
        tok_pre *p;
        int im, ab;
        cx_err err = {0};
        if (tok_pre_new(*nm, strlen(*nm), &p, &im, &ab, &err)) { CHECK(0, "%s: %s", *nm, err.msg); continue; }
        tok_span *w;
        int n;
        uint32_t at = 0;
        if (tok_pre_split(p, text, strlen(text), &w, &n, &err) == 0) {
            for (int i = 0; i < n; i++) {
                all_ok &= w[i].start == at && w[i].len > 0;
                at += w[i].len;
            }
            free(w);
        } else {
            all_ok = 0;
        }
        all_ok &= at == strlen(text);
        tok_pre_free(p);
    }
    CHECK(all_ok && count >= 11, "all %d pre-tokenizer names compile and their words tile the text", count);
    char buf[512];
    words("gpt-2", "Hello, world! it's  12345", buf, sizeof buf);
    CHECK(!strcmp(buf, "Hello|,| world|!| it|'s| | 12345"), "gpt-2: %s", buf);
    words("llama-bpe", "Hello, world! it's  12345", buf, sizeof buf);
    CHECK(!strcmp(buf, "Hello|,| world|!| it|'s| | |123|45"), "llama-bpe: %s", buf);
    words("qwen2", "ab 123", buf, sizeof buf);
    CHECK(!strcmp(buf, "ab| |1|2|3"), "qwen2: %s", buf);
    words("starcoder", "x 42", buf, sizeof buf);
    CHECK(!strcmp(buf, "x| |4|2"), "starcoder: %s", buf);
    words("gpt-4o", "HelloWorld can't", buf, sizeof buf);
    CHECK(!strcmp(buf, "Hello|World| can't"), "gpt-4o: %s", buf);
    words("deepseek-coder", "a\r\nb", buf, sizeof buf);
    CHECK(!strcmp(buf, "a|\r|\n|b"), "deepseek-coder: %s", buf);
    words("", "a+b", buf, sizeof buf);
    CHECK(!strcmp(buf, "a|+|b"), "no name is 'default': %s", buf);
}

/* The real vocabularies: random text round-trips. */
static void test_real(void) {
    const char *dir = getenv("CORTEX_VOCAB") ? getenv("CORTEX_VOCAB") : "../shared/vocab";
    static const char *names[] = {"ggml-vocab-gpt-2.gguf", "ggml-vocab-starcoder.gguf"};
    for (int i = 0; i < 2; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        cx_model *m;
        cx_err err = {0};
        if (cx_model_load(path, NULL, &m, &err)) {
            const char *ci = getenv("CI");
            CHECK(!(ci && !strcmp(ci, "true")), "vocabulary missing in CI: %s", err.msg);
            printf("SKIP: %s\n", err.msg);
            continue;
        }
        roundtrip_random(&m->vocab, names[i], TOK_ADD_BOS | TOK_PARSE_SPECIAL, 1);
        cx_model_free(m);
    }
}

/* A vocabulary-only GGUF written here (no shared files needed): the BPE
 * loader's defaults, EOT found by its text, end of generation, BOS policy. */
static void test_gguf_vocab(void) {
    const char *path = "/tmp/cortex-test-bpe-vocab.gguf";
    static char bytes[256][3];
    const char *tokens[258];
    int32_t types[258];
    for (int b = 0; b < 256; b++) {
        map_byte(b, bytes[b]);
        tokens[b] = bytes[b];
        types[b] = TOK_NORMAL;
    }
    tokens[256] = "<|endoftext|>", types[256] = TOK_CONTROL;
    tokens[257] = "<|im_end|>", types[257] = TOK_CONTROL;
    const char *merges[] = {"a b"};
    gguf_writer *w = gguf_writer_new(0);
    gguf_w_str(w, "general.architecture", "qwen2");
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "qwen2");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", tokens, 258);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, 258);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, 1);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 256);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 256);
    FILE *f = fopen(path, "wb");
    cx_err err = {0};
    CHECK(f && gguf_w_header(w, f, path, NULL, &err) == 0, "write %s: %s", path, err.msg);
    if (f) fclose(f);
    gguf_writer_free(w);
    cx_model *m;
    if (cx_model_load(path, NULL, &m, &err)) {
        CHECK(0, "load: %s", err.msg);
        return;
    }
    CHECK(cx_token_eot(m) == 257 && cx_token_is_eog(m, 257) && cx_token_is_eog(m, 256) && !cx_token_is_eog(m, 'a'),
          "EOT is <|im_end|> by its text; EOS and EOT end generation (eot %d)", cx_token_eot(m));
    int32_t ids[16];
    int n = 0;
    CHECK(cx_tokenize(m, "a<|im_end|>", 11, CX_TOKENIZE_BOS | CX_TOKENIZE_SPECIAL, ids, 16, &n, &err) == 0 && n == 2 &&
              ids[0] == 'a' && ids[1] == 257,
          "qwen2: no BOS by default, control token parsed (%d tokens)", n);
    cx_model_free(m);
    remove(path);
}

TEST_MAIN({
    test_gguf_vocab();
    test_mapping();
    test_merges();
    test_malformed();
    test_pre();
    test_real();
})
