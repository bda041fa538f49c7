/*
 * bench_main.c - the `cortex-bench` command: run, trace, list, show, compare.
 *
 * A run loads the model once, opens the counters (before any engine thread
 * exists, so the thread pool is counted), records the run as incomplete,
 * runs warm-up and counted repetitions, and stores everything in one
 * transaction. One run per thread count of the -t grid.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cortex.h"
#include "compare.h"
#include "counters.h"
#include "env.h"
#include "runner.h"
#include "sha256.h"
#include "show.h"
#include "store.h"
#include "trace_gen.h"
#include "version.h"
#include "workload.h"

#define DEFAULT_DB "reports/cortex.db"

static int usage(void) {
    fprintf(stderr,
            "usage: cortex-bench <command> [options]\n"
            "  run --model M [-z TOKENIZER] [--workload standard|trace:FILE|prompts:FILE|ppN|tgN|pgN,M]\n"
            "      [--reps N] [--warmup W] [-t T[,T...]] [-d DEPTH] [--mode closed|open] [--concurrency C]\n"
            "      [-c CTX] [--pin CPUS] [--respect-eos] [--db FILE] [-o md|csv|json] [--no-progress]\n"
            "  trace --requests N --rate R --zipf S --adapters K --prompt-len DIST --gen-len DIST --seed X -o FILE\n"
            "        (DIST: fixed:N | uniform:A,B | normal:MEAN,SD | lognormal:MU,SIGMA)\n"
            "  list [--db FILE] [--limit N]\n"
            "  show RUN [--db FILE] [-o md|csv|json]\n"
            "  compare BASE CAND [--db FILE] [--force]\n");
    return 2;
}

/* "cortex-bench: " + message, exit code `code`. */
static int fail(int code, const char *fmt, const char *a) {
    fprintf(stderr, "cortex-bench: ");
    fprintf(stderr, fmt, a);
    fputc('\n', stderr);
    return code;
}

