/*
 * cortex.h - the public C API of the Cortex inference engine.
 *
 * This header is the whole API for running models: load, tokenize, evaluate,
 * sample, the KV cache. The tools around inference (synthetic models,
 * quantization, flag parsers, the roofline's byte counts) are declared in
 * cortex_tools.h. Everything behind the two (file formats, kernels, caches)
 * may change without callers noticing.
 *
 * Conventions:
 *   - Every call that can fail returns 0 on success or a negative CX_E* code and,
 *     when `err` is not NULL, fills it with one human-readable sentence naming the
 *     thing and the problem (e.g. "model.gguf: tensor 'blk.0.attn_q.weight' data
 *     [4096, 8192) lies past the end of the file (6000 bytes)").
 *   - Objects are opaque and owned by the caller, freed with the matching _free().
 *   - Token ids are int32_t. Text is bytes (UTF-8 expected, any bytes accepted).
 */
#ifndef CORTEX_H
#define CORTEX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ------------------------------------------------------------- */

enum {
    CX_OK = 0,
    CX_EIO = -1,      /* file cannot be opened, read, written or mapped */
    CX_EFORMAT = -2,  /* the bytes are not a valid model/tokenizer file */
    CX_ERANGE = -3,   /* a size, offset or dimension is out of range */
    CX_EUNSUP = -4,   /* valid, but a feature this engine does not support */
    CX_EINVAL = -5,   /* bad argument from the caller (empty prompt, bad flag) */
    CX_ENOMEM = -6,   /* allocation failed */
    CX_ECTX = -7,     /* the sequence would exceed the context length */
    CX_EBUSY = -8     /* the scheduler's waiting queue is full (or it is stopping): try later */
};

typedef struct cx_err {
    int code;
    char msg[512];
} cx_err;

/* ---- weight types (numbering follows ggml so GGUF files map directly) ---- */

enum {
    CX_TYPE_F32 = 0,
    CX_TYPE_F16 = 1,
    CX_TYPE_Q4_0 = 2,
    CX_TYPE_Q8_0 = 8,
    CX_TYPE_Q4_K = 12,
    CX_TYPE_Q6_K = 14,
    CX_TYPE_BF16 = 30, /* bfloat16: the top half of an IEEE single (8-bit exponent, 7-bit mantissa) */
    CX_TYPE_MXFP4 = 39 /* OCP MXFP4: 32 E2M1 values sharing an E8M0 scale (GPT-OSS) */
};

/* File type (not a tensor type: far above ggml's type ids, which stay below
 * 100): llama.cpp's "Q4_K_M" mixture, mostly q4_k with q6_k for the classifier
 * and half of attn_v/ffn_down. Accepted wherever a file's type is asked for
 * (cx_synth_write, cx_type_from_name("q4_k_m")) and reported as a model's
 * main_type when its matrices mix types and the file says Q4_K_M. */
#define CX_FTYPE_Q4_K_M 1015

/* Name of a weight type ("f32", "q8_0", "q4_k", ...) or file type ("q4_k_m"); "?" if unknown. */
const char *cx_type_name(int type);

/* ---- models ------------------------------------------------------------- */

typedef struct cx_model cx_model;

typedef struct cx_model_info {
    const char *format;       /* "gguf" or "llama2c" */
    uint32_t format_version;  /* GGUF version, 0 for llama2.c */
    const char *name;         /* general.name or the file's base name */
    int n_embd, n_ff, n_layer, n_head, n_head_kv, n_vocab, n_ctx, head_dim;
    float rope_base, rms_eps;
    int tied_output;          /* classifier shares the token embedding */
    int n_tensors;
    uint64_t n_params;        /* elements over all weight tensors */
    uint64_t weight_bytes;    /* bytes of all weight tensors as stored */
    uint64_t file_bytes;
    int main_type;            /* type of the attention/FFN matrices; if they mix types: CX_FTYPE_Q4_K_M
                                 for a Q4_K_M file, else the type holding most of their weights */
    const char *weights_memory; /* "mmap", "hugepages", "hugepages, repacked x8" (AVX2) or "hugepages,
                                   repacked x16" (AVX-512) (cx_model_params weights and repack) */
    uint64_t weights_hugepage_bytes; /* of a copy in huge pages: how much of it the kernel really backs with 2 MiB
                                 pages (/proc/self/smaps AnonHugePages at load; it gives them only while it has
                                 free 2 MiB blocks); 0 for a mapping or where smaps cannot be read */
    const char *isa;          /* the kernel instruction set this model's passes run with ("scalar", "avx2",
                                 "avxvnni", "avx512", "avx512vnni", "avx512bf16") */
    int vocab_only;           /* a GGUF without tensors: tokenizes, but sessions refuse it (n_layer etc. are 0) */
    const char *tokenizer;    /* tokenizer model: "llama" (SentencePiece) or "gpt2" (byte-level BPE) */
    const char *tokenizer_pre;/* byte-level BPE: the pre-tokenizer's canonical name ("gpt-2", "llama-bpe", ...); else NULL */
    const char *arch;         /* general.architecture: "llama", "qwen2" or "gpt-oss" ("llama" for llama2.c checkpoints) */
    int rope_neox;            /* RoPE rotates dimension i with i + head_dim/2 (qwen2), not 2i with 2i+1 (llama) */
    float rope_freq_scale;    /* positions are multiplied by this (1/rope.scaling.factor for linear scaling, else 1) */
    int rope_freq_factors;    /* per-frequency divisors (rope_freqs.weight, Llama 3 scaling) are applied */
    int qkv_bias;             /* the attention projections have biases (qwen2) */
    const char *chat_template;/* tokenizer.chat_template: the Jinja source of the chat format, or NULL */
    int n_expert;             /* mixture of experts: experts per layer (0: a dense feed-forward) */
    int n_expert_used;        /* experts each token runs through */
    int n_ff_expert;          /* an expert's feed-forward width (expert_feed_forward_length, else n_ff) */
    uint64_t expert_bytes;    /* bytes of the stacked expert tensors (part of weight_bytes): a decoded token
                                 reads n_expert_used / n_expert of them (the roofline's weight term) */
    int sliding_window;       /* positions a sliding-window layer sees (0: every layer sees all) */
    int attn_sinks;           /* attention has learned per-head sink logits (gpt-oss) */
    const char *rope_scaling; /* "none", "linear" or "yarn" (rope.scaling.type) */
} cx_model_info;

typedef struct cx_tensor_info {
    const char *name;
    int type;
    int n_dims;
    int64_t ne[4];            /* ne[0] is the contiguous (input) dimension */
    uint64_t offset;          /* byte offset of the data in the file */
    uint64_t nbytes;
} cx_tensor_info;

/* Where a model's weights live (cx_model_params.weights). Decode reads every
 * weight once per token; with 4 KiB pages a 1 GiB model needs 262,144 TLB
 * entries per token, and 2 MiB pages cut that 512-fold, at the price of a
 * copy (about 0.5 s per GiB) counted as anonymous memory. */
