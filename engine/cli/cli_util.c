/*
 * cli_util.c - the helpers every `cortex` command shares (cli_util.h).
 */
#include "cli_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cortex_env.h"

/* See cli_util.h. */
double cli_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* See cli_util.h. */
char *cli_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (n < cap) break;
        char *nb = realloc(buf, cap *= 2);
        if (!nb) { free(buf); buf = NULL; }
        else buf = nb;
    }
    fclose(f);
    *len = n;
    return buf;
}

/* See cli_util.h. */
char *cli_load_prompt(const opts *o, size_t *len) {
    if (o->prompt && o->prompt_file) { die("give -p or -f, not both"); return NULL; }
    if (o->prompt_file) {
        char *p = cli_read_file(o->prompt_file, len);
        if (!p) die("%s: cannot read prompt file: %s", o->prompt_file, strerror(errno));
        return p;
    }
    if (!o->prompt) { die("no prompt: give -p TEXT or -f FILE"); return NULL; }
    *len = strlen(o->prompt);
    return strdup(o->prompt);
}

/* Load a model with the parameters the environment asks for (cortex_env.h:
 * CORTEX_WEIGHTS, CORTEX_REPACK, CORTEX_ISA), with -z for a llama2.c
 * checkpoint; NULL after printing why. */
cx_model *cli_load_model(const opts *o, const char *path) {
    cx_model *m;
    cx_err err = {0};
    cx_model_params mp;
    if (!path) { die("no model: give -m MODEL"); return NULL; }
    if (cx_model_params_from_env(&mp, &err) || cx_model_load_ex(path, o->tokenizer, &mp, &m, &err)) {
        die("%s", err.msg);
        return NULL;
    }
    return m;
}

/* See cli_util.h. */
int32_t *cli_encode(const cx_model *m, const char *text, size_t len, int flags, int *n) {
    cx_err err = {0};
    int cap = (int)(len + 2 < 1u << 28 ? len + 2 : 1u << 28);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)cap);
    if (!ids || cx_tokenize(m, text, len, flags, ids, cap, n, &err)) {
        die("tokenize: %s", ids ? err.msg : "out of memory");
        free(ids);
        return NULL;
    }
    return ids;
}
