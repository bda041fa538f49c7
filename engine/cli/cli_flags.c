/*
 * cli_flags.c - see cli_flags.h: the flag table, the parser and the help
 * printer it drives. Accepted values of the enumerated flags come from the
 * engine's own tables (weight type names, KV tier types and policies, model
 * shapes), defaults from cli_defaults().
 */
#include "cli_flags.h"
#include "srv.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* How a flag's value is read. */
enum {
    K_SWITCH,  /* no value: int field set to 1 */
    K_STR,     /* const char * */
    K_LONG,    /* long in [lo, hi] */
    K_INT,     /* int in [lo, hi] */
    K_FLOAT,   /* float in [lo, hi] */
    K_SEED,    /* uint64_t from [-1, hi]; -1: draw one at start (opts.random_seed) */
    K_BUDGET,  /* int64_t bytes with a K/M/G suffix, or "unlimited" */
    K_KV_TYPE, /* int CX_KV_* among the types tier (int)lo stores */
    K_POLICY,  /* int CX_KV_LRU/LFU */
    K_WTYPE,   /* const char * naming a weight/file type */
    K_SHAPE,   /* const char * naming a synth shape */
    K_LORA,    /* FILE[:SCALE] appended to opts.lora (repeatable) */
    K_LORA_NAMED, /* NAME=FILE appended to opts.serve_lora (repeatable) */
    K_TMPL,    /* const char * naming a chat template (serve) */
    K_HELP     /* -h/--help */
};

typedef struct flag {
    const char *name, *alias; /* "--model", "-m" (or NULL) */
    const char *meta;         /* the value's placeholder; NULL for a switch */
    unsigned cmds;            /* CMD_* bits of the commands taking it */
    int kind;
    size_t off;               /* offsetof(opts, field) */
    double lo, hi;            /* numbers: the range; K_KV_TYPE: lo is the tier */
    const char *dflt;         /* the default in words, instead of the field's value; or NULL */
    const char *help;
} flag;

