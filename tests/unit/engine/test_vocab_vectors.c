/*
 * test_vocab_vectors.c - llama.cpp's own tokenizer test vectors: every
 * NAME.gguf in ../shared/vocab (CORTEX_VOCAB overrides the folder) is loaded
 * vocabulary-only, and each string of NAME.gguf.inp must encode (no BOS, no
 * control-token parsing: what llama.cpp's test-tokenizer-0 does) to exactly
 * the ids of its NAME.gguf.out line, and decode back to itself. A missing
 * folder skips with a message, but fails under CI=true.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"
#include "testing.h"

/* Read a whole file; NULL if it cannot be read. */
static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    if (buf) buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

/* Check one vocabulary's vectors; returns the number of strings checked. */
static int check_vocab(const char *dir, const char *name) {
    char path[1024], inp[1100], outp[1100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(inp, sizeof inp, "%s.inp", path);
    snprintf(outp, sizeof outp, "%s.out", path);
    size_t ni, no;
    char *in = slurp(inp, &ni), *out = slurp(outp, &no);
    cx_model *m = NULL;
    cx_err err = {0};
    int rc = cx_model_load(path, NULL, &m, &err);
    CHECK(rc == 0 && in && out, "%s: load: %s (vectors %s)", name, err.msg, in && out ? "present" : "missing");
    if (rc || !in || !out) { free(in); free(out); cx_model_free(m); return 0; }
    CHECK(cx_model_get_info(m)->vocab_only, "%s loads vocabulary-only", name);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *s = in, *line = out;
    int count = 0, bad = 0;
    int32_t *ids = malloc(sizeof(int32_t) * (ni + 16));
    char *dec = malloc(ni * 2 + 16);
    char *end = in + ni; /* strings are separated (and the file may end) by sep, as test-tokenizer-0 reads them */
    while (s && s < end && *line) {
        char *next = strstr(s, sep);
        size_t len = next ? (size_t)(next - s) : strlen(s);
        char *eol = strchr(line, '\n');
        if (eol) *eol = 0;
        int n = 0;
        rc = cx_tokenize(m, s, len, 0, ids, (int)ni + 16, &n, &err);
        char got[16384] = "";
        size_t gl = 0;
        for (int i = 0; i < n && gl + 16 < sizeof got; i++) gl += (size_t)snprintf(got + gl, sizeof got - gl, i ? " %d" : "%d", ids[i]);
        const char *want = line;
        while (*want == ' ') want++;
        char trimmed[16384];
        snprintf(trimmed, sizeof trimmed, "%s", want);
        for (size_t k = strlen(trimmed); k > 0 && (trimmed[k - 1] == ' ' || trimmed[k - 1] == '\r'); k--) trimmed[k - 1] = 0;
        int ok = rc == 0 && !strcmp(got, trimmed);
        if (!ok && bad++ < 5)
            fprintf(stderr, "%s: string %d '%.*s':\n  want %s\n  got  %s\n", name, count, (int)(len > 60 ? 60 : len), s,
                    trimmed, got);
        CHECK(ok, "%s: string %d matches llama.cpp", name, count);
        size_t dl = cx_detokenize(m, ids, n, dec, ni * 2 + 16);
        CHECK(dl == len && !memcmp(dec, s, len), "%s: string %d decodes back (%zu vs %zu bytes)", name, count, dl, len);
        count++;
        s = next ? next + sizeof sep - 1 : NULL;
        line = eol ? eol + 1 : line + strlen(line);
    }
    CHECK((!s || s >= end) && !*line, "%s: as many strings as id lines", name);
    printf("%s: %d strings, %d mismatched\n", name, count, bad);
    free(ids);
    free(dec);
    free(in);
    free(out);
    cx_model_free(m);
    return count;
}

TEST_MAIN({
    const char *dir = getenv("CORTEX_VOCAB") ? getenv("CORTEX_VOCAB") : "../shared/vocab";
    DIR *d = opendir(dir);
    if (!d) {
        const char *ci = getenv("CI");
        if (ci && !strcmp(ci, "true")) CHECK(0, "%s is missing in CI", dir);
        else TEST_SKIP_ALL("%s is missing: no tokenizer vectors to check", dir);
    } else {
        int files = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t l = strlen(e->d_name);
            if (l > 5 && !strcmp(e->d_name + l - 5, ".gguf")) files += check_vocab(dir, e->d_name) > 0;
        }
        closedir(d);
        CHECK(files >= 3, "%d vocabularies checked", files);
    }
})
