/*
 * kernel_bench.c - what each SIMD kernel buys: every kernel of two tables
 * (default: scalar and avx2) timed on the shapes TinyLlama-1.1B gives them, in
 * one process, interleaved (base, other, base, ...), median of 7 rounds of
 * at least 20 ms each. Prints a markdown table of ns per call and the ratio.
 * Weights of types with an interleaved layout (q8_0, q4_0, mxfp4; Q4_K and
 * Q6_K under AVX-512) are repacked for each table as a model would be (X16
 * where the table has gemm_x16, else X8 where it has gemm_x8), unless
 * --rows asks for the row-major kernels (a mapped file's: prefill through the
 * multi-row kernels by gathers, decode through the one-row kernels).
 * A benchmark, not a test: nothing here passes or fails.
 *   build/tests/kernel_bench [--quick] [--rows] [--base ISA] [--isa ISA] [--types T1,T2,...]
 * When --base and --isa name the same table it is timed once and both columns
 * are that time (ci/gate_ab.sh times one table of two builds this way,
 * alternating the builds, and judges them with `cortex-bench judge`).
 * KERNEL_BENCH_SLOWDOWN_PCT=P (0..1000, a test knob): each timed round also
 * calls the kernel P more times per 100, an injected slowdown of about P% for
 * measuring that gate's detection rate (docs/gates.md).
 * (--types: only these weight types' kernels, e.g. q4_0,mxfp4; no other operators;
 * --base avx512vnni --isa avx512bf16 --types bf16: what vdpbf16ps buys over float activations)
 * Matrix shapes are 256 rows x 2048 columns (the rows fit in L2, so this
 * measures arithmetic, not memory; memory-bound decode is cortex-bench's job).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cortex.h"
#include "kernels/kernels.h"
#include "quant.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t st = 7;
static float rnd(void) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((st >> 40) * 0x1.0p-24) * 2.0f - 1.0f;
}

enum { ROWS = 256, COLS = 2048, TOK = 32, FF = 5632, VOCAB = 32000, HEADS = 32, HD = 64, KEYS = 64 };

typedef struct bench_ctx {
    const kern_ops *k;
    int type, T, layout;
    uint8_t *w;
    size_t rb;
    kern_act *act;
    float *x, *y, *big, *w1, *cs, *sc;
    double *acc;
} bench_ctx;

typedef void (*bench_fn)(bench_ctx *c);

static void b_gemm(bench_ctx *c) {
    kern_act a = *c->act;
    a.T = c->T;
    if (c->layout == KERN_LAYOUT_X16) c->k->gemm_x16[c->type](c->w, c->rb, 0, ROWS, &a, c->y, ROWS);
    else if (c->layout == KERN_LAYOUT_X8) c->k->gemm_x8[c->type](c->w, c->rb, 0, ROWS, &a, c->y, ROWS);
    else if (c->k->gemm[c->type]) c->k->gemm[c->type](c->w, c->rb, 0, ROWS, &a, c->y, ROWS);
    else kern_gemm_generic(c->k, c->type, c->w, c->rb, 0, ROWS, &a, c->y, ROWS);
}
static void b_quant(bench_ctx *c) { c->k->quantize_act(c->x, c->act, 0); }
static void b_rmsnorm(bench_ctx *c) { c->k->rmsnorm(c->y, c->x, c->w1, COLS, 1e-5f); }
static void b_softmax(bench_ctx *c) {
    memcpy(c->y, c->x, sizeof(float) * COLS);
    c->k->softmax(c->y, COLS);
}
static void b_rope(bench_ctx *c) { c->k->rope(c->y, HEADS, HD, c->cs); }
static void b_swiglu(bench_ctx *c) {
    memcpy(c->y, c->big, sizeof(float) * FF);
    c->k->swiglu(c->y, c->big + FF, FF);
}
static void b_argmax(bench_ctx *c) { c->y[0] = (float)c->k->argmax(c->big, VOCAB); }
/* Scores as the forward pass calls them: every (head, query) of an item at
 * once against a tile's keys; one query, a decode item of a kv group of
 * eight heads, a prefill item (16 queries x 8 heads). */
static void b_scores(bench_ctx *c) { c->k->attn_scores(c->sc, KEYS, c->x, HD, 1, c->big, HD, KEYS, HD, 0.125f); }
static void b_scores8(bench_ctx *c) { c->k->attn_scores(c->sc, KEYS, c->x, HD, 8, c->big, HD, KEYS, HD, 0.125f); }
static void b_scores128(bench_ctx *c) { c->k->attn_scores(c->sc, KEYS, c->x, HD, 128, c->big, HD, KEYS, HD, 0.125f); }
static void b_values(bench_ctx *c) {
    const float *vb[KEYS / KERN_VBLOCK];
    for (int b = 0; b < KEYS / KERN_VBLOCK; b++) vb[b] = c->big + (size_t)b * KERN_VBLOCK * HD;
    c->k->attn_values(c->acc, c->sc, vb, HD, KEYS, HD);
}
static void b_exp(bench_ctx *c) {
    memcpy(c->y, c->x, sizeof(float) * KEYS);
    c->y[KEYS] = (float)c->k->exp_shift(c->y, KEYS, 1.0f);
}
static void b_scale(bench_ctx *c) { c->k->scale_f64(c->acc, 1.0, HD); }
static void b_add(bench_ctx *c) { c->k->add(c->y, c->x, COLS); }