enum {
    CX_WEIGHTS_AUTO = 0,      /* copy files of 64 MiB and more when the kernel offers transparent huge pages, map the rest */
    CX_WEIGHTS_MMAP = 1,      /* map the file (pages shared with the page cache) */
    CX_WEIGHTS_HUGEPAGES = 2  /* copy the file into memory advised for 2 MiB huge pages */
};

/* How to load a model. The library reads no environment variables: the
 * `cortex` and `cortex-bench` commands fill this from CORTEX_WEIGHTS,
 * CORTEX_REPACK and CORTEX_ISA (cx_model_params_from_env in cortex_env.h). */
typedef struct cx_model_params {
    int weights;          /* CX_WEIGHTS_* (default CX_WEIGHTS_AUTO) */
    int repack;           /* 1 (default): a huge-page copy's q8_0/q4_0 matrices are interleaved 8 rows (AVX2)
                             or 16 rows (AVX-512) at a time where the kernels read that faster; 0: the file's
                             layout, to measure what repacking buys */
    const char *isa;      /* kernel instruction set: NULL or "auto" (default) the best this CPU runs; "scalar",
                             "avx2", "avxvnni", "avx512", "avx512vnni" or "avx512bf16" force one, and loading fails
                             (CX_EINVAL) if it is unknown or unavailable. "avx512bf16" is avx512vnni with
                             BF16 weights met by bf16-rounded activations (vdpbf16ps): faster, less exact,
                             never chosen by "auto".
                             Per model: every session and batch of the model runs this table */
} cx_model_params;

/* The defaults above. */
cx_model_params cx_model_defaults(void);

/*
 * Load a model. `path` is a GGUF file or a llama2.c checkpoint (.bin);
 * llama2.c checkpoints need `tokenizer_path` (a llama2.c tokenizer.bin), GGUF
 * files carry their vocabulary and ignore it when NULL. `p` NULL means
 * cx_model_defaults().
 */
int cx_model_load_ex(const char *path, const char *tokenizer_path, const cx_model_params *p, cx_model **out,
                     cx_err *err);
/* cx_model_load_ex with the defaults. */
int cx_model_load(const char *path, const char *tokenizer_path, cx_model **out, cx_err *err);
void cx_model_free(cx_model *m);
const cx_model_info *cx_model_get_info(const cx_model *m);
int cx_model_tensor(const cx_model *m, int i, cx_tensor_info *out);

/* ---- tokenizer ---------------------------------------------------------- */

/* Special token ids, -1 when the vocabulary has none. EOT is the end-of-turn
 * token of chat models (tokenizer.ggml.eot_token_id, else found by its text:
 * "<|eot_id|>", "<|im_end|>", ...). A harmony vocabulary (gpt-oss: it has
 * <|return|> and <|call|>) ends a turn with either, so EOT is <|call|> when
 * EOS is <|return|> (else <|return|>), never <|end|> (it closes a message
 * inside the turn), as llama.cpp decides. */
int cx_token_bos(const cx_model *m);
int cx_token_eos(const cx_model *m);
int cx_token_eot(const cx_model *m);
/* 1 if `token` ends generation: EOS or EOT (a chat model's end of turn). */
int cx_token_is_eog(const cx_model *m, int token);

/* Flags of cx_tokenize (its `flags` argument; 1 keeps its old meaning, "add BOS"). */
enum {
    CX_TOKENIZE_BOS = 1,     /* start with BOS when the vocabulary asks for it (tokenizer.ggml.add_bos_token;
                                default yes for SentencePiece and Llama 3, no for other byte-level BPE) */
    CX_TOKENIZE_SPECIAL = 2  /* text matching a control token ("<|eot_id|>", "<s>") becomes that token;
                                user-defined tokens are always matched, as llama.cpp does */
};

/*
 * Encode `len` bytes of text with the model's tokenizer (SentencePiece or
 * byte-level BPE). Writes at most `cap` ids to `out` and the number needed to
 * `*n_out`; returns CX_ERANGE if cap was too small.
 */
int cx_tokenize(const cx_model *m, const char *text, size_t len, int flags,
                int32_t *out, int cap, int *n_out, cx_err *err);

/*
 * The bytes a token contributes when it follows `prev` (-1 at the start):
 * byte tokens give their raw byte, control tokens nothing, byte-level BPE
 * tokens the bytes their characters stand for, and the leading space
 * SentencePiece adds is dropped where encoding adds it: at the start, after
 * BOS and after any other special token. Returns the length and
 * points *bytes at storage owned by the model (or by `tmp` for byte tokens).
 */
size_t cx_token_piece(const cx_model *m, int prev, int token, char tmp[2], const char **bytes);

/* The most bytes of text one token can stand for (its longest piece as
 * stored, control tokens' text included; at least 4, an unknown character):
 * a text longer than this times n tokens cannot tokenize to n or fewer. */
size_t cx_token_max_bytes(const cx_model *m);

/* Decode a whole id sequence into `buf` (NUL-terminated); returns bytes needed. */
size_t cx_detokenize(const cx_model *m, const int32_t *ids, int n, char *buf, size_t cap);

/* ---- sessions: one sequence with its KV cache -------------------------- */

typedef struct cx_session cx_session;

/* Context used when a session does not ask: long-context models would
 * otherwise reserve gigabytes of KV cache nobody uses. */
#define CX_DEFAULT_CTX 4096

/* n_ctx <= 0 means min(model context, CX_DEFAULT_CTX), larger values are capped
 * at the model's context; n_threads <= 0 means 1. */
int cx_session_new(const cx_model *m, int n_ctx, int n_threads, cx_session **out, cx_err *err);
void cx_session_free(cx_session *s);
/* Forget the sequence (the KV cache is reused). */
void cx_session_reset(cx_session *s);
int cx_session_pos(const cx_session *s);
/* Bytes of expert weights (mixture of experts) this session's cx_eval passes
 * have read since it was made: per pass and layer, the gate, up and down rows
 * of each expert some token of the pass chose, once however many chose it.
 * 0 for a dense model. A counter: take differences around the calls. */
uint64_t cx_session_expert_bytes(const cx_session *s);
int cx_session_n_ctx(const cx_session *s);

/*
 * The engine's threads: where their time went and whether they found their
 * cores shared. A pass's work is cut into chunks that the threads claim as
 * they run, so a thread the kernel deschedules holds back only the chunk it
 * is inside; a thread with nothing to claim waits, spinning briefly and then
 * asleep. Counters since the session (batch, scheduler) was made, summed over
 * its threads; times in nanoseconds. Parallel sections of one chunk, and
 * every section of a one-thread session, run inline and are not counted.
 */
