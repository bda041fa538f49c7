/*
 * dump_logits.c - run greedy generation (or teacher forcing) and write every
 * step's logits, for tests/test_reference.py to compare with the numpy
 * reference. Format (little-endian): int32 magic 'GLXC' (0x43584C47), int32
 * n_steps, int32 n_vocab, n_steps int32 input tokens, n_steps int32 argmax
 * tokens, n_steps * n_vocab float32 logits.
 *
 * usage: dump_logits MODEL [-z TOKENIZER] -n N -o OUT [--tokens-in DUMP] [-t THREADS] [--isa ISA] [--lora FILE[:SCALE]]...
 * (--isa: the kernel table, as cx_model_params.isa; exit 1 if this CPU lacks it;
 *  --lora: adapters applied as `cortex generate --lora` does, held as f32)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"

#define MAGIC 0x43584C47

static int fail(const char *what) {
    fprintf(stderr, "dump_logits: %s\n", what);
    return 1;
}

int main(int argc, char **argv) {
    const char *model = NULL, *tok = NULL, *out = NULL, *tin = NULL, *isa = NULL;
    int n = 0, threads = 1, n_lora = 0;
    const char *lora[CX_LORA_MAX_SET];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-z") && i + 1 < argc) tok = argv[++i];
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tokens-in") && i + 1 < argc) tin = argv[++i];
        else if (!strcmp(argv[i], "--isa") && i + 1 < argc) isa = argv[++i];
        else if (!strcmp(argv[i], "--lora") && i + 1 < argc && n_lora < CX_LORA_MAX_SET) lora[n_lora++] = argv[++i];
        else if (!model && argv[i][0] != '-') model = argv[i];
        else return fail("usage: dump_logits MODEL [-z TOKENIZER] -n N -o OUT [--tokens-in DUMP] [-t THREADS] [--isa ISA] "
                         "[--lora FILE[:SCALE]]...");
    }
    if (!model || !out || n <= 0) return fail("need MODEL, -n N > 0 and -o OUT");
    cx_err err = {0};
    cx_model *m;
    cx_session *s;
    cx_model_params mp = cx_model_defaults();
    mp.isa = isa;
    if (cx_model_load_ex(model, tok, &mp, &m, &err) || cx_session_new(m, n, threads, &s, &err)) return fail(err.msg);
    cx_lora_use uses[CX_LORA_MAX_SET];
    for (int i = 0; i < n_lora; i++) { /* FILE[:SCALE]: the scale after the last ':' */
        char path[1024];
        snprintf(path, sizeof path, "%s", lora[i]);
        char *colon = strrchr(path, ':');
        uses[i].scale = colon ? (float)atof(colon + 1) : 1.0f;
        if (colon) *colon = 0;
        cx_lora_params lp = cx_lora_defaults();
        lp.type = CX_TYPE_F32;
        cx_lora *a;
        if (cx_lora_load(m, path, &lp, &a, &err)) return fail(err.msg);
        uses[i].lora = a; /* freed after the session */
    }
    if (n_lora && cx_session_set_lora(s, uses, n_lora, &err)) return fail(err.msg);
    int V = cx_model_get_info(m)->n_vocab;
    if (n > cx_session_n_ctx(s)) n = cx_session_n_ctx(s);
    int32_t *in = calloc((size_t)n, 4), *next = calloc((size_t)n, 4);
    float *logits = malloc(sizeof(float) * (size_t)n * (size_t)V);
    if (!in || !next || !logits) return fail("out of memory");
    if (tin) { /* teacher forcing: take the input tokens of another dump */
        FILE *f = fopen(tin, "rb");
        int32_t hdr[3];
        if (!f || fread(hdr, 4, 3, f) != 3 || hdr[0] != MAGIC) return fail("cannot read --tokens-in dump");
        if (hdr[1] < n) n = hdr[1];
        if (fread(in, 4, (size_t)n, f) != (size_t)n) return fail("short --tokens-in dump");
        fclose(f);
    } else {
        in[0] = cx_token_bos(m);
    }
    for (int i = 0; i < n; i++) {
        const float *l;
        if (cx_eval(s, &in[i], 1, &l, &err)) return fail(err.msg);
        memcpy(logits + (size_t)i * V, l, sizeof(float) * (size_t)V);
        int best = 0;
        for (int v = 1; v < V; v++)
            if (l[v] > l[best]) best = v;
        next[i] = best;
        if (!tin && i + 1 < n) in[i + 1] = best;
    }
    FILE *f = fopen(out, "wb");
    int32_t hdr[3] = {MAGIC, n, V};
    if (!f || fwrite(hdr, 4, 3, f) != 3 || fwrite(in, 4, (size_t)n, f) != (size_t)n ||
        fwrite(next, 4, (size_t)n, f) != (size_t)n || fwrite(logits, 4, (size_t)n * V, f) != (size_t)n * V ||
        fclose(f) != 0)
        return fail("cannot write output");
    free(in);
    free(next);
    free(logits);
    cx_session_free(s);
    for (int i = 0; i < n_lora; i++) cx_lora_free((cx_lora *)uses[i].lora); /* after the session that applied them */
    cx_model_free(m);
    return 0;
}