/* KERNEL_BENCH_SLOWDOWN_PCT: extra calls per 100 (see the top); 0 normally. */
static int slowdown_pct;

/* Median ns per call of fn over `rounds` rounds of >= min_s seconds. */
static double time_fn(bench_fn fn, bench_ctx *c, int rounds, double min_s, double *out) {
    for (int r = 0; r < rounds; r++) {
        long n = 0, extra = 0;
        double t0 = now(), t;
        do {
            for (int i = 0; i < 8; i++) fn(c);
            n += 8;
            for (; extra * 100 < n * slowdown_pct; extra++) fn(c); /* the knob: P extra calls per 100 */
            t = now() - t0;
        } while (t < min_s);
        out[r] = t / (double)n * 1e9;
    }
    for (int i = 1; i < rounds; i++)
        for (int j = i; j > 0 && out[j] < out[j - 1]; j--) {
            double tmp = out[j];
            out[j] = out[j - 1];
            out[j - 1] = tmp;
        }
    return out[rounds / 2];
}

/* A copy of the row-major weights w (ROWS rows of rb bytes) in the layout
 * table k's model would use for `type` (row-major if rows_only); *layout
 * says which. */
static uint8_t *weights_for(const kern_ops *k, int type, const uint8_t *w, size_t rb, int rows_only, int *layout) {
    uint8_t *p = malloc(rb * ROWS), *scratch = malloc(rb * 16);
    memcpy(p, w, rb * ROWS);
    *layout = rows_only ? KERN_LAYOUT_ROWS
              : k->gemm_x16[type] ? KERN_LAYOUT_X16 : k->gemm_x8[type] ? KERN_LAYOUT_X8 : KERN_LAYOUT_ROWS;
    int g = kern_layout_group(*layout);
    for (int r = 0; r < ROWS && g > 1; r += g) {
        if (g == 16) kern_repack_x16(type, p + (size_t)r * rb, rb, COLS, scratch);
        else kern_repack_x8(type, p + (size_t)r * rb, rb, COLS, scratch);
    }
    free(scratch);
    return p;
}

/* The weights' layout in each gemm row's shape column (base / other table). */
static const char *const layout_name[] = {[KERN_LAYOUT_ROWS] = "rows", [KERN_LAYOUT_X8] = "x8", [KERN_LAYOUT_X16] = "x16"};