typedef struct cx_pool_stats {
    int n_threads;
    int64_t jobs;         /* parallel sections run on the pool */
    int64_t chunks;       /* chunks run */
    int64_t stolen;       /* ... of which taken from another thread's share */
    int64_t busy_ns;      /* threads running chunks */
    int64_t idle_ns;      /* workers waiting for the next section (spinning or asleep) */
    int64_t stall_ns;     /* the calling thread waiting for chunks other threads still ran */
    int64_t waits;        /* waits of either kind */
    int64_t sleeps;       /* ... that ended asleep (the core given back) */
    int64_t shared_waits; /* ... made as on a shared machine: the threads had been waiting for a core
                           * (their run-queue delay), so they spun only briefly before sleeping */
    int64_t pass_parks;   /* times a pass, out of chunks, gave its thread back to wait for other threads' */
    int64_t pass_moves;   /* ... and was then run on by another thread (the one that finished the job) */
    double worker_wait_max; /* the largest share of its time a worker (threads 1..n-1) waited for
                             * work, idle / (busy + idle); 0 without workers */
} cx_pool_stats;
void cx_session_pool_stats(const cx_session *s, cx_pool_stats *out);

/*
 * Feed `n` tokens at the current position, advancing it by n. On success
 * *logits (if not NULL) points at the n_vocab logits after the last token,
 * valid until the next call.
 */
int cx_eval(cx_session *s, const int32_t *tokens, int n, const float **logits, cx_err *err);

/*
 * Feed `n` tokens like cx_eval and write the logits after every one of them:
 * row i of `logits` (the caller's array of n * n_vocab floats) holds the
 * logits after tokens[i], i.e. the prediction of token i+1. Computed in the
 * same passes as a prompt (up to the session's batch of tokens each), not one
 * call per token: teacher forcing, perplexity and quality measurements read
 * every row. Every position is computed (the prefix cache is not consulted;
 * full blocks are still indexed for others). Row i equals the logits of
 * feeding the tokens one cx_eval at a time: bit for bit for f32/f16 weights,
 * within the prefill/decode rounding for quantized ones (see cx_batch_eval).
 */
int cx_eval_all(cx_session *s, const int32_t *tokens, int n, float *logits, cx_err *err);

/*
 * Keep the first n_pos positions of the sequence and forget the rest (a KV
 * rewind: rejected speculative tokens, a regenerated reply). Blocks past
 * n_pos go back to the cache; blocks another session or the prefix cache
 * shares stay intact for them (the partial last block is copied before its
 * next write). Evaluating from n_pos then gives the logits a fresh session fed
 * the same tokens gives (bit for bit with an f32 cache without a warm tier).
 * CX_EINVAL, changing nothing, when n_pos < 0 or n_pos > cx_session_pos(s).
 */
int cx_session_truncate(cx_session *s, int n_pos, cx_err *err);

/* ---- the KV cache: paged, tiered, with prefix reuse (docs/kv-cache.md) --- */

/*
 * The cache is made of blocks of CX_KV_BLOCK consecutive positions (all
 * layers, keys and values); a session maps its positions to blocks through a
 * block table. Blocks live in one of three tiers with byte budgets:
 *   hot   cx_kv_params.type (f32, f16, or int8 per row), written by the forward pass;
 *   warm  int8 (or 4-bit) codes, keys scaled per column over the block, values per row;
 *   cold  zlib pages of byte-plane-split blocks (the warm codes, or the hot
 *         bytes when there is no warm tier: lossless), in memory or spilled
 *         to a file, decompressed for each pass that reads them.
 * Blocks move down when a tier is over budget (by LRU or LFU, partial
 * blocks last) and up when read if their claim from before the read beats
 * the weakest block above (so sequences taking turns do not swap tiers). With the prefix cache on, full blocks are indexed by a hash
 * chain of their tokens and a sequence starting with the same tokens reuses
 * them (reference counted; a shared block is copied before it is written).
 * cx_session_new's cache: f32, every budget unlimited, prefix cache off:
 * exactly the plain contiguous cache's arithmetic.
 */
#define CX_KV_BLOCK 16          /* positions per block */
#define CX_KV_UNLIMITED (-1)    /* a tier budget without limit */

enum { /* block formats */
    CX_KV_F32 = 0, CX_KV_F16 = 1, CX_KV_Q8 = 2, CX_KV_Q4 = 3, CX_KV_BF16 = 4, CX_KV_E4M3 = 5, CX_KV_E5M2 = 6,
    CX_KV_Q4G = 7, CX_KV_Q4H = 8
};
enum { CX_KV_LRU = 0, CX_KV_LFU = 1, CX_KV_RANDOM = 2 };          /* tier policies */
enum { CX_KV_HOT = 0, CX_KV_WARM = 1, CX_KV_COLD = 2, CX_KV_TIERS = 3 };

typedef struct cx_kv_params {
    int type;              /* hot blocks: CX_KV_F32 (default), CX_KV_F16, CX_KV_BF16, CX_KV_Q8 (int8, a scale
                              per row), CX_KV_E4M3 (FP8, a scale per row), CX_KV_E5M2 (FP8), CX_KV_Q4G
                              (4-bit, a scale per 32 values) or CX_KV_Q4H (CX_KV_Q4G of each 32 values
                              rotated by a Walsh-Hadamard transform; q4g/q4h need head_dim % 32 == 0) */
    int warm_type;         /* warm blocks: CX_KV_Q8 (default: int8, keys scaled per channel), CX_KV_Q4
                              (4-bit, likewise), or a row format: CX_KV_F16, CX_KV_BF16, CX_KV_E4M3,
                              CX_KV_E5M2, CX_KV_Q4G, CX_KV_Q4H */
    int64_t budget[CX_KV_TIERS]; /* bytes per tier, CX_KV_UNLIMITED (default) or >= 0. Hot must hold
                              at least one block. Warm 0: no warm tier, hot blocks go to cold as they
                              are (lossless). Cold: in memory; past it pages spill to spill_path, else
                              cached prefixes nobody uses are dropped, else cx_eval fails (CX_ENOMEM). */
    int policy;            /* which block leaves a tier first: CX_KV_LRU (default), CX_KV_LFU, or
                              CX_KV_RANDOM (uniformly among the full blocks; promotes only into room) */
    int prefix_cache;      /* 1: reuse the blocks of identical prompt prefixes (default 0) */
    int zlib_level;        /* 1..9 (default 1: fastest; higher levels gain < 1% on KV pages) */
    const char *spill_path;/* file for cold pages past the cold budget; NULL: none (default) */
    int max_tokens;        /* capacity of a cache made by cx_kv_cache_new, in positions over all its
                              sequences and cached prefixes (0: CX_DEFAULT_CTX); a session's own
                              cache ignores it and holds the session's context */
} cx_kv_params;

/* The defaults above. */
cx_kv_params cx_kv_defaults(void);

/* A cache several sessions of the same model share (so they share prefixes).
 * Passes over it run one at a time (cx_eval and cx_batch_eval hold its lock).
 * Free it after every session attached to it. */
typedef struct cx_kv_cache cx_kv_cache;
int cx_kv_cache_new(const cx_model *m, const cx_kv_params *p, cx_kv_cache **out, cx_err *err);
void cx_kv_cache_free(cx_kv_cache *c);

typedef struct cx_session_params {
    int n_ctx;             /* as cx_session_new */
    int n_threads;
    cx_kv_params kv;       /* the session's own cache; ignored when `cache` is set */
    cx_kv_cache *cache;    /* NULL: a private cache made from `kv` */
    int batch;             /* tokens per cx_eval pass, 0..256 (0: 256); memory for activations grows
                              with it (TinyLlama: 80 KiB a token), so a session only ever evaluated
                              through cx_batch_eval can take 1 */
} cx_session_params;

