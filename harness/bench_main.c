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

#include <sqlite3.h>

#include "cortex.h"
#include "cli_util.h"
#include "compare.h"
#include "counters.h"
#include "detmode.h"
#include "env.h"
#include "gate_cmd.h"
#include "hw_cmd.h"
#include "report_cmd.h"
#include "run_cmd.h"
#include "runner.h"
#include "sha256.h"
#include "show.h"
#include "store.h"
#include "trace_gen.h"
#include "workload.h"


static int usage(void) {
    fprintf(stderr,
            "usage: cortex-bench <command> [options]\n"
            "  run --model M [-z TOKENIZER] [--workload standard|trace:FILE|prompts:FILE|ppN|tgN|pgN,M|multiseq:N,C,G|batched:N,C,G]\n"
            "      [--reps N] [--warmup W] [-t T[,T...]] [-d DEPTH] [--mode closed|open] [--concurrency C]\n"
            "      [-c CTX] [--pin CPUS] [--respect-eos] [--db FILE] [-o md|csv|json] [--no-progress]\n"
            "      [--kv-type f32|f16|q8] [--kv-warm-type q8|q4] [--kv-hot|--kv-warm|--kv-cold BYTES|unlimited]\n"
            "      [--kv-policy lru|lfu] [--prefix-cache on|off] [--kv-spill FILE]\n"
            "  trace --requests N --rate R --zipf S --adapters K --prompt-len DIST --gen-len DIST --seed X\n"
            "        [--system-prefix TOKENS] -o FILE\n"
            "        (DIST: fixed:N | uniform:A,B | normal:MEAN,SD | lognormal:MU,SIGMA)\n"
            "  list [--db FILE] [--limit N]\n"
            "  show RUN [--db FILE] [-o md|csv|json]\n"
            "  compare BASE CAND [--db FILE] [--force] [--gate-file F]   (BASE/CAND: run id, tag or git commit)\n"
            "  tag RUN NAME [--db FILE]\n"
            "  gate --model M [--mode wallclock|deterministic] [--baseline REF] [--baseline-bin BIN] [--record-baseline]\n"
            "       [--gate-file ci/gates.conf] [--junit FILE] [--summary FILE.md] [-t T] [--baseline-instructions N] [--db FILE]\n"
            "  calibrate --model M [--pairs N] [--workload W] [--gate-file F] [--db FILE]\n"
            "  trend METRIC [--workload W] [--chart DIR] [--db FILE]\n"
            "  report RUN [--baseline RUN|TAG] [--db FILE] [--out DIR]\n"
            "  dashboard [--db FILE] [--out DIR]\n"
            "  hw [--db FILE] [--size MiB] [--reps N] [-t N]   (read bandwidth and peak arithmetic of this machine)\n");
    return 2;
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
        if (!v) return cli_fail(2, "%s needs a value", a);
        if (!strcmp(a, "--requests")) { if (cli_parse_int(a, v, 1, 10000000, &x)) return 2; p.requests = (int)x; }
        else if (!strcmp(a, "--rate")) { if (cli_parse_double(a, v, 1e-6, 1e6, &d)) return 2; p.rate = d; }
        else if (!strcmp(a, "--zipf")) { if (cli_parse_double(a, v, 0, 100, &d)) return 2; p.zipf_s = d; }
        else if (!strcmp(a, "--adapters")) { if (cli_parse_int(a, v, 1, 100000, &x)) return 2; p.adapters = (int)x; }
        else if (!strcmp(a, "--seed")) { if (cli_parse_int(a, v, 0, 0x7fffffffffffffffL, &x)) return 2; p.seed = (uint64_t)x; }
        else if (!strcmp(a, "--prompt-len")) { if (trace_len_parse(v, a, &p.prompt_len, err, sizeof err)) return cli_fail(2, "%s", err); }
        else if (!strcmp(a, "--gen-len")) { if (trace_len_parse(v, a, &p.gen_len, err, sizeof err)) return cli_fail(2, "%s", err); }
        else if (!strcmp(a, "--system-prefix")) { if (cli_parse_int(a, v, 0, TRACE_MAX_LEN / 2, &x)) return 2; p.system_prefix = (int)x; }
        else if (!strcmp(a, "-o")) out = v;
        else return cli_fail(2, "unknown option '%s' (see cortex-bench --help)", a);
    }
    if (!out) return cli_fail(2, "%s", "trace needs -o FILE.jsonl");
    char cmdline[2048]; /* as typed, for the sidecar: "cortex-bench trace ..." (argv[-2..-1] are ours) */
    cli_join_argv(argc + 2, argv - 2, cmdline, sizeof cmdline);
    if (trace_write(&p, out, cmdline, err, sizeof err)) return cli_fail(1, "%s", err);
    fprintf(stderr, "wrote %s (%d requests) and its sidecar %s" WL_META_SUFFIX "\n", out, p.requests, out);
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
            if (n_pos >= max_pos) return cli_fail(2, "unexpected argument '%s'", a);
            pos[n_pos++] = a;
            continue;
        }
        if (!v) return cli_fail(2, "%s needs a value", a);
        if (!strcmp(a, "--db")) *db = v;
        else if (!strcmp(a, "-o")) *fmt = v;
        else if (!strcmp(a, "--limit")) { if (cli_parse_int(a, v, 1, 1000000, limit)) return 2; }
        else return cli_fail(2, "unknown option '%s'", a);
        i++;
    }
    return n_pos == max_pos ? 0 : cli_fail(2, "%s", max_pos == 1 ? "expected a run id" : "expected two run ids");
}