/* 1 if `name` is one of the comma-separated names in list. */
static int in_list(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == 0)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    int quick = 0, rows_only = 0;
    const char *base = "scalar", *isa = "avx2", *only = NULL, *knob = getenv("KERNEL_BENCH_SLOWDOWN_PCT");
    slowdown_pct = knob ? atoi(knob) : 0;
    if (slowdown_pct < 0 || slowdown_pct > 1000) {
        fprintf(stderr, "kernel_bench: KERNEL_BENCH_SLOWDOWN_PCT=%s is not in 0..1000\n", knob);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--rows")) rows_only = 1;
        else if (!strcmp(argv[i], "--base") && i + 1 < argc) base = argv[++i];
        else if (!strcmp(argv[i], "--isa") && i + 1 < argc) isa = argv[++i];
        else if (!strcmp(argv[i], "--types") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "kernel_bench: unknown argument '%s' (usage: [--quick] [--rows] [--base ISA] [--isa ISA] "
                            "[--types T1,T2,...])\n", argv[i]);
            return 2;
        }
    }
    int rounds = quick ? 3 : 7;
    double min_s = quick ? 0.005 : 0.02;
    const kern_ops *sc = kern_table(base), *av = kern_table(isa);
    if (!av || !sc) {
        printf("table %s not available on this CPU (%s): nothing to compare\n", av ? base : isa, kern_cpu_features());
        return 0;
    }
    bench_ctx c = {0};
    c.x = malloc(sizeof(float) * (size_t)COLS * TOK);
    c.y = malloc(sizeof(float) * (size_t)ROWS * TOK + sizeof(float) * FF * 2);
    c.big = malloc(sizeof(float) * (size_t)VOCAB * 2);
    c.w1 = malloc(sizeof(float) * COLS);
    c.cs = malloc(sizeof(float) * HD);
    c.sc = malloc(sizeof(float) * KEYS * 128); /* scores of up to 128 queries */
    c.acc = calloc(HD, sizeof(double));
    for (int i = 0; i < COLS * TOK; i++) c.x[i] = rnd();
    for (int i = 0; i < VOCAB * 2; i++) c.big[i] = rnd();
    for (int i = 0; i < COLS; i++) c.w1[i] = 1.0f + 0.1f * rnd();
    for (int i = 0; i < KEYS; i++) c.sc[i] = 0.5f + 0.5f * rnd();
    double inv[HD / 2];
    for (int i = 0; i < HD / 2; i++) inv[i] = 1.0 / pow(10000.0, 2.0 * i / HD);
    kern_rope_table(c.cs, HD, 100, inv);

    printf("| kernel | shape | %s ns/call | %s ns/call | speed-up |\n|---|---|---:|---:|---:|\n", sc->name, av->name);
    int same = sc == av; /* one table: timed once */
    int types[] = {CX_TYPE_F32, CX_TYPE_F16, CX_TYPE_BF16, CX_TYPE_Q8_0, CX_TYPE_Q4_0, CX_TYPE_Q4_K, CX_TYPE_Q6_K,
                   CX_TYPE_MXFP4};
    double s_buf[9], a_buf[9];
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        int type = types[ti], fmt = kern_act_format(type);
        if (only && !in_list(only, cx_type_name(type))) continue;
        c.type = type;
        c.rb = quant_row_bytes(type, COLS);
        uint8_t *rowmajor = malloc(c.rb * ROWS);
        float *row = malloc(sizeof(float) * COLS);
        for (int r = 0; r < ROWS; r++) {
            for (int i = 0; i < COLS; i++) row[i] = rnd() * 0.05f;
            quant_quantize_row(type, row, rowmajor + c.rb * (size_t)r, COLS);
        }
        free(row);
        size_t bytes = kern_act_bytes(fmt, TOK, COLS);
        void *mem = aligned_alloc(64, bytes ? (bytes + 63) & ~(size_t)63 : 64);
        kern_act a;
        kern_act_init(&a, fmt, TOK, COLS, mem);
        a.f = c.x;
        for (int t = 0; t < TOK; t++) kern_act_set(sc, &a, t, c.x + (size_t)t * COLS);
        c.act = &a;
        int lay[2];
        uint8_t *wt[2] = {weights_for(sc, type, rowmajor, c.rb, rows_only, &lay[0]),
                          weights_for(av, type, rowmajor, c.rb, rows_only, &lay[1])};
        free(rowmajor);
        int Ts[2] = {1, TOK};
        for (int i = 0; i < 2; i++) {
            c.T = Ts[i];
            c.k = sc, c.w = wt[0], c.layout = lay[0];
            double s = time_fn(b_gemm, &c, rounds, min_s, s_buf);
            c.k = av, c.w = wt[1], c.layout = lay[1];
            double v = same ? s : time_fn(b_gemm, &c, rounds, min_s, a_buf);
            printf("| %s %s | %d x %d, %d token%s (%s / %s) | %.0f | %.0f | %.1fx |\n", cx_type_name(type),
                   c.T == 1 ? "matvec (decode)" : "gemm (prefill)", ROWS, COLS, c.T, c.T == 1 ? "" : "s",
                   layout_name[lay[0]], layout_name[lay[1]], s, v, s / v);
            fflush(stdout);
        }
        free(wt[0]);
        free(wt[1]);
        if (fmt != KERN_ACT_F32) {
            c.k = sc;
            double s = time_fn(b_quant, &c, rounds, min_s, s_buf);
            c.k = av;
            double v = same ? s : time_fn(b_quant, &c, rounds, min_s, a_buf);
            printf("| quantize activations (%s) | %d | %.0f | %.0f | %.1fx |\n", fmt == KERN_ACT_Q8_32 ? "q8 per 32" : "q8 per 256",
                   COLS, s, v, s / v);
        }
        free(mem);
    }
    struct { const char *name, *shape; bench_fn fn; } ops[] = {
        {"rmsnorm", "2048", b_rmsnorm},          {"softmax", "2048", b_softmax},
        {"rope", "32 heads x 64", b_rope},       {"swiglu", "5632", b_swiglu},
        {"argmax", "32000", b_argmax},           {"attention scores", "64 keys x 64 dims", b_scores},
        {"attention scores, 8 queries", "64 keys x 64 dims", b_scores8},
        {"attention scores, 128 queries", "64 keys x 64 dims", b_scores128},
        {"attention values", "64 keys x 64 dims", b_values},
        {"exp_shift (online softmax)", "64", b_exp},
        {"scale_f64 (online softmax)", "64", b_scale},
        {"add (residual)", "2048", b_add},
    };
    for (size_t i = 0; !only && i < sizeof ops / sizeof *ops; i++) {
        c.k = sc;
        double s = time_fn(ops[i].fn, &c, rounds, min_s, s_buf);
        c.k = av;
        double v = same ? s : time_fn(ops[i].fn, &c, rounds, min_s, a_buf);
        printf("| %s | %s | %.0f | %.0f | %.1fx |\n", ops[i].name, ops[i].shape, s, v, s / v);
    }
    free(c.x), free(c.y), free(c.big), free(c.w1), free(c.cs), free(c.sc), free(c.acc); /* clean under LeakSanitizer */
    return 0;
}