/* n_ctx 0, 1 thread, cx_kv_defaults(), no shared cache. */
cx_session_params cx_session_defaults(void);
/* cx_session_new with KV-cache options. With the prefix cache on, cx_eval
 * takes whole blocks of `tokens` already in the cache (at a position that is
 * a multiple of CX_KV_BLOCK) instead of computing them; the logits are those
 * of computing them (bit for bit with an f32 cache). */
int cx_session_new_ex(const cx_model *m, const cx_session_params *p, cx_session **out, cx_err *err);
/* Make dst continue from src's sequence (beam search, parallel samples):
 * every block is shared, the partial last one copied when either writes it.
 * Both must use the same cache (a shared one). */
int cx_session_fork(cx_session *dst, const cx_session *src, cx_err *err);

/* ---- continuous batching: several sessions in one forward pass -------- */

/*
 * A batch evaluates the next tokens of several sessions in one pass: every
 * weight is read once for all their rows (decode at batch size 1 is bound by
 * reading the weights), attention stays per sequence. Mixing decode tokens
 * of some sessions with prompt chunks of others is allowed (continuous
 * batching). The batch owns the pass's buffers and thread pool; sessions
 * keep their sequences and may use different caches. The blocks written by
 * one pass must fit each cache's hot tier at once.
 */
typedef struct cx_batch cx_batch;
/* A batch for model m: at most max_tokens (1..256) tokens per pass over all
 * its sessions, on n_threads threads (<= 0: 1). */
int cx_batch_new(const cx_model *m, int max_tokens, int n_threads, cx_batch **out, cx_err *err);
void cx_batch_free(cx_batch *b);
/* The threads of the batch's passes (cx_pool_stats). */
void cx_batch_pool_stats(const cx_batch *b, cx_pool_stats *out);
/* Feed sessions[i] the n[i] tokens at tokens[i], for n_seq distinct
 * sessions of the batch's model, in one pass (sum of n[i] <= max_tokens).
 * On success (*logits)[i] (if logits is not NULL) points at the n_vocab
 * logits after sessions[i]'s last token, valid until the next call. With
 * the prefix cache on, cached blocks are taken as cx_eval does. The results
 * equal evaluating each session alone within rounding (bit for bit for
 * f32/f16 weights; quantized matrices' multi-row kernels sum in another
 * order than the one-row decode kernel). On failure no token has
 * been computed (a session may have taken cached prefix blocks, as after a
 * failed cx_eval: cx_session_pos tells). */
int cx_batch_eval(cx_batch *b, cx_session *const *sessions, const int32_t *const *tokens, const int *n, int n_seq,
                  const float ***logits, cx_err *err);

typedef struct cx_kv_stats {
    int type, warm_type, policy, prefix_cache;
    int64_t budget[CX_KV_TIERS];   /* as configured (CX_KV_UNLIMITED: none) */
    int64_t bytes[CX_KV_TIERS];    /* held now: hot/warm block bytes; cold: the buddy blocks its pages take */
    int64_t blocks[CX_KV_TIERS];   /* blocks held now per tier (cold: in memory and spilled) */
    int64_t spilled_bytes;         /* cold pages in the spill file now */
    int64_t blocks_used, blocks_max;
    int64_t blocks_capacity;       /* blocks the byte budgets can always hold (<= blocks_max): the hot and warm
                                      slots plus the cold budget at its worst-case page size (all of blocks_max
                                      with a spill file or no budgets); what the scheduler admits against */
    int64_t hits[CX_KV_TIERS];     /* block reads by forward passes served from each tier (one per block per pass) */
    int64_t demotions, promotions; /* moves to a lower / a higher tier */
    int64_t spills, drops;         /* cold pages written to the spill file; cached prefixes dropped */
    int64_t zip_in, zip_out;       /* bytes into and out of the compressor (cumulative) */
    double zip_ratio;              /* zip_in / zip_out: the compression achieved */
    int64_t restores;              /* cold pages (one block, one layer) decompressed */
    int64_t restore_ns;            /* their total time */
    int64_t prefix_lookups;        /* full prompt blocks looked up in the prefix cache */
    int64_t prefix_hits;           /* ... and found */
    int64_t prefix_tokens;         /* tokens reused instead of computed */
    double prefix_hit_rate;        /* prefix_hits / prefix_lookups (0 when none) */
    int64_t cow_copies;            /* shared blocks copied before a write */
    int last_reused;               /* tokens the session's last cx_eval reused (cx_session_kv_stats) */
} cx_kv_stats;

/* Counters of a session's cache (shared or its own). */
void cx_session_kv_stats(const cx_session *s, cx_kv_stats *out);
void cx_kv_cache_stats(cx_kv_cache *c, cx_kv_stats *out);

/* ---- LoRA adapters (docs/lora.md) --------------------------------------- */

/*
 * An adapter changes some of the model's matrices W into W + s·B·A, with A
 * [rank x n_in] and B [n_out x rank] small and s = alpha / rank x the
 * user's scale. It is loaded beside the base model, which it never
 * modifies: many adapters can be resident at once, and one forward pass can
 * serve sequences with different adapters (each matrix runs W over every
 * token once, then each group of tokens sharing an adapter its low-rank
 * path). Files: llama.cpp's GGUF LoRA, or a PEFT directory
 * (adapter_config.json + adapter_model.safetensors).
 */
typedef struct cx_lora cx_lora;

typedef struct cx_lora_params {
    int type;              /* in-memory type of A and B: CX_TYPE_F32, CX_TYPE_Q8_0, CX_TYPE_Q4_0 (half
                              q8_0's memory traffic, coarser), or -1 (default): q8_0 when the base's
                              matrices are quantized, else f32 */
} cx_lora_params;

typedef struct cx_lora_info {
    char path[256];
    int n_matrices;        /* adapted matrices */
    int rank_min, rank_max;
    float alpha;           /* of the first matrix (alpha <= 0: scale 1) */
    int type;              /* in-memory type (CX_TYPE_F32, CX_TYPE_Q8_0 or CX_TYPE_Q4_0) */
    size_t bytes;          /* resident memory */
    uint64_t id;           /* unique per load in this process (prefix-cache keys include it) */
    int64_t load_ns;       /* time cx_lora_load took */
} cx_lora_info;

/* Most adapters one sequence applies together. */
#define CX_LORA_MAX_SET 8

/* One adapter applied to a sequence, with the user's scale. */
typedef struct cx_lora_use {
    const cx_lora *lora;
    float scale;
} cx_lora_use;

cx_lora_params cx_lora_defaults(void);
/* Load an adapter for model m: a GGUF file, or a PEFT directory or its
 * .safetensors file. Every mismatch with m (unknown tensor, wrong shape,
 * ranks of A and B differing) is CX_EFORMAT naming the file and tensor. */
