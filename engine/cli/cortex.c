/*
 * cortex.c - the `cortex` command: generate, info, synth, tokenize.
 *
 * A thin shell over the public API: parse flags, call the engine, print.
 * Errors print one line "cortex: <what>: <problem>" and exit 1 (2 for usage).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cortex.h"

static int usage(void) {
    fprintf(stderr,
            "usage: cortex <command> [options]\n"
            "  generate -m MODEL [-z TOKENIZER] (-p PROMPT | -f PROMPT_FILE) [-n N] [--temp T] [--top-k K]\n"
            "           [--top-p P] [--min-p P] [--repeat-penalty R] [--repeat-last-n N] [--seed S]\n"
            "           [-t THREADS] [-c CTX] [--no-echo]\n"
            "  info MODEL [-z TOKENIZER]\n"
            "  synth --shape NAME --type f32|f16|q8_0|q4_0 -o FILE.gguf [--seed S] [-c CTX]   (synth --list: shapes)\n"
            "  tokenize -m MODEL [-z TOKENIZER] (-p TEXT | -f FILE) [--no-bos]\n");
    return 2;
}

static int die(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "cortex: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Parse a whole-string number; report the flag on failure. */
static int parse_long(const char *flag, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "cortex: %s: '%s' is not an integer in [%ld, %ld]\n", flag, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_float(const char *flag, const char *s, double lo, double hi, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "cortex: %s: '%s' is not a number in [%g, %g]\n", flag, s, lo, hi);
        return -1;
    }
    *out = (float)v;
    return 0;
}

/* Read a whole file into a malloc'd buffer. */
static char *read_file(const char *path, size_t *len) {
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

typedef struct opts {
    const char *model, *tokenizer, *prompt, *prompt_file, *out, *shape, *type;
    long n_predict, threads, ctx, seed;
    int no_bos, no_echo, list;
    cx_sampler_params sp;
} opts;

/* Parse the flags shared by all subcommands; returns 0, or an exit code. */
static int parse_opts(int argc, char **argv, opts *o, const char **positional) {
    o->n_predict = 128;
    o->threads = 1;
    o->sp = cx_sampler_defaults();
    o->seed = -1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 1;
        long n;
        if (!strcmp(a, "--no-bos")) { o->no_bos = 1; takes = 0; }
        else if (!strcmp(a, "--no-echo")) { o->no_echo = 1; takes = 0; }
        else if (!strcmp(a, "--list")) { o->list = 1; takes = 0; }
        else if (a[0] != '-') {
            if (*positional) { fprintf(stderr, "cortex: unexpected argument '%s'\n", a); return 2; }
            *positional = a;
            takes = 0;
        } else if (!v) { fprintf(stderr, "cortex: %s needs a value\n", a); return 2; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "-z") || !strcmp(a, "--tokenizer")) o->tokenizer = v;
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) o->prompt = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--prompt-file")) o->prompt_file = v;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) o->out = v;
        else if (!strcmp(a, "--shape")) o->shape = v;
        else if (!strcmp(a, "--type")) o->type = v;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) { if (parse_long(a, v, 0, 1 << 24, &o->n_predict)) return 2; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (parse_long(a, v, 1, 256, &o->threads)) return 2; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) { if (parse_long(a, v, 1, 1 << 24, &o->ctx)) return 2; }
        else if (!strcmp(a, "--seed")) { if (parse_long(a, v, 0, 0x7fffffffL, &o->seed)) return 2; }
        else if (!strcmp(a, "--temp")) { if (parse_float(a, v, 0, 100, &o->sp.temperature)) return 2; }
        else if (!strcmp(a, "--top-k")) { if (parse_long(a, v, 0, 1 << 24, &n)) return 2; o->sp.top_k = (int)n; }
        else if (!strcmp(a, "--top-p")) { if (parse_float(a, v, 0, 1, &o->sp.top_p)) return 2; }
        else if (!strcmp(a, "--min-p")) { if (parse_float(a, v, 0, 1, &o->sp.min_p)) return 2; }
        else if (!strcmp(a, "--repeat-penalty")) { if (parse_float(a, v, 0.01, 100, &o->sp.repeat_penalty)) return 2; }
        else if (!strcmp(a, "--repeat-last-n")) { if (parse_long(a, v, 0, 1 << 20, &n)) return 2; o->sp.repeat_last_n = (int)n; }
        else { fprintf(stderr, "cortex: unknown option '%s'\n", a); return 2; }
        i += takes;
    }
    if (o->seed >= 0) o->sp.seed = (uint64_t)o->seed;
    return 0;
}

