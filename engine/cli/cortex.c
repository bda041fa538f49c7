/*
 * cortex.c - the `cortex` command: generate, info, synth, tokenize, quantize,
 * quality, serve (the HTTP server itself is engine/server/).
 *
 * A thin shell over the public API: parse flags (cli_flags.c: one table for
 * parsing and every command's --help), call the engine, print. Errors print
 * one line "cortex: <what>: <problem>" and exit 1 (2 for usage).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_flags.h"
#include "cli_lora.h"
#include "cortex_env.h"
#include "cortex_tools.h"
#include "srv.h"

/* Monotonic seconds, for the timings generate and synth print. */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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

/* Load a model with the parameters the environment asks for (cortex_env.h:
 * CORTEX_WEIGHTS, CORTEX_REPACK, CORTEX_ISA), with -z for a llama2.c
 * checkpoint; NULL after printing why. */
static cx_model *load_model(const opts *o, const char *path) {
    cx_model *m;
    cx_err err = {0};
    cx_model_params mp;
    if (!path) { fprintf(stderr, "cortex: no model: give -m MODEL\n"); return NULL; }
    if (cx_model_params_from_env(&mp, &err) || cx_model_load_ex(path, o->tokenizer, &mp, &m, &err)) {
        fprintf(stderr, "cortex: %s\n", err.msg);
        return NULL;
    }
    return m;
}

/* Encode text (flags: CX_TOKENIZE_*); returns a malloc'd id array or NULL after an error. */
static int32_t *encode(const cx_model *m, const char *text, size_t len, int flags, int *n) {
    cx_err err = {0};
    int cap = (int)(len + 2 < 1u << 28 ? len + 2 : 1u << 28);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)cap);
    if (!ids || cx_tokenize(m, text, len, flags, ids, cap, n, &err)) {
        fprintf(stderr, "cortex: tokenize: %s\n", ids ? err.msg : "out of memory");
        free(ids);
        return NULL;
    }
    return ids;
}

/* The KV cache counters, for --kv-stats. */
static void print_kv_stats(const cx_session *s) {
    cx_kv_stats st;
    cx_session_kv_stats(s, &st);
    static const char *tier[CX_KV_TIERS] = {"hot", "warm", "cold"};
    for (int t = 0; t < CX_KV_TIERS; t++) {
        char budget[32] = "unlimited";
        if (st.budget[t] >= 0) snprintf(budget, sizeof budget, "%lld", (long long)st.budget[t]);
        fprintf(stderr, "kv %-4s: %lld blocks, %lld bytes (budget %s), %lld block reads\n", tier[t],
                (long long)st.blocks[t], (long long)st.bytes[t], budget, (long long)st.hits[t]);
    }
    fprintf(stderr, "kv moves: %lld demotions, %lld promotions, %lld spills (%lld bytes in the file), %lld drops\n",
            (long long)st.demotions, (long long)st.promotions, (long long)st.spills, (long long)st.spilled_bytes,
            (long long)st.drops);
    fprintf(stderr, "kv zlib: %lld -> %lld bytes (ratio %.3f); restores: %lld pages, %.1f us each\n",
            (long long)st.zip_in, (long long)st.zip_out, st.zip_ratio, (long long)st.restores,
            st.restores ? (double)st.restore_ns / (double)st.restores / 1e3 : 0.0);
    fprintf(stderr, "kv prefix: %lld/%lld blocks hit (%.1f%%), %lld tokens reused\n", (long long)st.prefix_hits,
            (long long)st.prefix_lookups, 100.0 * st.prefix_hit_rate, (long long)st.prefix_tokens);
}

/* cortex generate: prefill the prompt, then sample, print (text or --ids) and
 * feed one token at a time until EOS, -n tokens or a full context. */