int cx_lora_load(const cx_model *m, const char *path, const cx_lora_params *p, cx_lora **out, cx_err *err);
/* Free an adapter; no session may still use it. */
void cx_lora_free(cx_lora *a);
void cx_lora_get_info(const cx_lora *a, cx_lora_info *out);
/* The adapters (up to CX_LORA_MAX_SET, each of s's model) applied to every
 * token s evaluates from now on; n = 0 removes them. The session must be
 * empty (position 0: cx_session_truncate(s, 0) first), since its cached
 * keys and values were computed under the old set; prefix reuse only
 * matches blocks computed under an equal set. CX_EINVAL otherwise. */
int cx_session_set_lora(cx_session *s, const cx_lora_use *uses, int n, cx_err *err);

/* ---- sampler ------------------------------------------------------------ */

/* llama.cpp's sampler chain and its current defaults (common_params_sampling):
 * penalties -> top-k -> top-p -> min-p -> temperature -> draw. */
typedef struct cx_sampler_params {
    float temperature;       /* <= 0: greedy (argmax, lowest id on ties); default 0.8 */
    int top_k;               /* <= 0: off; default 40 */
    float top_p;             /* >= 1: off; default 0.95 */
    float min_p;             /* <= 0: off; default 0.05 */
    float repeat_penalty;    /* 1: off (default); a token seen in the window has its logit divided
                                by it (multiplied if the logit is <= 0), once however often seen */
    int repeat_last_n;       /* the window: the last N accepted tokens; 0: every penalty off; default 64 */
    uint64_t seed;           /* of the draws' noise (a hash of the seed, the draw's index and the token);
                                default 42 (fixed: runs repeat) */
    float presence_penalty;  /* 0: off (default); subtracted from the logit of a token seen in the window */
    float frequency_penalty; /* 0: off (default); subtracted once per occurrence in the window */
} cx_sampler_params;

typedef struct cx_sampler cx_sampler;

/* The defaults above: llama.cpp's, except the seed (llama.cpp draws a random one). */
cx_sampler_params cx_sampler_defaults(void);
int cx_sampler_new(int n_vocab, const cx_sampler_params *p, cx_sampler **out, cx_err *err);
void cx_sampler_free(cx_sampler *s);
/* Remember an accepted token (prompt or generated) for the penalties' window;
 * a token outside the vocabulary is not remembered. */
void cx_sampler_accept(cx_sampler *s, int token);
/* Choose the next token from logits (the array is not modified): the
 * sampler's next draw (its n-th call reads the noise of draw n, whatever
 * else happened: the tokens of a seeded run depend on the logits alone). */
int cx_sampler_sample(cx_sampler *s, const float *logits);
/* The distribution cx_sampler_sample draws from for these logits (the whole
 * chain, penalties included): m tokens (*ids) with probabilities (*probs)
 * summing to 1, best first; greedy gives its choice with probability 1. The
 * arrays are the sampler's, valid until its next call. No random number is
 * used. */
int cx_sampler_dist(cx_sampler *s, const float *logits, const int32_t **ids, const float **probs);

/* ---- speculative decoding (docs/speculative.md) ------------------------- */

/*
 * Decode at batch size 1 reads every weight once per token. Speculation
 * drafts k tokens cheaply, then checks them all in one pass of the target
 * (k + 1 rows read the weights once) and keeps the longest prefix the
 * target agrees with, plus one token of the target's own: 1 to k + 1 tokens
 * per pass over the weights. The output does not change: each row of the
 * check draws its token exactly as a plain decode step would and the draft
 * token is kept while it is that token, so greedy and seeded sampled output
 * are the target's alone, token for token; a draft model proposes with the
 * noise the target's draws will read, which couples its guesses to them
 * (docs/speculative.md).
 *
 * A drafter is where drafts come from, made once per target and shared by
 * the sequences that draft from it:
 *   CX_SPEC_NGRAM  prompt lookup: the context's last n tokens are found
 *                  earlier in the context, and what followed them there is
 *                  the draft (no model: editing, summarising, code)
 *   CX_SPEC_SELF   the target's own weights quantized at load (self_type),
 *                  run as a draft model: no second file
 *   CX_SPEC_MODEL  a draft model file with the target's vocabulary
 * A cx_spec is one sequence's speculation: the draft model's KV cache kept
 * in step with the sequence, the adaptive draft length, the statistics.
 */
enum { CX_SPEC_NONE = 0, CX_SPEC_NGRAM = 1, CX_SPEC_SELF = 2, CX_SPEC_MODEL = 3 };
#define CX_SPEC_MAX_DRAFT 32   /* most tokens one draft may hold */

typedef struct cx_spec_params {
    int kind;              /* CX_SPEC_* (default CX_SPEC_NGRAM) */
    int draft_max;         /* most tokens drafted per target pass, 1..CX_SPEC_MAX_DRAFT (default 8) */
    int draft_min;         /* a draft shorter than this is not verified: the step decodes one token
                              (default 0: any draft is verified) */
    int adapt;             /* 1 (default): each draft's length is the one that maximises tokens per second
                              under the measured acceptance and draft and verify times (<= draft_max);
                              0: every draft is draft_max long (or as long as the lookup found) */
    float p_min;           /* model drafters: stop drafting at a token the draft gives less than p_min
                              (default 0: never) */
    int ngram_min, ngram_max; /* lookup: suffix lengths tried, longest first (default 2..4) */
    int self_type;         /* CX_SPEC_SELF: the draft's weight type (default CX_TYPE_Q4_0; any type
                              cx_quantize_file writes); the target must be f32, f16 or bf16 */
    const char *draft_path;/* CX_SPEC_MODEL: a GGUF or llama2.c file sharing the target's vocabulary */
    const char *draft_tokenizer; /* CX_SPEC_MODEL with a llama2.c draft: its tokenizer.bin */
    const char *tmp_dir;   /* CX_SPEC_SELF: the quantized copy is written here, loaded, then unlinked
                              (NULL: "/tmp"; the library reads no environment) */
    int n_threads;         /* the draft model's passes (<= 0: 1) */
} cx_spec_params;

typedef struct cx_drafter cx_drafter;
typedef struct cx_spec cx_spec;

/* Lookup drafting, 8 tokens, adaptive, nothing else set. */
cx_spec_params cx_spec_defaults(void);
/* "none", "ngram", "self", "model"; NULL when out of range. */
const char *cx_spec_kind_name(int kind);
/* Parse llama-server-like spec names: "ngram", "self" (q4_0), "self:TYPE" ("self:q8_0"),
 * "model" (draft_path set separately), "none". Fills kind and self_type; CX_EINVAL naming it. */
int cx_spec_parse(const char *text, cx_spec_params *p, cx_err *err);

/* A drafter for target m. CX_SPEC_MODEL: the draft file is loaded and its
 * vocabulary checked against m's (CX_EINVAL naming the first difference);
 * CX_SPEC_SELF: m is quantized (seconds per GiB). */
int cx_drafter_new(const cx_model *m, const cx_spec_params *p, cx_drafter **out, cx_err *err);
/* After every cx_spec made from it. */
void cx_drafter_free(cx_drafter *d);
/* The draft model (NULL for lookup), e.g. for its size. */
const cx_model *cx_drafter_model(const cx_drafter *d);
/* One line: "ngram 2..4", "self:q4_0 (636 MiB)", "model stories15m.gguf (q8_0, 25 MiB)". */
const char *cx_drafter_describe(const cx_drafter *d);