#define O(f) offsetof(opts, f)
#define GEN CMD_GENERATE
#define KV (CMD_GENERATE | CMD_SERVE) /* the KV cache's flags */
static const flag FLAGS[] = {
    {"--model", "-m", "MODEL", GEN | CMD_TOKENIZE | CMD_INFO | CMD_SERVE, K_STR, O(model), 0, 0, NULL,
     "model file: GGUF (v2, v3) or a llama2.c checkpoint (then -z)"},
    {"--model", "-m", "MODEL", CMD_QUALITY, K_STR, O(model), 0, 0, NULL, "the model compared with the reference"},
    {"--ref", NULL, "REF_MODEL", CMD_QUALITY, K_STR, O(ref), 0, 0, NULL, "the reference model"},
    {"--tokenizer", "-z", "TOKENIZER", GEN | CMD_INFO | CMD_TOKENIZE | CMD_QUANTIZE | CMD_QUALITY | CMD_SERVE, K_STR, O(tokenizer),
     0, 0, NULL, "llama2.c tokenizer.bin, for a llama2.c checkpoint"},
    {"--prompt", "-p", "PROMPT", GEN, K_STR, O(prompt), 0, 0, NULL, "the prompt text"},
    {"--prompt", "-p", "TEXT", CMD_TOKENIZE, K_STR, O(prompt), 0, 0, NULL, "the text to tokenize"},
    {"--prompt-file", "-f", "FILE", GEN | CMD_TOKENIZE, K_STR, O(prompt_file), 0, 0, NULL,
     "read the text from FILE instead (its bytes as they are)"},
    {"--n-predict", "-n", "N", GEN, K_LONG, O(n_predict), 0, 1 << 24, NULL,
     "tokens to generate at most (fewer at end-of-text or a full context)"},
    {"--temp", NULL, "T", GEN, K_FLOAT, O(sp.temperature), 0, 100, NULL,
     "temperature; 0: greedy (the argmax after the penalties, lowest id on ties)"},
    {"--top-k", NULL, "K", GEN, K_INT, O(sp.top_k), 0, 1 << 24, NULL, "keep the K most likely tokens; 0: off"},
    {"--top-p", NULL, "P", GEN, K_FLOAT, O(sp.top_p), 0, 1, NULL,
     "keep the fewest most likely tokens whose probability reaches P; 1: off"},
    {"--min-p", NULL, "P", GEN, K_FLOAT, O(sp.min_p), 0, 1, NULL,
     "keep tokens at least P times as likely as the most likely one; 0: off"},
    {"--repeat-penalty", NULL, "R", GEN, K_FLOAT, O(sp.repeat_penalty), 0.01, 100, NULL,
     "divide the logit of each token in the window by R (multiply if <= 0), once per token; 1: off"},
    {"--repeat-last-n", NULL, "N", GEN, K_INT, O(sp.repeat_last_n), -1, 1 << 20, NULL,
     "the penalties' window: the last N tokens, prompt included; 0: penalties off; -1: the context size"},
    {"--presence-penalty", NULL, "P", GEN, K_FLOAT, O(sp.presence_penalty), -100, 100, NULL,
     "subtract P from the logit of each token in the window; 0: off"},
    {"--frequency-penalty", NULL, "F", GEN, K_FLOAT, O(sp.frequency_penalty), -100, 100, NULL,
     "subtract F times its count in the window from each token's logit; 0: off"},
    {"--seed", NULL, "S", GEN, K_SEED, O(sp.seed), -1, 4294967295.0, NULL,
     "sampling seed, fixed so runs repeat; -1: a random one (llama.cpp's choice), printed to stderr"},
    {"--threads", "-t", "N", GEN | CMD_QUALITY | CMD_SERVE, K_LONG, O(threads), 1, 256, NULL, "threads"},
    {"--ctx", "-c", "CTX", GEN, K_LONG, O(ctx), 0, 1 << 24, "0: the model's, at most 4096", "context size in tokens"},
    {"--ctx", "-c", "CTX", CMD_SERVE, K_LONG, O(ctx), 0, 1 << 24, "0: the model's, at most 4096",
     "each request's context size in tokens"},
    {"--no-echo", NULL, NULL, GEN, K_SWITCH, O(no_echo), 0, 0, NULL, "do not print the prompt first"},
    {"--ids", NULL, NULL, GEN, K_SWITCH, O(ids), 0, 0, NULL,
     "print token ids instead of text, on one line: the prompt's (BOS first; not with --no-echo), then the "
     "generated ones (end-of-text excluded)"},
    {"--kv-type", NULL, "TYPE", KV, K_KV_TYPE, O(kv.type), CX_KV_HOT, 0, NULL, "hot KV blocks' format"},
    {"--kv-warm-type", NULL, "TYPE", KV, K_KV_TYPE, O(kv.warm_type), CX_KV_WARM, 0, NULL, "warm KV blocks' format"},
    {"--kv-hot", NULL, "BYTES", KV, K_BUDGET, O(kv.budget[CX_KV_HOT]), 0, 0, NULL,
     "hot tier budget: bytes with K/M/G, e.g. 64K, 2M, or unlimited"},
    {"--kv-warm", NULL, "BYTES", KV, K_BUDGET, O(kv.budget[CX_KV_WARM]), 0, 0, NULL,
     "warm tier budget; 0: no warm tier, hot blocks go to cold losslessly"},
    {"--kv-cold", NULL, "BYTES", KV, K_BUDGET, O(kv.budget[CX_KV_COLD]), 0, 0, NULL,
     "cold tier (zlib pages) budget in memory"},
    {"--kv-spill", NULL, "FILE", KV, K_STR, O(kv.spill_path), 0, 0, "none",
     "cold pages past the cold budget go to FILE"},
    {"--kv-policy", NULL, "POLICY", KV, K_POLICY, O(kv.policy), 0, 0, NULL, "which block leaves a tier first"},
    {"--prefix-cache", NULL, NULL, KV, K_SWITCH, O(kv.prefix_cache), 0, 0, NULL,
     "reuse the cached blocks of an identical prompt prefix"},
    {"--kv-stats", NULL, NULL, GEN, K_SWITCH, O(kv_stats), 0, 0, NULL, "print the KV cache's counters to stderr at the end"},
    {"--no-bos", NULL, NULL, CMD_TOKENIZE, K_SWITCH, O(no_bos), 0, 0, NULL,
     "do not put the BOS token first (it is only put there when the vocabulary asks for it)"},
    {"--no-special", NULL, NULL, GEN | CMD_TOKENIZE, K_SWITCH, O(no_special), 0, 0, NULL,
     "take control-token text (\"<|eot_id|>\", \"<s>\") in the text literally instead of as that token"},
    {"--shape", NULL, "NAME", CMD_SYNTH, K_SHAPE, O(shape), 0, 0, NULL, "a real model's shape (sizes: --list)"},
    {"--type", NULL, "TYPE", CMD_SYNTH, K_WTYPE, O(type), 0, 0, "f32", "the matrices' weight type"},
    {"--type", NULL, "TYPE", CMD_QUANTIZE, K_WTYPE, O(type), 0, 0, "none, required", "OUT's file type"},
    {"--output", "-o", "FILE", CMD_SYNTH, K_STR, O(out), 0, 0, NULL, "the GGUF file to write"},
    {"--seed", NULL, "S", CMD_SYNTH, K_LONG, O(seed), 0, 0x7fffffff, NULL, "the weights' seed"},
    {"--ctx", "-c", "CTX", CMD_SYNTH, K_LONG, O(ctx), 1, 1 << 24, "the shape's", "the context length written to the file"},
    {"--vocab", NULL, "FILE.gguf", CMD_SYNTH, K_STR, O(vocab), 0, 0, "a synthetic SentencePiece one",
     "take the vocabulary (every tokenizer.* entry) of this GGUF, e.g. a real byte-level BPE one; the vocabulary size "
     "becomes its token count"},
    {"--list", NULL, NULL, CMD_SYNTH, K_SWITCH, O(list), 0, 0, NULL, "list the shapes and their sizes, then exit"},
    {"--positions", NULL, "N", CMD_QUALITY, K_LONG, O(positions), 1, 100000000, NULL, "positions to score"},
    {"--text", NULL, "FILE", CMD_QUALITY, K_STR, O(text), 0, 0, "greedy text from fixed prompts",
     "score the tokens of FILE (BOS + context-sized chunks)"},
    {"--json", NULL, NULL, CMD_QUALITY, K_SWITCH, O(json), 0, 0, NULL, "print one JSON line instead of the table"},
    {"--lora", NULL, "FILE[:SCALE]", GEN | CMD_MERGE_LORA, K_LORA, O(lora), 0, 0, "none",
     "apply a LoRA adapter (GGUF, or a PEFT directory) with the user scale SCALE (default 1); repeat for several, "
     "applied together"},
    {"--lora-type", NULL, "TYPE", GEN, K_STR, O(lora_type), 0, 0, "auto: q8_0 for a quantized base, else f32",
     "adapters' in-memory type: f32, q8_0, q4_0 (half the memory traffic, coarser) or auto"},
    {"--model", "-m", "MODEL", CMD_SYNTH_LORA | CMD_MERGE_LORA, K_STR, O(model), 0, 0, NULL,
     "the base model (GGUF, or llama2.c with -z)"},
    {"--tokenizer", "-z", "TOKENIZER", CMD_SYNTH_LORA | CMD_MERGE_LORA, K_STR, O(tokenizer), 0, 0, NULL,
     "llama2.c tokenizer.bin, for a llama2.c base"},
    {"--rank", NULL, "R", CMD_SYNTH_LORA, K_LONG, O(rank), 1, 4096, NULL, "the adapter's rank"},
    {"--alpha", NULL, "A", CMD_SYNTH_LORA, K_FLOAT, O(alpha), 0, 1e6, "the rank (scale 1)",
     "adapter.lora.alpha: the scale is alpha / rank"},
    {"--targets", NULL, "LIST", CMD_SYNTH_LORA, K_STR, O(targets), 0, 0, NULL,
     "the matrices adapted: q,k,v,o,gate,up,down (any of them) or all"},
    {"--seed", NULL, "S", CMD_SYNTH_LORA, K_LONG, O(seed), 0, 0x7fffffff, NULL, "the adapter's seed"},
    {"--strength", NULL, "X", CMD_SYNTH_LORA, K_FLOAT, O(strength), 0, 100, NULL,
     "RMS of each matrix's change relative to the base matrix's RMS"},
    {"--type", NULL, "TYPE", CMD_SYNTH_LORA, K_WTYPE, O(type), 0, 0, "f32",
     "the tensors' type: f32, f16 or q8_0 (f32 where a row is not whole blocks)"},
    {"--type", NULL, "TYPE", CMD_MERGE_LORA, K_WTYPE, O(type), 0, 0, "f32", "the merged model's file type"},
    {"--output", "-o", "FILE", CMD_SYNTH_LORA | CMD_MERGE_LORA, K_STR, O(out), 0, 0, NULL, "the GGUF file to write"},
    {"--n-predict", "-n", "N", CMD_SERVE, K_LONG, O(n_predict), 1, 1 << 24, NULL,
     "max_tokens of a request that gives none"},
    {"--host", NULL, "ADDR", CMD_SERVE, K_STR, O(host), 0, 0, NULL, "address to listen on (0.0.0.0: every interface)"},
    {"--port", NULL, "PORT", CMD_SERVE, K_LONG, O(port), 0, 65535, NULL, "port to listen on; 0: a free one (printed)"},
    {"--api-key", NULL, "KEY", CMD_SERVE, K_STR, O(api_key), 0, 0, "none",
     "require 'Authorization: Bearer KEY' on every route but /health"},
    {"--chat-template", NULL, "NAME", CMD_SERVE, K_TMPL, O(chat_template), 0, 0, "the model's, recognized",
     "the chat format of /v1/chat/completions"},
    {"--max-seqs", NULL, "N", CMD_SERVE, K_LONG, O(max_seqs), 1, 256, NULL, "scheduler: sequences running at once"},
    {"--max-batch-tokens", NULL, "T", CMD_SERVE, K_LONG, O(max_batch_tokens), 1, 256, NULL,
     "scheduler: tokens per step over all sequences, at least --max-seqs"},
    {"--max-queue", NULL, "N", CMD_SERVE, K_LONG, O(max_queue), 1, 1000000, NULL,
     "scheduler: waiting requests; one more is answered 429"},
    {"--request-timeout", NULL, "S", CMD_SERVE, K_FLOAT, O(request_timeout), 0, 86400, NULL,
     "a request's deadline in seconds from its arrival (504 past it); 0: none"},
    {"--max-body", NULL, "BYTES", CMD_SERVE, K_LONG, O(max_body), 64, 1L << 30, NULL,
     "largest request body accepted (413 past it)"},
    {"--lora", NULL, "NAME=FILE", CMD_SERVE, K_LORA_NAMED, O(serve_lora), 0, 0, "none",
     "serve a LoRA adapter (GGUF, or a PEFT directory) under the model name NAME, loaded at start; repeatable "
     "(more: POST /v1/load_lora_adapter)"},
    {"--lora-budget", NULL, "BYTES", CMD_SERVE, K_BUDGET, O(lora_budget), 0, 0, "unlimited",
     "resident adapters' memory; idle ones are unloaded least recently used first and reloaded on use"},
    {"--lora-type", NULL, "TYPE", CMD_SERVE, K_STR, O(lora_type), 0, 0, "auto: q8_0 for a quantized base, else f32",
     "adapters' in-memory type: f32, q8_0, q4_0 (half the memory traffic, coarser) or auto"},
    {"--help", "-h", NULL, CMD_ALL, K_HELP, 0, 0, 0, NULL, "print this help and exit"},
};
#undef GEN
#undef KV
#undef O
#define N_FLAGS ((int)(sizeof FLAGS / sizeof FLAGS[0]))

