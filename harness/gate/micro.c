/*
 * micro.c - `cortex-bench micro`: the fixed workload of the deterministic gate
 * mode (see detmode.h), and a small driver around det_measure.
 *
 *   cortex-bench micro --model M [--prompt N] [--gen G] [--count]
 *       load M, one session on one thread, then det_micro_workload: N
 *       deterministic prompt tokens (BOS + pseudo-random ids) in one cx_eval,
 *       then G greedy single-token steps. Nothing else: no database, no
 *       counters set, no clocks. Prints one line:
 *         micro_version=1 prompt=N gen=G threads=1 token_hash=H [instructions=I]
 *       --count: I = user-mode instructions of det_micro_workload alone, read
 *       from a perf_event_open counter enabled around it (perf mode).
 *   cortex-bench micro --measure callgrind|perf|auto --model M [--prompt N] [--gen G] [--bench-bin B]
 *       det_measure() on binary B (default: this one) and print
 *         instructions=I mode=callgrind|perf micro_version=1 prompt=N gen=G
 *       Exit codes: 0, 1 failure, 2 bad input, 3 B has no micro subcommand,
 *       4 no deterministic mode available here.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cortex.h"
#include "cortex_env.h"
#include "cli_util.h"
#include "detmode.h"

/* The measured region. callgrind collects only while this function runs
 * (--toggle-collect=det_micro_workload, callees included); perf mode counts
 * around its call. External and noinline, so the symbol exists under this
 * name whatever the optimization level. Returns 0 or an engine error. */
__attribute__((noinline)) int det_micro_workload(cx_session *s, cx_sampler *greedy, const int32_t *prompt, int np,
                                                  int ng, uint64_t *hash, cx_err *e);
__attribute__((noinline)) int det_micro_workload(cx_session *s, cx_sampler *greedy, const int32_t *prompt, int np,
                                                  int ng, uint64_t *hash, cx_err *e) {
    const float *logits;
    if (cx_eval(s, prompt, np, &logits, e)) return -1;
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the generated ids, like the harness's canary */
    for (int i = 0; i < ng; i++) {
        int32_t tok = cx_sampler_sample(greedy, logits);
        for (int b = 0; b < 4; b++) h = (h ^ (uint8_t)((uint32_t)tok >> (8 * b))) * 1099511628211ull;
        if (cx_eval(s, &tok, 1, &logits, e)) return -1;
    }
    *hash = h;
    return 0;
}


/* --measure: run det_measure on `bin` and print the result line. */
static int micro_measure(const char *bin, const char *model, const char *mode, int np, int ng) {
    char self[PATH_MAX], used[32], isa[32], err[1024];
    if (!bin) { /* this very binary */
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) return cli_fail(1, "micro: cannot find this binary (/proc/self/exe); pass --bench-bin");
        self[n] = 0;
        bin = self;
    }
    double ins;
    int rc = det_measure(bin, model, mode, np, ng, &ins, used, sizeof used, isa, sizeof isa, err, sizeof err);
    if (rc) return cli_fail(rc == DET_ENOMICRO ? 3 : rc == DET_EUNAVAIL ? 4 : 1, "micro: %s", err);
    printf("instructions=%.0f mode=%s micro_version=%d prompt=%d gen=%d isa=%s\n", ins, used, DET_MICRO_VERSION, np, ng,
           isa);
    return 0;
}

/* See detmode.h. */
void micro_opts_init(void *op) {
    micro_opts *o = op;
    memset(o, 0, sizeof *o);
    o->prompt = DET_DEFAULT_PROMPT;
    o->gen = DET_DEFAULT_GEN;
}

int cmd_micro(void *opts, const cli_args *a) {
    const micro_opts *o = opts;
    const char *model = o->model, *measure = o->measure, *bin = o->bin;
    int np = o->prompt, ng = o->gen, count = o->count;
    (void)a;
    if (!model)
        return cli_fail(2, "micro: needs --model MODEL (cortex synth --shape " DET_DEFAULT_SHAPE " --type " DET_DEFAULT_TYPE
                           " -o FILE makes the default one)");
    if (measure) return micro_measure(bin, model, measure, np, ng);

    cx_model *m;
    cx_err e = {0};
    cx_model_params mp; /* CORTEX_WEIGHTS, CORTEX_REPACK, CORTEX_ISA */
    if (cx_model_params_from_env(&mp, &e) || cx_model_load_ex(model, NULL, &mp, &m, &e))
        return cli_fail(2, "micro: %s", e.msg);
    const cx_model_info *mi = cx_model_get_info(m);
    int rc = 1;
    cx_session *s = NULL;
    cx_sampler *greedy = NULL;
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)np);
    cx_sampler_params gp = cx_sampler_defaults();
    gp.temperature = 0; /* greedy */
    gp.repeat_penalty = 1;
    int fd = -1;
    char why[256];
    if (!prompt) { cli_fail(1, "micro: out of memory"); goto out; }
    if (np + ng > mi->n_ctx) {
        fprintf(stderr, "cortex-bench micro: %d + %d tokens exceed the model's context of %d\n", np, ng, mi->n_ctx);
        rc = 2;
        goto out;
    }
    /* One thread: no pool workers, so no spinning whose length depends on scheduling. */
    if (cx_session_new(m, np + ng, 1, &s, &e) || cx_sampler_new(mi->n_vocab, &gp, &greedy, &e)) {
        cli_fail(1, "micro: %s", e.msg);
        goto out;
    }
    /* BOS, then the same pseudo-random ids as the harness's synthetic tests: never BOS or EOS. */
    prompt[0] = cx_token_bos(m);
    uint64_t seed = 0x5eed;
    for (int i = 1; i < np; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        prompt[i] = 3 + (int32_t)((seed >> 33) % (uint64_t)(mi->n_vocab - 3));
    }
    if (count && (fd = det_perf_open(why, sizeof why)) < 0) { cli_fail(1, "micro: %s", why); goto out; }
    uint64_t hash = 0;
    if (fd >= 0) det_perf_start(fd);
    int wrc = det_micro_workload(s, greedy, prompt, np, ng, &hash, &e);
    long long ins = fd >= 0 ? det_perf_stop(fd) : 0;
    if (wrc) { cli_fail(1, "micro: %s", e.msg); goto out; }
    if (fd >= 0 && ins <= 0) {
        cli_fail(1, "micro: the instructions counter could not be read (or was multiplexed)");
        goto out;
    }
    /* isa: the kernels this process really ran (under valgrind, which has no AVX-512, the AVX2 table even
     * on an AVX-512 machine): the counts belong to that table, and the gate records it */
    printf("micro_version=%d prompt=%d gen=%d threads=1 token_hash=%016llx isa=%s", DET_MICRO_VERSION, np, ng,
           (unsigned long long)hash, mi->isa);
    if (fd >= 0) printf(" instructions=%lld", ins);
    printf("\n");
    rc = 0;
out:
    if (fd >= 0) close(fd);
    free(prompt);
    cx_sampler_free(greedy);
    cx_session_free(s);
    cx_model_free(m);
    return rc;
}