/* One sequence's speculation, for sequences of up to n_ctx positions. */
int cx_spec_new(cx_drafter *d, int n_ctx, cx_spec **out, cx_err *err);
void cx_spec_free(cx_spec *sp);
/* A new sequence: the draft model's cache is forgotten (the statistics stay). */
void cx_spec_reset(cx_spec *sp);

/*
 * One speculative step of session s. hist[0..n_hist) is the whole sequence:
 * s holds its first n_hist - 1 positions and hist[n_hist - 1] is the last
 * token chosen, not yet evaluated. The step drafts, evaluates that token and
 * the draft in one pass, chooses each row's token with smp as a plain step
 * would (cx_sampler_sample, then cx_sampler_accept) while it is the draft's,
 * keeps the accepted positions
 * (cx_session_truncate past them), and writes the tokens chosen to out:
 * 1..draft+1 of them, at most max_out, ending at the first end-of-generation
 * token. The last is chosen, not evaluated: append out to hist and step again.
 * Returns the count, or a CX_E* code (then s holds its first n_hist - 1
 * positions again and nothing was chosen).
 */
int cx_spec_step(cx_spec *sp, cx_session *s, cx_sampler *smp, const int32_t *hist, int n_hist, int max_out,
                 int32_t *out, cx_err *err);
/* The logits out[i] of the last step was chosen from (n_vocab floats, valid until the next step). */
const float *cx_spec_logits(const cx_spec *sp, int i);

typedef struct cx_spec_stats {
    int64_t steps;          /* target passes (cx_spec_step calls, or the scheduler's sequence-steps) */
    int64_t verified;       /* of them, those that checked at least one draft token */
    int64_t drafted;        /* draft tokens checked */
    int64_t accepted;       /* ... and accepted */
    int64_t tokens;         /* tokens chosen (accepted + one per step) */
    int64_t draft_ns;       /* time drafting (the draft model's passes, the lookup) */
    int64_t verify_ns;      /* time in the target's passes */
    double acceptance;      /* accepted / drafted (0 when nothing was drafted) */
    double mean_accepted;   /* accepted / verified: tokens of a checked draft kept, on average */
    double tokens_per_pass; /* tokens / steps */
    int draft_len;          /* the length the next draft will aim for */
} cx_spec_stats;
void cx_spec_get_stats(const cx_spec *sp, cx_spec_stats *out);

/* ---- the request scheduler (docs/serving.md) ---------------------------- */

/*
 * A scheduler serves many requests on one model at once: each step is one
 * cx_batch_eval pass holding the next token of every decoding sequence and,
 * in the rest of a token budget, chunks of waiting prompts (continuous
 * batching with chunked prefill). Requests wait in a bounded queue, are
 * admitted by priority (aged, so a low class is never starved) when their
 * KV blocks fit the shared cache, may be preempted when the cache runs out
 * (their blocks are dropped and recomputed later: the tokens equal an
 * uninterrupted run), end at a deadline or on cancellation, and report each
 * token and their end through callbacks. Driven step by step by the caller
 * (cx_sched_step) or by its own thread (cx_sched_start); submit, cancel and
 * the statistics calls are safe from any thread. With a drafter
 * (cx_sched_params.drafter) a decoding sequence's segment of the pass is its
 * last token and a draft, checked as cx_spec_step checks one, while few
 * sequences decode (spec_max_batch): same tokens, fewer passes.
 */
typedef struct cx_sched cx_sched;

/* A request's states; the last four are final (docs/serving.md, "Lifecycle";
 * engine/src/sched/sched.h draws the transitions). cx_request_stats keeps
 * them in an int. */
typedef enum cx_req_state {
    CX_REQ_QUEUED, CX_REQ_PREFILL, CX_REQ_DECODE, CX_REQ_FINISHED, CX_REQ_CANCELLED, CX_REQ_TIMEOUT, CX_REQ_FAILED
} cx_req_state;
/* Why a request stopped generating. */
typedef enum cx_stop_reason {
    CX_STOP_NONE = 0,   /* not stopped, or ended by cancellation, deadline or failure */
    CX_STOP_LENGTH,     /* max_tokens generated (or the context is full) */
    CX_STOP_EOS,        /* the model's end of generation: its EOS or EOT token (cx_token_is_eog) */
    CX_STOP_TOKEN,      /* one of the request's stop token ids */
    CX_STOP_STRING      /* one of the request's stop strings (it is not part of the text) */
} cx_stop_reason;

/* One generated token, as the scheduler hands it to on_token. */
typedef struct cx_token_event {
    int64_t id;            /* the request */
    int32_t token;
    int index;             /* 0 for the first generated token */
    const char *text;      /* bytes now final: may be empty while they could start a stop string, and
                              then several tokens' bytes arrive at once (valid during the call) */
    size_t len;
    int64_t t_ns;          /* CLOCK_MONOTONIC time it was sampled */
    const float *logits;   /* the n_vocab logits it was sampled from (valid during the call: logprobs) */
} cx_token_event;

/* A request's life, readable during on_done and by cx_sched_request_stats. */
typedef struct cx_request_stats {
    int64_t id;
    int state, reason;     /* CX_REQ_*, CX_STOP_* */
    int priority, adapter;
    int n_prompt, n_gen;   /* prompt tokens; tokens generated */
    int n_cached;          /* prompt tokens taken from the prefix cache instead of computed */
    int n_preempted;       /* times its blocks were dropped to make room */
    int64_t t_submit, t_start, t_first, t_end; /* CLOCK_MONOTONIC ns: submitted, first scheduled,
                                                  first token, final state (0: not yet) */
    const int64_t *itl_ns; /* [n_gen - 1] the gaps between consecutive tokens */
    const int32_t *tokens; /* [n_gen] the generated ids */
    const char *text;      /* the generated text, stop string excluded (NUL-terminated) */
    size_t text_len;
    char error[256];       /* CX_REQ_FAILED: why */
    /* Speculative decoding (cx_sched_params.drafter; all 0 when it did not speculate). A decode
     * step of a speculating request is a speculative step: it drafts (possibly nothing), its
     * pass checks the draft, and it keeps 1..draft+1 tokens. */
    int spec_steps;        /* its speculative steps (a draft checked or not) */
    int spec_verified;     /* of them, those whose pass checked a draft */
    int spec_drafted;      /* draft tokens checked */
    int spec_accepted;     /* ... and accepted (<= spec_drafted) */
    int spec_tokens;       /* tokens those steps gave it (accepted + 1 per step, less any cut off by its end):
                              n_gen - 1 when every decode step speculated (the first token comes from prefill) */
    int64_t spec_draft_ns; /* time drafting for it */
    int64_t spec_verify_ns;/* its share of those steps' passes (by the rows it had in each) */
} cx_request_stats;

typedef void (*cx_token_cb)(void *user, const cx_token_event *ev);
typedef void (*cx_done_cb)(void *user, const cx_request_stats *st);

