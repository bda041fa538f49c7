/*
 * hw_cmd.c - `cortex-bench hw [--db FILE] [--size MiB] [--reps N] [-t N]`
 * (see hw_cmd.h): its options, the database opened before measuring (so a bad path
 * fails at once), the measurement, its table, the stored row.
 */
#include "hw_cmd.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "env.h"
#include "hw.h"
#include "hw_store.h"
#include "store.h"

/* "12.34 (12.01)": best and median, or "–" when not measured. */
static const char *hw_fmt(char *buf, size_t n, hw_fig f) {
    if (isnan(f.best)) snprintf(buf, n, "–");
    else snprintf(buf, n, "%.2f (%.2f)", f.best, f.median);
    return buf;
}

/* One table row: a label, the 1-thread and N-thread figures, the unit. */
static void hw_row(FILE *out, const char *label, const hw_fig f[2], const char *unit) {
    char a[48], b[48];
    fprintf(out, "| %s | %s | %s | %s |\n", label, hw_fmt(a, sizeof a, f[0]), hw_fmt(b, sizeof b, f[1]), unit);
}

/* The measurement as markdown: context line, table, ISA availability, caveats. */
static void hw_print(FILE *out, const hw_result *r, const env_info *e) {
    fprintf(out, "## hw: %s, %d CPUs", e->cpu_model, e->logical_cores);
    if (r->llc_bytes) fprintf(out, ", last-level cache %.0f MiB", (double)r->llc_bytes / (1 << 20));
    fprintf(out, "\n\nbuffer %.0f MiB, best of %d passes (median in parentheses), %d thread%s pinned to CPUs %s,"
                 " memory kernels %s\n\n",
            (double)r->buffer_bytes / (1 << 20), r->reps, r->threads, r->threads == 1 ? "" : "s", r->cpus,
            !strcmp(r->mem_isa, "avx2") ? "avx2 (256-bit loads)" : "generic");
    fprintf(out, "| measurement | 1 thread | %d thread%s | unit |\n| --- | ---: | ---: | --- |\n", r->threads,
            r->threads == 1 ? "" : "s");
    hw_row(out, "read (sum)", r->read, "GB/s");
    hw_row(out, "copy", r->copy, "GB/s");
    hw_row(out, "triad (a = b + s·c)", r->triad, "GB/s");
    hw_row(out, "fp32 scalar mul+add", r->fp32_scalar, "GFLOP/s");
    hw_row(out, "fp32 AVX2 FMA", r->fp32_avx2, "GFLOP/s");
    hw_row(out, "int8 AVX2 dot (maddubs+madd)", r->int8_avx2, "GOP/s");
    if (!isnan(r->fp32_avx512[0].best)) hw_row(out, "fp32 AVX-512 FMA", r->fp32_avx512, "GFLOP/s");
    if (!isnan(r->int8_vnni[0].best)) hw_row(out, "int8 AVX-512 VNNI dot (vpdpbusd)", r->int8_vnni, "GOP/s");
    fprintf(out, "\n- AVX-512: %s\n- VNNI (AVX-512 VNNI or AVX-VNNI): %s\n", r->avx512, r->vnni);
    if (r->notes[0]) fprintf(out, "- note: %s\n", r->notes);
}

/* See hw_cmd.h. */
void hw_cmd_opts_init(void *op) {
    hw_cmd_opts *o = op;
    hw_opts_init(&o->hw);
    o->size_mib = (long)(o->hw.bytes >> 20);
    o->db = cli_default_db();
}

int cmd_hw(void *opts, const cli_args *a) {
    const hw_cmd_opts *ho = opts;
    const char *db = ho->db;
    hw_opts o = ho->hw;
    (void)a;
    o.bytes = (uint64_t)ho->size_mib << 20;
    char err[512];
    store *s;
    cli_ensure_default_dir(db);
    if (store_open(db, &s, err, sizeof err)) return cli_fail(1, "%s", err);
    env_info env;
    env_collect(&env);
    fprintf(stderr, "cortex-bench hw: measuring (%.0f MiB buffer, %d passes, 1 and %d threads)...\n",
            (double)o.bytes / (1 << 20), o.reps, o.threads);
    hw_result r;
    if (hw_measure(&o, &r, err, sizeof err)) {
        store_close(s);
        return cli_fail(1, "hw: %s", err);
    }
    hw_print(stdout, &r, &env);
    int64_t id;
    int rc = hw_store_insert(s, &r, &env, &id, err, sizeof err);
    store_close(s);
    if (rc) return cli_fail(1, "%s", err);
    printf("\nstored as hw row %lld in %s: runs on this machine now report decode speed against the read roofline"
           " (%.2f GB/s with 1 thread, %.2f GB/s with %d)\n",
           (long long)id, db, r.read[0].best, r.read[1].best, r.threads);
    return 0;
}
