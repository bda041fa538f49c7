/*
 * cli_flags.c - see cli_flags.h: the `cortex` command's flag table on the
 * shared table-driven parser and help printer (engine/src/flags.c,
 * cortex_tools.h), with the callbacks of its own kinds of values (the
 * sampling seed, --lora lists, chat templates). Accepted values of the
 * enumerated flags come from the engine's own tables (weight type names, KV
 * tier types and policies, model shapes), defaults from cli_defaults().
 */
#include "cli_flags.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* generate --seed S: a uint64_t from [lo, hi]; -1 draws one at start (opts.random_seed). */
static int parse_seed(const cx_flag *f, const char *name, const char *v, void *op, char *err, size_t n) {
    opts *o = op;
    long long s;
    if (cx_parse_int_in(v, (long long)f->lo, (long long)f->hi, &s))
        return snprintf(err, n, "%s: '%s' is not an integer in [%.0f, %.0f]", name, v, f->lo, f->hi), -1;
    o->random_seed = s < 0;
    if (s >= 0) o->sp.seed = (uint64_t)s;
    return 0;
}

/* --spec KIND: none, ngram, self, self:TYPE or model (cx_spec_parse). */
static int parse_spec(const cx_flag *f, const char *name, const char *v, void *op, char *err, size_t n) {
    opts *o = op;
    cx_err e = {0};
    if (cx_spec_parse(v, &o->spec, &e)) return snprintf(err, n, "%s: %s", name, e.msg), -1;
    return 0;
}

/* The default --spec: none. */
static const char *show_spec(const cx_flag *f, const void *op, char *buf, size_t cap) {
    const opts *o = op;
    snprintf(buf, cap, "%s", o->spec.kind == CX_SPEC_SELF ? "self:q4_0" : cx_spec_kind_name(o->spec.kind));
    return buf;
}

/* The seed's default, a uint64_t. */
static const char *show_seed(const cx_flag *f, const void *op, char *buf, size_t cap) {
    const opts *o = op;
    (void)f;
    snprintf(buf, cap, "%llu", (unsigned long long)o->sp.seed);
    return buf;
}

/* --lora FILE[:SCALE] (repeatable): appended to opts.lora with its scale. */
static int parse_lora(const cx_flag *f, const char *name, const char *v, void *op, char *err, size_t n) {
    opts *o = op;
    (void)f;
    if (o->n_lora >= CX_LORA_MAX_SET) return snprintf(err, n, "%s: at most %d adapters", name, CX_LORA_MAX_SET), -1;
    const char *colon = strrchr(v, ':');
    char *end = NULL;
    float scale = 1.0f;
    if (colon && colon[1]) { /* a number after the last ':' is the scale; otherwise it is part of the path */
        errno = 0;
        double d = strtod(colon + 1, &end);
        if (!errno && *end == 0) scale = (float)d;
        else colon = NULL;
    } else colon = NULL;
    if ((colon ? colon : v + strlen(v)) == v) return snprintf(err, n, "%s: '%s' names no file", name, v), -1;
    /* the value is an argv string (writable, alive for the process): end the path at the ':' */
    if (colon) *(char *)(uintptr_t)colon = 0;
    o->lora[o->n_lora] = v;
    o->lora_scale[o->n_lora++] = scale;
    return 0;
}

/* serve --lora NAME=FILE (repeatable): appended to opts.serve_lora. */
static int parse_lora_named(const cx_flag *f, const char *name, const char *v, void *op, char *err, size_t n) {
    opts *o = op;
    (void)f;
    const char *eq = strchr(v, '=');
    int max = (int)(sizeof o->serve_lora / sizeof o->serve_lora[0]);
    if (!eq || eq == v || !eq[1]) return snprintf(err, n, "%s: '%s' is not NAME=FILE", name, v), -1;
    if (o->n_serve_lora >= max)
        return snprintf(err, n, "%s: at most %d adapters at start (load more at run time: --lora-dir)", name,
                        max), -1;
    o->serve_lora[o->n_serve_lora++] = v;
    return 0;
}

/* serve --chat-template: the chat formats (cx_chat_name), then gpt-oss's by its
 * own name (cx_chat_find); a name that does not fit is left out. */
