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
 * arena carves: fixed buffers once, the pass's scratch (8-bit activations
 * sized for its rows) after them, rolled back at each pass. fwd_ws_init
 * allocates it all, so a pass allocates nothing.
 */
#ifndef CX_FORWARD_H
#define CX_FORWARD_H

#include <stdint.h>

#include "arena.h"
#include "kernels/kernels.h"
#include "kv/kv_cache.h"
#include "kv/kv_view.h"
#include "lora/lora.h"
#include "model.h"
#include "threadpool.h"

#define FWD_MAX_BATCH 256 /* rows per pass of a session's own workspace */
#define FWD_TILE_TOKENS 32 /* tokens per gemm call (forward.c's matmul tiles; the adapters' A products too) */

struct lora_mat;

/* LoRA (lora/lora_pass.c): consecutive rows of a pass whose sequences apply
 * the same adapters with the same scales; adapters are read once per run. */
typedef struct fwd_lora_run {
    int row, T, n;
    const cx_lora_use *uses;
} fwd_lora_run;

/* One low-rank product of the current input: one matrix of one adapter over
 * one run's rows; u is [T][mat->rank], scaled, then added through B. */
typedef struct fwd_lora_job {
    const struct lora_mat *mat;
    const kern_act *act;      /* the input in the format A's type reads */
    int row, T;
    float scale;              /* the matrix's alpha / rank x the user's scale */
    float *u;
} fwd_lora_job;

/* One prepared activation input: the floats, and their 8-bit forms once asked for. */
typedef struct fwd_act {
    kern_act a;
    void *mem;
    int ready;
} fwd_act;

typedef struct fwd_ws {
    const cx_model *m;
    const kern_ops *k;
    int batch;                /* rows per pass */
    int n_out;                /* logit rows per pass */
    int n_threads;
    tp_pool *pool;
    /* per-row activations, [batch][width] */
    float *x, *xb, *xb2, *hb, *hb2, *q, *kk, *vv, *rope_cs;
    float *logits;            /* [n_out][n_vocab] */
    double *inv_freq;         /* RoPE frequency of each pair in a head */
    float att_scale;          /* attention scores' scale: 1/sqrt(head_dim), times YaRN's mscale^2 */
    /* mixture of experts (moe.c), for batch rows x n_expert_used (token, expert) pairs */
    float *moe_logits;        /* [batch][n_expert]: router logits, then gating probabilities */
    float *moe_wt;            /* [batch][n_expert_used]: each token's experts' weights */
    int *moe_sel;             /* [batch][n_expert_used]: each token's experts, best first */
    int *moe_slot;            /* [batch][n_expert_used]: the pair's row in the grouped buffers */
    int *moe_off;             /* [n_expert + 1]: expert e's grouped rows are moe_off[e] .. moe_off[e+1]-1 */
    uint64_t moe_bytes;       /* expert weight bytes the passes read so far: each chosen expert's gate, up
                                 and down rows, once per pass and layer (cx_session_expert_bytes) */
    float *moe_x;             /* [pairs][n_embd]: grouped inputs, then the experts' outputs */
    float *moe_h, *moe_h2;    /* [pairs][n_ff_expert]: gate and up products */
    /* the current matrix input and its prepared forms, one per activation format */
    const float *in;
    int in_T;
    int64_t in_n;
    fwd_act act[3];           /* their memory: the pass's scratch in the arena */
    int pass_rows;            /* rows of the current pass */
    /* attention scratch, per thread, each thread's on its own cache lines */
    float *att_scores;        /* [thread][ATT_TILE] */
    double *att_acc;          /* [thread][heads of a kv group][ATT_QBLOCK][head_dim] */
    double *att_ml;           /* [thread][heads of a kv group][ATT_QBLOCK][2]: running max, running sum */
    float *att_kv;            /* [thread][2][ATT_TILE][head_dim]: a tile's keys, then values, packed */
    size_t att_stride[4];     /* elements from one thread's slice to the next */
    int *item_end;            /* [batch]: attention work items of segments 0..i */
    void *region;             /* the one allocation behind all of it */
    arena mem;                /* carves the region: fixed buffers, then each pass's scratch */
    size_t pass_mark;         /* the arena's position after the fixed buffers */
    /* LoRA: this pass's runs, the current input's jobs (those of projection p,
     * LORA_Q..LORA_DOWN, are lora_jobs[lora_begin[p] .. lora_end[p])) and
     * their u; grown by fwd_lora_prepare outside passes, only when a pass
     * needs more */
    fwd_lora_run *lora_runs;
    int n_lora_runs, cap_lora_runs;
    fwd_lora_job *lora_jobs;
    int cap_lora_jobs, n_lora_jobs;
    int lora_begin[LORA_NPROJ], lora_end[LORA_NPROJ];
    float *lora_u;
    size_t cap_lora_u;
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

/* Make x ([T][n]) the input of the next matrix products; its 8-bit forms are
 * made on first use (fwd_input_for). */
void fwd_set_input(fwd_ws *w, const float *x, int T, int64_t n);
/* y[t][r] = W · input[t] for every row r of w and token t of the current
 * input, on the pool (rows split by fwd_row_share). */
void fwd_matmul(fwd_ws *w, const cx_weight *wt, float *y);
/* Thread i of n's share [*r0, *r1) of `rows` matrix rows: contiguous, split
 * at multiples of 16 rows (whole interleaved groups), the same for every
 * matrix, so each (row, token) product has one owner. */
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

/* Before fwd_pass over these segments: group their rows into LoRA runs and
 * make room for the pass's low-rank work (allocating only when this pass
 * needs more than any before). 0 or CX_ENOMEM. (lora/lora_pass.c) */
int fwd_lora_prepare(fwd_ws *w, const fwd_seg *seg, int n_seg, cx_err *err);
/* Make room now for passes of up to `rows` rows, each row applying adapters
 * whose ranks over one input sum to at most rank_sum, in at most `runs`
 * runs of at most `per_run` adapters, so later passes need not grow
 * anything. 0 or CX_ENOMEM. (lora/lora_pass.c) */
int fwd_lora_reserve(fwd_ws *w, int rows, int runs, int per_run, int rank_sum, cx_err *err);
/* Inside fwd_pass, with matrix inputs set: compute u for matrices
 * p0..p0+n-1 of layer l (they read the current input) for every run and
 * adapter, on the pool. Nothing when the pass has no adapters. */
void fwd_lora_down(fwd_ws *w, int l, int p0, int n);
/* The current input in the format `type`'s kernels read (made on first use). */
const kern_act *fwd_input_for(fwd_ws *w, int type);
void fwd_lora_free(fwd_ws *w);

#endif
