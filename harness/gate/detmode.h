/*
 * detmode.h - the deterministic gate mode: instruction counts of a fixed
 * micro workload, for machines whose clocks are too noisy to gate on.
 *
 * The workload is `cortex-bench micro` (micro.c): load a model, one session on
 * ONE thread, evaluate N deterministic prompt tokens in one cx_eval, then M
 * greedy single-token steps. Only det_micro_workload() is measured:
 *
 *   callgrind  valgrind --tool=callgrind --toggle-collect=det_micro_workload
 *              bench micro ...; the total Ir of the callgrind output file.
 *              Exact to ~1e-7 run to run; ~50x slower than native.
 *   perf       bench micro ... --count natively: a user-mode instructions
 *              counter (perf_event_open) enabled around the workload only.
 *              Native speed; needs a PMU (this VM has one), a little noisier.
 *   auto       callgrind if `valgrind` is on PATH, else perf if the
 *              instructions counter counts, else an error naming both.
 *
 * The two modes count different things (valgrind emulates its own CPU, so
 * libm may take other code paths; perf counts what the hardware retires),
 * so a baseline and a candidate are comparable only within one mode, and one
 * micro workload version (DET_MICRO_VERSION, printed by `micro`).
 *
 * Why one thread: spinning workers execute pause loops whose length depends on
 * scheduling; with two threads two callgrind runs of one generation counted
 * 684M and 779M instructions (14% apart), with one 84,843,464 and 84,843,453.
 */
#ifndef CB_DETMODE_H
#define CB_DETMODE_H

#include <stddef.h>

/* Default micro workload: `cortex synth --shape gate-micro --type q8_0`, a
 * 16-token prompt and 8 greedy steps: ~1.1e8 instructions in the measured region. */
#define DET_DEFAULT_SHAPE "gate-micro"
#define DET_DEFAULT_TYPE "q8_0"
#define DET_DEFAULT_PROMPT 16
#define DET_DEFAULT_GEN 8

/* Bumped whenever the measured region or its inputs change meaning: counts
 * from different versions are not comparable. */
#define DET_MICRO_VERSION 1

/* The measured function's name, for --toggle-collect. */
#define DET_MICRO_FN "det_micro_workload"

/* det_measure results besides 0. */
enum {
    DET_EFAIL = -1,     /* the measurement failed (message in err) */
    DET_EUNAVAIL = -2,  /* the asked mode (or, for auto, both modes) is not available here,
                         * whatever the reason (missing valgrind, any perf_event_open errno,
                         * a counter that counts nothing); err says which */
    DET_ENOMICRO = -3   /* bench_bin has no `micro` subcommand (a revision older than it) */
};

/*
 * Measure the micro workload of `bench_bin` (a cortex-bench binary) on
 * `model` with `test_prompt` prompt tokens and `test_gen` greedy steps, in a
 * child process, in `mode` ("callgrind", "perf" or "auto"). On success *instructions
 * gets the count, mode_used the mode actually used ("callgrind" or "perf")
 * and isa_used the kernel table the child really ran (its `isa=`: under
 * valgrind, which emulates no AVX-512, the AVX2 table even on an AVX-512
 * machine; "unknown" for a child from before it said so). The child inherits
 * the environment (CORTEX_SLOWDOWN_PCT, CORTEX_ISA included).
 */
int det_measure(const char *bench_bin, const char *model, const char *mode, int test_prompt, int test_gen,
                double *instructions, char *mode_used, size_t mode_len, char *isa_used, size_t isa_len, char *err,
                size_t errlen);

/* 1 if an executable `valgrind` is on PATH. */
int det_have_valgrind(void);
/* 1 if a user-mode instructions counter opens and counts here; else 0 and the reason in err. */
int det_perf_supported(char *err, size_t errlen);

/* Instructions counter for the calling thread (user mode, not inherited),
 * created disabled: det_perf_open returns the descriptor or -1 (why in err);
 * det_perf_start resets and enables it, det_perf_stop disables it and returns
 * the count (-1 on a failed read or a counter that was multiplexed out). */
int det_perf_open(char *err, size_t errlen);
void det_perf_start(int fd);
long long det_perf_stop(int fd);

/* micro's options (the flag table, harness/commands.c, fills them). */
typedef struct micro_opts {
    const char *model;
    const char *measure; /* --measure callgrind|perf|auto; NULL: run the workload here */
    const char *bin;     /* --bench-bin; NULL: this binary */
    int prompt, gen;     /* DET_DEFAULT_PROMPT, DET_DEFAULT_GEN */
    int count;           /* --count */
} micro_opts;
void micro_opts_init(void *o);
/* `cortex-bench micro` (micro.c; opts: micro_opts): the workload itself, or
 * with --measure the driver around det_measure. Usage in micro.c. */
struct cli_args;
int cmd_micro(void *opts, const struct cli_args *a);

#endif
