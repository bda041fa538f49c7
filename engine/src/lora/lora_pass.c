/*
 * lora_pass.c - the low-rank half of adapted matrices inside a forward pass,
 * for a batch whose sequences use different adapters (forward.h).
 *
 * Every matrix first runs its base weights over all rows of the pass
 * (forward.c). The rows are grouped into runs of consecutive rows whose
 * sequences apply the same adapters (the batch orders sequences so equal
 * sets sit together, as SGMV groups tokens by adapter). For the matrices
 * that read one input (q, k and v read the same normalized rows; gate and
 * up; o; down), fwd_lora_down computes, on the pool, each run's
 * u = scale · A·x for each of its adapters: rank values per row, with A's
 * rows split across threads and the same gemm kernels as the base weights
 * (A in q8_0 reads the 8-bit activations the base already made). Then each
 * thread of the base matrix product adds B·u into the outputs it computed
 * itself (forward.c, matmul_part): no second pass over y, no other barrier.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "../forward.h"
#include "../util.h"
#include "lora.h"

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

/* See forward.h. */
int fwd_lora_prepare(fwd_ws *w, const fwd_seg *seg, int n_seg, cx_err *err) {
    w->n_lora_runs = 0;
    int any = 0;
    for (int g = 0; g < n_seg; g++) any |= seg[g].n_lora > 0;
    if (!any) return 0;
    size_t cap = (size_t)w->cap_lora_runs;
    if (grow((void **)&w->lora_runs, &cap, (size_t)n_seg, sizeof *w->lora_runs))
        return cx_fail(err, CX_ENOMEM, "out of memory for the adapters of a pass");
    w->cap_lora_runs = (int)cap;
    size_t jobs = 0, u = 0;
    for (int g = 0; g < n_seg; g++) {
        const fwd_seg *s = &seg[g];
        if (!s->n_lora) continue;
        fwd_lora_run *r = w->n_lora_runs ? &w->lora_runs[w->n_lora_runs - 1] : NULL;
        if (r && g > 0 && same_set(s, &seg[g - 1]) && r->row + r->T == s->row) {
            r->T += s->T;
        } else {
            r = &w->lora_runs[w->n_lora_runs++];
            r->row = s->row;
            r->T = s->T;
            r->n = s->n_lora;
            r->uses = s->lora;
            jobs += 3 * (size_t)s->n_lora; /* at most three matrices read one input */
        }
        for (int i = 0; i < s->n_lora; i++) u += (size_t)s->T * (size_t)s->lora[i].lora->group_rank;
    }
    cap = (size_t)w->cap_lora_jobs;
    int bad = grow((void **)&w->lora_jobs, &cap, jobs, sizeof *w->lora_jobs);
    w->cap_lora_jobs = (int)cap;
    if (bad || grow((void **)&w->lora_u, &w->cap_lora_u, u, sizeof(float)))
        return cx_fail(err, CX_ENOMEM, "out of memory for the adapters of a pass");
    return 0;
}

/* See forward.h. */
int fwd_lora_reserve(fwd_ws *w, int rows, int runs, int per_run, int rank_sum, cx_err *err) {
    size_t cap = (size_t)w->cap_lora_runs, jcap = (size_t)w->cap_lora_jobs;
    int bad = grow((void **)&w->lora_runs, &cap, (size_t)runs, sizeof *w->lora_runs);
    w->cap_lora_runs = (int)cap;
    bad = bad || grow((void **)&w->lora_jobs, &jcap, 3 * (size_t)runs * (size_t)per_run, sizeof *w->lora_jobs);
    w->cap_lora_jobs = (int)jcap;
    bad = bad || grow((void **)&w->lora_u, &w->cap_lora_u, (size_t)rows * (size_t)rank_sum, sizeof(float));
    return bad ? cx_fail(err, CX_ENOMEM, "out of memory for the adapters of a pass") : 0;
}

/* See forward.h. */
void fwd_lora_free(fwd_ws *w) {
    free(w->lora_runs);
    free(w->lora_jobs);
    free(w->lora_u);
    w->lora_runs = NULL;
    w->lora_jobs = NULL;
    w->lora_u = NULL;
    w->cap_lora_runs = w->cap_lora_jobs = 0;
    w->cap_lora_u = 0;
}

/* This thread's share of all the jobs' A rows, counted as one list: the
 * products over the job's rows in token tiles, then the scale. */
static void down_part(void *ctx, int i, int n) {
    fwd_ws *w = ctx;
    int64_t total = 0;
    for (int j = 0; j < w->n_lora_jobs; j++) total += w->lora_jobs[j].mat->rank;
    int64_t g0 = total * i / n, g1 = total * (i + 1) / n, base = 0;
    for (int j = 0; j < w->n_lora_jobs && base < g1; j++) {
        const fwd_lora_job *jb = &w->lora_jobs[j];
        const lora_mat *mt = jb->mat;
        int64_t r0 = g0 - base > 0 ? g0 - base : 0, r1 = g1 - base < mt->rank ? g1 - base : mt->rank;
        base += mt->rank;
        if (r0 >= r1) continue;
        kern_gemm_fn gemm = w->k->gemm[mt->a_type];
        for (int t0 = 0; t0 < jb->T; t0 += FWD_TILE_TOKENS) {
            kern_act tile;
            int nt = jb->T - t0 < FWD_TILE_TOKENS ? jb->T - t0 : FWD_TILE_TOKENS;
            kern_act_slice(jb->act, jb->row + t0, nt, &tile);
            float *u = jb->u + (size_t)t0 * (size_t)mt->rank;
            if (gemm) gemm(mt->a, mt->a_row_bytes, r0, r1, &tile, u, mt->rank);
            else kern_gemm_generic(w->k, mt->a_type, mt->a, mt->a_row_bytes, r0, r1, &tile, u, mt->rank);
        }
        for (int t = 0; t < jb->T; t++)
            for (int64_t r = r0; r < r1; r++) jb->u[(size_t)t * (size_t)mt->rank + (size_t)r] *= jb->scale;
    }
}

/* See forward.h. Jobs are laid out matrix by matrix, so matmul_part finds
 * matrix p's between lora_begin[p] and lora_end[p]. */
void fwd_lora_down(fwd_ws *w, int l, int p0, int n) {
    for (int p = 0; p < LORA_NPROJ; p++) w->lora_begin[p] = w->lora_end[p] = 0;
    w->n_lora_jobs = 0;
    if (!w->n_lora_runs) return;
    float *u = w->lora_u;
    for (int p = p0; p < p0 + n; p++) {
        w->lora_begin[p] = w->n_lora_jobs;
        for (int r = 0; r < w->n_lora_runs; r++) {
            const fwd_lora_run *run = &w->lora_runs[r];
            for (int a = 0; a < run->n; a++) {
                const lora_mat *mt = lora_mat_of(run->uses[a].lora, l, p);
                if (!mt->rank) continue;
                assert(w->n_lora_jobs < w->cap_lora_jobs);
                fwd_lora_job *jb = &w->lora_jobs[w->n_lora_jobs++];
                jb->mat = mt;
                jb->act = fwd_input_for(w, mt->a_type);
                jb->row = run->row;
                jb->T = run->T;
                jb->scale = mt->scale * run->uses[a].scale;
                jb->u = u;
                u += (size_t)run->T * (size_t)mt->rank;
                assert((size_t)(u - w->lora_u) <= w->cap_lora_u);
            }
        }
        w->lora_end[p] = w->n_lora_jobs;
    }
    if (w->n_lora_jobs) tp_run(w->pool, down_part, w);
}