/* See cli_flags.h. */
void cli_defaults(opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = 128;
    o->positions = 1000;
    o->threads = 1;
    o->sp = cx_sampler_defaults();
    o->kv = cx_kv_defaults();
    o->rank = 16;
    o->strength = 0.25f;
    o->targets = "all";
    cx_sched_params sp = cx_sched_defaults();
    o->host = "127.0.0.1";
    o->port = 8080;
    o->max_seqs = sp.max_seqs;
    o->max_batch_tokens = sp.max_batch_tokens;
    o->max_queue = sp.max_queue;
    o->max_body = 1L << 20;
}

/* Print "cortex: " + the message + newline to stderr. */
static void report(const char *fmt, va_list ap) {
    fputs("cortex: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

/* See cli_flags.h. */
int die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    report(fmt, ap);
    va_end(ap);
    return 1;
}

/* See cli_flags.h. */
int die_usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    report(fmt, ap);
    va_end(ap);
    return 2;
}

/* Append "|name" (no bar first) to the list in buf; a name that does not fit is left out. */
static void list_add(char *buf, size_t cap, const char *name) {
    size_t at = strlen(buf);
    int w = snprintf(buf + at, cap - at, "%s%s", at ? "|" : "", name);
    if (w < 0 || (size_t)w >= cap - at) buf[at] = 0;
}