/* The prompt bytes from -p or -f; NULL (after printing why) if neither works. */
static char *load_prompt(const opts *o, size_t *len) {
    if (o->prompt && o->prompt_file) { fprintf(stderr, "cortex: give -p or -f, not both\n"); return NULL; }
    if (o->prompt_file) {
        char *p = read_file(o->prompt_file, len);
        if (!p) fprintf(stderr, "cortex: %s: cannot read prompt file: %s\n", o->prompt_file, strerror(errno));
        return p;
    }
    if (!o->prompt) { fprintf(stderr, "cortex: no prompt: give -p TEXT or -f FILE\n"); return NULL; }
    *len = strlen(o->prompt);
    return strdup(o->prompt);
}

static cx_model *load_model(const opts *o, const char *path) {
    cx_model *m;
    cx_err err = {0};
    if (!path) { fprintf(stderr, "cortex: no model: give -m MODEL\n"); return NULL; }
    if (cx_model_load(path, o->tokenizer, &m, &err)) {
        fprintf(stderr, "cortex: %s\n", err.msg);
        return NULL;
    }
    return m;
}

/* Encode text with BOS; returns a malloc'd id array or NULL after an error. */
static int32_t *encode(const cx_model *m, const char *text, size_t len, int add_bos, int *n) {
    cx_err err = {0};
    int cap = (int)(len + 2 < 1u << 28 ? len + 2 : 1u << 28);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)cap);
    if (!ids || cx_tokenize(m, text, len, add_bos, ids, cap, n, &err)) {
        fprintf(stderr, "cortex: tokenize: %s\n", ids ? err.msg : "out of memory");
        free(ids);
        return NULL;
    }
    return ids;
}

