/*
 * challenge.h - `cortex-bench report --challenge RUN`: the benchmark
 * challenge's figures from stored runs of a prompt set (the `challenge` set
 * stands in for the challenge's own 10 prompts): per prompt the medians over
 * repetitions of decode TPS, end-to-end TPS and TTFT, over the set their
 * minimum, median and maximum and the peak RSS, for RUN and the runs of its
 * configuration at other thread counts (store_run_siblings), against the
 * challenge's 30 tokens/s baseline; and a projection to the challenge
 * machine from the roofs `cortex-bench hw` measured here (one core's peak
 * for the instruction set the run's kernels used) and the bytes and
 * arithmetic a decoded token costs (roofline.h), from the thread count that
 * decoded fastest. The report states VALID or INVALID first; an INVALID run
 * (validity.h) is no measurement: its report shows the per-prompt outcomes
 * only, with no comparison with the baseline and no projection.
 * Definitions: docs/metrics.md ("The challenge run"); the command:
 * docs/harness.md.
 *
 * challenge_data.c loads and computes (no output); challenge.c writes the
 * markdown report and its charts.
 */
#ifndef CB_CHALLENGE_H
#define CB_CHALLENGE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "hw_store.h"
#include "store.h"
#include "store_read.h"

#define CHAL_BASELINE_TPS 30.0  /* the challenge's baseline, tokens/s */
#define CHAL_MAX_RUNS 8         /* thread counts in one report */
/* The challenge machine: 2 sockets, 8 cores, 32 GB. Its read bandwidth is
 * not published; CHAL_DEFAULT_GBS is an estimate (docs/metrics.md says how it
 * was reached), to be replaced with --challenge-gbs when measured. */
#define CHAL_DEFAULT_GBS 40.0
#define CHAL_DEFAULT_CORES 8
#define CHAL_DEFAULT_MEM_GB 32.0
#define CHAL_PATH_BYTES (PATH_MAX + 32) /* the report's path: its directory + "/challenge.md" */

/* What the report is asked for (report flags). */
typedef struct chal_opts {
    double gbs;          /* the challenge machine's read bandwidth, GB/s */
    int cores;           /* its cores */
    double mem_gb;       /* its memory, GB (1e9 bytes) */
    const char *cmdline; /* the report command as typed (the reproduction record) */
} chal_opts;

/* min / median / max over the served prompts (NAN when none). */
typedef struct chal_spread {
    double min, median, max;
    int n;
} chal_spread;

/* One prompt at one thread count: medians over the repetitions that served it. */
typedef struct chal_prompt {
    char item[64];
    int prompt_tokens;
    int served, reps;                 /* repetitions that served it, of those run */
    double gen_tokens;                /* median generated tokens */
    double decode_tps, e2e_tps, ttft_ms; /* NAN when never served (or decode: one token) */
    char hash[24];                    /* the canary of its first served repetition */
    int stable;                       /* every served repetition produced that hash */
    char error[200];                  /* the last error, when a repetition failed */
} chal_prompt;

/* One run (one thread count). */
typedef struct chal_run {
    store_run info;
    chal_prompt *p;
    int n;
    chal_spread decode, e2e, ttft;    /* over the prompts' medians */
    double peak_rss_mib;              /* the largest of the repetitions' peak RSS */
    double bytes_per_token, flops_per_token; /* medians of the run's metrics (NAN: not recorded) */
    double decode_tps;                /* the run's decode_tps median (all prompts' decode tokens / time) */
} chal_run;

/* The projection's inputs and result: the roofs here and there, the
 * efficiency measured here against the roof, the projected decode speed. */
typedef struct chal_proj {
    /* inputs */
    double bytes_per_token, flops_per_token; /* per decoded token (flops NAN: no compute roof) */
    double here_gbs;          /* this machine's read bandwidth at the run's thread count */
    double core_gops;         /* one core's peak arithmetic here (G operations/s) */
    int here_threads;
    double here_decode_tps;   /* measured */
    double target_gbs;        /* the challenge machine's bandwidth (opts) */
    int target_cores;
    /* results */
    double here_bw_roof, here_cpu_roof, here_roof; /* tokens/s */
    double efficiency;        /* here_decode_tps / here_roof */
    double eff_used;          /* the efficiency carried over: at most 1 */
    double target_bw_roof, target_cpu_roof, target_roof, projected_tps;
    int target_compute_bound; /* the challenge machine's roof is arithmetic, not bandwidth */
} chal_proj;

/* Everything a challenge report is made from. */
typedef struct chal_data {
    chal_run run[CHAL_MAX_RUNS]; /* by thread count; an INVALID asked run alone */
    int n_runs;
    int asked;                /* index of the run the report was asked for */
    int invalid;              /* the asked run is INVALID: outcomes only, no comparison, no projection */
    int best;                 /* index of the run the projection is from: the best decode_tps median (-1: none) */
    hw_peaks hw;              /* the hw row of that run (id 0: none) */
    int have_hw;
    char core_fig[256];       /* which measured per-core peak core_gops is ("int8 AVX-512 VNNI dot", ...) */
    chal_proj proj;
    int have_proj;
    char no_proj[256];        /* why there is no projection */
} chal_data;

/* The run to project from: the index of the largest decode_tps median
 * (fewer threads on a tie), -1 when no run has one. More threads are not
 * assumed faster: on a shared or small machine they can be slower. */
int chal_best_run(const chal_run *runs, int n);

/* One core's peak arithmetic (G op/s) for the kernels a run used, from hw
 * row `hw`: `isa` is runs.isa ("avx512vnni+hpx16": the part before '+'
 * counts), `type` the weights' type. Float weights (f32, f16, bf16) use the
 * FMA peak of that ISA (AVX-512 F or AVX2), quantized ones the int8 dot
 * product peak (AVX-512 VNNI for avx512vnni/avx512bf16 kernels, AVX2
 * maddubs+madd otherwise), scalar kernels the scalar peak. A figure hw did
 * not measure is replaced by the nearest it did, and `fig` (n bytes) says
 * which and why. NAN when none is known. */
double chal_core_peak(const hw_peaks *hw, const char *isa, const char *type, char *fig, size_t n);

/* Compute the roofs, efficiency and projection of `p` from its inputs. */
void chal_project(chal_proj *p);

/* min / median / max of n values (sorted in place; NANs must be left out). */
chal_spread chal_spread_of(double *v, int n);

/* Load run `run_id` and its configuration at other thread counts, every
 * prompt's medians, the spreads, and the projection (opts). 0, or -1 with a
 * message (no such run, not a prompt set, database error). chal_free after. */
int chal_load(store *s, int64_t run_id, const chal_opts *opts, chal_data *d, char *err, size_t errlen);
void chal_free(chal_data *d);

/* Write DIR/challenge.md (DIR: out_dir, or reports/challenge-RUN) with its
 * charts (per-prompt decode TPS against the 30 tokens/s line, TTFT per
 * prompt). 0, or -1 with a message in err (the report is still written when
 * only gnuplot failed). path_out (CHAL_PATH_BYTES) gets the file's path. */
int chal_report_write(store *s, int64_t run_id, const chal_opts *opts, const char *out_dir, char *path_out,
                      char *err, size_t errlen);

#endif