/* The values an enumerated flag accepts, '|'-separated, from the engine's
 * tables; NULL for a flag that is not enumerated. */
static const char *flag_values(const flag *f, char *buf, size_t cap) {
    buf[0] = 0;
    switch (f->kind) {
    case K_KV_TYPE: return cx_kv_tier_types((int)f->lo, buf, cap);
    case K_POLICY:
        for (int p = 0; cx_kv_policy_name(p); p++) list_add(buf, cap, cx_kv_policy_name(p));
        return buf;
    case K_WTYPE: /* every tensor type id with a name, then the file types (one today) */
        for (int t = 0; t < CX_QUANT_NTYPES; t++)
            if (strcmp(cx_type_name(t), "?")) list_add(buf, cap, cx_type_name(t));
        list_add(buf, cap, cx_type_name(CX_FTYPE_Q4_K_M));
        return buf;
    case K_SHAPE:
        for (const cx_shape *s = cx_shapes(); s->name; s++) list_add(buf, cap, s->name);
        return buf;
    case K_TMPL:
        for (int t = 0; srv_chat_name(t); t++) list_add(buf, cap, srv_chat_name(t));
        list_add(buf, cap, "harmony"); /* gpt-oss's format by its own name (srv_chat_find) */
        return buf;
    default: return NULL;
    }
}

