/*
 * cortex.c - the `cortex` command: generate, info, synth, tokenize, quantize,
 * quality, serve (the HTTP server itself is engine/server/).
 *
 * A thin shell over the public API: parse flags (cli_flags.c: one table for
 * parsing and every command's --help), call the engine, print. Errors print
 * one line "cortex: <what>: <problem>" and exit 1 (2 for usage).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_flags.h"
#include "cli_lora.h"
#include "cli_quality.h"
#include "cli_util.h"
#include "cortex_env.h"
#include "cortex_tools.h"
#include "srv.h"

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
    char *text = cli_load_prompt(o, &len);
    if (!text) return 1;
    if (len == 0) {
        free(text);
        return die("empty prompt: give some text with -p or -f");
    }
    cx_model *m = cli_load_model(o, o->model);
    if (!m) { free(text); return 1; }
    const cx_model_info *mi = cx_model_get_info(m);
    cx_session *s = NULL;
    cx_sampler *smp = NULL;
    cx_drafter *drafter = NULL;
    cx_spec *spec = NULL;
    int32_t *hist = NULL;
    cx_lora *lora[CX_LORA_MAX_SET] = {0};
    cx_err err = {0};
    int rc = 1, n_prompt = 0;
    double t0 = cli_now_s();
    int32_t *ids = cli_encode(m, text, len, CX_TOKENIZE_BOS | (o->no_special ? 0 : CX_TOKENIZE_SPECIAL), &n_prompt);
    if (!ids) goto out;
    cx_session_params sp = cx_session_defaults();
    sp.n_ctx = (int)o->ctx;
    sp.n_threads = (int)o->threads;
    sp.kv = o->kv;
    if (cx_session_new_ex(m, &sp, &s, &err)) {
        die("%s", err.msg);
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
        die("%s", err.msg);
        goto out;
    }
    if (o->spec.draft_path && o->spec.kind == CX_SPEC_NONE) o->spec.kind = CX_SPEC_MODEL; /* --draft alone */
    if (o->spec.kind != CX_SPEC_NONE) {
        o->spec.adapt = !o->spec_fixed;
        o->spec.n_threads = (int)o->threads;
        o->spec.tmp_dir = getenv("TMPDIR");
        double t_d = cli_now_s();
        if (cx_drafter_new(m, &o->spec, &drafter, &err) || cx_spec_new(drafter, cx_session_n_ctx(s), &spec, &err)) {
            die("%s", err.msg);
            goto out;
        }
        fprintf(stderr, "speculation: %s, ready in %.2f s\n", cx_drafter_describe(drafter), cli_now_s() - t_d);
    }
    if (n_prompt >= cx_session_n_ctx(s)) {
        die("prompt is %d tokens, the context holds %d (use -c up to the model's %d)", n_prompt,
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
    double t_start = cli_now_s();
    if (cx_eval(s, ids, n_prompt, &logits, &err)) { die("%s", err.msg); goto out; }
    double t_prefill = cli_now_s();
    /* hist: the prompt and every token chosen; the session holds all but the last */
    hist = malloc(sizeof *hist * (size_t)(cx_session_n_ctx(s) + CX_SPEC_MAX_DRAFT + 1));
    if (!hist) { die("out of memory"); goto out; }
    memcpy(hist, ids, sizeof *ids * (size_t)n_prompt);
    int n_hist = n_prompt, n_gen = 0, done = 0;
    double t_first = 0;
    while (n_gen < o->n_predict && !done) {
        int32_t chosen[CX_SPEC_MAX_DRAFT + 1];
        int n_new = 1;
        if (n_gen > 0 && spec) { /* draft, verify, keep what the model agrees with */
            n_new = cx_spec_step(spec, s, smp, hist, n_hist, (int)(o->n_predict - n_gen), chosen, &err);
            if (n_new < 0) { die("%s", err.msg); goto out; }
        } else {
            if (n_gen > 0 && cx_eval(s, &hist[n_hist - 1], 1, &logits, &err)) { die("%s", err.msg); goto out; }
            chosen[0] = cx_sampler_sample(smp, logits);
            cx_sampler_accept(smp, chosen[0]);
        }
        if (n_gen == 0) t_first = cli_now_s();
        for (int i = 0; i < n_new && !done; i++) {
            int tok = chosen[i];
            if (cx_token_is_eog(m, tok)) { done = 1; break; }
            if (o->ids) {
                printf(n_gen || !o->no_echo ? " %d" : "%d", tok);
            } else {
                char tmp[2];
                const char *piece;
                size_t k = cx_token_piece(m, hist[n_hist - 1], tok, tmp, &piece);
                fwrite(piece, 1, k, stdout);
            }
            hist[n_hist++] = tok;
            n_gen++;
        }
        fflush(stdout);
        if (!done && n_gen < o->n_predict && cx_session_pos(s) >= cx_session_n_ctx(s)) { /* no room for the last */
            fprintf(stderr, "\n[context full]");
            break;
        }
    }
    double t_end = cli_now_s();
    printf("\n");
    fflush(stdout); /* keep the text ahead of the statistics on a shared terminal */
    double decode_s = t_end - t_first;
    fprintf(stderr, "prompt tokens: %d, generated tokens: %d\n", n_prompt, n_gen);
    fprintf(stderr, "time to first token: %.2f ms (tokenize + prefill + sample)\n", (t_first ? t_first - t0 : 0) * 1e3);
    fprintf(stderr, "prefill: %.2f tokens/s (%d tokens in %.2f ms)\n", n_prompt / (t_prefill - t_start), n_prompt,
            (t_prefill - t_start) * 1e3);
    if (n_gen > 1)
        fprintf(stderr, "decode: %.2f tokens/s (%d tokens in %.2f ms)\n", (n_gen - 1) / decode_s, n_gen - 1, decode_s * 1e3);
    if (spec) {
        cx_spec_stats st;
        cx_spec_get_stats(spec, &st);
        fprintf(stderr, "speculation: %s; %lld passes, %lld drafted, %lld accepted (%.1f%%), %.2f accepted per "
                "checked draft, %.2f tokens per pass; draft %.1f ms, verify %.1f ms\n", cx_drafter_describe(drafter),
                (long long)st.steps, (long long)st.drafted, (long long)st.accepted, 100.0 * st.acceptance,
                st.mean_accepted, st.tokens_per_pass, st.draft_ns / 1e6, st.verify_ns / 1e6);
    }
    if (o->kv_stats) print_kv_stats(s);
    rc = 0;
out:
    free(text);
    free(ids);
    free(hist);
    cx_spec_free(spec);
    cx_drafter_free(drafter);
    cx_sampler_free(smp);
    cx_session_free(s);
    for (int i = 0; i < CX_LORA_MAX_SET; i++) cx_lora_free(lora[i]); /* after the session that used them */
    cx_model_free(m);
    return rc;
}

/* cortex tokenize: the text's ids, space-separated, on one line. */
static int cmd_tokenize(opts *o) {
    size_t len = 0;
    char *text = cli_load_prompt(o, &len);
    if (!text) return 1;
    cx_model *m = cli_load_model(o, o->model);
    int n = 0, rc = 1;
    int flags = (o->no_bos ? 0 : CX_TOKENIZE_BOS) | (o->no_special ? 0 : CX_TOKENIZE_SPECIAL);
    int32_t *ids = m ? cli_encode(m, text, len, flags, &n) : NULL;
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
    cx_model *m = cli_load_model(o, path);
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
    double t0 = cli_now_s();
    if (cx_synth_write_ex(sh, type, (uint64_t)o->seed, o->vocab, o->out, &err)) {
        die("%s", err.msg);
        return 1;
    }
    fprintf(stderr, "wrote %s (%s, %s) in %.1f s\n", o->out, sh->name, cx_type_name(type), cli_now_s() - t0);
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
    double t0 = cli_now_s();
    if (cx_quantize_file(in, o->tokenizer, out, ftype, &st, &err)) {
        die("%s", err.msg);
        return 1;
    }
    char ib[32], ob[32], iw[32], ow[32];
    human_bytes(st.in_file_bytes, ib, sizeof ib);
    human_bytes(st.out_file_bytes, ob, sizeof ob);
    human_bytes(st.in_weight_bytes, iw, sizeof iw);
    human_bytes(st.out_weight_bytes, ow, sizeof ow);
    printf("quantized %s (%s, %s) -> %s (%s, %s) in %.1f s\n", in, st.input_format, ib, out, cx_type_name(ftype), ob,
           cli_now_s() - t0);
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

/* cortex serve: the OpenAI-compatible HTTP server (engine/server/,
 * docs/server.md) on the request scheduler, until SIGTERM drains it. */
static int cmd_serve(opts *o) {
    if (o->max_batch_tokens < o->max_seqs)
        return die_usage("--max-batch-tokens %ld is below --max-seqs %ld: every running sequence decodes one token per step",
                         o->max_batch_tokens, o->max_seqs);
    cx_model *m = cli_load_model(o, o->model);
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
    if (o->spec.draft_path && o->spec.kind == CX_SPEC_NONE) o->spec.kind = CX_SPEC_MODEL; /* --draft alone */
    if (o->spec.kind != CX_SPEC_NONE) { /* srv_serve makes the drafter */
        o->spec.adapt = !o->spec_fixed;
        o->spec.n_threads = (int)o->threads;
        o->spec.tmp_dir = getenv("TMPDIR");
        cfg.spec = &o->spec;
    }
    cfg.sched.spec_max_batch = (int)o->spec_max_batch;
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
     "cortex quality --ref stories260K.gguf --model stories260K-q4_0.gguf --positions 1000", cli_quality},
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

/* --pin and --numa: the process's placement, set before any model loads (a
 * copy of the weights is bound to the NUMA policy as it is read). generate
 * and quality evaluate on this thread, thread 0 of their passes: it is
 * pinned too (pin_caller); serve's passes run on the scheduler's own thread,
 * which the engine pins. The placement goes to stderr when one was asked for. */
static int placement(const opts *o, int pin_caller) {
    cx_err err = {0};
    if (cx_set_placement((cx_pin_policy)o->pin, (cx_numa_policy)o->numa, &err) ||
        (pin_caller && cx_pin_caller(&err)))
        return die("%s", err.msg);
    if (o->pin != CX_PIN_NONE || o->numa != CX_NUMA_DEFAULT) {
        char line[512];
        cx_placement_describe(line, sizeof line);
        fprintf(stderr, "placement: %s\n", line);
    }
    return 0;
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
    if (!rc && (c->bit & (CMD_GENERATE | CMD_QUALITY | CMD_SERVE))) rc = placement(&o, c->bit != CMD_SERVE);
    return rc ? rc : c->run(&o);
}