static const char *chat_templates(const cx_flag *f, char *buf, size_t cap) {
    (void)f;
    size_t at = 0;
    buf[0] = 0;
    for (int t = 0; t == 0 || cx_chat_name(t - 1); t++) {
        const char *name = cx_chat_name(t) ? cx_chat_name(t) : "harmony";
        int w = snprintf(buf + at, cap - at, "%s%s", at ? "|" : "", name);
        if (w < 0 || (size_t)w >= cap - at) {
            buf[at] = 0;
            break;
        }
        at += (size_t)w;
    }
    return buf;
}

#define O(f) offsetof(opts, f)
#define GEN CMD_GENERATE
#define KV (CMD_GENERATE | CMD_SERVE) /* the KV cache's flags */
#define SPEC (CMD_GENERATE | CMD_SERVE) /* speculative decoding's flags */
static const cx_flag FLAGS[] = {
    {"--model", "-m", "MODEL", GEN | CMD_TOKENIZE | CMD_INFO | CMD_SERVE, CX_FLAG_STR, O(model), 0, 0, NULL,
     .help = "model file: GGUF (v2, v3) or a llama2.c checkpoint (then -z)"},
    {"--model", "-m", "MODEL", CMD_QUALITY, CX_FLAG_STR, O(model), 0, 0, "the reference itself",
     .help = "the model compared with the reference"},
    {"--ref", NULL, "REF_MODEL", CMD_QUALITY, CX_FLAG_STR, O(ref), 0, 0, NULL, .help = "the reference model"},
    {"--tokenizer", "-z", "TOKENIZER", GEN | CMD_INFO | CMD_TOKENIZE | CMD_QUANTIZE | CMD_QUALITY | CMD_SERVE, CX_FLAG_STR, O(tokenizer),
     0, 0, NULL, .help = "llama2.c tokenizer.bin, for a llama2.c checkpoint"},
    {"--prompt", "-p", "PROMPT", GEN, CX_FLAG_STR, O(prompt), 0, 0, NULL, .help = "the prompt text"},
    {"--prompt", "-p", "TEXT", CMD_TOKENIZE, CX_FLAG_STR, O(prompt), 0, 0, NULL, .help = "the text to tokenize"},
    {"--prompt-file", "-f", "FILE", GEN | CMD_TOKENIZE, CX_FLAG_STR, O(prompt_file), 0, 0, NULL,
     .help = "read the text from FILE instead (its bytes as they are)"},
    {"--n-predict", "-n", "N", GEN, CX_FLAG_LONG, O(n_predict), 0, 1 << 24, NULL,
     .help = "tokens to generate at most (fewer at end-of-text or a full context)"},
    {"--temp", NULL, "T", GEN, CX_FLAG_FLOAT, O(sp.temperature), 0, 100, NULL,
     .help = "temperature; 0: greedy (the argmax after the penalties, lowest id on ties)"},
    {"--top-k", NULL, "K", GEN, CX_FLAG_INT, O(sp.top_k), 0, 1 << 24, NULL,
     .help = "keep the K most likely tokens; 0: off"},
    {"--top-p", NULL, "P", GEN, CX_FLAG_FLOAT, O(sp.top_p), 0, 1, NULL,
     .help = "keep the fewest most likely tokens whose probability reaches P; 1: off"},
    {"--min-p", NULL, "P", GEN, CX_FLAG_FLOAT, O(sp.min_p), 0, 1, NULL,
     .help = "keep tokens at least P times as likely as the most likely one; 0: off"},
    {"--repeat-penalty", NULL, "R", GEN, CX_FLAG_FLOAT, O(sp.repeat_penalty), 0.01, 100, NULL,
     .help = "divide the logit of each token in the window by R (multiply if <= 0), once per token; 1: off"},
    {"--repeat-last-n", NULL, "N", GEN, CX_FLAG_INT, O(sp.repeat_last_n), -1, 1 << 20, NULL,
     .help = "the penalties' window: the last N tokens, prompt included; 0: penalties off; -1: the context size"},
    {"--presence-penalty", NULL, "P", GEN, CX_FLAG_FLOAT, O(sp.presence_penalty), -100, 100, NULL,
     .help = "subtract P from the logit of each token in the window; 0: off"},
    {"--frequency-penalty", NULL, "F", GEN, CX_FLAG_FLOAT, O(sp.frequency_penalty), -100, 100, NULL,
     .help = "subtract F times its count in the window from each token's logit; 0: off"},
    {"--seed", NULL, "S", GEN, CX_FLAG_CUSTOM, O(sp.seed), -1, 4294967295.0, NULL,
     .help = "sampling seed, fixed so runs repeat; -1: a random one (llama.cpp's choice), printed to stderr",
     .parse = parse_seed, .show = show_seed},
    {"--spec", NULL, "KIND", SPEC, CX_FLAG_CUSTOM, O(spec.kind), 0, 0, NULL,
     .help = "speculative decoding (the output does not change): ngram drafts from the prompt and text so far, "
     "self:TYPE from the model quantized to TYPE at load (self: q4_0; the model must be f32/f16/bf16), model from "
     "--draft; none: off", .parse = parse_spec, .show = show_spec},
    {"--draft", "-md", "MODEL", SPEC, CX_FLAG_STR, O(spec.draft_path), 0, 0, "none",
     .help = "draft model for --spec model (implied when --spec is not given): a GGUF with the model's vocabulary"},
    {"--draft-max", NULL, "N", SPEC, CX_FLAG_INT, O(spec.draft_max), 1, CX_SPEC_MAX_DRAFT, NULL,
     .help = "most tokens drafted per pass of the model"},
    {"--draft-min", NULL, "N", SPEC, CX_FLAG_INT, O(spec.draft_min), 0, CX_SPEC_MAX_DRAFT, NULL,
     .help = "a draft shorter than N is not checked (the step decodes one token)"},
    {"--draft-p-min", NULL, "P", SPEC, CX_FLAG_FLOAT, O(spec.p_min), 0, 1, NULL,
     .help = "a draft model stops drafting at a token it gives less than P"},
    {"--draft-fixed", NULL, NULL, SPEC, CX_FLAG_SWITCH, O(spec_fixed), 0, 0, NULL,
     .help = "draft --draft-max tokens every time instead of the length the measured acceptance and times favour"},
    {"--spec-max-batch", NULL, "N", CMD_SERVE, CX_FLAG_LONG, O(spec_max_batch), 1, 256, NULL,
     .help = "speculate only in steps where at most N sequences decode (past that, batching fills each pass; a "
     "request asks for none with \"speculative\": false)"},
    {"--threads", "-t", "N", GEN | CMD_QUALITY | CMD_SERVE, CX_FLAG_LONG, O(threads), 1, 256, NULL, .help = "threads"},
    {"--pin", NULL, "POLICY", GEN | CMD_QUALITY | CMD_SERVE, CX_FLAG_CHOICE, O(pin), 0, 0, NULL,
     .help = "pin the engine's threads, one CPU each, among the CPUs the process may use: compact fills a core's SMT"
     " siblings, then the next core; spread takes a core of each package/NUMA node in turn, siblings last; none leaves"
     " them to the kernel", .values = cx_flag_pin_policies},
    {"--numa", NULL, "POLICY", GEN | CMD_QUALITY | CMD_SERVE, CX_FLAG_CHOICE, O(numa), 0, 0, NULL,
     .help = "NUMA policy of the weights (when copied into huge pages) and the KV cache: interleave spreads their pages"
     " over the nodes, local puts each on the node of the thread first writing it, default leaves it to the kernel;"
     " with one node it has no effect", .values = cx_flag_numa_policies},
    {"--ctx", "-c", "CTX", GEN, CX_FLAG_LONG, O(ctx), 0, 1 << 24, "0: the model's, at most 4096",
     .help = "context size in tokens"},
    {"--ctx", "-c", "CTX", CMD_SERVE, CX_FLAG_LONG, O(ctx), 0, 1 << 24, "0: the model's, at most 4096",
     .help = "each request's context size in tokens"},
    {"--no-echo", NULL, NULL, GEN, CX_FLAG_SWITCH, O(no_echo), 0, 0, NULL, .help = "do not print the prompt first"},
    {"--ids", NULL, NULL, GEN, CX_FLAG_SWITCH, O(ids), 0, 0, NULL,
     .help = "print token ids instead of text, on one line: the prompt's (BOS first; not with --no-echo), then the "
     "generated ones (end-of-text excluded)"},
    {"--kv-type", NULL, "TYPE", KV, CX_FLAG_CUSTOM, O(kv.type), CX_KV_HOT, 0, NULL,
     .help = "hot KV blocks' format", CX_FLAG_KV_TYPE_OPS},
    {"--kv-warm-type", NULL, "TYPE", KV, CX_FLAG_CUSTOM, O(kv.warm_type), CX_KV_WARM, 0, NULL,
     .help = "warm KV blocks' format", CX_FLAG_KV_TYPE_OPS},
    {"--kv-hot", NULL, "BYTES", KV, CX_FLAG_BUDGET, O(kv.budget[CX_KV_HOT]), 0, 0, NULL,
     .help = "hot tier budget: bytes with K/M/G, e.g. 64K, 2M, or unlimited"},
    {"--kv-warm", NULL, "BYTES", KV, CX_FLAG_BUDGET, O(kv.budget[CX_KV_WARM]), 0, 0, NULL,
     .help = "warm tier budget; 0: no warm tier, hot blocks go to cold losslessly"},
    {"--kv-cold", NULL, "BYTES", KV, CX_FLAG_BUDGET, O(kv.budget[CX_KV_COLD]), 0, 0, NULL,
     .help = "cold tier (zlib pages) budget in memory"},
    {"--kv-spill", NULL, "FILE", KV, CX_FLAG_STR, O(kv.spill_path), 0, 0, "none",
     .help = "cold pages past the cold budget go to FILE"},
    {"--kv-policy", NULL, "POLICY", KV, CX_FLAG_CUSTOM, O(kv.policy), 0, 0, NULL,
     .help = "which block leaves a tier first", CX_FLAG_KV_POLICY_OPS},
    {"--prefix-cache", NULL, NULL, KV, CX_FLAG_SWITCH, O(kv.prefix_cache), 0, 0, NULL,
     .help = "reuse the cached blocks of an identical prompt prefix"},
    {"--kv-stats", NULL, NULL, GEN, CX_FLAG_SWITCH, O(kv_stats), 0, 0, NULL,
     .help = "print the KV cache's counters to stderr at the end"},
    {"--no-bos", NULL, NULL, CMD_TOKENIZE, CX_FLAG_SWITCH, O(no_bos), 0, 0, NULL,
     .help = "do not put the BOS token first (it is only put there when the vocabulary asks for it)"},
    {"--no-special", NULL, NULL, GEN | CMD_TOKENIZE, CX_FLAG_SWITCH, O(no_special), 0, 0, NULL,
     .help = "take control-token text (\"<|eot_id|>\", \"<s>\") in the text literally instead of as that token"},
    {"--shape", NULL, "NAME", CMD_SYNTH, CX_FLAG_STR, O(shape), 0, 0, NULL,
     .help = "a real model's shape (sizes: --list)", .values = cx_flag_shapes},
    {"--type", NULL, "TYPE", CMD_SYNTH, CX_FLAG_STR, O(type), 0, 0, "f32",
     .help = "the matrices' weight type", .values = cx_flag_weight_types},
    {"--type", NULL, "TYPE", CMD_QUANTIZE, CX_FLAG_STR, O(type), 0, 0, "none, required",
     .help = "OUT's file type", .values = cx_flag_weight_types},
    {"--output", "-o", "FILE", CMD_SYNTH, CX_FLAG_STR, O(out), 0, 0, NULL, .help = "the GGUF file to write"},
    {"--seed", NULL, "S", CMD_SYNTH, CX_FLAG_LONG, O(seed), 0, 0x7fffffff, NULL, .help = "the weights' seed"},
    {"--ctx", "-c", "CTX", CMD_SYNTH, CX_FLAG_LONG, O(ctx), 1, 1 << 24, "the shape's",
     .help = "the context length written to the file"},
    {"--vocab", NULL, "FILE.gguf", CMD_SYNTH, CX_FLAG_STR, O(vocab), 0, 0, "a synthetic SentencePiece one",
     .help = "take the vocabulary (every tokenizer.* entry) of this GGUF, e.g. a real byte-level BPE one; the vocabulary size "
     "becomes its token count"},
    {"--list", NULL, NULL, CMD_SYNTH, CX_FLAG_SWITCH, O(list), 0, 0, NULL,
     .help = "list the shapes and their sizes, then exit"},
    {"--positions", NULL, "N", CMD_QUALITY, CX_FLAG_LONG, O(positions), 1, 100000000, NULL,
     .help = "positions to score"},
    {"--ctx", "-c", "CTX", CMD_QUALITY, CX_FLAG_LONG, O(ctx), 0, 1 << 24, "0: the models', at most 2048",
     .help = "positions per sequence, at most the smaller of the models' contexts"},
    {"--from", NULL, "N", CMD_QUALITY, CX_FLAG_LONG, O(from), 0, 1 << 24, NULL,
     .help = "score each sequence's positions from N on (the first N only build the context): quality at depth N"},
    {"--kv-type", NULL, "TYPE", CMD_QUALITY, CX_FLAG_CUSTOM, O(kv.type), CX_KV_HOT, 0, NULL,
     .help = "the model's hot KV format", CX_FLAG_KV_TYPE_OPS},
    {"--ref-kv-type", NULL, "TYPE", CMD_QUALITY, CX_FLAG_CUSTOM, O(ref_kv_type), CX_KV_HOT, 0, NULL,
     .help = "the reference's hot KV format", CX_FLAG_KV_TYPE_OPS},
    {"--text", NULL, "FILE", CMD_QUALITY, CX_FLAG_STR, O(text), 0, 0, "greedy text from fixed prompts",
     .help = "score the tokens of FILE (BOS + context-sized chunks)"},
    {"--json", NULL, NULL, CMD_QUALITY, CX_FLAG_SWITCH, O(json), 0, 0, NULL,
     .help = "print one JSON line instead of the table"},
    {"--lora", NULL, "FILE[:SCALE]", GEN | CMD_MERGE_LORA, CX_FLAG_CUSTOM, O(lora), 0, 0, "none",
     .help = "apply a LoRA adapter (GGUF, or a PEFT directory) with the user scale SCALE (default 1); repeat for several, "
     "applied together", .parse = parse_lora},
    {"--lora-type", NULL, "TYPE", GEN, CX_FLAG_STR, O(lora_type), 0, 0, "auto: q8_0 for a quantized base, else f32",
     .help = "adapters' in-memory type: f32, q8_0, q4_0 (half the memory traffic, coarser) or auto"},
    {"--model", "-m", "MODEL", CMD_SYNTH_LORA | CMD_MERGE_LORA, CX_FLAG_STR, O(model), 0, 0, NULL,
     .help = "the base model (GGUF, or llama2.c with -z)"},
    {"--tokenizer", "-z", "TOKENIZER", CMD_SYNTH_LORA | CMD_MERGE_LORA, CX_FLAG_STR, O(tokenizer), 0, 0, NULL,
     .help = "llama2.c tokenizer.bin, for a llama2.c base"},
    {"--rank", NULL, "R", CMD_SYNTH_LORA, CX_FLAG_LONG, O(rank), 1, 4096, NULL, .help = "the adapter's rank"},
    {"--alpha", NULL, "A", CMD_SYNTH_LORA, CX_FLAG_FLOAT, O(alpha), 0, 1e6, "the rank (scale 1)",
     .help = "adapter.lora.alpha: the scale is alpha / rank"},
    {"--targets", NULL, "LIST", CMD_SYNTH_LORA, CX_FLAG_STR, O(targets), 0, 0, NULL,
     .help = "the matrices adapted: q,k,v,o,gate,up,down (any of them) or all"},
    {"--seed", NULL, "S", CMD_SYNTH_LORA, CX_FLAG_LONG, O(seed), 0, 0x7fffffff, NULL, .help = "the adapter's seed"},
    {"--strength", NULL, "X", CMD_SYNTH_LORA, CX_FLAG_FLOAT, O(strength), 0, 100, NULL,
     .help = "RMS of each matrix's change relative to the base matrix's RMS"},
    {"--type", NULL, "TYPE", CMD_SYNTH_LORA, CX_FLAG_STR, O(type), 0, 0, "f32",
     .help = "the tensors' type: f32, f16 or q8_0 (f32 where a row is not whole blocks)",
     .values = cx_flag_weight_types},
    {"--type", NULL, "TYPE", CMD_MERGE_LORA, CX_FLAG_STR, O(type), 0, 0, "f32",
     .help = "the merged model's file type", .values = cx_flag_weight_types},
    {"--output", "-o", "FILE", CMD_SYNTH_LORA | CMD_MERGE_LORA, CX_FLAG_STR, O(out), 0, 0, NULL,
     .help = "the GGUF file to write"},
    {"--n-predict", "-n", "N", CMD_SERVE, CX_FLAG_LONG, O(n_predict), 1, 1 << 24, NULL,
     .help = "max_tokens of a request that gives none"},
    {"--host", NULL, "ADDR", CMD_SERVE, CX_FLAG_STR, O(host), 0, 0, NULL,
     .help = "address to listen on (0.0.0.0: every interface)"},
    {"--port", NULL, "PORT", CMD_SERVE, CX_FLAG_LONG, O(port), 0, 65535, NULL,
     .help = "port to listen on; 0: a free one (printed)"},
    {"--api-key", NULL, "KEY", CMD_SERVE, CX_FLAG_STR, O(api_key), 0, 0, "none",
     .help = "require 'Authorization: Bearer KEY' on every route but /health"},
    {"--chat-template", NULL, "NAME", CMD_SERVE, CX_FLAG_STR, O(chat_template), 0, 0, "the model's, recognized",
     .help = "the chat format of /v1/chat/completions", .values = chat_templates},
    {"--max-seqs", NULL, "N", CMD_SERVE, CX_FLAG_LONG, O(max_seqs), 1, 256, NULL,
     .help = "scheduler: sequences running at once"},
    {"--max-batch-tokens", NULL, "T", CMD_SERVE, CX_FLAG_LONG, O(max_batch_tokens), 1, 256, NULL,
     .help = "scheduler: tokens per step over all sequences, at least --max-seqs"},
    {"--max-queue", NULL, "N", CMD_SERVE, CX_FLAG_LONG, O(max_queue), 1, 1000000, NULL,
     .help = "scheduler: waiting requests; one more is answered 429"},
    {"--request-timeout", NULL, "S", CMD_SERVE, CX_FLAG_FLOAT, O(request_timeout), 0, 86400, NULL,
     .help = "a request's deadline in seconds from its arrival (504 past it); 0: none"},
    {"--max-body", NULL, "BYTES", CMD_SERVE, CX_FLAG_LONG, O(max_body), 64, 1L << 30, NULL,
     .help = "largest request body accepted (413 past it)"},
    {"--max-conns", NULL, "N", CMD_SERVE, CX_FLAG_LONG, O(max_conns), 1, 16384, NULL,
     .help = "connections served at once (lowered to half of what the file limit allows); past it a request gets 503 "
     "server_busy and its connection closes (GET /health is still answered)"},
    {"--max-conns-per-ip", NULL, "N", CMD_SERVE, CX_FLAG_LONG, O(max_conns_per_ip), 0, 16384, NULL,
     .help = "of them from one client address (IPv6: one /64), so a few clients cannot hold every one; past it 503 as "
     "above; 0: no such limit (behind a proxy, every client is the proxy's address)"},
    {"--read-timeout", NULL, "S", CMD_SERVE, CX_FLAG_FLOAT, O(read_timeout), 0.1, 86400, NULL,
     .help = "a request's headers and body must arrive within S seconds of the connection's waiting for it (its "
     "opening, or the previous response sent), else the connection is closed: idle, slow and truncated ones"},
    {"--busy-timeout", NULL, "S", CMD_SERVE, CX_FLAG_FLOAT, O(busy_timeout), 0.1, 86400, NULL,
     .help = "the same for a connection past a limit, which then gets its 503"},
    {"--idle-timeout", NULL, "S", CMD_SERVE, CX_FLAG_LONG, O(idle_timeout), 0, 86400, NULL,
     .help = "close a connection on which no byte moved for S seconds while nothing is generated for it (a client "
     "that stops reading its response); 0: never"},
    {"--drain-timeout", NULL, "S", CMD_SERVE, CX_FLAG_FLOAT, O(drain_timeout), 0, 86400, NULL,
     .help = "at SIGTERM, how long admitted requests may run on before what is left is cancelled"},
    {"--lora", NULL, "NAME=FILE", CMD_SERVE, CX_FLAG_CUSTOM, O(serve_lora), 0, 0, "none",
     .help = "serve a LoRA adapter (GGUF, or a PEFT directory) under the model name NAME, loaded at start; repeatable "
     "(more at run time with --lora-dir)", .parse = parse_lora_named},
    {"--lora-dir", NULL, "DIR", CMD_SERVE, CX_FLAG_STR, O(lora_dir), 0, 0, "none: the adapter routes answer 403",
     .help = "allow POST /v1/load_lora_adapter and /v1/unload_lora_adapter, loading only files inside DIR (lora_path "
     "relative to it; nothing outside, symbolic links resolved)"},
    {"--max-adapters", NULL, "N", CMD_SERVE, CX_FLAG_LONG, O(max_adapters), 1, 4096, NULL,
     .help = "adapters registered at once (--lora's included); a load past it gets 409"},
    {"--lora-budget", NULL, "BYTES", CMD_SERVE, CX_FLAG_BUDGET, O(lora_budget), 0, 0, "unlimited",
     .help = "resident adapters' memory; idle ones are unloaded least recently used first and reloaded on use"},
    {"--lora-type", NULL, "TYPE", CMD_SERVE, CX_FLAG_STR, O(lora_type), 0, 0, "auto: q8_0 for a quantized base, else f32",
     .help = "adapters' in-memory type: f32, q8_0, q4_0 (half the memory traffic, coarser) or auto"},
    {"--help", "-h", NULL, CMD_ALL, CX_FLAG_HELP, 0, 0, 0, NULL, .help = "print this help and exit"},
};
#undef GEN
#undef KV
#undef SPEC
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
    o->spec = cx_spec_defaults();
    o->spec.kind = CX_SPEC_NONE; /* speculation is asked for */
    o->spec_max_batch = CX_SCHED_SPEC_MAX_BATCH;
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
    o->max_adapters = 32;
    o->max_conns = 1024;
    o->max_conns_per_ip = 128;
    o->read_timeout = 30;
    o->busy_timeout = 5;
    o->idle_timeout = 60;
    o->drain_timeout = 30;
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