/* 1 if `v` is one of the '|'-separated names in list (case-insensitive). */
static int in_list(const char *list, const char *v) {
    size_t n = strlen(v);
    for (const char *p = list; *p;) {
        const char *bar = strchr(p, '|');
        size_t k = bar ? (size_t)(bar - p) : strlen(p);
        if (k == n && !strncasecmp(p, v, n)) return 1;
        if (!bar) break;
        p = bar + 1;
    }
    return 0;
}

/* The default of f in o, in words, into buf; NULL when it has none to show. */
static const char *flag_default(const flag *f, const opts *o, char *buf, size_t cap) {
    if (f->dflt) return f->dflt;
    const char *at = (const char *)o + f->off;
    switch (f->kind) {
    case K_STR: case K_WTYPE: case K_SHAPE: case K_TMPL: {
        const char *s;
        memcpy(&s, at, sizeof s);
        return s;
    }
    case K_LONG: snprintf(buf, cap, "%ld", *(const long *)(const void *)at); return buf;
    case K_INT: snprintf(buf, cap, "%d", *(const int *)(const void *)at); return buf;
    case K_FLOAT: snprintf(buf, cap, "%g", (double)*(const float *)(const void *)at); return buf;
    case K_SEED: snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)(const void *)at); return buf;
    case K_BUDGET: {
        int64_t b = *(const int64_t *)(const void *)at;
        if (b == CX_KV_UNLIMITED) return "unlimited";
        snprintf(buf, cap, "%lld", (long long)b);
        return buf;
    }
    case K_KV_TYPE: return cx_kv_type_name(*(const int *)(const void *)at);
    case K_POLICY: return cx_kv_policy_name(*(const int *)(const void *)at);
    default: return NULL;
    }
}