static int cmd_generate(opts *o) {
    size_t len = 0;
    char *text = load_prompt(o, &len);
    if (!text) return 1;
    if (len == 0) {
        free(text);
        return die("empty prompt: give some text with -p or -f%s%s", "", "");
    }
    cx_model *m = load_model(o, o->model);
    if (!m) { free(text); return 1; }
    const cx_model_info *mi = cx_model_get_info(m);
    cx_session *s = NULL;
    cx_sampler *smp = NULL;
    cx_err err = {0};
    int rc = 1, n_prompt = 0;
    double t0 = now_s();
    int32_t *ids = encode(m, text, len, 1, &n_prompt);
    if (!ids) goto out;
    if (cx_session_new(m, (int)o->ctx, (int)o->threads, &s, &err) || cx_sampler_new(mi->n_vocab, &o->sp, &smp, &err)) {
        fprintf(stderr, "cortex: %s\n", err.msg);
        goto out;
    }
    if (n_prompt >= cx_session_n_ctx(s)) {
        fprintf(stderr, "cortex: prompt is %d tokens, the context holds %d (use -c up to the model's %d)\n", n_prompt,
                cx_session_n_ctx(s), mi->n_ctx);
        goto out;
    }
    for (int i = 0; i < n_prompt; i++) cx_sampler_accept(smp, ids[i]);
    if (!o->no_echo) { /* like llama.cpp: the prompt, then what the model adds */
        fwrite(text, 1, len, stdout);
        fflush(stdout);
    }
    const float *logits;
    double t_start = now_s();
    if (cx_eval(s, ids, n_prompt, &logits, &err)) { fprintf(stderr, "cortex: %s\n", err.msg); goto out; }
    double t_prefill = now_s();
    int prev = ids[n_prompt - 1], n_gen = 0;
    double t_first = 0;
    for (; n_gen < o->n_predict; n_gen++) {
        int tok = cx_sampler_sample(smp, logits);
        if (n_gen == 0) t_first = now_s();
        if (tok == cx_token_eos(m)) break;
        char tmp[2];
        const char *piece;
        size_t k = cx_token_piece(m, prev, tok, tmp, &piece);
        fwrite(piece, 1, k, stdout);
        fflush(stdout);
        cx_sampler_accept(smp, tok);
        prev = tok;
        if (cx_session_pos(s) >= cx_session_n_ctx(s)) { n_gen++; fprintf(stderr, "\n[context full]"); break; }
        if (cx_eval(s, &tok, 1, &logits, &err)) { fprintf(stderr, "cortex: %s\n", err.msg); goto out; }
    }
    double t_end = now_s();
    printf("\n");
    fflush(stdout); /* keep the text ahead of the statistics on a shared terminal */
    double decode_s = t_end - t_first;
    fprintf(stderr, "prompt tokens: %d, generated tokens: %d\n", n_prompt, n_gen);
    fprintf(stderr, "time to first token: %.2f ms (tokenize + prefill + sample)\n", (t_first ? t_first - t0 : 0) * 1e3);
    fprintf(stderr, "prefill: %.2f tokens/s (%d tokens in %.2f ms)\n", n_prompt / (t_prefill - t_start), n_prompt,
            (t_prefill - t_start) * 1e3);
    if (n_gen > 1)
        fprintf(stderr, "decode: %.2f tokens/s (%d tokens in %.2f ms)\n", (n_gen - 1) / decode_s, n_gen - 1, decode_s * 1e3);
    rc = 0;
out:
    free(text);
    free(ids);
    cx_sampler_free(smp);
    cx_session_free(s);
    cx_model_free(m);
    return rc;
}

static int cmd_tokenize(opts *o) {
    size_t len = 0;
    char *text = load_prompt(o, &len);
    if (!text) return 1;
    cx_model *m = load_model(o, o->model);
    int n = 0, rc = 1;
    int32_t *ids = m ? encode(m, text, len, !o->no_bos, &n) : NULL;
    if (ids) {
        for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
        rc = 0;
    }
    free(ids);
    free(text);
    cx_model_free(m);
    return rc;
}

static void human_bytes(uint64_t b, char *out, size_t cap) {
    if (b >= (1ull << 30)) snprintf(out, cap, "%.2f GiB", (double)b / (1ull << 30));
    else if (b >= (1ull << 20)) snprintf(out, cap, "%.2f MiB", (double)b / (1ull << 20));
    else snprintf(out, cap, "%.2f KiB", (double)b / 1024.0);
}