/* The parse of command c: its bit, its positional arguments. */
static cx_flags flags_of(const cli_command *c) {
    cx_flags p = {.prog = "cortex", .cmd = c->name, .table = FLAGS, .n = N_FLAGS, .bit = c->bit, .max_pos = c->max_pos};
    return p;
}

/* See cli_flags.h. */
int cli_parse(const cli_command *c, int argc, char **argv, opts *o) {
    cx_flags p = flags_of(c);
    int rc = cx_flags_parse(&p, argc, argv, o);
    o->n_pos = p.n_pos;
    for (int i = 0; i < p.n_pos && i < (int)(sizeof o->pos / sizeof o->pos[0]); i++) o->pos[i] = p.pos[i];
    return rc;
}

/* See cli_flags.h. */
void cli_help(const cli_command *c) {
    opts d;
    cli_defaults(&d);
    cx_flags p = flags_of(c);
    printf("usage: cortex %s %s\n\n%s\noptions:\n", c->name, c->synopsis, c->about);
    cx_flags_help(&p, &d, stdout);
    printf("\nexample:\n  %s\n", c->example);
}

/* See cli_flags.h. */
void cli_usage(const cli_command *cmds, int n, FILE *f) {
    fprintf(f, "usage: cortex COMMAND [options]\n\ncommands:\n");
    for (int i = 0; i < n; i++) fprintf(f, "  %-9s %s\n", cmds[i].name, cmds[i].synopsis);
    fprintf(f, "\ncortex COMMAND --help: what COMMAND does, every option with its accepted values and default, "
               "an example\n");
}