typedef struct cx_request {
    const int32_t *prompt; /* token ids, or NULL to tokenize `text` (with BOS) */
    int n_prompt;
    const char *text;
    cx_sampler_params sampling;
    int max_tokens;        /* >= 1; capped at what the context leaves */
    const int32_t *stop_ids;
    int n_stop_ids;
    const char *const *stop;   /* stop strings */
    int n_stop;
    int ignore_eos;        /* 1: the end-of-text token does not end the request */
    int no_prefix_cache;   /* 1: take no cached prefix blocks, compute the whole prompt (its own full blocks
                              are still cached for later requests): llama-server's "cache_prompt": false */
    int priority;          /* higher classes are admitted first; FIFO within a class */
    int64_t deadline_ms;   /* > 0: end as CX_REQ_TIMEOUT this long after submission */
    int adapter;           /* LoRA adapter id (cx_sched_adapter_add), 0: none */
    float adapter_scale;   /* the user's scale of the adapter (default 1) */
    int speculate;         /* speculative decoding with the scheduler's drafter (cx_sched_params.drafter):
                              -1 (default): on, drafts of up to the drafter's draft_max; 0: off for this
                              request; N > 0: on, drafts of at most N tokens. The output is the same */
    void *user;            /* handed to the callbacks */
    cx_token_cb on_token;  /* may be NULL; called on the stepping thread without the scheduler's lock */
    cx_done_cb on_done;    /* may be NULL; called once, when the request reaches a final state */
} cx_request;

/* Sampling as cx_sampler_defaults(), 16 tokens, nothing else set. */
cx_request cx_request_defaults(void);

typedef struct cx_sched_params {
    int max_seqs;          /* sequences running at once, >= 1 (default 8) */
    int max_batch_tokens;  /* tokens per step over all sequences, 1..256 (default 256) */
    int max_queue;         /* waiting requests, >= 1 (default 256); a submission beyond: CX_EBUSY */
    int n_ctx;             /* each sequence's context (0: the model's, at most CX_DEFAULT_CTX) */
    int n_threads;         /* threads of the forward pass (<= 0: 1) */
    int aging_ms;          /* a waiting request climbs one priority class per aging_ms waited (0: never) */
    int chunk;             /* most prompt tokens one sequence gets per step (0: what the budget leaves) */
    cx_kv_params kv;       /* the shared cache; kv.max_tokens is its capacity in positions
                              (0: max_seqs * n_ctx) */
    int64_t lora_budget;   /* bytes of resident adapters (0: unlimited); the least recently used
                              idle ones are unloaded to make room */
    int lora_type;         /* adapters' in-memory type (cx_lora_params.type; -1: auto) */
    int lora_split;        /* 1: each step serves one adapter (and scale) only, as llama.cpp's server
                              does; for comparison with mixed batches (0, the default) */
    cx_drafter *drafter;   /* speculative decoding (docs/serving.md): NULL (default): none. A drafter for
                              this model (cx_drafter_new); the caller keeps it and frees it after
                              cx_sched_free. Each sequence slot gets its own cx_spec */
    int spec_max_batch;    /* a step speculates only while at most this many sequences decode: past it,
                              batching fills the pass already (0: CX_SCHED_SPEC_MAX_BATCH) */
} cx_sched_params;

/* cx_sched_params.spec_max_batch's default: speculation pays while a pass is
 * bound by reading the weights; a few decoding rows leave it so, and past
 * that the rows it adds cost compute that batching already puts to use. */
#define CX_SCHED_SPEC_MAX_BATCH 4

/* Scheduler counters (cx_sched_get_stats). */
typedef struct cx_sched_stats {
    int running, waiting;          /* now */
    int64_t submitted, rejected;   /* accepted submissions; refused ones (any reason) */
    int64_t finished, cancelled, timed_out, failed, preemptions;
    int64_t steps, prefill_tokens, decode_tokens; /* decode_tokens: rows of decoding sequences computed,
                                                     the drafts their passes checked included */
    int64_t step_ns, eval_ns;      /* time in steps, and inside their cx_batch_eval (the rest is
                                      the scheduler's own overhead: batch forming, sampling, callbacks) */
    int64_t kv_blocks_used, kv_blocks_max, kv_blocks_capacity; /* see cx_kv_stats */
    int lora_registered, lora_resident;    /* adapters known; loaded now */
    int64_t lora_bytes;                    /* memory of the resident ones */
    int64_t lora_loads, lora_evictions;    /* loads (first use and reloads); unloads to make room */
    int64_t lora_load_ns, lora_load_ns_max; /* time loading, in all and the longest */
    /* speculative decoding (cx_request_stats' counters, summed over every request) */
    int64_t spec_steps;            /* sequence-steps decoded speculatively (a draft checked or not) */
    int64_t spec_verified;         /* of them, those whose pass checked a draft */
    int64_t spec_passes;           /* passes (steps) that checked at least one draft (in decode order) */
    int64_t spec_drafted, spec_accepted; /* draft tokens checked; of them, accepted */
    int64_t spec_draft_passes;     /* passes of the draft model (a model drafter's; each drafts a token, or
                                      feeds a catch-up, for every sequence drafting in the step) */
    int64_t spec_tokens;           /* tokens the speculative steps gave their requests */
    int64_t spec_draft_ns;         /* time drafting (part of step_ns, outside eval_ns) */
    int64_t spec_verify_ns;        /* time in the passes that checked drafts (part of eval_ns) */
    cx_pool_stats pool;            /* the threads of its passes (cx_pool_stats) */
} cx_sched_stats;

/* max_seqs 8, max_batch_tokens 256, max_queue 256, aging 1000 ms, cx_kv_defaults() with the prefix cache on. */
cx_sched_params cx_sched_defaults(void);
int cx_sched_new(const cx_model *m, const cx_sched_params *p, cx_sched **out, cx_err *err);
/* Stops its thread (cancelling what is left) and frees everything. */
void cx_sched_free(cx_sched *s);
/* Queue a request: its id (> 0), or CX_EBUSY (queue full or stopping), CX_ECTX (the prompt
 * leaves no room to generate in the context), CX_EINVAL / CX_EUNSUP (bad request), CX_ENOMEM. */
int64_t cx_sched_submit(cx_sched *s, const cx_request *r, cx_err *err);
/* Ask request id to end (at the next step boundary) as CX_REQ_CANCELLED; CX_EINVAL if no such live request. */
int cx_sched_cancel(cx_sched *s, int64_t id);
/* One step: ends, admission, preemption, one pass, sampling, callbacks. Returns the
 * requests still waiting or running (0: idle), or a CX_E* code (the thread is running). */
int cx_sched_step(cx_sched *s, cx_err *err);
/* Run steps on a thread of its own until cx_sched_stop. */
int cx_sched_start(cx_sched *s, cx_err *err);
/* Stop the thread: drain = 1 refuses new requests and returns once every
 * admitted one has ended; drain = 0 cancels them. */
