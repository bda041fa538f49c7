/*
 * lora_pass.c - the low-rank half of adapted matrices inside a forward pass,
 * for a batch whose sequences use different adapters (lora_pass.h), in the
 * adapters' own workspace (lora_ws).
 *
 * Every matrix first runs its base weights over all rows of the pass
 * (forward.c). The rows are grouped into runs of consecutive rows whose
 * sequences apply the same adapters (the batch orders sequences so equal
 * sets sit together, as SGMV groups tokens by adapter). For the matrices
 * that read one input (q, k and v read the same normalized rows; gate and
 * up; o; down), lora_ws_down computes, on the pool, each run's
 * u = scale · A·x for each of its adapters: rank values per row, with A's
 * rows split across threads and the same gemm kernels as the base weights
 * (A in q8_0 reads the 8-bit activations the base already made). Then each
 * thread of the base matrix product adds B·u into the outputs it computed
 * itself (forward.c's matmul_part, through lora_ws_jobs): no second pass
 * over y, no other barrier.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "../forward.h"
#include "../util.h"
#include "lora.h"
#include "lora_pass.h"

/* 1 if segments a and b apply the same adapters with the same scales. */
static int same_set(const fwd_seg *a, const fwd_seg *b) {
    if (a->n_lora != b->n_lora) return 0;
    for (int i = 0; i < a->n_lora; i++)
        if (a->lora[i].lora != b->lora[i].lora || a->lora[i].scale != b->lora[i].scale) return 0;
    return 1;
}