static int parse_int(const char *flag, const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "cortex-bench: %s: '%s' is not an integer in [%ld, %ld]\n", flag, v ? v : "", lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_double(const char *flag, const char *v, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double x = v ? strtod(v, &end) : 0;
    if (!v || errno || end == v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "cortex-bench: %s: '%s' is not a number in [%g, %g]\n", flag, v ? v : "", lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

/* Make the directory holding `path` when it is the default reports/ folder. */
static void ensure_default_dir(const char *db) {
    if (!strcmp(db, DEFAULT_DB)) mkdir("reports", 0777);
}

/* The model file's SHA-256, from the database's cache when size and mtime match. */
static int model_hash(store *s, const char *path, char out[65], char *err, size_t n) {
    struct stat st;
    if (stat(path, &st) != 0) return snprintf(err, n, "%s: %s", path, strerror(errno)), -1;
    int64_t mt = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    if (store_cached_hash(s, path, (int64_t)st.st_size, mt, out)) return 0;
    if (sha256_hex_file(path, out, err, n)) return -1;
    store_cache_hash(s, path, (int64_t)st.st_size, mt, out);
    return 0;
}

/* Resolve "standard" to prompts/standard.jsonl: $CORTEX_PROMPTS, ./prompts, or the source tree. */
static void standard_path(char *out, size_t n) {
    const char *dir = getenv("CORTEX_PROMPTS");
    if (dir) { snprintf(out, n, "%s/standard.jsonl", dir); return; }
    snprintf(out, n, "prompts/standard.jsonl");
    if (access(out, R_OK) != 0) snprintf(out, n, "%s/prompts/standard.jsonl", CORTEX_SRC_DIR);
}

typedef struct run_opts {
    const char *model, *tokenizer, *workload, *db, *fmt, *pin, *threads;
    long reps, warmup, depth, concurrency, ctx;
    int mode, respect_eos, no_progress;
} run_opts;

/* SHA-256 of everything that must match for two runs to be compared. */
static void compare_key(const run_meta *m, const env_info *e, char out[65]) {
    char buf[2048];
    snprintf(buf, sizeof buf, "cpu=%s|isa=%s|cores=%d|model=%s|type=%s|threads=%d|build=%s|ctx=%d", e->cpu_model,
             e->isa_flags, e->logical_cores, m->model_sha256, m->model_type, m->threads, m->build_type, m->n_ctx);
    sha256_ctx c;
    uint8_t d[32];
    sha256_init(&c);
    sha256_update(&c, buf, strlen(buf));
    sha256_final(&c, d);
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* One run at one thread count: record, warm up, measure, store. */
static int run_one(store *db, const cx_model *model, const wl_workload *wl, const run_opts *o, run_config cfg,
                   run_meta meta, const env_info *env, ctr_set *ctr, int64_t *id_out) {
    char err[512];
    compare_key(&meta, env, meta.compare_key);
    int64_t id;
    if (store_begin_run(db, &meta, env, &id, err, sizeof err)) return fail(1, "%s", err);
    *id_out = id;
    rep_result *reps = calloc((size_t)o->reps, sizeof(rep_result));
    if (!reps) return fail(1, "%s", "out of memory");
    char label[64];
    int rc = 0;
    for (long w = 0; w < o->warmup && !rc; w++) {
        rep_result tmp;
        snprintf(label, sizeof label, "run %lld warm-up", (long long)id);
        cfg.label = label;
        rc = runner_rep(model, wl, &cfg, NULL, (int)w, (int)o->warmup, &tmp, err, sizeof err);
        rep_free(&tmp);
    }
    snprintf(label, sizeof label, "run %lld t=%d", (long long)id, cfg.threads);
    cfg.label = label;
    for (long r = 0; r < o->reps && !rc; r++) rc = runner_rep(model, wl, &cfg, ctr, (int)r, (int)o->reps, &reps[r], err, sizeof err);
    if (rc) {
        store_fail_run(db, id, err);
        fprintf(stderr, "cortex-bench: run %lld failed: %s\n", (long long)id, err);
    } else if (store_finish_run(db, id, reps, (int)o->reps, err, sizeof err)) {
        fprintf(stderr, "cortex-bench: %s\n", err);
        rc = -1;
    }
    for (long r = 0; r < o->reps; r++) rep_free(&reps[r]);
    free(reps);
    return rc ? 1 : 0;
}

static int cmd_run(int argc, char **argv) {
    run_opts o = {0};
    o.workload = "standard";
    o.db = DEFAULT_DB;
    o.fmt = "md";
    o.reps = 3;
    o.warmup = 1;
    o.concurrency = 1;
    o.mode = -1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 1;
        if (!strcmp(a, "--respect-eos")) { o.respect_eos = 1; takes = 0; }
        else if (!strcmp(a, "--no-progress")) { o.no_progress = 1; takes = 0; }
        else if (!v) return fail(2, "%s needs a value", a);
        else if (!strcmp(a, "--model") || !strcmp(a, "-m")) o.model = v;
        else if (!strcmp(a, "-z") || !strcmp(a, "--tokenizer")) o.tokenizer = v;
        else if (!strcmp(a, "--workload") || !strcmp(a, "-w")) o.workload = v;
        else if (!strcmp(a, "--db")) o.db = v;
        else if (!strcmp(a, "-o")) o.fmt = v;
        else if (!strcmp(a, "--pin")) o.pin = v;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) o.threads = v;
        else if (!strcmp(a, "--reps")) { if (parse_int(a, v, 1, 10000, &o.reps)) return 2; }
        else if (!strcmp(a, "--warmup")) { if (parse_int(a, v, 0, 10000, &o.warmup)) return 2; }
        else if (!strcmp(a, "-d") || !strcmp(a, "--depth")) { if (parse_int(a, v, 0, 1 << 24, &o.depth)) return 2; }
        else if (!strcmp(a, "--concurrency")) { if (parse_int(a, v, 1, 100000, &o.concurrency)) return 2; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) { if (parse_int(a, v, 1, 1 << 24, &o.ctx)) return 2; }
        else if (!strcmp(a, "--mode")) {
            if (!strcmp(v, "closed")) o.mode = RUN_CLOSED;
            else if (!strcmp(v, "open")) o.mode = RUN_OPEN;
            else return fail(2, "--mode: '%s' is not closed or open", v);
        } else return fail(2, "unknown option '%s' (see cortex-bench --help)", a);
        i += takes;
    }
    if (!o.model) return fail(2, "%s", "run needs --model MODEL");
    if (strcmp(o.fmt, "md") && strcmp(o.fmt, "csv") && strcmp(o.fmt, "json"))
        return fail(2, "-o: unknown format '%s' (md, csv, json)", o.fmt);

    /* The workload: a prompt set, a trace, or a synthetic test. */
    run_config cfg = {0};
    run_meta meta = {0};
    wl_workload wl = {0};
    char err[512], path[1024];
    int np = 0, ng = 0;
    const char *wl_path = NULL;
    if (!strcmp(o.workload, "standard")) {
        standard_path(path, sizeof path);
        wl_path = path;
    } else if (!strncmp(o.workload, "trace:", 6) || !strncmp(o.workload, "prompts:", 8)) {
        wl_path = strchr(o.workload, ':') + 1;
    } else if (runner_parse_test(o.workload, &np, &ng) != 0) {
        return fail(2, "unknown workload '%s' (standard, trace:FILE, prompts:FILE, ppN, tgN, pgN,M)", o.workload);
    }
    if (wl_path && wl_load(wl_path, &wl, err, sizeof err)) return fail(2, "%s", err);
    if (!wl_path && o.mode >= 0) return fail(2, "--mode %s applies to prompt sets and traces, not synthetic tests",
                                             o.mode == RUN_OPEN ? "open" : "closed");
    if (o.depth && wl_path) return fail(2, "%s", "-d (KV depth) applies to synthetic tests (ppN, tgN, pgN,M)");
    cfg.mode = wl_path ? (o.mode >= 0 ? o.mode : wl.kind == WL_TRACE ? RUN_OPEN : RUN_CLOSED) : RUN_SYNTHETIC;
    if (cfg.mode == RUN_OPEN && wl.kind != WL_TRACE) {
        wl_free(&wl);
        return fail(2, "--mode open needs a trace with arrival times; '%s' is a prompt set", o.workload);
    }
    cfg.concurrency = (int)o.concurrency;
    cfg.ignore_eos = !o.respect_eos;
    cfg.test_prompt = np;
    cfg.test_gen = ng;
    cfg.test_depth = (int)o.depth;
    cfg.n_ctx = (int)o.ctx;
    cfg.progress = !o.no_progress && isatty(2) && !(getenv("CI") && !strcmp(getenv("CI"), "true"));

    /* Thread grid: "2" or "1,2,4". */
    int threads[32], n_threads = 0;
    char tbuf[128];
    snprintf(tbuf, sizeof tbuf, "%s", o.threads ? o.threads : "");
    for (char *tok = strtok(tbuf, ","); tok && n_threads < 32; tok = strtok(NULL, ",")) {
        long t;
        if (parse_int("-t", tok, 1, 256, &t)) { wl_free(&wl); return 2; }
        threads[n_threads++] = (int)t;
    }
    env_info env;
    env_collect(&env);
    if (!n_threads) threads[n_threads++] = env.logical_cores > 0 ? env.logical_cores : 1;

    if (o.pin && env_pin_cpus(o.pin, err, sizeof err)) { wl_free(&wl); return fail(2, "--pin: %s", err); }
    /* Everything that can be wrong with the input is checked before the
     * database is touched, so bad input leaves no trace in it. */
    cx_model *model;
    cx_err ce = {0};
    if (cx_model_load(o.model, o.tokenizer, &model, &ce)) {
        wl_free(&wl);
        return fail(1, "%s", ce.msg);
    }
    ensure_default_dir(o.db);
    store *db;
    if (store_open(o.db, &db, err, sizeof err)) {
        cx_model_free(model);
        wl_free(&wl);
        return fail(1, "%s", err);
    }
    const cx_model_info *mi = cx_model_get_info(model);
    if (model_hash(db, o.model, meta.model_sha256, err, sizeof err)) {
        cx_model_free(model);
        store_close(db);
        wl_free(&wl);
        return fail(1, "%s", err);
    }
    /* Counters open before any session exists, so every engine thread is counted. */
    ctr_set *ctr = ctr_open(err, sizeof err);
    if (!ctr) fprintf(stderr, "cortex-bench: counters unavailable: %s\n", err);

    snprintf(meta.workload, sizeof meta.workload, "%s", o.workload);
    snprintf(meta.workload_kind, sizeof meta.workload_kind, "%s", wl_path ? wl_kind_name(wl.kind) : "synthetic");
    snprintf(meta.workload_hash, sizeof meta.workload_hash, "%s", wl_path ? wl.sha256 : "");
    snprintf(meta.mode, sizeof meta.mode, "%s", cfg.mode == RUN_OPEN ? "open" : cfg.mode == RUN_CLOSED ? "closed" : "synthetic");
    meta.concurrency = cfg.mode == RUN_CLOSED ? cfg.concurrency : 0;
    snprintf(meta.model_path, sizeof meta.model_path, "%s", o.model);
    snprintf(meta.model_type, sizeof meta.model_type, "%s", cx_type_name(mi->main_type));
    snprintf(meta.model_name, sizeof meta.model_name, "%s", mi->name);
    meta.model_params = mi->n_params;
    meta.model_bytes = mi->weight_bytes;
    meta.reps = (int)o.reps;
    meta.warmup = (int)o.warmup;
    meta.n_ctx = o.ctx ? (int)o.ctx : (mi->n_ctx < CX_DEFAULT_CTX ? mi->n_ctx : CX_DEFAULT_CTX);
    meta.test_prompt = np;
    meta.test_gen = ng;
    meta.test_depth = (int)o.depth;
    snprintf(meta.pinned, sizeof meta.pinned, "%s", o.pin ? o.pin : "");
    snprintf(meta.git_commit, sizeof meta.git_commit, "%s", CORTEX_GIT_COMMIT);
    meta.git_dirty = CORTEX_GIT_DIRTY;
    snprintf(meta.build_type, sizeof meta.build_type, "%s", CORTEX_BUILD_TYPE);
    snprintf(meta.build_flags, sizeof meta.build_flags, "%s", CORTEX_BUILD_FLAGS);
    snprintf(meta.counter_mode, sizeof meta.counter_mode, "%s", ctr ? ctr_mode(ctr) : "none");
    size_t k = 0;
    for (int i = 0; i < argc + 2 && k < sizeof meta.cmdline - 1; i++)
        k += (size_t)snprintf(meta.cmdline + k, sizeof meta.cmdline - k, "%s%s", i ? " " : "", (argv - 2)[i]);

    int64_t ids[32];
    int rc = 0, n_ids = 0;
    for (int t = 0; t < n_threads && !rc; t++) {
        cfg.threads = threads[t];
        meta.threads = threads[t];
        rc = run_one(db, model, wl_path ? &wl : NULL, &o, cfg, meta, &env, ctr, &ids[n_ids]);
        n_ids++;
    }
    if (!rc) {
        if (show_table(db, ids, n_ids, o.fmt, 0, stdout, err, sizeof err)) rc = fail(1, "%s", err);
        if (!strcmp(o.fmt, "md")) {
            for (int i = 0; wl_path && wl.kind == WL_TRACE && i < n_ids; i++) {
                printf("\n");
                show_adapters(store_db(db), ids[i], stdout); /* under Zipf popularity: who pays */
            }
            printf("\nstored as run%s", n_ids > 1 ? "s" : "");
            for (int i = 0; i < n_ids; i++) printf("%s %lld", i ? "," : "", (long long)ids[i]);
            printf(" in %s (cortex-bench show RUN for details)\n", o.db);
        }
    }
    ctr_close(ctr);
    cx_model_free(model);
    store_close(db);
    wl_free(&wl);
    return rc;
}

static int cmd_trace(int argc, char **argv) {
    trace_params p;
    memset(&p, 0, sizeof p);
    char err[512];
    /* Defaults: a one-minute chat-like trace over four adapters. */
    p.requests = 64;
    p.rate = 1.0;
    p.zipf_s = 1.1;
    p.adapters = 4;
    p.seed = 1;
    trace_len_parse("uniform:32,256", "--prompt-len", &p.prompt_len, err, sizeof err);
    trace_len_parse("uniform:16,128", "--gen-len", &p.gen_len, err, sizeof err);
    const char *out = NULL;
    for (int i = 0; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
        double d;
        if (!v) return fail(2, "%s needs a value", a);
        if (!strcmp(a, "--requests")) { if (parse_int(a, v, 1, 10000000, &x)) return 2; p.requests = (int)x; }
        else if (!strcmp(a, "--rate")) { if (parse_double(a, v, 1e-6, 1e6, &d)) return 2; p.rate = d; }
        else if (!strcmp(a, "--zipf")) { if (parse_double(a, v, 0, 100, &d)) return 2; p.zipf_s = d; }
        else if (!strcmp(a, "--adapters")) { if (parse_int(a, v, 1, 100000, &x)) return 2; p.adapters = (int)x; }
        else if (!strcmp(a, "--seed")) { if (parse_int(a, v, 0, 0x7fffffffffffffffL, &x)) return 2; p.seed = (uint64_t)x; }
        else if (!strcmp(a, "--prompt-len")) { if (trace_len_parse(v, a, &p.prompt_len, err, sizeof err)) return fail(2, "%s", err); }
        else if (!strcmp(a, "--gen-len")) { if (trace_len_parse(v, a, &p.gen_len, err, sizeof err)) return fail(2, "%s", err); }
        else if (!strcmp(a, "-o")) out = v;
        else return fail(2, "unknown option '%s' (see cortex-bench --help)", a);
    }
    if (!out) return fail(2, "%s", "trace needs -o FILE.jsonl");
    if (trace_write(&p, out, err, sizeof err)) return fail(1, "%s", err);
    fprintf(stderr, "wrote %s: %d requests\n", out, p.requests);
    return 0;
}

/* Parse --db/--limit/-o/--force and up to two positional ids. */
static int parse_read_opts(int argc, char **argv, const char **db, const char **fmt, long *limit, int *force,
                           const char **pos, int max_pos) {
    int n_pos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--force")) { *force = 1; continue; }
        if (a[0] != '-') {
            if (n_pos >= max_pos) return fail(2, "unexpected argument '%s'", a);
            pos[n_pos++] = a;
            continue;
        }
        if (!v) return fail(2, "%s needs a value", a);
        if (!strcmp(a, "--db")) *db = v;
        else if (!strcmp(a, "-o")) *fmt = v;
        else if (!strcmp(a, "--limit")) { if (parse_int(a, v, 1, 1000000, limit)) return 2; }
        else return fail(2, "unknown option '%s'", a);
        i++;
    }
    return n_pos == max_pos ? 0 : fail(2, "%s", max_pos == 1 ? "expected a run id" : "expected two run ids");
}

/* Open an existing database read-write (migrating it), never creating one. */
static int open_existing(const char *path, store **s) {
    char err[512];
    if (access(path, F_OK) != 0) return fail(1, "%s: no such database (run cortex-bench run first)", path);
    if (store_open(path, s, err, sizeof err)) return fail(1, "%s", err);
    return 0;
}

static int cmd_list(int argc, char **argv) {
    const char *db = DEFAULT_DB, *fmt = "md", *pos[1];
    long limit = 20;
    int force = 0;
    if (parse_read_opts(argc, argv, &db, &fmt, &limit, &force, pos, 0)) return 2;
    store *s;
    char err[512];
    if (open_existing(db, &s)) return 1;
    int rc = store_list(s, stdout, (int)limit, err, sizeof err);
    store_close(s);
    return rc ? fail(1, "%s", err) : 0;
}

static int parse_id(const char *v, int64_t *id) {
    long x;
    if (parse_int("run id", v, 1, 0x7fffffffL, &x)) return -1;
    *id = x;
    return 0;
}

static int cmd_show(int argc, char **argv) {
    const char *db = DEFAULT_DB, *fmt = "md", *pos[1];
    long limit = 0;
    int force = 0;
    int64_t id;
    if (parse_read_opts(argc, argv, &db, &fmt, &limit, &force, pos, 1) || parse_id(pos[0], &id)) return 2;
    store *s;
    char err[512];
    if (open_existing(db, &s)) return 1;
    int rc = store_show(s, id, fmt, stdout, err, sizeof err);
    store_close(s);
    return rc ? fail(1, "%s", err) : 0;
}

/* Compare two runs' medians; refuse (or with --force, flag) runs whose
 * fingerprints differ, and report changed correctness canaries. */
static int cmd_compare(int argc, char **argv) {
    const char *db = DEFAULT_DB, *fmt = "md", *pos[2];
    long limit = 0;
    int force = 0;
    int64_t a, b;
    if (parse_read_opts(argc, argv, &db, &fmt, &limit, &force, pos, 2) || parse_id(pos[0], &a) || parse_id(pos[1], &b))
        return 2;
    store *s;
    if (open_existing(db, &s)) return 1;
    int rc = compare_runs(s, a, b, force, stdout);
    store_close(s);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage();
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage();
        return 0;
    }
    if (!strcmp(cmd, "run")) return cmd_run(argc - 2, argv + 2);
    if (!strcmp(cmd, "trace")) return cmd_trace(argc - 2, argv + 2);
    if (!strcmp(cmd, "list")) return cmd_list(argc - 2, argv + 2);
    if (!strcmp(cmd, "show")) return cmd_show(argc - 2, argv + 2);
    if (!strcmp(cmd, "compare")) return cmd_compare(argc - 2, argv + 2);
    fprintf(stderr, "cortex-bench: unknown command '%s'\n", cmd);
    return usage();
}
