/*
 * tok_bench.c - tokenizer throughput: encode a text with a model's (or a
 * vocabulary-only file's) tokenizer over and over for about SECONDS seconds
 * and print MB/s of text and tokens/s. TEXT is one file encoded whole, or,
 * with --each, NUL-separated pieces encoded one call each (the standard
 * prompts: per-call costs show). docs/performance.md quotes its output.
 *
 *   build/tests/tok_bench VOCAB.gguf TEXT [--each] [SECONDS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cortex.h"

/* Monotonic seconds. */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s VOCAB.gguf TEXT [--each] [SECONDS]\n", argv[0]);
        return 2;
    }
    int each = argc > 3 && !strcmp(argv[3], "--each");
    double secs = argc > 3 + each ? atof(argv[3 + each]) : 2.0;
    FILE *f = fopen(argv[2], "rb");
    if (!f) { fprintf(stderr, "tok_bench: %s: cannot open\n", argv[2]); return 1; }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    if (!text || fread(text, 1, (size_t)n, f) != (size_t)n) { fprintf(stderr, "tok_bench: read failed\n"); return 1; }
    fclose(f);
    text[n] = 0;
    cx_model *m;
    cx_err err = {0};
    if (cx_model_load(argv[1], NULL, &m, &err)) { fprintf(stderr, "tok_bench: %s\n", err.msg); return 1; }
    int cap = (int)n + 16;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)cap);
    long long bytes = 0, tokens = 0, calls = 0;
    double t0 = now_s(), t;
    do {
        for (long at = 0; at < n;) {
            long len = each ? (long)strlen(text + at) : n - at;
            int k = 0;
            if (cx_tokenize(m, text + at, (size_t)len, CX_TOKENIZE_SPECIAL, ids, cap, &k, &err)) {
                fprintf(stderr, "tok_bench: %s\n", err.msg);
                return 1;
            }
            bytes += len;
            tokens += k;
            calls++;
            at += len + (each ? 1 : 0);
        }
        t = now_s() - t0;
    } while (t < secs);
    const cx_model_info *i = cx_model_get_info(m);
    printf("%s (%s%s%s): %s, %ld bytes%s: %.2f MB/s, %.0f tokens/s, %.2f bytes/token, %.1f us/call\n", argv[1],
           i->tokenizer, i->tokenizer_pre ? " " : "", i->tokenizer_pre ? i->tokenizer_pre : "", argv[2], n,
           each ? " in NUL-separated pieces" : "", (double)bytes / t / 1e6, (double)tokens / t,
           (double)bytes / (double)tokens, t / (double)calls * 1e6);
    free(ids);
    free(text);
    cx_model_free(m);
    return 0;
}