/* Grow *p to hold n items of `size` (never shrinks). 0, or -1 out of memory. */
static int grow(void **p, size_t *cap, size_t n, size_t size) {
    if (n <= *cap) return 0;
    void *q = realloc(*p, n * size);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* See lora_pass.h. */
int lora_ws_prepare(lora_ws *lw, const fwd_seg *seg, int n_seg, cx_err *err) {
    lw->n_runs = 0;
    int any = 0;
    for (int g = 0; g < n_seg; g++) any |= seg[g].n_lora > 0;
    if (!any) return 0;
    size_t cap = (size_t)lw->cap_runs;
    if (grow((void **)&lw->runs, &cap, (size_t)n_seg, sizeof *lw->runs))
        return cx_fail(err, CX_ENOMEM, "out of memory for the adapters of a pass");
    lw->cap_runs = (int)cap;
    size_t jobs = 0, u = 0;
    for (int g = 0; g < n_seg; g++) {
        const fwd_seg *s = &seg[g];
        if (!s->n_lora) continue;
        lora_run *r = lw->n_runs ? &lw->runs[lw->n_runs - 1] : NULL;
        if (r && g > 0 && same_set(s, &seg[g - 1]) && r->row + r->T == s->row) {
            r->T += s->T;
        } else {
            r = &lw->runs[lw->n_runs++];
            r->row = s->row;
            r->T = s->T;
            r->n = s->n_lora;
            r->uses = s->lora;
            jobs += LORA_JOBS_PER_INPUT * (size_t)s->n_lora;
        }
        for (int i = 0; i < s->n_lora; i++) u += (size_t)s->T * (size_t)s->lora[i].lora->group_rank;
    }
    cap = (size_t)lw->cap_jobs;
    int bad = grow((void **)&lw->jobs, &cap, jobs, sizeof *lw->jobs);
    lw->cap_jobs = (int)cap;
    if (bad || grow((void **)&lw->u, &lw->cap_u, u, sizeof(float)))
        return cx_fail(err, CX_ENOMEM, "out of memory for the adapters of a pass");
    return 0;
}

/* See lora_pass.h. */
int lora_ws_reserve(lora_ws *lw, int rows, int runs, int per_run, int rank_sum, cx_err *err) {
    size_t cap = (size_t)lw->cap_runs, jcap = (size_t)lw->cap_jobs;
    int bad = grow((void **)&lw->runs, &cap, (size_t)runs, sizeof *lw->runs);
    lw->cap_runs = (int)cap;
    bad = bad || grow((void **)&lw->jobs, &jcap, LORA_JOBS_PER_INPUT * (size_t)runs * (size_t)per_run, sizeof *lw->jobs);
    lw->cap_jobs = (int)jcap;
    bad = bad || grow((void **)&lw->u, &lw->cap_u, (size_t)rows * (size_t)rank_sum, sizeof(float));
    return bad ? cx_fail(err, CX_ENOMEM, "out of memory for the adapters of a pass") : 0;
}

/* See lora_pass.h. */
void lora_ws_free(lora_ws *lw) {
    free(lw->runs);
    free(lw->jobs);
    free(lw->u);
    memset(lw, 0, sizeof *lw);
}

typedef struct down_job { const kern_ops *k; const lora_ws *lw; int64_t total; int chunks; } down_job;

/* One chunk of all the jobs' A rows (`total`, counted as one list): the
 * products over the job's rows in token tiles, then the scale. */
static void down_part(void *ctx, int c, int thread) {
    const down_job *dj = ctx;
    const lora_ws *lw = dj->lw;
    int64_t total = dj->total;
    int64_t g0 = total * c / dj->chunks, g1 = total * (c + 1) / dj->chunks, base = 0;
    for (int j = 0; j < lw->n_jobs && base < g1; j++) {
        const lora_job *jb = &lw->jobs[j];
        const lora_mat *mt = jb->mat;
        int64_t r0 = g0 - base > 0 ? g0 - base : 0, r1 = g1 - base < mt->rank ? g1 - base : mt->rank;
        base += mt->rank;
        if (r0 >= r1) continue;
        kern_gemm_fn gemm = dj->k->gemm[mt->a_type];
        for (int t0 = 0; t0 < jb->T; t0 += FWD_TILE_TOKENS) {
            kern_act tile;
            int nt = jb->T - t0 < FWD_TILE_TOKENS ? jb->T - t0 : FWD_TILE_TOKENS;
            kern_act_slice(jb->act, jb->row + t0, nt, &tile);
            float *u = jb->u + (size_t)t0 * (size_t)mt->rank;
            if (gemm) gemm(mt->a, mt->a_row_bytes, r0, r1, &tile, u, mt->rank);
            else kern_gemm_generic(dj->k, mt->a_type, mt->a, mt->a_row_bytes, r0, r1, &tile, u, mt->rank);
        }
        for (int t = 0; t < jb->T; t++)
            for (int64_t r = r0; r < r1; r++) jb->u[(size_t)t * (size_t)mt->rank + (size_t)r] *= jb->scale;
    }
}

/* See lora_pass.h. Jobs are laid out matrix by matrix, so lora_ws_jobs finds
 * matrix p's between begin[p] and end[p]. */
void lora_ws_down(fwd_ws *w, lora_ws *lw, int l, int p0, int n) {
    assert(n <= LORA_JOBS_PER_INPUT);
    for (int p = 0; p < LORA_NPROJ; p++) lw->begin[p] = lw->end[p] = 0;
    lw->n_jobs = 0;
    if (!lw->n_runs) return;
    float *u = lw->u;
    for (int p = p0; p < p0 + n; p++) {
        lw->begin[p] = lw->n_jobs;
        for (int r = 0; r < lw->n_runs; r++) {
            const lora_run *run = &lw->runs[r];
            for (int a = 0; a < run->n; a++) {
                const lora_mat *mt = lora_mat_of(run->uses[a].lora, l, p);
                if (!mt->rank) continue;
                assert(lw->n_jobs < lw->cap_jobs);
                lora_job *jb = &lw->jobs[lw->n_jobs++];
                jb->mat = mt;
                jb->act = fwd_input_for(w, mt->a_type);
                jb->row = run->row;
                jb->T = run->T;
                jb->scale = mt->scale * run->uses[a].scale;
                jb->u = u;
                u += (size_t)run->T * (size_t)mt->rank;
                assert((size_t)(u - lw->u) <= lw->cap_u);
            }
        }
        lw->end[p] = lw->n_jobs;
    }
    down_job dj = {w->k, lw, 0, 0};
    for (int j = 0; j < lw->n_jobs; j++) dj.total += lw->jobs[j].mat->rank;
    dj.chunks = tp_chunks(w->pool, dj.total);
    if (lw->n_jobs) tp_run(w->pool, down_part, &dj, dj.chunks, 0);
}