static int cmd_info(opts *o, const char *path) {
    cx_model *m = load_model(o, path ? path : o->model);
    if (!m) return 1;
    const cx_model_info *i = cx_model_get_info(m);
    char wb[32], fb[32];
    human_bytes(i->weight_bytes, wb, sizeof wb);
    human_bytes(i->file_bytes, fb, sizeof fb);
    printf("file:           %s\n", path ? path : o->model);
    printf("format:         %s", i->format);
    if (i->format_version) printf(" v%u", i->format_version);
    printf("\nname:           %s\n", i->name);
    printf("architecture:   llama\n");
    printf("n_embd:         %d\nn_ff:           %d\nn_layer:        %d\n", i->n_embd, i->n_ff, i->n_layer);
    printf("n_head:         %d\nn_head_kv:      %d\nhead_dim:       %d\n", i->n_head, i->n_head_kv, i->head_dim);
    printf("n_vocab:        %d\nn_ctx:          %d\n", i->n_vocab, i->n_ctx);
    printf("rope_base:      %g\nrms_eps:        %g\n", i->rope_base, i->rms_eps);
    printf("output:         %s\n", i->tied_output ? "tied to token_embd" : "separate output.weight");
    printf("main type:      %s\n", cx_type_name(i->main_type));
    printf("parameters:     %llu\n", (unsigned long long)i->n_params);
    printf("weight bytes:   %llu (%s)\nfile bytes:     %llu (%s)\n", (unsigned long long)i->weight_bytes, wb,
           (unsigned long long)i->file_bytes, fb);
    printf("tensors:        %d\n", i->n_tensors);
    int count[32] = {0};
    uint64_t bytes[32] = {0};
    for (int k = 0; k < i->n_tensors; k++) {
        cx_tensor_info t;
        cx_model_tensor(m, k, &t);
        if (t.type >= 0 && t.type < 32) { count[t.type]++; bytes[t.type] += t.nbytes; }
    }
    for (int t = 0; t < 32; t++)
        if (count[t]) printf("  %-6s %4d tensors, %llu bytes\n", cx_type_name(t), count[t], (unsigned long long)bytes[t]);
    printf("%-32s %-5s %-22s %14s %12s\n", "tensor", "type", "shape", "offset", "bytes");
    for (int k = 0; k < i->n_tensors; k++) {
        cx_tensor_info t;
        cx_model_tensor(m, k, &t);
        char shape[64];
        int w = snprintf(shape, sizeof shape, "[%lld", (long long)t.ne[0]);
        for (int d = 1; d < t.n_dims; d++) w += snprintf(shape + w, sizeof shape - (size_t)w, ", %lld", (long long)t.ne[d]);
        snprintf(shape + w, sizeof shape - (size_t)w, "]");
        printf("%-32s %-5s %-22s %14llu %12llu\n", t.name, cx_type_name(t.type), shape, (unsigned long long)t.offset,
               (unsigned long long)t.nbytes);
    }
    cx_model_free(m);
    return 0;
}

static int cmd_synth(opts *o) {
    if (o->list) {
        printf("%-16s %6s %6s %6s %6s %6s %7s %7s\n", "shape", "embd", "ff", "layers", "heads", "kv", "vocab", "ctx");
        for (const cx_shape *s = cx_shapes(); s->name; s++)
            printf("%-16s %6d %6d %6d %6d %6d %7d %7d\n", s->name, s->n_embd, s->n_ff, s->n_layer, s->n_head,
                   s->n_head_kv, s->n_vocab, s->n_ctx);
        return 0;
    }
    if (!o->shape || !o->out) {
        fprintf(stderr, "cortex: synth needs --shape NAME and -o FILE (see cortex synth --list)\n");
        return 2;
    }
    const cx_shape *found = cx_shape_find(o->shape);
    if (!found) return die("unknown shape '%s'%s (see cortex synth --list)", o->shape, "");
    cx_shape shape = *found; /* --ctx makes e.g. a long-context variant of a real shape */
    if (o->ctx) shape.n_ctx = (int)o->ctx;
    const cx_shape *sh = &shape;
    int type = cx_type_from_name(o->type ? o->type : "f32");
    if (type < 0) return die("unknown type '%s'%s (f32, f16, q8_0, q4_0)", o->type, "");
    cx_err err = {0};
    double t0 = now_s();
    if (cx_synth_write(sh, type, o->seed >= 0 ? (uint64_t)o->seed : 0, o->out, &err)) {
        fprintf(stderr, "cortex: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "wrote %s (%s, %s) in %.1f s\n", o->out, sh->name, cx_type_name(type), now_s() - t0);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage();
    const char *cmd = argv[1];
    opts o = {0};
    const char *positional = NULL;
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage();
        return 0;
    }
    int rc = parse_opts(argc - 2, argv + 2, &o, &positional);
    if (rc) return rc;
    if (!strcmp(cmd, "generate")) return positional ? usage() : cmd_generate(&o);
    if (!strcmp(cmd, "info")) return cmd_info(&o, positional);
    if (!strcmp(cmd, "synth")) return positional ? usage() : cmd_synth(&o);
    if (!strcmp(cmd, "tokenize")) return positional ? usage() : cmd_tokenize(&o);
    fprintf(stderr, "cortex: unknown command '%s'\n", cmd);
    return usage();
}