static int cmd_generate(opts *o) {
    size_t len = 0;
    char *text = load_prompt(o, &len);
    if (!text) return 1;
    if (len == 0) {
        free(text);
        return die("empty prompt: give some text with -p or -f");
    }
    cx_model *m = load_model(o, o->model);
    if (!m) { free(text); return 1; }
    const cx_model_info *mi = cx_model_get_info(m);
    cx_session *s = NULL;
    cx_sampler *smp = NULL;
    cx_lora *lora[CX_LORA_MAX_SET] = {0};
    cx_err err = {0};
    int rc = 1, n_prompt = 0;
    double t0 = now_s();
    int32_t *ids = encode(m, text, len, CX_TOKENIZE_BOS | (o->no_special ? 0 : CX_TOKENIZE_SPECIAL), &n_prompt);
    if (!ids) goto out;
    cx_session_params sp = cx_session_defaults();
    sp.n_ctx = (int)o->ctx;
    sp.n_threads = (int)o->threads;
    sp.kv = o->kv;
    if (cx_session_new_ex(m, &sp, &s, &err)) {
        fprintf(stderr, "cortex: %s\n", err.msg);
        goto out;
    }
    if ((rc = cli_lora_attach(m, o, s, lora)) != 0) goto out;
    rc = 1;
    if (o->sp.repeat_last_n < 0) o->sp.repeat_last_n = cx_session_n_ctx(s); /* -1: the context, as llama.cpp */
    if (o->random_seed) { /* --seed -1: llama.cpp's random seed; printed so the run can be repeated */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        o->sp.seed = ((uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)getpid() << 20) & 0xffffffffu;
        fprintf(stderr, "seed: %llu\n", (unsigned long long)o->sp.seed);
    }
    if (cx_sampler_new(mi->n_vocab, &o->sp, &smp, &err)) {
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
        if (o->ids)
            for (int i = 0; i < n_prompt; i++) printf(i ? " %d" : "%d", ids[i]);
        else
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
        if (cx_token_is_eog(m, tok)) break;
        if (o->ids) {
            printf(n_gen || !o->no_echo ? " %d" : "%d", tok);
        } else {
            char tmp[2];
            const char *piece;
            size_t k = cx_token_piece(m, prev, tok, tmp, &piece);
            fwrite(piece, 1, k, stdout);
        }
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
    if (o->kv_stats) print_kv_stats(s);
    rc = 0;
out:
    free(text);
    free(ids);
    cx_sampler_free(smp);
    cx_session_free(s);
    for (int i = 0; i < CX_LORA_MAX_SET; i++) cx_lora_free(lora[i]); /* after the session that used them */
    cx_model_free(m);
    return rc;
}

/* cortex tokenize: the text's ids, space-separated, on one line. */
static int cmd_tokenize(opts *o) {
    size_t len = 0;
    char *text = load_prompt(o, &len);
    if (!text) return 1;
    cx_model *m = load_model(o, o->model);
    int n = 0, rc = 1;
    int flags = (o->no_bos ? 0 : CX_TOKENIZE_BOS) | (o->no_special ? 0 : CX_TOKENIZE_SPECIAL);
    int32_t *ids = m ? encode(m, text, len, flags, &n) : NULL;
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

/* A byte count in KiB, MiB or GiB. */
static void human_bytes(uint64_t b, char *out, size_t cap) {
    if (b >= (1ull << 30)) snprintf(out, cap, "%.2f GiB", (double)b / (1ull << 30));
    else if (b >= (1ull << 20)) snprintf(out, cap, "%.2f MiB", (double)b / (1ull << 20));
    else snprintf(out, cap, "%.2f KiB", (double)b / 1024.0);
}

/* cortex info MODEL: the model's header, hyper-parameters and tensor table. */
static int cmd_info(opts *o) {
    const char *path = o->n_pos ? o->pos[0] : o->model;
    if (!path) return die_usage("info: no model: give MODEL (see cortex info --help)");
    if (o->n_pos && o->model) return die_usage("info: give the model once, as MODEL or as -m MODEL");
    cx_model *m = load_model(o, path);
    if (!m) return 1;
    const cx_model_info *i = cx_model_get_info(m);
    char wb[32], fb[32];
    human_bytes(i->weight_bytes, wb, sizeof wb);
    human_bytes(i->file_bytes, fb, sizeof fb);
    printf("file:           %s\n", path);
    printf("format:         %s", i->format);
    if (i->format_version) printf(" v%u", i->format_version);
    printf("\nname:           %s\n", i->name);
    printf("architecture:   %s\n", i->arch);
    printf("tokenizer:      %s%s%s, %d tokens\n", i->tokenizer, i->tokenizer_pre ? ", pre-tokenizer " : "",
           i->tokenizer_pre ? i->tokenizer_pre : "", i->n_vocab);
    if (i->vocab_only) {
        printf("vocabulary only: no tensors (tokenizes, does not run)\nfile bytes:     %llu (%s)\n",
               (unsigned long long)i->file_bytes, fb);
        cx_model_free(m);
        return 0;
    }
    printf("n_embd:         %d\nn_ff:           %d\nn_layer:        %d\n", i->n_embd, i->n_ff, i->n_layer);
    printf("n_head:         %d\nn_head_kv:      %d\nhead_dim:       %d\n", i->n_head, i->n_head_kv, i->head_dim);
    printf("n_vocab:        %d\nn_ctx:          %d\n", i->n_vocab, i->n_ctx);
    printf("rope_base:      %g\nrms_eps:        %g\n", i->rope_base, i->rms_eps);
    printf("rope:           %s pairs%s", i->rope_neox ? "NeoX (i, i+d/2)" : "adjacent (2i, 2i+1)",
           i->rope_freq_factors ? ", rope_freqs.weight factors" : "");
    if (i->rope_freq_scale != 1.0f) printf(", %s scaling x%g", i->rope_scaling, 1.0 / i->rope_freq_scale);
    printf("\nqkv bias:       %s\n", i->qkv_bias ? "yes" : "no");
    if (i->n_expert)
        printf("experts:        %d per layer, %d per token, width %d (%llu bytes, %.1f%% of the weights)\n",
               i->n_expert, i->n_expert_used, i->n_ff_expert, (unsigned long long)i->expert_bytes,
               100.0 * (double)i->expert_bytes / (double)i->weight_bytes);
    if (i->sliding_window) printf("sliding window: %d positions (even layers)\n", i->sliding_window);
    if (i->attn_sinks) printf("attention:      learned sinks per head\n");
    printf("output:         %s\n", i->tied_output ? "tied to token_embd" : "separate output.weight");
    printf("main type:      %s\n", cx_type_name(i->main_type));
    printf("weights memory: %s\n", i->weights_memory);
    if (strncmp(i->weights_memory, "hugepages", 9) == 0)
        printf("huge pages:     %.1f MiB of the copy in 2 MiB pages (the file: %.1f MiB)\n",
               (double)i->weights_hugepage_bytes / 1048576.0, (double)i->file_bytes / 1048576.0);
    printf("parameters:     %llu\n", (unsigned long long)i->n_params);
    printf("weight bytes:   %llu (%s)\nfile bytes:     %llu (%s)\n", (unsigned long long)i->weight_bytes, wb,
           (unsigned long long)i->file_bytes, fb);
    printf("tensors:        %d\n", i->n_tensors);
    int count[CX_QUANT_NTYPES] = {0}; /* per ggml type id, as quantize counts them */
    uint64_t bytes[CX_QUANT_NTYPES] = {0};
    for (int k = 0; k < i->n_tensors; k++) {
        cx_tensor_info t;
        cx_model_tensor(m, k, &t);
        if (t.type >= 0 && t.type < CX_QUANT_NTYPES) { count[t.type]++; bytes[t.type] += t.nbytes; }
    }
    for (int t = 0; t < CX_QUANT_NTYPES; t++)
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

/* cortex synth: --list the shapes, or write a synthetic model. */
static int cmd_synth(opts *o) {
    if (o->list) {
        printf("%-16s %6s %6s %6s %6s %6s %7s %7s  %s\n", "shape", "embd", "ff", "layers", "heads", "kv", "vocab", "ctx",
               "experts (used)");
        for (const cx_shape *s = cx_shapes(); s->name; s++) {
            printf("%-16s %6d %6d %6d %6d %6d %7d %7d", s->name, s->n_embd, s->n_ff, s->n_layer, s->n_head,
                   s->n_head_kv, s->n_vocab, s->n_ctx);
            if (s->n_expert) printf("  %d (%d)", s->n_expert, s->n_expert_used);
            printf("\n");
        }
        return 0;
    }
    if (!o->shape || !o->out) return die_usage("synth needs --shape NAME and -o FILE (see cortex synth --help)");
    const cx_shape *found = cx_shape_find(o->shape);
    if (!found) return die_usage("synth: unknown shape '%s' (see cortex synth --list)", o->shape);
    cx_shape shape = *found; /* --ctx makes e.g. a long-context variant of a real shape */
    if (o->ctx) shape.n_ctx = (int)o->ctx;
    const cx_shape *sh = &shape;
    int type = cx_type_from_name(o->type ? o->type : "f32"); /* the default cortex synth --help shows */
    if (type < 0) return die_usage("synth: unknown type '%s' (see cortex synth --help)", o->type);
    cx_err err = {0};
    double t0 = now_s();
    if (cx_synth_write_ex(sh, type, (uint64_t)o->seed, o->vocab, o->out, &err)) {
        fprintf(stderr, "cortex: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "wrote %s (%s, %s) in %.1f s\n", o->out, sh->name, cx_type_name(type), now_s() - t0);
    return 0;
}

/* ---- quantize ------------------------------------------------------------ */

/* cortex quantize IN OUT --type T [-z TOK]: convert, then report what was written. */
static int cmd_quantize(opts *o) {
    if (o->n_pos != 2)
        return die_usage("quantize needs IN and OUT: cortex quantize IN OUT --type TYPE (see cortex quantize --help)");
    if (!o->type) return die_usage("quantize needs --type TYPE (see cortex quantize --help)");
    int ftype = cx_type_from_name(o->type);
    if (ftype < 0) return die_usage("quantize: unknown type '%s' (see cortex quantize --help)", o->type);
    const char *in = o->pos[0], *out = o->pos[1];
    cx_quantize_stats st;
    cx_err err = {0};
    double t0 = now_s();
    if (cx_quantize_file(in, o->tokenizer, out, ftype, &st, &err)) {
        fprintf(stderr, "cortex: %s\n", err.msg);
        return 1;
    }
    char ib[32], ob[32], iw[32], ow[32];
    human_bytes(st.in_file_bytes, ib, sizeof ib);
    human_bytes(st.out_file_bytes, ob, sizeof ob);
    human_bytes(st.in_weight_bytes, iw, sizeof iw);
    human_bytes(st.out_weight_bytes, ow, sizeof ow);
    printf("quantized %s (%s, %s) -> %s (%s, %s) in %.1f s\n", in, st.input_format, ib, out, cx_type_name(ftype), ob,
           now_s() - t0);
    printf("tensors: %d\n", st.n_tensors);
    for (int t = 0; t < CX_QUANT_NTYPES; t++) {
        if (!st.count[t]) continue;
        char b[32];
        human_bytes(st.bytes[t], b, sizeof b);
        printf("  %-6s %5d tensors %12s\n", cx_type_name(t), st.count[t], b);
    }
    printf("weights: %s -> %s (%.2fx smaller)\n", iw, ow,
           st.out_weight_bytes ? (double)st.in_weight_bytes / (double)st.out_weight_bytes : 0.0);
    if (!st.n_fallback) printf("fallbacks: none\n");
    else printf("fallbacks: %d tensors stored in another type than the rule wanted\n", st.n_fallback);
    for (int g = 0; g < st.n_fallback_groups; g++) {
        const cx_quantize_fallback *f = &st.fallback[g];
        printf("  %d x %lld columns: %s -> %s (e.g. %s)\n", f->count, (long long)f->cols, cx_type_name(f->wanted),
               cx_type_name(f->stored), f->example);
    }
    return 0;
}

/* ---- quality: a model against a reference on the same tokens -------------- */

/* Prompts the reference continues greedily when no --text is given. */
static const char *const QUALITY_PROMPTS[] = {
    "Once upon a time", "Echoes of", "The little dog", "I dream of", "In the quiet", "One day, a girl",
    "The sun was", "Deep in the forest", "She said", "My code", "The old man", "Whispers of",
    "Tom and Sue", "Under the stars", "The machine", "A tiny bird",
};
#define N_QUALITY_PROMPTS ((int)(sizeof QUALITY_PROMPTS / sizeof QUALITY_PROMPTS[0]))

/* Positions per cx_eval_all call of each model: up to one full pass (256),
 * fewer for large vocabularies so each logits array stays near 32 MiB. */
#define QUALITY_CHUNK_BYTES ((size_t)32 << 20)

typedef struct quality {
    const cx_model *ref, *mod;
    cx_session *sr, *sm;
    int n_vocab, n_ctx, chunk;
    double *lp_ref, *lp_mod;  /* log-softmax of the current position, n_vocab each */
    float *lr, *lm;           /* logits of a chunk of positions, [chunk][n_vocab] each */
    int32_t *seq;             /* the tokens of the current sequence, [n_ctx] */
    long target, positions, sequences, agree;
    double kl_sum, kl_max, dlogit_max;
} quality;

/* out[i] = x[i] - log(sum_j exp(x[j])), in double so tiny probabilities keep their digits. */
static void log_softmax(const float *x, int n, double *out) {
    double mx = x[0], s = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > mx) mx = x[i];
    for (int i = 0; i < n; i++) s += exp((double)x[i] - mx);
    double lse = mx + log(s);
    for (int i = 0; i < n; i++) out[i] = (double)x[i] - lse;
}

/* The token of rank `rank` (0: the largest logit; the lowest id first on ties,
 * as greedy sampling) among all tokens but `skip`. */
static int ranked_token(const float *x, int n, int rank, int skip) {
    int prev = -1;
    for (int r = 0; r <= rank; r++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            if (i == skip) continue;
            /* only tokens ordered after the previous pick (value desc, id asc) */
            if (prev >= 0 && !(x[i] < x[prev] || (x[i] == x[prev] && i > prev))) continue;
            if (best < 0 || x[i] > x[best]) best = i;
        }
        if (best < 0) return prev; /* fewer tokens than the rank asks: keep the last */
        prev = best;
    }
    return prev;
}

/* Score one position from the two models' logits there: top-1 agreement,
 * KL(ref || model), largest logit difference. */
static void quality_score(quality *q, const float *lr, const float *lm) {
    int V = q->n_vocab;
    log_softmax(lr, V, q->lp_ref);
    log_softmax(lm, V, q->lp_mod);
    double kl = 0, dmax = 0;
    for (int i = 0; i < V; i++) {
        kl += exp(q->lp_ref[i]) * (q->lp_ref[i] - q->lp_mod[i]);
        double d = fabs((double)lr[i] - (double)lm[i]);
        if (d > dmax) dmax = d;
    }
    if (kl < 0) kl = 0; /* rounding when the distributions are identical */
    q->agree += ranked_token(lr, V, 0, -1) == ranked_token(lm, V, 0, -1);
    q->kl_sum += kl;
    if (kl > q->kl_max) q->kl_max = kl;
    if (dmax > q->dlogit_max) q->dlogit_max = dmax;
    q->positions++;
}

/* Teacher-force toks[0..n) (n <= n_ctx) through both models as a new
 * sequence, q->chunk positions per cx_eval_all call (one forward pass each
 * rather than one per token), and score every position. */
static int quality_sequence(quality *q, const int32_t *toks, int n, cx_err *err) {
    cx_session_reset(q->sr);
    cx_session_reset(q->sm);
    q->sequences++;
    size_t V = (size_t)q->n_vocab;
    for (int i = 0; i < n; i += q->chunk) {
        int k = n - i < q->chunk ? n - i : q->chunk;
        if (cx_eval_all(q->sr, toks + i, k, q->lr, err) || cx_eval_all(q->sm, toks + i, k, q->lm, err)) return -1;
        for (int t = 0; t < k; t++) quality_score(q, q->lr + (size_t)t * V, q->lm + (size_t)t * V);
    }
    return 0;
}

/* Tokens from greedy generation with the reference: BOS + a prompt, then the
 * reference's best token (never EOS: the next best continues), one decode
 * step each; the sequence is then scored as a whole. A sequence ends when the
 * context fills or the position budget does; round r over the prompts takes
 * the (r+1)-th best token at its first generated position, so no sequence
 * repeats. */
static int quality_greedy(quality *q, cx_err *err) {
    int eos = cx_token_eos(q->ref);
    for (long seq = 0; q->positions < q->target; seq++) {
        const char *p = QUALITY_PROMPTS[seq % N_QUALITY_PROMPTS];
        int round = (int)(seq / N_QUALITY_PROMPTS), n = 0;
        int32_t ids[128];
        if (cx_tokenize(q->ref, p, strlen(p), 1, ids, 128, &n, err)) return -1;
        long room = q->target - q->positions;
        int len = room < q->n_ctx ? (int)room : q->n_ctx;
        cx_session_reset(q->sr);
        const float *lr;
        for (int i = 0, tok = ids[0]; i < len; i++) {
            q->seq[i] = tok;
            if (i + 1 == len) break;
            if (cx_eval(q->sr, &tok, 1, &lr, err)) return -1;
            tok = i + 1 < n ? ids[i + 1] : ranked_token(lr, q->n_vocab, i + 1 == n ? round : 0, eos);
        }
        if (quality_sequence(q, q->seq, len, err)) return -1;
    }
    return 0;
}

/* Tokens from a text: BOS + the next context-sized chunk, until the text or
 * the position budget runs out. */
static int quality_text(quality *q, const int32_t *ids, int n_ids, cx_err *err) {
    int at = 0;
    while (at < n_ids && q->positions < q->target) {
        long room = q->target - q->positions, len = 1 + (long)(n_ids - at);
        if (len > room) len = room;
        if (len > q->n_ctx) len = q->n_ctx;
        q->seq[0] = cx_token_bos(q->ref);
        memcpy(q->seq + 1, ids + at, sizeof(int32_t) * (size_t)(len - 1));
        at += (int)len - 1;
        if (quality_sequence(q, q->seq, (int)len, err)) return -1;
    }
    return 0;
}

/* Print s as a JSON string. */
static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

/* The table (or JSON line) of a finished comparison. */
static void quality_print(const quality *q, const opts *o) {
    const char *rt = cx_type_name(cx_model_get_info(q->ref)->main_type);
    const char *mt = cx_type_name(cx_model_get_info(q->mod)->main_type);
    double agree = q->positions ? (double)q->agree / (double)q->positions : 0;
    double kl_mean = q->positions ? q->kl_sum / (double)q->positions : 0;
    if (o->json) {
        printf("{\"ref\":");
        json_str(o->ref);
        printf(",\"model\":");
        json_str(o->model);
        printf(",\"ref_type\":\"%s\",\"model_type\":\"%s\",\"source\":\"%s\",\"n_ctx\":%d,\"positions\":%ld,"
               "\"sequences\":%ld,\"top1_agreement\":%.6f,\"kl_mean\":%.6e,\"kl_max\":%.6e,\"max_abs_logit_diff\":%.6e}\n",
               rt, mt, o->text ? "text" : "greedy", q->n_ctx, q->positions, q->sequences, agree, kl_mean, q->kl_max,
               q->dlogit_max);
        return;
    }
    printf("reference: %s (%s)\nmodel:     %s (%s)\n", o->ref, rt, o->model, mt);
    if (o->text) printf("tokens:    %s, teacher-forced, context %d\n", o->text, q->n_ctx);
    else printf("tokens:    greedy from the reference over %d fixed prompts, teacher-forced, context %d\n",
                N_QUALITY_PROMPTS, q->n_ctx);
    printf("%10s %10s %14s %12s %12s %14s\n", "positions", "sequences", "top-1 agree", "mean KL", "max KL",
           "max |dlogit|");
    printf("%10ld %10ld %12.2f %% %12.3e %12.3e %14.3e\n", q->positions, q->sequences, 100 * agree, kl_mean, q->kl_max,
           q->dlogit_max);
}

/* cortex quality --ref REF --model MODEL: teacher-forced comparison of the
 * next-token distributions of two models sharing a vocabulary. */
static int cmd_quality(opts *o) {
    if (!o->ref || !o->model) {
        fprintf(stderr, "cortex: quality needs --ref REF_MODEL and --model MODEL (see cortex quality --help)\n");
        return 2;
    }
    quality q = {0};
    cx_model *ref = load_model(o, o->ref), *mod = ref ? load_model(o, o->model) : NULL;
    char *text = NULL;
    int32_t *ids = NULL;
    int rc = 1, n_ids = 0;
    cx_err err = {0};
    if (!mod) goto out;
    const cx_model_info *ri = cx_model_get_info(ref), *mi = cx_model_get_info(mod);
    if (ri->n_vocab != mi->n_vocab || cx_token_bos(ref) != cx_token_bos(mod) || cx_token_eos(ref) != cx_token_eos(mod)) {
        fprintf(stderr, "cortex: %s has %d tokens (BOS %d, EOS %d) but %s has %d (BOS %d, EOS %d): the models must share "
                "one vocabulary\n", o->ref, ri->n_vocab, cx_token_bos(ref), cx_token_eos(ref), o->model, mi->n_vocab,
                cx_token_bos(mod), cx_token_eos(mod));
        goto out;
    }
    for (int t = 0; t < ri->n_vocab; t++) { /* same size, same pieces: one vocabulary */
        char ta[2], tb[2];
        const char *pa, *pb;
        size_t na = cx_token_piece(ref, -1, t, ta, &pa), nb = cx_token_piece(mod, -1, t, tb, &pb);
        if (na != nb || memcmp(pa, pb, na)) {
            fprintf(stderr, "cortex: %s and %s have different vocabularies (token %d is '%.*s' in one, '%.*s' in the "
                    "other): the models must share one vocabulary\n", o->ref, o->model, t, (int)(na > 24 ? 24 : na), pa,
                    (int)(nb > 24 ? 24 : nb), pb);
            goto out;
        }
    }
    if (o->text) {
        size_t len = 0;
        if (!(text = read_file(o->text, &len))) {
            fprintf(stderr, "cortex: %s: cannot read text file: %s\n", o->text, strerror(errno));
            goto out;
        }
        if (!(ids = encode(ref, text, len, 0, &n_ids))) goto out;
        if (n_ids == 0) {
            fprintf(stderr, "cortex: %s: the text file is empty\n", o->text);
            goto out;
        }
    }
    q.ref = ref;
    q.mod = mod;
    q.n_vocab = ri->n_vocab;
    q.n_ctx = ri->n_ctx < mi->n_ctx ? ri->n_ctx : mi->n_ctx;
    if (q.n_ctx > CX_DEFAULT_CTX) q.n_ctx = CX_DEFAULT_CTX;
    q.target = o->positions;
    size_t per_row = sizeof(float) * (size_t)q.n_vocab;
    q.chunk = QUALITY_CHUNK_BYTES / per_row < 256 ? (int)(QUALITY_CHUNK_BYTES / per_row) : 256;
    if (q.chunk < 1) q.chunk = 1;
    q.lp_ref = malloc(sizeof(double) * (size_t)q.n_vocab);
    q.lp_mod = malloc(sizeof(double) * (size_t)q.n_vocab);
    q.lr = malloc(per_row * (size_t)q.chunk);
    q.lm = malloc(per_row * (size_t)q.chunk);
    q.seq = malloc(sizeof(int32_t) * (size_t)q.n_ctx);
    if (!q.lp_ref || !q.lp_mod || !q.lr || !q.lm || !q.seq) {
        fprintf(stderr, "cortex: out of memory\n");
        goto out;
    }
    if (cx_session_new(ref, q.n_ctx, (int)o->threads, &q.sr, &err) ||
        cx_session_new(mod, q.n_ctx, (int)o->threads, &q.sm, &err) ||
        (o->text ? quality_text(&q, ids, n_ids, &err) : quality_greedy(&q, &err))) {
        fprintf(stderr, "cortex: %s\n", err.msg);
        goto out;
    }
    quality_print(&q, o);
    rc = 0;
out:
    free(q.lp_ref);
    free(q.lp_mod);
    free(q.lr);
    free(q.lm);
    free(q.seq);
    cx_session_free(q.sr);
    cx_session_free(q.sm);
    free(ids);
    free(text);
    cx_model_free(mod);
    cx_model_free(ref);
    return rc;
}

/* cortex serve: the OpenAI-compatible HTTP server (engine/server/,
 * docs/server.md) on the request scheduler, until SIGTERM drains it. */
static int cmd_serve(opts *o) {
    if (o->max_batch_tokens < o->max_seqs)
        return die_usage("--max-batch-tokens %ld is below --max-seqs %ld: every running sequence decodes one token per step",
                         o->max_batch_tokens, o->max_seqs);
    cx_model *m = load_model(o, o->model);
    if (!m) return 1;
    srv_config cfg = {0};
    cfg.host = o->host;
    cfg.port = (int)o->port;
    cfg.api_key = o->api_key;
    cfg.chat_template = o->chat_template;
    cfg.max_tokens = (int)o->n_predict;
    cfg.request_timeout_ms = (int64_t)((double)o->request_timeout * 1000.0 + 0.5);
    cfg.max_body = o->max_body;
    cfg.max_conns = (int)o->max_conns;
    cfg.max_conns_per_ip = (int)o->max_conns_per_ip;
    cfg.read_timeout = o->read_timeout;
    cfg.busy_timeout = o->busy_timeout;
    cfg.idle_timeout = (int)o->idle_timeout;
    cfg.drain_timeout = o->drain_timeout;
    cfg.sched = cx_sched_defaults();
    cfg.sched.max_seqs = (int)o->max_seqs;
    cfg.sched.max_batch_tokens = (int)o->max_batch_tokens;
    cfg.sched.max_queue = (int)o->max_queue;
    cfg.sched.n_ctx = (int)o->ctx;
    cfg.sched.n_threads = (int)o->threads;
    cfg.sched.kv = o->kv;
    cfg.sched.lora_budget = o->lora_budget == CX_KV_UNLIMITED ? 0 : o->lora_budget;
    cfg.sched.lora_type = !o->lora_type || !strcmp(o->lora_type, "auto") ? -1
                          : !strcmp(o->lora_type, "f32") ? CX_TYPE_F32 : !strcmp(o->lora_type, "q8_0") ? CX_TYPE_Q8_0
                          : !strcmp(o->lora_type, "q4_0") ? CX_TYPE_Q4_0 : -2;
    if (cfg.sched.lora_type == -2) {
        cx_model_free(m);
        return die_usage("--lora-type: '%s' is not one of f32|q8_0|q4_0|auto", o->lora_type);
    }
    cfg.lora = o->serve_lora;
    cfg.n_lora = o->n_serve_lora;
    cfg.lora_dir = o->lora_dir;
    cfg.max_adapters = (int)o->max_adapters;
    int rc = srv_serve(m, &cfg);
    cx_model_free(m);
    return rc;
}

/* ---- the commands and main ------------------------------------------------ */

static const cli_command COMMANDS[] = {
    {"generate", CMD_GENERATE, 0, "-m MODEL [-z TOKENIZER] (-p PROMPT | -f FILE) [-n N] [sampling] [KV cache] [options]",
     "Generate text after the prompt: the prompt is printed, then each token as it is sampled; prompt size,\n"
     "time to first token and speeds go to stderr. Sampling is llama.cpp's chain with its defaults:\n"
     "penalties -> top-k -> top-p -> min-p -> temperature; --temp 0 is greedy. The KV cache keeps blocks of\n"
     "16 positions in hot, warm and cold tiers with byte budgets (docs/kv-cache.md).\n",
     "cortex generate -m ../shared/models/aidreams260K.gguf -p \"Echoes of\" -n 100 --temp 0", cmd_generate},
    {"info", CMD_INFO, 1, "MODEL [-z TOKENIZER]",
     "Print a model's format, hyper-parameters, weight types and every tensor's type, shape, offset and size.\n",
     "cortex info ../shared/models/stories260K.gguf", cmd_info},
    {"synth", CMD_SYNTH, 0, "--shape NAME -o FILE.gguf [--type TYPE] [--seed S] [-c CTX] [--vocab FILE.gguf] | --list",
     "Write a GGUF v3 model with deterministic synthetic weights (normal, std 0.02) in a real model's shape\n"
     "(architecture, RoPE scaling and biases included: llama-3.2-1b, qwen2.5-0.5b, ...) and a synthetic\n"
     "vocabulary, or with --vocab the real vocabulary of a GGUF file, for benchmarks. Same shape, type,\n"
     "seed and vocabulary: the same bytes.\n",
     "cortex synth --shape stories15m --type q8_0 -o models/stories15m-q8_0.gguf", cmd_synth},
    {"tokenize", CMD_TOKENIZE, 0, "-m MODEL [-z TOKENIZER] (-p TEXT | -f FILE) [--no-bos] [--no-special]",
     "Print the token ids of the text, space-separated, with the model's tokenizer (SentencePiece or\n"
     "byte-level BPE). MODEL may be a vocabulary-only GGUF (no tensors), such as llama.cpp's\n"
     "ggml-vocab-*.gguf files.\n",
     "cortex tokenize -m ../shared/models/stories260K.gguf -p \"Once upon a time\"", cmd_tokenize},
    {"quantize", CMD_QUANTIZE, 2, "IN OUT --type TYPE [-z TOKENIZER]",
     "Convert IN into a GGUF v3 file OUT whose weight matrices are stored as --type.\n"
     "IN is an F32/F16/BF16 GGUF (metadata copied, general.file_type rewritten) or a llama2.c\n"
     "checkpoint with its tokenizer.bin given by -z/--tokenizer (the vocabulary is embedded\n"
     "as llama.cpp's converter does). 1-D tensors (norms) stay f32; a matrix whose rows a\n"
     "block does not divide falls back to another type (e.g. 172 columns -> f16), and\n"
     "q4_k_m mixes q4_k and q6_k as llama.cpp does; mxfp4 stores every matrix as MXFP4\n"
     "(llama.cpp's MXFP4_MOE keeps it for MoE experts). --type f32 converts a llama2.c\n"
     "checkpoint without losing anything. Already-quantized inputs are refused.\n"
     "Tensors stream from the mapped input into OUT.tmp, which is loaded back as a check\n"
     "and renamed to OUT: a failure leaves neither file behind.\n",
     "cortex quantize ../shared/models/stories260K.gguf stories260K-q8_0.gguf --type q8_0", cmd_quantize},
    {"quality", CMD_QUALITY, 0, "--ref REF_MODEL --model MODEL [-z TOKENIZER] [--positions N] [--text FILE] [--json]",
     "Compare MODEL's next-token distributions with REF_MODEL's on the same tokens\n"
     "(teacher forcing). Tokens come from FILE (--text: BOS + context-sized chunks) or,\n"
     "by default, from greedy generation with the reference from fixed prompts: EOS is\n"
     "never fed (the next best token continues), a new sequence starts when the context\n"
     "fills, and each new round over the prompts branches at its first generated token.\n"
     "Reports top-1 agreement, mean and max KL(ref || model) in nats (log-softmax in\n"
     "double), the largest logit difference, and the number of sequences. -z applies to\n"
     "whichever model is a llama2.c checkpoint. Both models must share the vocabulary.\n",
     "cortex quality --ref stories260K.gguf --model stories260K-q4_0.gguf --positions 1000", cmd_quality},
    {"serve", CMD_SERVE, 0, "-m MODEL [--host ADDR] [--port PORT] [scheduler] [KV cache] [options]",
     "Serve the model over HTTP with OpenAI's API: POST /v1/completions and /v1/chat/completions (whole or\n"
     "streamed as server-sent events), GET /v1/models, /health and /metrics (Prometheus). Requests run\n"
     "together through the request scheduler (continuous batching; docs/serving.md); a full queue answers\n"
     "429. Chat prompts use the model's chat template (tokenizer.chat_template), recognized among the\n"
     "common formats, or --chat-template. SIGTERM or SIGINT drains: running requests finish, then exit 0.\n"
     "Routes, fields and metrics: docs/server.md.\n",
     "cortex serve -m ../shared/models/stories260K.gguf --port 8080 --max-seqs 4", cmd_serve},
    {"synth-lora", CMD_SYNTH_LORA, 0, "-m BASE -o FILE.gguf [--rank R] [--alpha A] [--targets LIST] [--seed S] [--type TYPE]",
     "Write a deterministic synthetic LoRA adapter for BASE in llama.cpp's GGUF LoRA format\n"
     "(general.type adapter, adapter.lora.alpha, blk.L.<matrix>.weight.lora_a [rank x in] and .lora_b\n"
     "[out x rank]): A ~ N(0, 1/in), B sized so each adapted matrix changes by --strength of its RMS.\n"
     "Same base shape, rank, targets, type and seed: the same bytes. For benchmarks and tests.\n",
     "cortex synth-lora -m ../shared/models/stories260K.gguf --rank 8 --targets all --seed 1 -o a1.gguf",
     cmd_synth_lora},
    {"merge-lora", CMD_MERGE_LORA, 0, "-m BASE [-z TOKENIZER] --lora FILE[:SCALE] [--lora ...] -o OUT.gguf [--type TYPE]",
     "Bake adapters into a copy of BASE: each adapted matrix becomes W + sum of scale x alpha/rank x B·A\n"
     "(summed in double), stored as --type. BASE must be f32, f16 or bf16 (GGUF, or llama2.c with -z). The\n"
     "merged model is what generate --lora computes, so it is the reference for equality tests, and the\n"
     "fast path when one adapter serves everything.\n",
     "cortex merge-lora -m ../shared/models/stories260K.gguf --lora a1.gguf -o merged.gguf", cmd_merge_lora},
};
#define N_COMMANDS ((int)(sizeof COMMANDS / sizeof COMMANDS[0]))

/* The command named `name`, or NULL. */
static const cli_command *find_command(const char *name) {
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, COMMANDS[i].name)) return &COMMANDS[i];
    return NULL;
}

/* cortex COMMAND [options]; cortex --help; cortex help [COMMAND]. */
int main(int argc, char **argv) {
    if (argc < 2) {
        cli_usage(COMMANDS, N_COMMANDS, stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "-h") || !strcmp(name, "--help") || !strcmp(name, "help")) {
        const cli_command *c = argc > 2 && !strcmp(name, "help") ? find_command(argv[2]) : NULL;
        if (argc > 2 && !strcmp(name, "help") && !c)
            return die_usage("help: unknown command '%s' (cortex --help lists them)", argv[2]);
        if (c) cli_help(c);
        else cli_usage(COMMANDS, N_COMMANDS, stdout);
        return 0;
    }
    const cli_command *c = find_command(name);
    if (!c) return die_usage("unknown command '%s' (cortex --help lists them)", name);
    opts o;
    cli_defaults(&o);
    int rc = cli_parse(c, argc - 2, argv + 2, &o);
    if (rc == 1) {
        cli_help(c);
        return 0;
    }
    return rc ? rc : c->run(&o);
}
