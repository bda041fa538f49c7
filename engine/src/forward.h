/*
 * forward.h - one forward pass of the transformer over the rows of a batch,
 * and the workspace it runs in.
 *
 * A pass evaluates one or more segments: a segment is T consecutive new
 * positions of one sequence (a prefill chunk, or one decode token). The
 * rows of all segments go through every matrix together (each weight row is
 * read once for all of them); attention is per segment, each reading its
 * own sequence's KV blocks through its own view. cx_eval runs passes of one
 * segment in the session's workspace; cx_batch_eval runs passes of many
 * segments (continuous batching) in the batch's workspace.
 *
 * A workspace (fwd_ws) holds every buffer a pass needs, for up to `batch`
 * rows and `n_out` logit rows, and its thread pool, in one region that an
 * arena carves: fixed buffers once, the pass's scratch (the matrix input's
 * 8-bit forms, sized for its rows) after them, rolled back at each pass.
 * fwd_ws_init allocates it all, so a pass allocates nothing. The fixed part
 * is the shared activations (x, xb, ...) and each stage's own workspace,
 * sized and carved by the stage's file: attention's fwd_att_ws (forward.c),
 * the experts' moe_ws (moe.h, moe_ws_size / moe_ws_carve). The adapters'
 * lora_ws (lora/lora_pass.h) depends on the adapters a pass applies, so it
 * grows outside passes (lora_ws_prepare / lora_ws_reserve) instead.
 *
 * The stages meet through arguments and fwd_input, not fields: a matrix
 * reads the current input (fwd_input_set, fwd_input_for); moe_ffn takes its
 * input and output rows; lora_ws_down reads the current input and the
 * matrix products add its jobs (lora_ws_jobs).
 */
#ifndef CX_FORWARD_H
#define CX_FORWARD_H

#include <stdint.h>

#include "arena.h"
#include "kernels/kernels.h"
#include "kv/kv_cache.h"
#include "kv/kv_view.h"
#include "lora/lora.h"
#include "lora/lora_pass.h"
#include "model.h"
#include "moe.h"
#include "threadpool.h"

#define FWD_MAX_BATCH 256 /* rows per pass of a session's own workspace */
#define FWD_TILE_TOKENS 32 /* tokens per gemm call (forward.c's matmul tiles; the adapters' A products too) */
enum { FWD_ACT_FORMATS = KERN_ACT_Q8_256 + 1 }; /* activation formats (KERN_ACT_*) */
enum { FWD_ATT_BUFS = 10 }; /* attention's per-thread buffers: scores, acc, ml, kv, qr, accr, q8, q8d, q8s, qf */

/* One prepared form of the matrix input: its kern_act, and its memory (the pass's scratch). */
typedef struct fwd_act {
    kern_act a;
    void *mem;
    int ready;
} fwd_act;

/* The current matrix input ([T][n] floats) and its prepared forms, one per
 * activation format, made on first use (fwd_input_for) and shared by every
 * matrix that reads the input (q/k/v; gate/up; the adapters' A). Set by
 * fwd_input_set; its forms' memory comes back at fwd_pass_begin. */
typedef struct fwd_input {
    const float *x;
    int T;
    int64_t n;
    fwd_act act[FWD_ACT_FORMATS];
} fwd_input;

/* Attention's scratch (forward.c, which sizes and carves it; ATT_TILE and
 * ATT_QBLOCK are its constants): per thread, each thread's slice on its own
 * cache lines, `stride` elements from the next. */
typedef struct fwd_att_ws {
    float *scores;            /* [thread][heads of a kv group][ATT_QBLOCK][ATT_TILE]: a tile's scores */
    double *acc;              /* [thread][heads of a kv group][ATT_QBLOCK][head_dim] */
    double *ml;               /* [thread][heads of a kv group][ATT_QBLOCK][2]: running max, running sum */
    float *kv;                /* [thread][2][ATT_TILE][head_dim]: a tile's keys, then values, packed */
    float *qr;                /* [thread][heads of a kv group][ATT_QBLOCK][head_dim]: the queries rotated (q4h keys) */
    double *accr;             /* [thread][heads][ATT_QBLOCK][head_dim]: as acc, of q4h values, still rotated */
    int8_t *q8;               /* [thread][heads][ATT_QBLOCK][head_dim]: the queries in int8 (for q8 keys) */
    float *q8d;               /* [thread][heads][ATT_QBLOCK]: their scales */
    int32_t *q8s;             /* [thread][heads][ATT_QBLOCK]: the sums of their codes */
    float *qf;                /* [thread][heads][ATT_QBLOCK][head_dim]: the item's queries, gathered (float keys) */
    size_t stride[FWD_ATT_BUFS]; /* scores .. qf: elements from one thread's slice to the next */
    int *item_end;            /* [batch]: work items of segments 0..i of this pass */
    int decode_heads;         /* this pass: query heads per decode item (a divisor of the kv group; forward.c) */
    float scale;              /* the scores' scale: 1/sqrt(head_dim), times YaRN's mscale^2 */
    int rows_rotated_back;    /* test knob: 1 unpacks every q4h row rotated back (the format's definition)
                                 instead of rotating the queries and the values' sum once (0, default) */
    int keys_unpacked;        /* test knob: 1 unpacks q8 keys to floats (f32 scores) instead of scoring
                                 them in int8 against int8 queries (0, default) */
} fwd_att_ws;

/* Workspace buffers are whole cache lines: the bytes of n items of `size`,
 * rounded up (at least a line: the arena serves 0 bytes as 1), which
 * fwd_carve takes. Each stage's *_ws_size counts its buffers so. */