/* Parse a whole-string integer in [lo, hi]; -1 after printing why not. */
static int parse_long(const char *what, const char *s, double lo, double hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        die_usage("%s: '%s' is not an integer in [%.0f, %.0f]", what, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* Parse a whole-string number in [lo, hi]; -1 after printing why not. */
static int parse_float(const char *what, const char *s, double lo, double hi, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        die_usage("%s: '%s' is not a number in [%g, %g]", what, s, lo, hi);
        return -1;
    }
    *out = (float)v;
    return 0;
}

/* Store the value v of flag f (as written: `name`) into o; 0, or 2 after one error line. */
static int flag_set(const flag *f, const char *name, const char *v, opts *o) {
    void *at = (char *)o + f->off;
    long n;
    char list[512];
    const char *vals = flag_values(f, list, sizeof list);
    if (vals && !in_list(vals, v)) return die_usage("%s: '%s' is not one of %s", name, v, vals);
    switch (f->kind) {
    case K_STR: case K_WTYPE: case K_SHAPE: case K_TMPL: memcpy(at, &v, sizeof v); return 0;
    case K_LONG:
        if (parse_long(name, v, f->lo, f->hi, &n)) return 2;
        *(long *)at = n;
        return 0;
    case K_INT:
        if (parse_long(name, v, f->lo, f->hi, &n)) return 2;
        *(int *)at = (int)n;
        return 0;
    case K_FLOAT: return parse_float(name, v, f->lo, f->hi, (float *)at) ? 2 : 0;
    case K_SEED:
        if (parse_long(name, v, f->lo, f->hi, &n)) return 2;
        o->random_seed = n < 0;
        if (n >= 0) *(uint64_t *)at = (uint64_t)n;
        return 0;
    case K_BUDGET: {
        int64_t b = !strcmp(v, "unlimited") ? CX_KV_UNLIMITED : cx_parse_bytes(v);
        if (b == -1 && strcmp(v, "unlimited"))
            return die_usage("%s: '%s' is not a byte count (e.g. 65536, 64K, 1.5M) or 'unlimited'", name, v);
        *(int64_t *)at = b;
        return 0;
    }
    case K_LORA: {
        if (o->n_lora >= CX_LORA_MAX_SET) return die_usage("%s: at most %d adapters", name, CX_LORA_MAX_SET);
        const char *colon = strrchr(v, ':');
        char *end = NULL;
        float scale = 1.0f;
        if (colon && colon[1]) { /* a number after the last ':' is the scale; otherwise it is part of the path */
            errno = 0;
            double d = strtod(colon + 1, &end);
            if (!errno && *end == 0) scale = (float)d;
            else colon = NULL;
        } else colon = NULL;
        if ((colon ? colon : v + strlen(v)) == v) return die_usage("%s: '%s' names no file", name, v);
        /* the value is an argv string (writable, alive for the process): end the path at the ':' */
        if (colon) *(char *)(uintptr_t)colon = 0;
        o->lora[o->n_lora] = v;
        o->lora_scale[o->n_lora++] = scale;
        return 0;
    }
    case K_LORA_NAMED: {
        const char *eq = strchr(v, '=');
        if (!eq || eq == v || !eq[1]) return die_usage("%s: '%s' is not NAME=FILE", name, v);
        if (o->n_serve_lora >= (int)(sizeof o->serve_lora / sizeof o->serve_lora[0]))
            return die_usage("%s: at most %d adapters at start (load more with POST /v1/load_lora_adapter)", name,
                             (int)(sizeof o->serve_lora / sizeof o->serve_lora[0]));
        o->serve_lora[o->n_serve_lora++] = v;
        return 0;
    }
    case K_KV_TYPE: *(int *)at = cx_kv_type_from_name(v); return 0;
    case K_POLICY: *(int *)at = cx_kv_policy_from_name(v); return 0;
    default: /* switches and --help take no value: cli_parse never gets here with one */
        assert(0);
        return die_usage("%s: takes no value", name);
    }
}

/* The entry of flag `a` for command c, or NULL. */
static const flag *flag_find(const cli_command *c, const char *a) {
    for (int i = 0; i < N_FLAGS; i++) {
        const flag *f = &FLAGS[i];
        if ((f->cmds & c->bit) && (!strcmp(a, f->name) || (f->alias && !strcmp(a, f->alias)))) return f;
    }
    return NULL;
}

/* See cli_flags.h. */
int cli_parse(const cli_command *c, int argc, char **argv, opts *o) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1]) { /* positional ("-" included) */
            if (o->n_pos >= c->max_pos)
                return die_usage("%s: unexpected argument '%s' (see cortex %s --help)", c->name, a, c->name);
            o->pos[o->n_pos++] = a;
            continue;
        }
        const flag *f = flag_find(c, a);
        if (!f) return die_usage("%s: unknown option '%s' (see cortex %s --help)", c->name, a, c->name);
        if (f->kind == K_HELP) return 1;
        if (f->kind == K_SWITCH) {
            *(int *)(void *)((char *)o + f->off) = 1;
            continue;
        }
        if (i + 1 >= argc) return die_usage("%s: %s needs a value (%s)", c->name, a, f->meta);
        int rc = flag_set(f, a, argv[++i], o);
        if (rc) return rc;
    }
    return 0;
}