static int cmd_list(int argc, char **argv) {
    const char *db = CLI_DEFAULT_DB, *fmt = "md", *pos[1];
    long limit = 20;
    int force = 0;
    if (parse_read_opts(argc, argv, &db, &fmt, &limit, &force, pos, 0)) return 2;
    store *s;
    char err[512];
    if (cli_open_existing(db, &s)) return 1;
    int rc = store_list(s, stdout, (int)limit, err, sizeof err);
    store_close(s);
    return rc ? cli_fail(1, "%s", err) : 0;
}

static int cmd_show(int argc, char **argv) {
    const char *db = CLI_DEFAULT_DB, *fmt = "md", *pos[1];
    long limit = 0;
    int force = 0;
    int64_t id;
    if (parse_read_opts(argc, argv, &db, &fmt, &limit, &force, pos, 1) || cli_parse_id(pos[0], &id)) return 2;
    store *s;
    char err[512];
    if (cli_open_existing(db, &s)) return 1;
    int rc = store_show(s, id, fmt, stdout, err, sizeof err);
    store_close(s);
    return rc ? cli_fail(1, "%s", err) : 0;
}

/* Resolve a run reference for compare: a run id, a tag (newest tagged run) or
 * a git commit prefix (newest complete run built from it). */
static int resolve_ref(store *s, const char *ref, int64_t *id) {
    if (cli_parse_id_quiet(ref, id) == 0) return 0;
    sqlite3_stmt *st;
    const char *sql = "SELECT id FROM runs WHERE status = 'complete' AND (id IN (SELECT run_id FROM tags WHERE name = ?1)"
                      " OR (length(?1) >= 4 AND git_commit LIKE ?1 || '%')) ORDER BY id DESC LIMIT 1";
    *id = 0;
    if (sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, ref, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) == SQLITE_ROW) *id = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    return *id ? 0 : cli_fail(2, "'%s' is neither a run id, a tag, nor the commit of a complete run", ref);
}

/* Compare two runs (ids, tags or commits) with the gate's statistics. */
static int cmd_compare(int argc, char **argv) {
    const char *db = CLI_DEFAULT_DB, *fmt = "md", *pos[2], *gate_file = "ci/gates.conf";
    long limit = 0;
    int force = 0;
    for (int i = 0; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--gate-file")) { /* taken out before the common parser sees it */
            gate_file = argv[i + 1];
            memmove(argv + i, argv + i + 2, sizeof(char *) * (size_t)(argc - i - 2));
            argc -= 2;
            break;
        }
    if (parse_read_opts(argc, argv, &db, &fmt, &limit, &force, pos, 2)) return 2;
    gate_conf gc;
    char err[512];
    int have_gc = gate_conf_load(gate_file, &gc, err, sizeof err) == 0;
    if (!have_gc && strcmp(gate_file, "ci/gates.conf")) return cli_fail(2, "%s", err);
    store *s;
    if (cli_open_existing(db, &s)) return 1;
    int64_t a, b;
    int rc = resolve_ref(s, pos[0], &a) || resolve_ref(s, pos[1], &b) ? 2 : compare_runs(s, a, b, force, have_gc ? &gc : NULL, stdout);
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
    if (!strcmp(cmd, "gate")) return cmd_gate(argc - 2, argv + 2);
    if (!strcmp(cmd, "micro")) return cmd_micro(argc - 2, argv + 2); /* hidden: the deterministic gate's workload */
    if (!strcmp(cmd, "tag")) return cmd_tag(argc - 2, argv + 2);
    if (!strcmp(cmd, "calibrate")) return cmd_calibrate(argc - 2, argv + 2);
    if (!strcmp(cmd, "trend")) return cmd_trend(argc - 2, argv + 2);
    if (!strcmp(cmd, "report")) return cmd_report(argc - 2, argv + 2);
    if (!strcmp(cmd, "dashboard")) return cmd_dashboard(argc - 2, argv + 2);
    if (!strcmp(cmd, "hw")) return cmd_hw(argc - 2, argv + 2);
    fprintf(stderr, "cortex-bench: unknown command '%s'\n", cmd);
    return usage();
}
