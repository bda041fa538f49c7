/*
 * lora_pass.h - the adapters' share of a forward pass (lora_pass.c): the
 * low-rank products of adapted matrices, for a batch whose sequences use
 * different adapters, and the workspace they run in (lora_ws, a member of
 * the pass's fwd_ws).
 *
 * The contract with forward.c: before the pass, lora_ws_prepare groups the
 * segments' rows into runs; inside it, once the matrix input is set
 * (fwd_input_set), lora_ws_down computes u = scale · A·x of the matrices that
 * read it, and the base product of matrix p adds B·u of lora_ws_jobs(p)
 * into the rows it computed (forward.c's matmul_part).
 */
#ifndef CX_LORA_PASS_H
#define CX_LORA_PASS_H

#include <stddef.h>

#include "../kernels/kernels.h"
#include "lora.h"

struct fwd_ws;
struct fwd_seg;

/* Consecutive rows of a pass whose sequences apply the same adapters with
 * the same scales; adapters are read once per run. */
typedef struct lora_run {
    int row, T, n;
    const cx_lora_use *uses;
} lora_run;

/* One low-rank product of the current input: one matrix of one adapter over
 * one run's rows; u is [T][mat->rank], scaled, then added through B. */
typedef struct lora_job {
    const lora_mat *mat;
    const kern_act *act;      /* the input in the format A's type reads */
    int row, T;
    float scale;              /* the matrix's alpha / rank x the user's scale */
    float *u;
} lora_job;

/* Matrices that read one input, at most (q, k and v). */
#define LORA_JOBS_PER_INPUT 3

/* The adapters' workspace: this pass's runs, the current input's jobs (those
 * of projection p, LORA_Q..LORA_DOWN, are jobs[begin[p] .. end[p])) and their
 * u. Zeroed with its fwd_ws; grown by lora_ws_prepare / lora_ws_reserve
 * outside passes, only when a pass needs more; freed by lora_ws_free. */
typedef struct lora_ws {
    lora_run *runs;
    int n_runs, cap_runs;
    lora_job *jobs;
    int n_jobs, cap_jobs;
    int begin[LORA_NPROJ], end[LORA_NPROJ];
    float *u;
    size_t cap_u;
} lora_ws;

/* Before a pass over these segments: group their rows into runs and make
 * room for the pass's low-rank work (allocating only when this pass needs
 * more than any before). 0 or CX_ENOMEM. */
int lora_ws_prepare(lora_ws *lw, const struct fwd_seg *seg, int n_seg, cx_err *err);
/* Make room now for passes of up to `rows` rows, each row applying adapters
 * whose ranks over one input sum to at most rank_sum, in at most `runs`
 * runs of at most `per_run` adapters, so later passes need not grow
 * anything. 0 or CX_ENOMEM. */
int lora_ws_reserve(lora_ws *lw, int rows, int runs, int per_run, int rank_sum, cx_err *err);
/* After a pass: the next has adapters only if lora_ws_prepare says so. */
static inline void lora_ws_end_pass(lora_ws *lw) { lw->n_runs = 0; }
void lora_ws_free(lora_ws *lw);

/* Inside a pass, with w's matrix input set: compute u for matrices
 * p0..p0+n-1 of layer l (they read that input) for every run and adapter,
 * on w's pool. Nothing when the pass has no adapters. */
void lora_ws_down(struct fwd_ws *w, lora_ws *lw, int l, int p0, int n);
/* The jobs lora_ws_down made for matrix `proj` (*n of them; NULL when none). */
static inline const lora_job *lora_ws_jobs(const lora_ws *lw, int proj, int *n) {
    *n = lw->end[proj] - lw->begin[proj];
    return *n > 0 ? lw->jobs + lw->begin[proj] : NULL;
}

#endif