/* See cli_flags.h. */
void cli_help(const cli_command *c) {
    opts d;
    cli_defaults(&d);
    printf("usage: cortex %s %s\n\n%s\noptions:\n", c->name, c->synopsis, c->about);
    for (int i = 0; i < N_FLAGS; i++) {
        const flag *f = &FLAGS[i];
        if (!(f->cmds & c->bit)) continue;
        char left[64], vbuf[512], dbuf[64];
        snprintf(left, sizeof left, "  %s%s%s%s%s", f->alias ? f->alias : "", f->alias ? ", " : "    ", f->name,
                 f->meta ? " " : "", f->meta ? f->meta : "");
        const char *vals = flag_values(f, vbuf, sizeof vbuf), *dflt = flag_default(f, &d, dbuf, sizeof dbuf);
        if (strlen(left) > 30) printf("%s\n%31s", left, "");
        else printf("%-30s ", left);
        printf("%s", f->help);
        if (vals || dflt)
            printf(" (%s%s%s%s%s)", vals ? "one of " : "", vals ? vals : "", vals && dflt ? "; " : "",
                   dflt ? "default " : "", dflt ? dflt : "");
        putchar('\n');
    }
    printf("\nexample:\n  %s\n", c->example);
}

/* See cli_flags.h. */
void cli_usage(const cli_command *cmds, int n, FILE *f) {
    fprintf(f, "usage: cortex COMMAND [options]\n\ncommands:\n");
    for (int i = 0; i < n; i++) fprintf(f, "  %-9s %s\n", cmds[i].name, cmds[i].synopsis);
    fprintf(f, "\ncortex COMMAND --help: what COMMAND does, every option with its accepted values and default, "
               "an example\n");
}