static inline size_t fwd_lines(size_t n, size_t size) {
    size_t b = (n * size + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    return b ? b : ARENA_ALIGN;
}
/* fwd_lines(n, size) zeroed bytes, line-aligned, from a workspace's arena
 * (its region was sized by the stages' *_ws_size, so they fit). */
void *fwd_carve(arena *mem, size_t n, size_t size);

typedef struct fwd_ws {
    const cx_model *m;
    const kern_ops *k;
    int batch;                /* rows per pass */
    int n_out;                /* logit rows per pass */
    int n_threads;
    tp_pool *pool;
    /* shared per-row activations, [batch][width] */
    float *x, *xb, *xb2, *hb, *hb2, *q, *kk, *vv, *rope_cs;
    float *logits;            /* [n_out][n_vocab] */
    double *inv_freq;         /* RoPE frequency of each pair in a head */
    fwd_input in;             /* the current matrix input */
    int pass_rows;            /* rows of the current pass (fwd_pass_begin) */
    int decode_order;         /* 1: every product sums as a one-token decode does, at any token count
                                 (kern_act.decode_order): set around speculative verification passes */
    /* the stages' own workspaces */
    fwd_att_ws att;           /* attention (forward.c) */
    moe_ws moe;               /* mixture of experts (moe.c) */
    lora_ws lora;             /* adapters (lora/lora_pass.c; grown outside passes) */
    void *region;             /* the one allocation behind the activations, att, moe and the inputs' forms */
    arena mem;                /* carves the region: fixed buffers, then each pass's scratch */
    size_t pass_mark;         /* the arena's position after the fixed buffers */
#ifdef CORTEX_TEST_KNOBS
    double slowdown_pct;      /* test knob CORTEX_SLOWDOWN_PCT (see knob_slowdown) */
    float *knob_y;            /* scratch outputs of the knob's extra products */
    volatile float knob_sink; /* keeps the extra products observable */
#endif
} fwd_ws;

/* One segment of a pass: positions pos..pos+T-1 of `seq` in `cache`, rows
 * row..row+T-1 of the pass, read by attention through `view`. */
typedef struct fwd_seg {
    kv_cache *cache;
    kv_seq *seq;
    kv_view *view;
    int pos, T, row;
    int out, n_out;           /* logits of its last n_out positions (0: none; T: every one, a multi-token
                                 segment's, as speculative verification reads them) go to logits rows
                                 out..out+n_out-1 */
    const cx_lora_use *lora;  /* the adapters its rows apply (n_lora of them; 0: none) */
    int n_lora;
} fwd_seg;

/* Start a pass of `rows` rows: the arena back to the end of the fixed
 * buffers (last pass's scratch given back), no input prepared. fwd_pass
 * does it; so does a caller that runs one stage alone (test_moe). */
void fwd_pass_begin(fwd_ws *w, int rows);
/* Make x ([T][n], T at most the pass's rows x n_expert_used) the input of
 * the next matrix products; its prepared forms are made on first use. */
void fwd_input_set(fwd_ws *w, const float *x, int T, int64_t n);
/* The current input in the format `type`'s kernels read (made on first use,
 * on the pool, in the pass's scratch). */
const kern_act *fwd_input_for(fwd_ws *w, int type);
/* y[t][r] = W · input[t] for every row r of w and token t of the current
 * input, on the pool (rows in fwd_row_chunks chunks, split by fwd_row_share). */
void fwd_matmul(fwd_ws *w, const cx_weight *wt, float *y);
/* How many chunks the pool cuts `rows` matrix rows into (tp_chunks over
 * 64-row gemm tiles, so no chunk cuts a prefill tile short: about 64 rows
 * at least; one chunk with one thread). */
int fwd_row_chunks(const fwd_ws *w, int64_t rows);
/* Chunk i of n's rows [*r0, *r1) of `rows` matrix rows: contiguous, split at
 * multiples of 16 rows (whole interleaved groups), so each (row, token)
 * product has one owner, whichever thread claims the chunk. */
void fwd_row_share(int64_t rows, int i, int n, int64_t *r0, int64_t *r1);
/* y[t*ldy + r] = row r of the matrix stored at w (wt's type, layout and row
 * bytes) . activation t, for r in [r0, r1) and every t of a, tiled for the
 * caches. w is wt->data, or a row range of it (an expert, whole groups). */
void fwd_gemm_rows(const kern_ops *k, const cx_weight *wt, const uint8_t *w, int64_t r0, int64_t r1, const kern_act *a,
                   float *y, int64_t ldy);

/* The check every workspace's owner makes first: *n_threads is in range
 * (<= 0 becomes 1; over 256 is an error). 0 or CX_EINVAL with a message.
 * (The kernel table was chosen when the model loaded: cx_model.kern.) */
int fwd_check_setup(int *n_threads, cx_err *err);
/* A workspace for passes of up to `batch` rows and `n_out` logit rows on
 * n_threads threads. 0 or a CX_E* code with a message. */
int fwd_ws_init(fwd_ws *w, const cx_model *m, int batch, int n_out, int n_threads, cx_err *err);
void fwd_ws_free(fwd_ws *w);

/* Run the n_seg segments (rows 0..rows-1 in order, tokens[row] each)
 * through every layer, writing their keys and values into their caches and
 * the logits of each segment's last n_out positions into rows out.. of
 * `logits` ([rows][n_vocab]: the workspace's own w->logits when NULL, which
 * holds w->n_out rows; cx_eval_all passes the caller's array). The caches'
 * blocks must have been prepared (kv_prepare*) for exactly these positions;
 * the caller commits them afterwards. */
void fwd_pass(fwd_ws *w, const fwd_seg *seg, int n_seg, const int32_t *tokens, int rows, float *logits);

#endif