void cx_sched_stop(cx_sched *s, int drain);
/* A request's statistics (pointers valid until cx_sched_release); CX_EINVAL if unknown. */
int cx_sched_request_stats(cx_sched *s, int64_t id, cx_request_stats *out);
/* Forget an ended request's record (its text, tokens and gaps). CX_EINVAL if unknown or still live. */
int cx_sched_release(cx_sched *s, int64_t id);
void cx_sched_get_stats(cx_sched *s, cx_sched_stats *out);
/* Register adapter `id` (>= 1) under `name` (NULL: "adapter-ID"), from `path` (GGUF or PEFT).
 * It is loaded on first use (preload = 1: now, so a bad file fails here) and may be
 * unloaded to make room when idle, then loaded again. Safe while the scheduler runs.
 * CX_EINVAL for a taken id or name, a loader's error when preloading. */
int cx_sched_adapter_add(cx_sched *s, int id, const char *name, const char *path, int preload, cx_err *err);
/* Unregister adapter id: 0 when it is gone now; 1 when requests still use it (it is
 * unloaded when the last of them ends; new requests naming it are refused meanwhile);
 * CX_EINVAL if unknown. */
int cx_sched_adapter_remove(cx_sched *s, int id, cx_err *err);
/* The id registered under `name`, or 0. */
int cx_sched_adapter_find(cx_sched *s, const char *name);

typedef struct cx_adapter_info {
    int id;
    char name[64];
    char path[256];
    int resident, removing;
    int refs, running;     /* live requests naming it; of those, running */
    int64_t bytes;         /* when resident (or last resident) */
    int64_t loads;
} cx_adapter_info;
/* Adapter number i (0.. registered - 1) into out; CX_EINVAL past the end. */
int cx_sched_adapter_info(cx_sched *s, int i, cx_adapter_info *out);

/* The scheduler's shared KV cache, for its statistics (cx_kv_cache_stats); owned by the scheduler. */
cx_kv_cache *cx_sched_cache(cx_sched *s);

/* ---- placement: the CPUs of the engine's threads, the NUMA nodes of its memory ---- */

/*
 * One setting per process, made before the models and sessions it should
 * apply to: a thread pool reads it when it starts (cx_session_new,
 * cx_batch_new, cx_sched_new), a model when it loads, a KV cache when it is
 * made; what exists already keeps what it got. Setting it again is allowed
 * (later objects follow the new one). The defaults are the engine's behaviour
 * without the call: no pinning, the kernel's NUMA policy.
 *
 * Threads: thread i of a pool is pinned to cpus[i mod n], where cpus is the
 * order below over the CPUs the calling thread may use when cx_set_placement
 * runs (sched_getaffinity: taskset, cpusets; so call it before cx_pin_caller,
 * which leaves that thread one CPU). Thread 0 of every pass is the caller
 * of cx_eval/cx_batch_eval/cx_sched_step; the library does not change the
 * affinity of a thread it does not own, so that CPU is left free of workers
 * and a program that owns its thread pins it with cx_pin_caller. The
 * scheduler's own thread (cx_sched_start) is the engine's and is pinned to
 * cpus[0]. Several pools share the same CPUs (each pins its thread i to cpus[i]).
 *
 * NUMA: the policy is bound (mbind) to the memory the engine allocates for
 * weights (a copy in huge pages, cx_model_params.weights) and for the KV
 * cache (its tiers), before the first touch. A model mapped from its file
 * lives in the page cache, which mbind does not place: cx_placement_info says
 * so. On a machine with one NUMA node nothing is bound and the setting says so.
 */
typedef enum cx_pin_policy {
    CX_PIN_NONE = 0,    /* no pinning: the kernel places and migrates threads */
    CX_PIN_COMPACT = 1, /* fill a core's SMT siblings, then the next core, same package and node first */
    CX_PIN_SPREAD = 2   /* one thread per NUMA node/package in turn, each on a core not yet used;
                           SMT siblings only once every core has a thread */
} cx_pin_policy;

typedef enum cx_numa_policy {
    CX_NUMA_DEFAULT = 0,   /* bind nothing: the process's policy (numactl's, or the kernel's first touch) */
    CX_NUMA_LOCAL = 1,     /* MPOL_LOCAL: a page goes to the node of the CPU that first touches it,
                              whatever policy the process inherited */
    CX_NUMA_INTERLEAVE = 2 /* MPOL_INTERLEAVE: pages round-robin over every node the process may use */
} cx_numa_policy;

/* Set the process's placement. CX_EINVAL for an unknown policy; CX_EIO when
 * the CPUs this process may use cannot be read. */
int cx_set_placement(cx_pin_policy pin, cx_numa_policy numa, cx_err *err);
/* Pin the calling thread to cpus[0], the CPU of every pass's thread 0 (see
 * above), for good: for a program that evaluates on a thread of its own.
 * Nothing under CX_PIN_NONE. CX_EINVAL when the kernel refuses (the CPU is
 * no longer allowed). */
int cx_pin_caller(cx_err *err);

/* What cx_set_placement applied, as this process has it now. */
typedef struct cx_placement_info {
    int pin, numa;        /* CX_PIN_*, CX_NUMA_* */
    int n_cpus;           /* CPUs in the pin order (0 under CX_PIN_NONE) */
    char cpus[256];       /* the order, "0,2,1,3" ("" under CX_PIN_NONE; ends in "..." when cut) */
    int numa_nodes;       /* NUMA nodes this process may allocate from (Mems_allowed with memory) */
    char nodes[128];      /* them as a list, "0" or "0-1" */
    int numa_effect;      /* 1: a policy other than CX_NUMA_DEFAULT on several nodes: memory is bound */
    int mapped_unplaced;  /* 1: with numa_effect, a model mapped from its file (page cache) was loaded:
                             its weights are not placed (weights CX_WEIGHTS_HUGEPAGES copies them) */
} cx_placement_info;
void cx_placement_get(cx_placement_info *out);
/* The same in one line for logs and run records, e.g. "pin=compact cpus=0,1
 * numa=interleave nodes=0 (one NUMA node: no effect)". NUL-terminated in buf
 * (cut to n); returns the length of the whole line. */
size_t cx_placement_describe(char *buf, size_t n);
/* "none", "compact", "spread"; "default", "local", "interleave"; NULL when out of range. */
const char *cx_pin_policy_name(int policy);
const char *cx_numa_policy_name(int policy);
/* The policy named (any case), or -1. */
int cx_pin_policy_from_name(const char *name);
int cx_numa_policy_from_name(const char *name);

/* ---- kernels ------------------------------------------------------------ */

/* The instruction set a model loaded with cx_model_params.isa = `isa` runs its
 * kernels with ("scalar", "avx2", "avxvnni", "avx512", "avx512vnni", "avx512bf16"; NULL or "auto": the best this
 * CPU offers, never avx512bf16),
 * known before loading one (the harness records it). NULL, with a message in
 * err (CX_EINVAL), when `isa` is unknown or not available here. */
const char *cx_isa_resolve(const char *isa, cx_err *err);
/* What CPUID reports that the kernels care about, e.g. "sse4.2 avx avx2 fma f16c". */
const char *cx_cpu_features(void);

#ifdef __cplusplus
}
#endif
#endif /* CORTEX_H */
