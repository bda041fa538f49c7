/*
 * synth.c - shape presets and synthetic GGUF models.
 *
 * Benchmarks need models of real size without downloading weights, so we
 * write them: every tensor is filled from its own deterministic stream
 * (seeded by the global seed and the tensor's name), normal with std 0.02,
 * norm weights 1. The vocabulary is a synthetic SentencePiece one: specials,
 * the 256 byte tokens, printable characters and letter n-grams with and
 * without the word-start marker, scored so BPE merges behave sensibly.
 * The file follows the GGUF v3 spec exactly, so other readers can load it.
 */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortex_tools.h"
#include "gguf.h"
#include "gguf_write.h"
#include "model.h"
#include "quant.h"
#include "synth.h"
#include "tokenizer.h"
#include "util.h"

static const cx_shape SHAPES[] = {
    /* name            embd   ff     layers heads kv  vocab   ctx     rope      eps    tied arch bias rope scaling (factor low high ctx), head_dim */
    {"test-tiny",      64,    192,   2,     4,    2,  512,    128,    10000.0f, 1e-5f, 1, "llama", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    /* the new architecture features at test size: Llama 3 RoPE factors (a short original context, so
     * every regime of the formula occurs in 8 frequencies); qwen2's biases, NeoX RoPE, separate output */
    {"test-llama3",    64,    192,   2,     4,    2,  512,    128,    500000.0f, 1e-5f, 1, "llama", 0, 8, 1, 32, 4000, 0, 0, 0, 0, 0, 0},
    {"test-qwen2",     64,    192,   2,     4,    2,  512,    128,    1000000.0f, 1e-6f, 0, "qwen2", 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    /* heads wider than n_embd / n_head (32 x 4 = 128 > 64), as the GGUF's attention.key_length may say */
    {"test-headdim",   64,    192,   2,     4,    2,  512,    128,    10000.0f, 1e-5f, 1, "llama", 0, 0, 0, 0, 0, 32, 0, 0, 0, 0, 0},
    /* the deterministic gate's micro workload: 16 prompt tokens + 8 steps = ~1.1e8 instructions (docs/gates.md) */
    {"gate-micro",     128,   384,   2,     4,    2,  2048,   256,    10000.0f, 1e-5f, 1, "llama", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"stories15m",     288,   768,   6,     6,    6,  32000,  256,    10000.0f, 1e-5f, 1, "llama", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"stories42m",     512,   1376,  8,     8,    8,  32000,  1024,   10000.0f, 1e-5f, 1, "llama", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"stories110m",    768,   2048,  12,    12,   12, 32000,  1024,   10000.0f, 1e-5f, 1, "llama", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"tinyllama-1.1b", 2048,  5632,  22,    32,   4,  32000,  2048,   10000.0f, 1e-5f, 0, "llama", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    /* TinyLlama-1.1B's attention (22 layers, 32 query and 4 KV heads of 64, 32k positions) around a
     * 256-wide residual and FFN: its matrices are 2% of TinyLlama's, so a decode at depth is nearly all
     * attention (docs/performance.md times attention against the peers with it) */
    {"tinyllama-attn", 256,   256,   22,    32,   4,  512,    32768,  10000.0f, 1e-5f, 1, "llama", 0, 0, 0, 0, 0, 64, 0, 0, 0, 0, 0},
    {"llama-3.2-1b",   2048,  8192,  16,    32,   8,  128256, 131072, 500000.0f, 1e-5f, 1, "llama", 0, 32, 1, 4, 8192, 0, 0, 0, 0, 0, 0},
    {"qwen2.5-0.5b",   896,   4864,  24,    14,   2,  151936, 32768,  1000000.0f, 1e-6f, 1, "qwen2", 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    /* mixture of experts at test size: Mixtral-style llama (4 experts, 2 per token); gpt-oss (sinks, a
     * sliding window of 16 on even layers, biases, clamped SwiGLU experts, YaRN x4 over 64 positions) */
    {"moe-tiny",       64,    96,    2,     4,    2,  512,    128,    10000.0f, 1e-5f, 1, "llama", 0, 0, 0, 0, 0, 0, 4, 2, 0, 0, 0},
    {"gpt-oss-tiny",   64,    96,    2,     4,    2,  512,    256,    150000.0f, 1e-5f, 0, "gpt-oss", 1, 0, 0, 0, 0, 32, 4, 2, 16, 4.0f, 64},
    /* OpenAI's gpt-oss-20b: 24 layers, 32 experts of width 2880 with 4 active, 64 query / 8 KV heads of 64 */
    {"gpt-oss-20b",    2880,  2880,  24,    64,   8,  201088, 131072, 150000.0f, 1e-5f, 0, "gpt-oss", 1, 0, 0, 0, 0, 64, 32, 4, 128, 32.0f, 4096},
    {"llama-2-7b",     4096,  11008, 32,    32,   32, 32000,  4096,   10000.0f, 1e-5f, 0, "llama", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
};

const cx_shape *cx_shapes(void) { return SHAPES; }

const cx_shape *cx_shape_find(const char *name) {
    for (const cx_shape *s = SHAPES; s->name; s++)
        if (!strcmp(s->name, name)) return s;
    return NULL;
}

/* ---- deterministic random streams ---- */

static uint64_t splitmix(uint64_t *x) { return cx_splitmix64(x); }

/* Fill n values N(0, std^2) by Box-Muller from the stream `st`. */
void synth_fill_normal(uint64_t *st, float *out, int64_t n, float std) {
    for (int64_t i = 0; i < n; i += 2) {
        double u1 = ((double)(splitmix(st) >> 11) + 1.0) * (1.0 / 9007199254740993.0); /* (0, 1] */
        double u2 = (double)(splitmix(st) >> 11) * (1.0 / 9007199254740992.0);
        double r = sqrt(-2.0 * log(u1)) * std, a = 6.283185307179586 * u2;
        out[i] = (float)(r * cos(a));
        if (i + 1 < n) out[i + 1] = (float)(r * sin(a));
    }
}

uint64_t synth_name_seed(uint64_t seed, const char *name) {
    uint64_t h = 1469598103934665603ull ^ seed;
    for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return h;
}

/* ---- synthetic vocabulary ---- */

typedef struct vocab_out { char **pieces; float *scores; int32_t *types; int n; } vocab_out;

static int vocab_add(vocab_out *v, int cap, const char *s, float score, int type) {
    if (v->n >= cap) return 0;
    v->pieces[v->n] = strdup(s);
    if (!v->pieces[v->n]) return -1;
    v->scores[v->n] = score;
    v->types[v->n] = type;
    v->n++;
    return 0;
}

/* Build n pieces (GGUF spelling, U+2581 for word starts); 0 on success. */
static int make_vocab(vocab_out *v, int n) {
    static const char *WS = "\xE2\x96\x81";
    v->pieces = calloc((size_t)n, sizeof(char *));
    v->scores = malloc(sizeof(float) * (size_t)n);
    v->types = malloc(sizeof(int32_t) * (size_t)n);
    v->n = 0;
    if (!v->pieces || !v->scores || !v->types) return -1;
    int rc = vocab_add(v, n, "<unk>", 0, TOK_UNKNOWN) | vocab_add(v, n, "<s>", 0, TOK_CONTROL) |
             vocab_add(v, n, "</s>", 0, TOK_CONTROL);
    char buf[32];
    for (int b = 0; b < 256 && !rc; b++) {
        snprintf(buf, sizeof buf, "<0x%02X>", b);
        rc = vocab_add(v, n, buf, 0, TOK_BYTE);
    }
    float score = 0;
    rc |= vocab_add(v, n, WS, score--, TOK_NORMAL);
    for (int c = 33; c < 127 && !rc; c++) {
        buf[0] = (char)c;
        buf[1] = 0;
        rc = vocab_add(v, n, buf, score--, TOK_NORMAL);
    }
    /* Letter n-grams of growing length, each with and without the word-start marker. */
    for (int len = 1; len <= 4 && v->n < n && !rc; len++) {
        long count = 1;
        for (int i = 0; i < len; i++) count *= 26;
        for (long k = 0; k < count && v->n < n && !rc; k++) {
            char gram[8];
            long x = k;
            for (int i = len - 1; i >= 0; i--, x /= 26) gram[i] = (char)('a' + x % 26);
            gram[len] = 0;
            snprintf(buf, sizeof buf, "%s%s", WS, gram);
            rc = vocab_add(v, n, buf, score--, TOK_NORMAL);
            if (len > 1 && !rc) rc = vocab_add(v, n, gram, score--, TOK_NORMAL);
        }
    }
    /* Beyond 4-grams (never reached by the presets): unique filler pieces. */
    for (int i = 0; v->n < n && !rc; i++) {
        snprintf(buf, sizeof buf, "<extra_%d>", i);
        rc = vocab_add(v, n, buf, score--, TOK_NORMAL);
    }
    return rc;
}

static void free_vocab(vocab_out *v) {
    for (int i = 0; v->pieces && i < v->n; i++) free(v->pieces[i]);
    free(v->pieces);
    free(v->scores);
    free(v->types);
}

/* ---- writing ---- */

/* What a tensor holds: weights N(0, 0.02^2), norm weights 1, biases
 * N(0, 0.5^2) (large, so a test sees them), or Llama 3's RoPE factors. */
enum { FILL_WEIGHT = 0, FILL_ONES = 1, FILL_BIAS = 2, FILL_ROPE = 3 };
typedef struct tensor_plan { char name[64]; int type, n_dims; int64_t ne[3]; int is_norm; } tensor_plan;

/*
 * Llama 3's RoPE scaling as per-frequency divisors (rope_freqs.weight), the
 * way llama.cpp's converter computes them from the Hugging Face config:
 * wavelengths shorter than orig_ctx / high keep their frequency, longer than
 * orig_ctx / low are divided by `factor`, and those between blend the two.
 */
static void llama3_rope_factors(const cx_shape *sh, float *out, int n) {
    int hd = 2 * n; /* n frequencies: one per pair of a head */
    double lo_wl = sh->rope_orig_ctx / sh->rope_low, hi_wl = sh->rope_orig_ctx / sh->rope_high;
    for (int i = 0; i < n; i++) {
        double freq = 1.0 / pow((double)sh->rope_base, (double)(2 * i) / hd), wl = 2 * 3.141592653589793 / freq;
        if (wl < hi_wl) out[i] = 1.0f;
        else if (wl > lo_wl) out[i] = sh->rope_factor;
        else {
            double smooth = (sh->rope_orig_ctx / wl - sh->rope_low) / (sh->rope_high - sh->rope_low);
            out[i] = (float)(1.0 / ((1 - smooth) / sh->rope_factor + smooth));
        }
    }
}

/* Stream one tensor: generate a row of floats, convert, write, pad. */
static int write_tensor(const gguf_writer *w, FILE *f, const tensor_plan *t, const cx_shape *sh, uint64_t seed,
                        float *row, void *qrow) {
    uint64_t st = synth_name_seed(seed, t->name);
    int64_t cols = t->ne[0], rows = 1;
    for (int d = 1; d < t->n_dims; d++) rows *= t->ne[d];
    size_t rb = quant_row_bytes(t->type, cols);
    for (int64_t r = 0; r < rows; r++) {
        if (t->is_norm == FILL_ONES) {
            for (int64_t i = 0; i < cols; i++) row[i] = 1.0f;
        } else if (t->is_norm == FILL_ROPE) {
            llama3_rope_factors(sh, row, (int)cols);
        } else {
            synth_fill_normal(&st, row, cols, t->is_norm == FILL_BIAS ? 0.5f : 0.02f);
        }
        quant_quantize_row(t->type, row, qrow, cols);
        if (fwrite(qrow, 1, rb, f) != rb) return CX_EIO;
    }
    return gguf_w_pad(w, f, rb * (uint64_t)rows);
}

/* See cortex_tools.h. */
int cx_synth_write(const cx_shape *sh, int type, uint64_t seed, const char *path, cx_err *err) {
    return cx_synth_write_ex(sh, type, seed, NULL, path, err);
}

/* The vocabulary file `path`, loaded (so a bad one fails here, with the
 * loader's message) and kept mapped for its metadata entries; 0 or an error. */
static int synth_open_vocab(const char *path, cx_model **vm, gguf_ctx *g, cx_err *err) {
    int rc = cx_model_load(path, NULL, vm, err);
    if (rc) return rc;
    return gguf_parse((*vm)->map, (*vm)->map_size, path, g, err);
}

/* See cortex_tools.h. */
int cx_synth_write_ex(const cx_shape *shape, int type, uint64_t seed, const char *vocab, const char *path,
                      cx_err *err) {
    cx_shape shv = *shape;
    const cx_shape *sh = &shv;
    cx_model *vm = NULL;
    gguf_ctx vg;
    int have_vg = 0;
    if (vocab) {
        int vrc = synth_open_vocab(vocab, &vm, &vg, err);
        have_vg = vrc == 0 && vm;
        if (vrc) {
            cx_model_free(vm);
            return vrc;
        }
        shv.n_vocab = cx_model_get_info(vm)->n_vocab;
    }
    const char *arch = sh->arch ? sh->arch : "llama";
    cx_model_info h = {0};
    h.n_embd = sh->n_embd; h.n_ff = sh->n_ff; h.n_layer = sh->n_layer; h.n_head = sh->n_head;
    h.n_head_kv = sh->n_head_kv; h.n_vocab = sh->n_vocab; h.n_ctx = sh->n_ctx;
    h.rope_base = sh->rope_base; h.rms_eps = sh->rms_eps; h.head_dim = sh->head_dim;
    int rc = model_check_hparams(&h, sh->name, err);
    if (rc) {
        if (have_vg) gguf_free(&vg);
        cx_model_free(vm);
        return rc;
    }
    if (gguf_file_type(type) < 0)
        return cx_fail(err, CX_EINVAL, "unsupported weight type %s (%d) for synth", cx_type_name(type), type);
    int64_t HD = sh->head_dim ? sh->head_dim : sh->n_embd / sh->n_head;
    int64_t E = sh->n_embd, F = sh->n_ff, KV = (int64_t)sh->n_head_kv * HD, QD = (int64_t)sh->n_head * HD;
    if (quant_block_size(type) == QK) { /* q8_0, q4_0, mxfp4 */
        if (E % QK || F % QK)
            return cx_fail(err, CX_EINVAL, "shape %s: embedding %lld and feed-forward %lld must be multiples of 32 for %s",
                           sh->name, (long long)E, (long long)F, cx_type_name(type));
    }
    int gptoss = !strcmp(arch, "gpt-oss"), moe = sh->n_expert > 0;
    int64_t X = sh->n_expert;
    /* per layer: 9 tensors (dense) or 10 (router + 3 experts), QKV biases, gpt-oss output, router and expert biases and sinks (6) */
    int n_t = 2 + (sh->tied_output ? 0 : 1) + (sh->rope_factor > 0) + ((moe ? 10 : 9) + (sh->qkv_bias ? 3 : 0) + (gptoss ? 6 : 0)) * sh->n_layer;
    tensor_plan *plan = calloc((size_t)n_t, sizeof *plan);
    vocab_out voc = {0};
    gguf_writer *w = gguf_writer_new(0);
    char *tmp = malloc(strlen(path) + 8);
    int64_t widest = E > F ? E : F; /* the longest row: n_embd, n_ff or the query width */
    if (QD > widest) widest = QD;
    float *row = malloc(sizeof(float) * (size_t)widest + 8);
    void *qrow = malloc(sizeof(float) * (size_t)widest + 8);
    FILE *f = NULL;
    if (tmp) tmp[0] = 0;
    synth_bpe bpe = {0}; /* gpt-oss: a byte-level BPE vocabulary in o200k's shape, else SentencePiece */
    if (!plan || !w || !tmp || !row || !qrow ||
        (!vocab && (gptoss ? synth_bpe_make(&bpe, sh->n_vocab) : make_vocab(&voc, sh->n_vocab)))) {
        rc = cx_fail(err, CX_ENOMEM, "out of memory preparing %s", sh->name);
        goto done;
    }
    /* Tensors in llama.cpp's order, so the file reads like one it would write. */
    int k = 0;
#define PLAN3(nm, ty, nd, c, r, x, norm) do { snprintf(plan[k].name, sizeof plan[k].name, "%s", nm); plan[k].type = ty; \
        plan[k].n_dims = nd; plan[k].ne[0] = c; plan[k].ne[1] = r; plan[k].ne[2] = x; plan[k].is_norm = norm; k++; } while (0)
#define PLAN(nm, ty, nd, c, r, norm) PLAN3(nm, ty, nd, c, r, 1, norm)
    /* Each matrix's type follows the file type's rule (quant_mix_type); a tied
     * embedding is also the classifier, so it gets output.weight's type, as in llama.cpp. */
    PLAN("token_embd.weight", quant_tensor_type(type, sh->tied_output ? "output.weight" : "token_embd.weight", -1,
                                                sh->n_layer, E, moe), 2, E, sh->n_vocab, 0);
    PLAN("output_norm.weight", CX_TYPE_F32, 1, E, 1, 1);
    if (!sh->tied_output) PLAN("output.weight", quant_tensor_type(type, "output.weight", -1, sh->n_layer, E, moe), 2, E,
                               sh->n_vocab, 0);
    if (sh->rope_factor > 0) PLAN("rope_freqs.weight", CX_TYPE_F32, 1, HD / 2, 1, FILL_ROPE);
    for (int l = 0; l < sh->n_layer; l++) {
        char nm[64];
#define LPLAN3(part, kind, ty, nd, c, r, x, norm) do { snprintf(nm, sizeof nm, "blk.%d.%s.%s", l, part, kind); \
        PLAN3(nm, quant_tensor_type(ty, nm, l, sh->n_layer, c, moe), nd, c, r, x, norm); } while (0)
#define LPLAN(part, ty, nd, c, r, norm) LPLAN3(part, "weight", ty, nd, c, r, 1, norm)
        LPLAN("attn_norm", CX_TYPE_F32, 1, E, 1, 1);
        LPLAN("attn_q", type, 2, E, QD, 0);
        LPLAN("attn_k", type, 2, E, KV, 0);
        LPLAN("attn_v", type, 2, E, KV, 0);
        LPLAN("attn_output", type, 2, QD, E, 0);
        if (sh->qkv_bias) {
            LPLAN3("attn_q", "bias", CX_TYPE_F32, 1, QD, 1, 1, FILL_BIAS);
            LPLAN3("attn_k", "bias", CX_TYPE_F32, 1, KV, 1, 1, FILL_BIAS);
            LPLAN3("attn_v", "bias", CX_TYPE_F32, 1, KV, 1, 1, FILL_BIAS);
        }
        if (gptoss) { /* the output bias, each head's sink logit; the feed-forward norm's name */
            LPLAN3("attn_output", "bias", CX_TYPE_F32, 1, E, 1, 1, FILL_BIAS);
            LPLAN("attn_sinks", CX_TYPE_F32, 1, sh->n_head, 1, FILL_BIAS);
        }
        LPLAN(gptoss ? "post_attention_norm" : "ffn_norm", CX_TYPE_F32, 1, E, 1, 1);
        if (moe) { /* the router and the stacked experts (ggml [cols, rows, expert]) */
            LPLAN("ffn_gate_inp", type, 2, E, X, 0);
            LPLAN3("ffn_gate_exps", "weight", type, 3, E, F, X, 0);
            LPLAN3("ffn_up_exps", "weight", type, 3, E, F, X, 0);
            LPLAN3("ffn_down_exps", "weight", type, 3, F, E, X, 0);
        } else {
            LPLAN("ffn_gate", type, 2, E, F, 0);
            LPLAN("ffn_up", type, 2, E, F, 0);
            LPLAN("ffn_down", type, 2, F, E, 0);
        }
        if (gptoss) {
            LPLAN3("ffn_gate_inp", "bias", CX_TYPE_F32, 1, X, 1, 1, FILL_BIAS);
            LPLAN3("ffn_gate_exps", "bias", CX_TYPE_F32, 2, F, X, 1, FILL_BIAS);
            LPLAN3("ffn_up_exps", "bias", CX_TYPE_F32, 2, F, X, 1, FILL_BIAS);
            LPLAN3("ffn_down_exps", "bias", CX_TYPE_F32, 2, E, X, 1, FILL_BIAS);
        }
#undef LPLAN
#undef LPLAN3
    }
#undef PLAN
#undef PLAN3
    assert(k == n_t);
    char name[160];
    snprintf(name, sizeof name, "cortex-synth %s %s seed %llu", sh->name, cx_type_name(type), (unsigned long long)seed);
    gguf_w_str(w, "general.architecture", arch);
    gguf_w_str(w, "general.name", name);
    gguf_w_u32(w, "general.file_type", (uint32_t)gguf_file_type(type));
    gguf_w_u32(w, "general.quantization_version", 2);
    char key[96];
#define ARCH_KEY(k) (snprintf(key, sizeof key, "%s.%s", arch, k), key)
    gguf_w_u32(w, ARCH_KEY("context_length"), (uint32_t)sh->n_ctx);
    gguf_w_u32(w, ARCH_KEY("embedding_length"), (uint32_t)E);
    gguf_w_u32(w, ARCH_KEY("feed_forward_length"), (uint32_t)F);
    gguf_w_u32(w, ARCH_KEY("block_count"), (uint32_t)sh->n_layer);
    gguf_w_u32(w, ARCH_KEY("attention.head_count"), (uint32_t)sh->n_head);
    gguf_w_u32(w, ARCH_KEY("attention.head_count_kv"), (uint32_t)sh->n_head_kv);
    gguf_w_u32(w, ARCH_KEY("rope.dimension_count"), (uint32_t)HD);
    if (sh->head_dim) {
        gguf_w_u32(w, ARCH_KEY("attention.key_length"), (uint32_t)HD);
        gguf_w_u32(w, ARCH_KEY("attention.value_length"), (uint32_t)HD);
    }
    gguf_w_f32(w, ARCH_KEY("rope.freq_base"), sh->rope_base);
    gguf_w_f32(w, ARCH_KEY("attention.layer_norm_rms_epsilon"), sh->rms_eps);
    gguf_w_u32(w, ARCH_KEY("vocab_size"), (uint32_t)sh->n_vocab);
    if (moe) {
        gguf_w_u32(w, ARCH_KEY("expert_count"), (uint32_t)sh->n_expert);
        gguf_w_u32(w, ARCH_KEY("expert_used_count"), (uint32_t)sh->n_expert_used);
        gguf_w_u32(w, ARCH_KEY("expert_feed_forward_length"), (uint32_t)F);
    }
    if (sh->sliding_window) gguf_w_u32(w, ARCH_KEY("attention.sliding_window"), (uint32_t)sh->sliding_window);
    if (sh->yarn_factor > 0) {
        gguf_w_str(w, ARCH_KEY("rope.scaling.type"), "yarn");
        gguf_w_f32(w, ARCH_KEY("rope.scaling.factor"), sh->yarn_factor);
        gguf_w_u32(w, ARCH_KEY("rope.scaling.original_context_length"), (uint32_t)sh->yarn_orig_ctx);
    }
#undef ARCH_KEY
    if (vocab) { /* the given file's tokenizer metadata, byte for byte */
        for (uint64_t i = 0; i < vg.n_kv; i++) {
            const gguf_kv *kv = &vg.kv[i];
            if (kv->key.len < 10 || memcmp(kv->key.ptr, "tokenizer.", 10)) continue;
            const uint8_t *entry;
            size_t n = gguf_kv_entry(kv, &entry);
            gguf_w_entry_raw(w, entry, n);
        }
    } else if (gptoss) {
        gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
        gguf_w_str(w, "tokenizer.ggml.pre", "gpt-4o");
        gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)bpe.tokens, (uint64_t)bpe.n);
        gguf_w_arr_i32(w, "tokenizer.ggml.token_type", bpe.types, (uint64_t)bpe.n);
        gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)bpe.merges, (uint64_t)bpe.n_merges);
        gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bpe.special);
        gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)bpe.special + 4);
        gguf_w_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)bpe.special + 9);
        gguf_w_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)bpe.special + 1);
        gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 0);
        /* harmony, as the published gpt-oss template renders it without tools (engine/src/harmony.c), condensed */
        gguf_w_str(w, "tokenizer.chat_template",
                   "{{- '<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\\n"
                   "Knowledge cutoff: 2024-06\\nCurrent date: ' + strftime_now('%Y-%m-%d') + '\\n\\nReasoning: medium"
                   "\\n\\n# Valid channels: analysis, commentary, final. Channel must be included for every message."
                   "<|end|>' }}{%- if messages[0].role == 'system' %}{{- '<|start|>developer<|message|># Instructions"
                   "\\n\\n' + messages[0].content + '\\n\\n<|end|>' }}{%- endif %}{%- for message in messages %}"
                   "{%- if message.role == 'user' %}{{- '<|start|>user<|message|>' + message.content + '<|end|>' }}"
                   "{%- elif message.role == 'assistant' %}{{- '<|start|>assistant<|channel|>final<|message|>' + "
                   "message.content + '<|end|>' }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}"
                   "<|start|>assistant{%- endif %}");
    } else {
        gguf_w_str(w, "tokenizer.ggml.model", "llama");
        gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)voc.pieces, (uint64_t)voc.n);
        gguf_w_arr_f32(w, "tokenizer.ggml.scores", voc.scores, (uint64_t)voc.n);
        gguf_w_arr_i32(w, "tokenizer.ggml.token_type", voc.types, (uint64_t)voc.n);
        gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
        gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
        gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0);
        gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 1);
    }
    for (int i = 0; i < n_t; i++) gguf_w_tensor(w, plan[i].name, (uint32_t)plan[i].type, plan[i].n_dims, plan[i].ne);

    /* Write beside the target and rename at the end: never a half-written model. */
    sprintf(tmp, "%s.tmp", path);
    f = fopen(tmp, "wb");
    if (!f) {
        rc = cx_fail(err, CX_EIO, "%s: cannot create: %s", tmp, strerror(errno));
        goto done;
    }
    if ((rc = gguf_w_header(w, f, path, NULL, err))) goto done;
    for (int i = 0; i < n_t; i++)
        if (write_tensor(w, f, &plan[i], sh, seed, row, qrow)) {
            rc = cx_fail(err, CX_EIO, "%s: write failed in tensor %s: %s", tmp, plan[i].name, strerror(errno));
            goto done;
        }
    if (fclose(f) != 0) {
        f = NULL;
        rc = cx_fail(err, CX_EIO, "%s: write failed: %s", tmp, strerror(errno));
        goto done;
    }
    f = NULL;
    if (rename(tmp, path) != 0) rc = cx_fail(err, CX_EIO, "%s: cannot rename into place: %s", path, strerror(errno));
done:
    if (f) fclose(f);
    if (rc && tmp && tmp[0]) remove(tmp);
    free(plan);
    free_vocab(&voc);
    synth_bpe_free(&bpe);
    if (have_vg) gguf_free(&vg);
    cx_model_free(vm);
    gguf_writer_free(w);
    free(tmp);
    free(row);
    free(qrow);
    return rc;
}
