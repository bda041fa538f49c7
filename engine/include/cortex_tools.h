/*
 * cortex_tools.h - the tools around the inference API (cortex.h): shape
 * presets and synthetic models, quantization, chat templates, and the
 * parsers and byte counts the command lines and the harness use. Nothing here is needed to load a
 * model and run it; a program that only runs models includes cortex.h alone.
 */
#ifndef CORTEX_TOOLS_H
#define CORTEX_TOOLS_H

#include <stdio.h>

#include "cortex.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- splitmix64: the one copy (library, server, harness, tests) -------- */

/* splitmix64's finalizer: every input bit moves every output bit (a hash of
 * a 64-bit value; the prefix cache's keys, the server's seeds). */
static inline uint64_t cx_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* The splitmix64 stream: advance *state by the golden-ratio gamma and return
 * its mix. Small, fast, well distributed and the same bits everywhere (the
 * sampler's draws, synthetic weights, seeding xoshiro, test inputs). */
static inline uint64_t cx_splitmix64(uint64_t *state) { return cx_mix64(*state += 0x9e3779b97f4a7c15ull); }

/* ---- parsers for flags and configuration files -------------------------- */

/* Parse "f32|f16|bf16|q8_0|q4_0|q4_k|q6_k|mxfp4|q4_k_m" (case-insensitive); returns -1 if unknown. */
int cx_type_from_name(const char *name);
/* Parse "f32|f16|q8|q4" (-1 if unknown); "lru|lfu" likewise. */
int cx_kv_type_from_name(const char *name);
int cx_kv_policy_from_name(const char *name);
/* Name of a CX_KV_* type ("f32", "f16", "q8", "q4") or policy ("lru", "lfu"); NULL for another number. */
const char *cx_kv_type_name(int type);
const char *cx_kv_policy_name(int policy);
/* The types tier CX_KV_HOT or CX_KV_WARM keeps blocks in, '|'-separated
 * ("f32|f16|q8", "q8|q4"), written into buf (cap bytes); returns buf. */
const char *cx_kv_tier_types(int tier, char *buf, size_t cap);

/* Parse a byte count "123", "64K", "1.5M", "2G" (binary units); -1 if invalid. */
int64_t cx_parse_bytes(const char *s);
/* Bytes one position takes in a hot block of `kv_type` (CX_KV_F32/F16/Q8):
 * keys and values of every layer, scales included; -1 for another type.
 * What attention reads per position attended (the roofline's KV term). */
double cx_kv_bytes_per_pos(const cx_model *m, int kv_type);

/* A whole-string base-10 integer in [lo, hi] into *out; 0, or -1 (not an
 * integer, out of range, or trailing characters). */
int cx_parse_int_in(const char *s, long long lo, long long hi, long long *out);
/* A whole-string number in [lo, hi] (NaN never is) into *out; 0 or -1. */
int cx_parse_num_in(const char *s, double lo, double hi, double *out);

/* ---- command-line flags (flags.c) ----------------------------------------
 *
 * One table of flags drives a program's parser and every command's --help:
 * which commands take a flag, how its value is read, where it goes (an offset
 * into the caller's options struct), its range or accepted values, and what
 * it means. The help shows the defaults from an options struct filled by the
 * caller's own defaults function, so it cannot drift from the code. `cortex`
 * (engine/cli/cli_flags.c) and `cortex-bench` (harness/commands.c) use it.
 */

/* How a flag's value is read (cx_flag.kind), and the field it goes to. */
enum {
    CX_FLAG_SWITCH, /* no value: int, set to 1 */
    CX_FLAG_STR,    /* const char *: the argv string itself (with a list of values: one of them, any case) */
    CX_FLAG_INT,    /* int in [lo, hi] */
    CX_FLAG_LONG,   /* long in [lo, hi] */
    CX_FLAG_U64,    /* uint64_t in [lo, hi] (lo >= 0) */
    CX_FLAG_FLOAT,  /* float in [lo, hi] */
    CX_FLAG_DOUBLE, /* double in [lo, hi] */
    CX_FLAG_BUDGET, /* int64_t bytes, cx_parse_bytes ("64K", "1.5M"), or "unlimited": CX_KV_UNLIMITED */
    CX_FLAG_CHOICE, /* int: the index of the value in `choices` ("closed|open": closed 0, open 1), any case */
    CX_FLAG_CUSTOM, /* `parse` reads it (after the value was checked against a list, if there is one) */
    CX_FLAG_HELP    /* -h/--help: cx_flags_parse returns 1 */
};

typedef struct cx_flag cx_flag;
/* One flag of one or more commands. Tables are written with the first nine
 * fields in order, then designated ones: {.., NULL, .help = "..."}. */
struct cx_flag {
    const char *name, *alias; /* "--model", "-m" (or NULL); a short flag alone is its name ("-o") */
    const char *meta;         /* the value's placeholder ("FILE"); NULL for a switch and -h */
    unsigned cmds;            /* bits of the commands taking it (the caller's numbering) */
    int kind;                 /* CX_FLAG_* */
    size_t off;               /* offsetof(the caller's options struct, the field) */
    double lo, hi;            /* numbers: the accepted range (shown by the help); free for callbacks */
    const char *dflt;         /* the default in words, instead of showing the field; or NULL */
    const char *help;         /* what it does; the help adds the accepted values and the default */
    const char *choices;      /* an enumeration: its values, "a|b|c" */
    /* ... or its values listed into buf from the engine's tables ('|'-separated; returns buf) */
    const char *(*values)(const cx_flag *f, char *buf, size_t cap);
    /* CX_FLAG_CUSTOM: store value v of the flag, written as `name`, into opts (f->off: its field);
     * 0, or -1 with the whole message in err ("--lora: 'x' names no file") */
    int (*parse)(const cx_flag *f, const char *name, const char *v, void *opts, char *err, size_t n);
    /* the default of the field in opts, in words (NULL: none to show); instead of the kind's own way */
    const char *(*show)(const cx_flag *f, const void *opts, char *buf, size_t cap);
};

#define CX_FLAGS_MAX 256   /* entries of one table */
#define CX_FLAGS_MAX_POS 8 /* positional arguments one command may take */

/* One command's parse: what the caller sets, then what cx_flags_parse fills. */
typedef struct cx_flags {
    const char *prog;     /* "cortex": every error line is "PROG: ..." on stderr */
    const char *cmd;      /* the command ("serve"), named in errors */
    const cx_flag *table; /* every flag of every command */
    int n;                /* entries in table (at most CX_FLAGS_MAX) */
    unsigned bit;         /* this command's bit in cx_flag.cmds */
    int max_pos;          /* positional arguments it takes (at most CX_FLAGS_MAX_POS) */
    /* filled by cx_flags_parse: */
    const char *pos[CX_FLAGS_MAX_POS]; /* positional arguments (anything not starting with '-', and "-") */
    int n_pos;
    unsigned char given[CX_FLAGS_MAX / 8]; /* bit i: table[i] was given */
} cx_flags;

/* Parse argv (the words after the command) into opts, which holds the
 * defaults already. A flag's value is the next word, whatever it looks like
 * ("--seed -1", "--db -h"). Returns 0; 1 when -h/--help came (the caller
 * prints the help); or 2 after printing one line "PROG: ..." naming the
 * unknown flag, the flag without its value, the bad value or the unexpected
 * argument. */
int cx_flags_parse(cx_flags *p, int argc, char **argv, void *opts);
/* 1 if a flag of p's command that stores into opts bytes [off, off + size)
 * was given (several flags may share a field or a struct: the KV cache's). */
int cx_flags_given(const cx_flags *p, size_t off, size_t size);
/* Print the flags of p's command, one a line in table order: the aliases
 * and names, the placeholder, the help, then "(one of a|b; default x)",
 * "(1..256; default 8)" or "(default x)", the default read from `defaults`
 * (an options struct as the caller's defaults function fills it). */
void cx_flags_help(const cx_flags *p, const void *defaults, FILE *out);

/* Callbacks for flags whose values are the engine's own tables. */
/* KV types of the tier (int)f->lo (CX_KV_HOT, CX_KV_WARM), into an int field (CX_KV_*). */
const char *cx_flag_kv_types(const cx_flag *f, char *buf, size_t cap);
int cx_flag_kv_type(const cx_flag *f, const char *name, const char *v, void *opts, char *err, size_t n);
const char *cx_flag_kv_type_show(const cx_flag *f, const void *opts, char *buf, size_t cap);
/* KV policies ("lru|lfu"), into an int field (CX_KV_LRU, ...). */
const char *cx_flag_kv_policies(const cx_flag *f, char *buf, size_t cap);
int cx_flag_kv_policy(const cx_flag *f, const char *name, const char *v, void *opts, char *err, size_t n);
const char *cx_flag_kv_policy_show(const cx_flag *f, const void *opts, char *buf, size_t cap);
/* The designated fields of a CX_FLAG_CUSTOM KV type or policy flag. */
#define CX_FLAG_KV_TYPE_OPS .values = cx_flag_kv_types, .parse = cx_flag_kv_type, .show = cx_flag_kv_type_show
#define CX_FLAG_KV_POLICY_OPS .values = cx_flag_kv_policies, .parse = cx_flag_kv_policy, .show = cx_flag_kv_policy_show
/* Placement policies ("none|compact|spread", "default|local|interleave") in enum order, for a
 * CX_FLAG_CHOICE into an int field (CX_PIN_*, CX_NUMA_*). */
const char *cx_flag_pin_policies(const cx_flag *f, char *buf, size_t cap);
const char *cx_flag_numa_policies(const cx_flag *f, char *buf, size_t cap);
/* Weight and file type names (cx_type_name, for a CX_FLAG_STR), and the shape presets' names. */
const char *cx_flag_weight_types(const cx_flag *f, char *buf, size_t cap);
const char *cx_flag_shapes(const cx_flag *f, char *buf, size_t cap);

/* ---- synthetic models --------------------------------------------------- */

typedef struct cx_shape {
    const char *name;
    int n_embd, n_ff, n_layer, n_head, n_head_kv, n_vocab, n_ctx;
    float rope_base, rms_eps;
    int tied_output;
    const char *arch;         /* general.architecture; NULL means "llama" */
    int qkv_bias;             /* Q, K, V biases (qwen2) */
    /* Llama 3 RoPE scaling, written as rope_freqs.weight factors (0: none):
     * factor, low and high frequency factors, original context length */
    float rope_factor, rope_low, rope_high;
    int rope_orig_ctx;
    int head_dim;             /* 0: n_embd / n_head; else written as attention.key_length / value_length */
    /* mixture of experts (0: dense): experts per layer and per token; n_ff is an expert's width */
    int n_expert, n_expert_used;
    int sliding_window;       /* gpt-oss: attention.sliding_window (even layers) */
    float yarn_factor;        /* YaRN RoPE scaling factor (0: none) over ... */
    int yarn_orig_ctx;        /* ... this original context length */
} cx_shape;

/* The built-in shape presets, terminated by an entry with name == NULL. */
const cx_shape *cx_shapes(void);
const cx_shape *cx_shape_find(const char *name);

/*
 * Write a GGUF v3 file with deterministic pseudo-random weights (normal, std
 * 0.02; norm weights 1) of `shape`, matrices stored as `type`, and a synthetic
 * SentencePiece vocabulary. Same (shape, type, seed) => same bytes. `type` may
 * be CX_FTYPE_Q4_K_M; matrices whose rows do not fit a type's block size fall
 * back to q8_0 or f16 (quant_mix_type in engine/src/quant.h).
 */
int cx_synth_write(const cx_shape *shape, int type, uint64_t seed, const char *path, cx_err *err);
/* cx_synth_write with the vocabulary of the GGUF file `vocab` (its
 * tokenizer.* metadata copied as it is, e.g. a real Llama 3 or Qwen 2.5
 * byte-level BPE vocabulary; the shape's n_vocab becomes its token count);
 * NULL: the synthetic SentencePiece vocabulary. */
int cx_synth_write_ex(const cx_shape *shape, int type, uint64_t seed, const char *vocab, const char *path, cx_err *err);

/* ---- quantization (quantize.c) ------------------------------------------ */

/* A file's weight type is a tensor type (CX_TYPE_*: every matrix whose rows
 * fit that type's block) or CX_FTYPE_Q4_K_M (the mixture); quant_mix_type in
 * engine/src/quant.h gives each tensor its storage type, cx_type_name and
 * cx_type_from_name name both kinds. (One namespace: CX_FTYPE_Q4_K_M = 1015
 * lies far above every ggml tensor type id.) */

#define CX_QUANT_NTYPES 40        /* ggml type ids counted per type below (mxfp4 is 39) */
#define CX_QUANT_MAX_FALLBACKS 8  /* distinct fallback kinds listed */

/* Tensors the mixture rule had to store in another type than it wanted,
 * grouped by (wanted, stored, row length). */
typedef struct cx_quantize_fallback {
    int wanted, stored;   /* ggml type ids */
    int64_t cols;         /* the row length the wanted type's block does not divide */
    int count;
    char example[64];     /* the first such tensor's name */
} cx_quantize_fallback;

typedef struct cx_quantize_stats {
    const char *input_format;              /* "gguf" or "llama2c" */
    int n_tensors;
    int count[CX_QUANT_NTYPES];            /* tensors written per ggml type id */
    uint64_t bytes[CX_QUANT_NTYPES];       /* their bytes */
    uint64_t in_file_bytes, out_file_bytes;
    uint64_t in_weight_bytes, out_weight_bytes;
    int n_fallback;                        /* tensors stored other than the rule wanted */
    int n_fallback_groups;
    cx_quantize_fallback fallback[CX_QUANT_MAX_FALLBACKS];
} cx_quantize_stats;

/*
 * Convert `in` (an F32/F16/BF16 GGUF, or a llama2.c checkpoint with `tokenizer`, its
 * tokenizer.bin) into a GGUF v3 file `out` of file type `ftype` (a CX_TYPE_* or CX_FTYPE_Q4_K_M, see above).
 * Streams tensor by tensor from the mapped input into `out`.tmp, checks that
 * the result loads, then renames it to `out`; on failure neither is left.
 * Already-quantized inputs are refused. `stats` (may be NULL) gets the counts.
 */
int cx_quantize_file(const char *in, const char *tokenizer, const char *out, int ftype, cx_quantize_stats *stats,
                     cx_err *err);

/* Rows changed while converting (merge-lora): every row of each tensor
 * `wants` accepts is expanded to floats, handed to `edit`, then stored as
 * the output type. */
typedef struct cx_row_edit {
    void *ctx;
    int (*wants)(void *ctx, const char *tensor);
    void (*edit)(void *ctx, const char *tensor, int64_t row, float *vals, int64_t n);
} cx_row_edit;
/* cx_quantize_file with rows edited on the way (edit may be NULL). */
int cx_quantize_file_ex(const char *in, const char *tokenizer, const char *out, int ftype, const cx_row_edit *edit,
                        cx_quantize_stats *stats, cx_err *err);

/* ---- LoRA adapter tools (docs/lora.md) ---- */

/* Bits of the matrices an adapter may change, in LORA order. */
enum { CX_LORA_Q = 1, CX_LORA_K = 2, CX_LORA_V = 4, CX_LORA_O = 8, CX_LORA_GATE = 16, CX_LORA_UP = 32,
       CX_LORA_DOWN = 64, CX_LORA_ALL = 127 };
/* "q,k,v,o,gate,up,down" (any subset, or "all") into a mask; 0 or CX_EINVAL naming the bad name. */
int cx_lora_targets_parse(const char *list, unsigned *mask, cx_err *err);

typedef struct cx_lora_synth_params {
    int rank;          /* >= 1 */
    float alpha;       /* written as adapter.lora.alpha (scale alpha / rank); 0: not written (scale 1) */
    unsigned targets;  /* CX_LORA_* bits */
    uint64_t seed;
    int type;          /* tensor type: CX_TYPE_F32, CX_TYPE_F16 or CX_TYPE_Q8_0 (f32 where a row is not whole blocks) */
    float strength;    /* RMS of scale·B·A relative to the base matrix's RMS (0: 0.25) */
} cx_lora_synth_params;
/* A deterministic synthetic adapter for model m in llama.cpp's GGUF LoRA
 * format: A ~ N(0, 1/n_in), B sized so the change has the asked RMS. Written
 * to path.tmp, then renamed. */
int cx_lora_synth_write(const cx_model *m, const cx_lora_synth_params *p, const char *path, cx_err *err);
/* Bake n adapters (scales[i] x their alpha / rank) into a copy of the base
 * model `in` (GGUF or llama2.c with tokenizer) stored as `ftype`: each
 * adapted matrix becomes W + sum_i s_i·B_i·A_i. The base must be f32, f16 or bf16. */
int cx_lora_merge(const char *in, const char *tokenizer, const char *const *adapters, const float *scales, int n,
                  const char *out, int ftype, cx_err *err);

/* ---- the harmony chat format (OpenAI's, gpt-oss; harmony.c) ------------- */

/* One chat message: role "system", "developer", "user" or "assistant". */
typedef struct cx_chat_msg {
    const char *role;
    const char *content;
} cx_chat_msg;

/* 1 if a model's Jinja chat template (tokenizer.chat_template) writes the
 * harmony format: it holds <|start|>, <|message|> and <|channel|>. */
int cx_harmony_detect(const char *jinja);
/* The prompt the published gpt-oss template renders for m[0..n) by default
 * (its system message with "Current date: " + date and "Reasoning: medium";
 * a first system or developer message as the developer's "# Instructions";
 * earlier answers on the final channel), ending with the assistant's turn
 * opened ("<|start|>assistant"). *out: malloc'd. 0, or CX_EINVAL (a system
 * message after the first, an unknown role) / CX_ENOMEM with err filled. */
int cx_harmony_prompt(const cx_chat_msg *m, int n, const char *date, char **out, cx_err *err);

/* What a harmony answer holds: the text of its final-channel messages
 * (content) and of its analysis-channel ones (reasoning), each joined;
 * malloc'd, NULL when none. */
typedef struct cx_harmony_parts {
    int harmony;            /* the output follows the format (it starts with <|channel|>) */
    char *content, *reasoning;
    size_t n_content, n_reasoning;
} cx_harmony_parts;
/* Split a model's output s[0..n), written with its control tokens' text
 * ("<|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final
 * <|message|>..."), into its parts; the output may stop anywhere (a stream
 * so far). Messages on other channels (commentary: tool calls) are left out.
 * 1 when it follows the format, 0 when not (out empty), -1 out of memory. */
int cx_harmony_split(const char *s, size_t n, cx_harmony_parts *out);
void cx_harmony_parts_free(cx_harmony_parts *p);

/* ---- chat templates (engine/src/chat.c) ---- */
enum { CX_CHAT_CHATML, CX_CHAT_LLAMA2, CX_CHAT_LLAMA3, CX_CHAT_ZEPHYR, CX_CHAT_PHI3, CX_CHAT_GEMMA,
       CX_CHAT_HARMONY, CX_CHAT_N };
#define CX_CHAT_MAX_END 2 /* texts that end an assistant turn, at most */
/* The template's name ("chatml", ..., "gpt-oss"); NULL outside 0..CX_CHAT_N-1. */
const char *cx_chat_name(int t);
/* The template called `name` (case-insensitive; "harmony" is gpt-oss), or -1. */
int cx_chat_find(const char *name);
/* The known format a Jinja chat template writes (markers), or -1. */
int cx_chat_detect(const char *jinja);
/* A model's chat format, ready to render. */
typedef struct cx_chat {
    int tmpl;                         /* CX_CHAT_* */
    char bos[64], eos[64];            /* the texts that tokenize back to the model's BOS / EOS ("" if none) */
    const char *end[CX_CHAT_MAX_END]; /* texts that end an assistant turn (NULL after the last); they point at
                                         static strings or into this struct's bos/eos, so do not copy the struct
                                         by value and keep using end[]: a copy's may point into the original */
} cx_chat;
/* Choose model m's chat format: the template called `name`, or (name NULL) the one detected from its
 * tokenizer.chat_template. CX_EINVAL for an unknown name (message lists the known names); CX_EUNSUP with the
 * reason when the model has no template, has one no renderer here knows (message lists the names and says
 * to pass one), or the format separates turns with BOS/EOS texts this model lacks. */
int cx_chat_init(const cx_model *m, const char *name, cx_chat *out, cx_err *err);
/* The prompt for messages m[0..n) in c's format, ending with the assistant's turn opened, into *out
 * (malloc'd, NUL-terminated; the caller frees). date: today as YYYY-MM-DD for harmony's system message
 * (NULL: today, UTC). CX_EINVAL for a message the format cannot hold (misplaced system message,
 * a NULL role/content), CX_ENOMEM. Roles: "system" ("developer" is the same), "user", "assistant";
 * another is CX_EINVAL too. */
int cx_chat_render(const cx_chat *c, const cx_chat_msg *m, int n, const char *date, char **out, cx_err *err);

#ifdef __cplusplus
}
#endif
#endif /* CORTEX_TOOLS_H */
