/*
 * report.c - `cortex-bench report RUN`: a markdown report of one run with
 * gnuplot charts (see report.h). Every chart is a data file (NAME.dat), a
 * gnuplot script (NAME.gp) that draws NAME.png and NAME.svg from it, and an
 * image link in report.md. Charts:
 *
 *   tps_per_prompt   per-request TPS by prompt, clustered with the baseline's
 *   ttft_cdf         TTFT distribution (CDF), baseline overlaid
 *   itl_cdf          inter-token latency distribution (CDF), baseline overlaid
 *   latency_time     trace replays: arrival time vs TTFT and end-to-end
 *   counters         counters per phase (prefill/decode), log scale
 *   adapter_ttft     TTFT p50/p99 per adapter
 *
 * A chart without data (e.g. latency over time for a closed-loop run) is not
 * written; report.md says why.
 */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "show.h"
#include "stats.h"

/* Most points a CDF curve is drawn with (evenly spaced ranks beyond that). */
#define RP_CDF_POINTS 2000
/* A latency axis spanning more than this ratio is drawn log-scaled. */
#define RP_LOG_RATIO 20.0

/* ---------------------------------------------------------------- helpers */

/* A text column, never NULL. */
static const char *rp_col(sqlite3_stmt *st, int i) {
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? (const char *)t : "";
}

/* A numeric column, NAN when NULL. */
static double rp_num(sqlite3_stmt *st, int i) {
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

/* Format a number with `prec` decimals into buf, or "–" when NAN. */
static const char *rp_fmt(char *buf, size_t n, double v, int prec) {
    if (isnan(v)) snprintf(buf, n, "–");
    else snprintf(buf, n, "%.*f", prec, v);
    return buf;
}

/* A growable array of doubles. */
typedef struct rp_vec {
    double *v;
    size_t n, cap;
} rp_vec;

/* Append x; -1 when out of memory. */
static int rp_vec_push(rp_vec *a, double x) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 256;
        double *v = realloc(a->v, cap * sizeof *v);
        if (!v) return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

/* Ascending order for qsort. */
static int rp_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A gnuplot string literal: single quotes, embedded quotes doubled. */
void report_gp_string(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputs("''", f);
        else if (*s == '\n' || *s == '\r') fputc(' ', f);
        else fputc(*s, f);
    }
    fputc('\'', f);
}

/* A quoted label field of a gnuplot data file. */
void report_dat_label(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) fputc(*s == '"' ? '\'' : ((unsigned char)*s < 0x20 ? ' ' : *s), f);
    fputc('"', f);
}

/* mkdir -p, then check the result is a directory. */
int report_mkdirs(const char *path, char *err, size_t errlen) {
    char buf[PATH_MAX];
    if (!*path) {
        snprintf(err, errlen, "empty directory name");
        return -1;
    }
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        snprintf(err, errlen, "%s: path too long", path);
        return -1;
    }
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p) continue;
        char c = *p;
        *p = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "cannot create directory %s: %s", buf, strerror(errno));
            return -1;
        }
        *p = c;
        if (!c) break;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: not a directory", path);
        return -1;
    }
    return 0;
}

/* Close a finished temporary file and rename it over `path`. */
int report_commit_file(FILE *f, const char *tmp, const char *path, char *err, size_t errlen) {
    int bad = fflush(f) != 0 || ferror(f);
    int e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        unlink(tmp);
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
        return -1;
    }
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Search $PATH for an executable `name`; 1 and its path in `out` if found. */
static int rp_which(const char *name, char *out, size_t n) {
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        if (len > 0 && (size_t)snprintf(out, n, "%.*s/%s", (int)len, path, name) < n && access(out, X_OK) == 0) {
            struct stat st;
            if (stat(out, &st) == 0 && S_ISREG(st.st_mode)) return 1;
        }
        path += len + (end != NULL);
    }
    return 0;
}

/* $CORTEX_GNUPLOT (a path or a name on $PATH), else gnuplot on $PATH. */
int report_gnuplot_find(char *path, size_t n) {
    const char *env = getenv("CORTEX_GNUPLOT");
    if (env && *env) {
        if (!strchr(env, '/')) return rp_which(env, path, n);
        struct stat st;
        if (access(env, X_OK) != 0 || stat(env, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
        return (size_t)snprintf(path, n, "%s", env) < n;
    }
    return rp_which("gnuplot", path, n);
}

/* The most useful line of gnuplot's stderr: the one naming the script line
 * ("FILE" line N: message), else the last non-empty one. */
static void rp_gnuplot_reason(const char *text, char *out, size_t n) {
    const char *best = NULL, *last = NULL;
    size_t best_len = 0, last_len = 0;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len && (p[len - 1] == '\r' || p[len - 1] == ' ')) len--;
        if (len) {
            last = p;
            last_len = len;
            if (!best && memmem(p, len, "\" line ", 7)) {
                best = p;
                best_len = len;
            }
        }
        p = e ? e + 1 : p + strlen(p);
    }
    if (!best) {
        best = last;
        best_len = last_len;
    }
    if (best) snprintf(out, n, "%.*s", (int)best_len, best);
    else snprintf(out, n, "no message");
}

/* fork + exec gnuplot SCRIPT in DIR, stderr captured for the error message. */
int report_gnuplot_run(const char *gnuplot, const char *dir, const char *script, char *err, size_t errlen) {
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "gnuplot: pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "gnuplot: fork: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        /* Child: stdin and stdout from/to /dev/null, stderr into the pipe. */
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
        }
        dup2(fd[1], 2);
        if (chdir(dir) != 0) {
            dprintf(2, "cannot enter %s: %s\n", dir, strerror(errno));
            _exit(126);
        }
        execl(gnuplot, "gnuplot", script, (char *)NULL);
        dprintf(2, "cannot run %s: %s\n", gnuplot, strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    char text[8192];
    size_t used = 0;
    for (;;) {
        char chunk[4096];
        ssize_t got = read(fd[0], chunk, sizeof chunk);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        size_t take = (size_t)got < sizeof text - 1 - used ? (size_t)got : sizeof text - 1 - used;
        memcpy(text + used, chunk, take);
        used += take;
    }
    text[used] = 0;
    close(fd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            snprintf(err, errlen, "gnuplot: waitpid: %s", strerror(errno));
            return -1;
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    char why[512];
    rp_gnuplot_reason(text, why, sizeof why);
    if (WIFSIGNALED(status))
        snprintf(err, errlen, "gnuplot (%s) killed by signal %d on %s/%s: %s", gnuplot, WTERMSIG(status), dir, script, why);
    else
        snprintf(err, errlen, "gnuplot (%s) failed (exit %d) on %s/%s: %s", gnuplot, WEXITSTATUS(status), dir, script,
                 why);
    return -1;
}

/* ---------------------------------------------------------------- data */

/* One item (prompt, trace request, synthetic test): means over repetitions. */
typedef struct rp_item {
    char item[64];
    int adapter, prompt_tokens, n, n_err, stable; /* stable: 1, 0, -1 unknown */
    double gen_tokens, queue, ttft, tpot, e2e, tps; /* NAN when no repetition served it */
    char error[200], hash[24];
} rp_item;

/* A run's identity and its items. */
typedef struct rp_run {
    int64_t id;
    char status[16], workload[256], kind[24], mode[16], commit[48], key[80], started[40], model[160], type[16];
    int dirty, reps, threads;
    rp_item *items;
    int n_items;
} rp_run;

/* A chart: written (data + script), rendered (images exist), or why not. */
typedef struct rp_chart {
    const char *stem, *title;
    int made, rendered;
    char why[256];  /* not made: why; made: a note for the reader (may be empty) */
} rp_chart;

enum { CH_TPS, CH_TTFT, CH_ITL, CH_TIME, CH_COUNTERS, CH_ADAPTERS, CH_N };

/* One counter over the phases prefill, decode, total. */
typedef struct rp_counter {
    char name[48], unit[16];
    int ok[3], seen[3];
    double v[3];
    char reason[3][200];
} rp_counter;

static const char *const RP_PHASES[3] = {"prefill", "decode", "total"};

/* Everything a report is made from. */
typedef struct rp_ctx {
    sqlite3 *db;
    store *s;
    char dir[PATH_MAX];
    rp_run run, base;  /* base.id == 0: no baseline */
    rp_chart charts[CH_N];
    rp_counter *counters;
    int n_counters;
    char *err;
    size_t errlen;
} rp_ctx;

/* Set the error message from SQLite and return -1. */
static int rp_db_fail(rp_ctx *c, const char *what) {
    snprintf(c->err, c->errlen, "report: %s: %s", what, sqlite3_errmsg(c->db));
    return -1;
}

/* Load a run's identity. 1 found, 0 missing, -1 error. */
static int rp_load_run(sqlite3 *db, int64_t id, rp_run *r) {
    sqlite3_stmt *st;
    memset(r, 0, sizeof *r);
    r->id = id;
    const char *sql = "SELECT status, workload, workload_kind, mode, git_commit, git_dirty, compare_key, started_at,"
                      " model_name, model_type, reps, threads FROM runs WHERE id = ?";
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
    sqlite3_bind_int64(st, 1, id);
    int found = sqlite3_step(st) == SQLITE_ROW;
    if (found) {
        snprintf(r->status, sizeof r->status, "%s", rp_col(st, 0));
        snprintf(r->workload, sizeof r->workload, "%s", rp_col(st, 1));
        snprintf(r->kind, sizeof r->kind, "%s", rp_col(st, 2));
        snprintf(r->mode, sizeof r->mode, "%s", rp_col(st, 3));
        snprintf(r->commit, sizeof r->commit, "%s", rp_col(st, 4));
        r->dirty = sqlite3_column_int(st, 5);
        snprintf(r->key, sizeof r->key, "%s", rp_col(st, 6));
        snprintf(r->started, sizeof r->started, "%s", rp_col(st, 7));
        snprintf(r->model, sizeof r->model, "%s", rp_col(st, 8));
        snprintf(r->type, sizeof r->type, "%s", rp_col(st, 9));
        r->reps = sqlite3_column_int(st, 10);
        r->threads = sqlite3_column_int(st, 11);
    }
    sqlite3_finalize(st);
    return found;
}

/* Load a run's items: per item, means over the repetitions that served it.
 * For synthetic tests the item's TPS is the test's `tps` (mean over reps). */
static int rp_load_items(sqlite3 *db, rp_run *r) {
    sqlite3_stmt *st;
    const char *sql =
        "SELECT min(q.item), max(q.adapter), max(q.prompt_tokens),"
        " avg(CASE WHEN q.error IS NULL THEN q.gen_tokens END), avg(CASE WHEN q.error IS NULL THEN q.queue_ms END),"
        " avg(q.ttft_ms), avg(q.tpot_ms), avg(q.e2e_ms),"
        " avg(CASE WHEN q.error IS NULL AND q.e2e_ms > q.queue_ms THEN q.gen_tokens / ((q.e2e_ms - q.queue_ms) / 1000.0) END),"
        " max(q.error), count(*), sum(q.error IS NOT NULL), max(c.token_hash), max(c.stable)"
        " FROM requests q LEFT JOIN canaries c ON c.run_id = q.run_id AND c.item = q.item"
        " WHERE q.run_id = ? GROUP BY q.idx ORDER BY q.idx";
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
    sqlite3_bind_int64(st, 1, r->id);
    int cap = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (r->n_items == cap) {
            cap = cap ? cap * 2 : 32;
            rp_item *v = realloc(r->items, (size_t)cap * sizeof *v);
            if (!v) {
                sqlite3_finalize(st);
                return -1;
            }
            r->items = v;
        }
        rp_item *it = &r->items[r->n_items++];
        memset(it, 0, sizeof *it);
        snprintf(it->item, sizeof it->item, "%s", rp_col(st, 0));
        it->adapter = sqlite3_column_int(st, 1);
        it->prompt_tokens = sqlite3_column_int(st, 2);
        it->gen_tokens = rp_num(st, 3);
        it->queue = rp_num(st, 4);
        it->ttft = rp_num(st, 5);
        it->tpot = rp_num(st, 6);
        it->e2e = rp_num(st, 7);
        it->tps = rp_num(st, 8);
        snprintf(it->error, sizeof it->error, "%s", rp_col(st, 9));
        it->n = sqlite3_column_int(st, 10);
        it->n_err = sqlite3_column_int(st, 11);
        snprintf(it->hash, sizeof it->hash, "%s", rp_col(st, 12));
        it->stable = sqlite3_column_type(st, 13) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 13);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return -1;
    if (!strcmp(r->mode, "synthetic")) {
        if (sqlite3_prepare_v2(db, "SELECT avg(value) FROM rep_metrics WHERE run_id = ? AND name = 'tps'", -1, &st,
                               NULL) != SQLITE_OK)
            return -1;
        sqlite3_bind_int64(st, 1, r->id);
        double tps = sqlite3_step(st) == SQLITE_ROW ? rp_num(st, 0) : NAN;
        sqlite3_finalize(st);
        for (int i = 0; i < r->n_items; i++) r->items[i].tps = tps;
    }
    return 0;
}

/* Load the counters of the run: per counter and phase, the mean over the
 * repetitions when every repetition counted it, else missing with a reason. */
static int rp_load_counters(rp_ctx *c) {
    sqlite3_stmt *st;
    const char *sql = "SELECT phase, name, max(unit), count(*), sum(status = 'ok'),"
                      " avg(CASE WHEN status = 'ok' THEN value END), max(reason), min(rowid) AS first"
                      " FROM counters WHERE run_id = ? GROUP BY phase, name ORDER BY first";
    if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) != SQLITE_OK) return rp_db_fail(c, "counters");
    sqlite3_bind_int64(st, 1, c->run.id);
    int cap = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int ph = -1;
        for (int p = 0; p < 3; p++)
            if (!strcmp(rp_col(st, 0), RP_PHASES[p])) ph = p;
        if (ph < 0) continue;
        rp_counter *k = NULL;
        for (int i = 0; i < c->n_counters; i++)
            if (!strcmp(c->counters[i].name, rp_col(st, 1))) k = &c->counters[i];
        if (!k) {
            if (c->n_counters == cap) {
                cap = cap ? cap * 2 : 16;
                rp_counter *v = realloc(c->counters, (size_t)cap * sizeof *v);
                if (!v) {
                    sqlite3_finalize(st);
                    snprintf(c->err, c->errlen, "report: out of memory");
                    return -1;
                }
                c->counters = v;
            }
            k = &c->counters[c->n_counters++];
            memset(k, 0, sizeof *k);
            snprintf(k->name, sizeof k->name, "%s", rp_col(st, 1));
            snprintf(k->unit, sizeof k->unit, "%s", rp_col(st, 2));
        }
        int n = sqlite3_column_int(st, 3), n_ok = sqlite3_column_int(st, 4);
        k->seen[ph] = 1;
        k->ok[ph] = n > 0 && n_ok == n;
        k->v[ph] = rp_num(st, 5);
        if (!k->ok[ph]) {
            if (n_ok > 0)
                snprintf(k->reason[ph], sizeof k->reason[ph], "counted in %d of %d repetitions: %s", n_ok, n,
                         rp_col(st, 6));
            else
                snprintf(k->reason[ph], sizeof k->reason[ph], "%s", *rp_col(st, 6) ? rp_col(st, 6) : "not counted");
        }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : rp_db_fail(c, "counters");
}

/* ---------------------------------------------------------------- charts */

/* Open DIR/STEM.EXT for writing; NULL with a message. */
static FILE *rp_open(rp_ctx *c, const char *stem, const char *ext) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s.%s", c->dir, stem, ext);
    FILE *f = fopen(path, "w");
    if (!f) snprintf(c->err, c->errlen, "cannot write %s: %s", path, strerror(errno));
    return f;
}

/* Close a file written by rp_open; -1 with a message if writing failed. */
static int rp_close(rp_ctx *c, FILE *f, const char *stem, const char *ext) {
    int bad = fflush(f) != 0 || ferror(f);
    int e = errno;
    if (fclose(f) != 0) bad = 1;
    if (bad) snprintf(c->err, c->errlen, "cannot write %s/%s.%s: %s", c->dir, stem, ext, strerror(e));
    return bad ? -1 : 0;
}

/* Script prologue: what it draws, and the PNG terminal (pngcairo when this
 * gnuplot has it, else png). */
static void rp_gp_begin(FILE *f, const rp_chart *ch, int w, int h) {
    fprintf(f, "# %s.gp - %s\n# Written by cortex-bench report. Re-plot (in this directory): gnuplot %s.gp\n", ch->stem,
            ch->title, ch->stem);
    fprintf(f, "if (strstrt(GPVAL_TERMINALS, ' pngcairo ') > 0) {\n"
               "    set terminal pngcairo size %d,%d noenhanced font 'sans,10' background rgb 'white'\n"
               "} else {\n"
               "    set terminal png size %d,%d noenhanced background rgb 'white'\n"
               "}\n"
               "set output '%s.png'\n"
               "set encoding utf8\n"
               "set border 3\nset tics nomirror\n",
            w, h, w, h, ch->stem);
}

/* Script epilogue: the same plot again as SVG. */
static void rp_gp_end(FILE *f, const rp_chart *ch, int w, int h) {
    fprintf(f, "set terminal svg size %d,%d noenhanced font 'sans,10' background rgb 'white'\n"
               "set output '%s.svg'\nreplot\nunset output\n",
            w, h, ch->stem);
}

/* Legend label for a run: "run 5" or "baseline: run 3". */
static void rp_run_label(char *buf, size_t n, const rp_run *r, int baseline) {
    snprintf(buf, n, "%srun %lld (%.8s%s)", baseline ? "baseline: " : "", (long long)r->id,
             *r->commit ? r->commit : "no commit", r->dirty ? "+dirty" : "");
}

/* (a) Per-request TPS by prompt, mean over repetitions; the baseline's bars
 * beside them when its prompts match by name. */
static int rp_chart_tps(rp_ctx *c, rp_chart *ch) {
    int n_ok = 0, n_base = 0, longest = 0;
    double *bv = calloc((size_t)(c->run.n_items ? c->run.n_items : 1), sizeof *bv);
    if (!bv) return snprintf(c->err, c->errlen, "report: out of memory"), -1;
    for (int i = 0; i < c->run.n_items; i++) {
        const rp_item *it = &c->run.items[i];
        n_ok += !isnan(it->tps);
        int len = (int)strlen(it->item);
        if (len > longest) longest = len;
        bv[i] = NAN;
        for (int j = 0; j < c->base.n_items; j++)
            if (!strcmp(c->base.items[j].item, it->item)) bv[i] = c->base.items[j].tps;
        n_base += !isnan(bv[i]);
    }
    if (!n_ok) {
        snprintf(ch->why, sizeof ch->why, "no request of this run was served");
        free(bv);
        return 0;
    }
    if (c->base.id && !n_base)
        snprintf(ch->why, sizeof ch->why, "baseline run %lld served none of these prompts, so it is not shown",
                 (long long)c->base.id);
    FILE *f = rp_open(c, ch->stem, "dat");
    if (!f) {
        free(bv);
        return -1;
    }
    int synth = !strcmp(c->run.mode, "synthetic");
    fprintf(f, "# %s\n# item\trun_%lld_tps%s\n", ch->title, (long long)c->run.id, n_base ? "\tbaseline_tps" : "");
    for (int i = 0; i < c->run.n_items; i++) {
        const rp_item *it = &c->run.items[i];
        report_dat_label(f, it->item);
        if (isnan(it->tps)) fprintf(f, "\t?");
        else fprintf(f, "\t%.6g", it->tps);
        if (n_base) {
            if (isnan(bv[i])) fprintf(f, "\t?");
            else fprintf(f, "\t%.6g", bv[i]);
        }
        fputc('\n', f);
    }
    free(bv);
    if (rp_close(c, f, ch->stem, "dat")) return -1;
    if (!(f = rp_open(c, ch->stem, "gp"))) return -1;
    int w = c->run.n_items > 24 ? 1200 : 900;
    rp_gp_begin(f, ch, w, 480);
    fprintf(f, "set title ");
    report_gp_string(f, synth ? "Test throughput (mean over repetitions)"
                              : "Per-request TPS by prompt (mean over repetitions; failed requests have no bar)");
    fprintf(f, "\nset ylabel ");
    report_gp_string(f, synth ? "tokens/s (the test's tps)" : "tokens/s (generated tokens / service time)");
    fprintf(f, "\nset xlabel ");
    report_gp_string(f, synth ? "test" : "prompt");
    fputc('\n', f);
    fprintf(f, "set datafile missing '?'\nset style data histograms\nset style histogram clustered gap 1\n"
               "set style fill solid 0.85 border rgb '#333333'\nset boxwidth 0.9 relative\n"
               "set grid ytics lc rgb '#dddddd'\nset yrange [0:*]\nset key outside top center horizontal\n");
    if (c->run.n_items > 12 || longest > 8) fprintf(f, "set xtics rotate by -45 left\n");
    fprintf(f, "set xrange [-0.6:%.1f]\n", c->run.n_items - 0.4);
    /* Mark the prompts that failed in every repetition (no bar). */
    for (int i = 0; i < c->run.n_items; i++)
        if (isnan(c->run.items[i].tps) && c->run.items[i].n_err)
            fprintf(f, "set label %d 'failed' at %d, graph 0.03 left rotate by 90 tc rgb '#b00000'\n", i + 1, i);
    char lr[96], lb[96];
    rp_run_label(lr, sizeof lr, &c->run, 0);
    rp_run_label(lb, sizeof lb, &c->base, 1);
    if (n_base) {
        fprintf(f, "plot '%s.dat' using 3:xtic(1) title ", ch->stem);
        report_gp_string(f, lb);
        fprintf(f, " lc rgb '#a6a6a6', '' using 2 title ");
        report_gp_string(f, lr);
        fprintf(f, " lc rgb '#1f77b4'\n");
    } else {
        fprintf(f, "plot '%s.dat' using 2:xtic(1) title ", ch->stem);
        report_gp_string(f, lr);
        fprintf(f, " lc rgb '#1f77b4'\n");
    }
    rp_gp_end(f, ch, w, 480);
    if (rp_close(c, f, ch->stem, "gp")) return -1;
    ch->made = 1;
    return 0;
}

/* Latency samples of a run: TTFT of every served request, or every
 * inter-token gap of every served request (`itl`), all repetitions. */
static int rp_samples(rp_ctx *c, int64_t run, int itl, rp_vec *out) {
    sqlite3_stmt *st;
    const char *sql = itl ? "SELECT itl_ms FROM requests WHERE run_id = ? AND error IS NULL AND itl_ms IS NOT NULL"
                          : "SELECT ttft_ms FROM requests WHERE run_id = ? AND error IS NULL AND ttft_ms IS NOT NULL";
    if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) != SQLITE_OK) return rp_db_fail(c, "requests");
    sqlite3_bind_int64(st, 1, run);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (!itl) {
            if (rp_vec_push(out, sqlite3_column_double(st, 0))) break;
            continue;
        }
        /* A JSON array of numbers, as the runner writes it. */
        const char *p = rp_col(st, 0);
        while (*p) {
            if (*p == '[' || *p == ']' || *p == ',' || *p == ' ' || *p == '\n' || *p == '\t') {
                p++;
                continue;
            }
            char *end;
            double v = strtod(p, &end);
            if (end == p) break; /* not a number: stop reading this array */
            if (isfinite(v) && rp_vec_push(out, v)) break;
            p = end;
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) return rp_db_fail(c, "requests");
    if (rc == SQLITE_ROW) return snprintf(c->err, c->errlen, "report: out of memory"), -1;
    if (out->n) qsort(out->v, out->n, sizeof *out->v, rp_cmp_double);
    return 0;
}

/* Write one CDF block: (x, fraction <= x), starting at (x0, 0), at most
 * RP_CDF_POINTS points (evenly spaced ranks, always the last). */
static void rp_cdf_block(FILE *f, const rp_vec *v, const char *what) {
    fprintf(f, "# %s: value\tfraction (%zu samples)\n", what, v->n);
    fprintf(f, "%.6g\t0\n", v->v[0]);
    size_t step = v->n > RP_CDF_POINTS ? (v->n + RP_CDF_POINTS - 1) / RP_CDF_POINTS : 1;
    for (size_t i = 0; i < v->n; i += step) fprintf(f, "%.6g\t%.6g\n", v->v[i], (double)(i + 1) / (double)v->n);
    if ((v->n - 1) % step) fprintf(f, "%.6g\t1\n", v->v[v->n - 1]);
}

/* (b) TTFT and (c) ITL distributions as CDFs, the baseline's overlaid. */
static int rp_chart_cdf(rp_ctx *c, rp_chart *ch, int itl) {
    if (!itl && !strcmp(c->run.mode, "synthetic")) {
        snprintf(ch->why, sizeof ch->why, "synthetic test: no requests to time to a first token");
        return 0;
    }
    rp_vec a = {0}, b = {0};
    int rc = -1;
    if (rp_samples(c, c->run.id, itl, &a) || (c->base.id && rp_samples(c, c->base.id, itl, &b))) goto out;
    rc = 0;
    if (a.n == 0) {
        snprintf(ch->why, sizeof ch->why, itl ? "no inter-token gaps: no request generated two tokens"
                                              : "no request of this run was served");
        goto out;
    }
    if (c->base.id && !b.n)
        snprintf(ch->why, sizeof ch->why, "baseline run %lld has no samples, so it is not shown", (long long)c->base.id);
    rc = -1;
    FILE *f = rp_open(c, ch->stem, "dat");
    if (!f) goto out;
    const char *unit = itl ? "inter-token gap (ms)" : "time to first token (ms)";
    char lr[96], lb[96];
    rp_run_label(lr, sizeof lr, &c->run, 0);
    rp_run_label(lb, sizeof lb, &c->base, 1);
    fprintf(f, "# %s\n", ch->title);
    rp_cdf_block(f, &a, lr);
    if (b.n) {
        fprintf(f, "\n\n");
        rp_cdf_block(f, &b, lb);
    }
    if (rp_close(c, f, ch->stem, "dat")) goto out;
    if (!(f = rp_open(c, ch->stem, "gp"))) goto out;
    double lo = a.v[0], hi = a.v[a.n - 1];
    if (b.n) {
        lo = fmin(lo, b.v[0]);
        hi = fmax(hi, b.v[b.n - 1]);
    }
    rp_gp_begin(f, ch, 900, 480);
    fprintf(f, "set title '%s'\n", itl ? "Inter-token latency: CDF of every gap of every request, all repetitions"
                                       : "Time to first token: CDF over every request, all repetitions");
    fprintf(f, "set xlabel '%s%s'\nset ylabel 'fraction of %s <= x'\n", unit, lo > 0 && hi / lo > RP_LOG_RATIO ? ", log scale" : "",
            itl ? "gaps" : "requests");
    if (lo > 0 && hi / lo > RP_LOG_RATIO) fprintf(f, "set logscale x\nset xrange [%.6g:%.6g]\n", lo / 1.25, hi * 1.25);
    else if (hi > lo) fprintf(f, "set xrange [%.6g:%.6g]\n", fmax(0, lo - (hi - lo) * 0.05), hi + (hi - lo) * 0.05);
    fprintf(f, "set yrange [0:1.02]\nset ytics 0.1\nset grid lc rgb '#dddddd'\nset key top left box opaque\n");
    char ta[200], tb[200];
    snprintf(ta, sizeof ta, "%s: n=%zu, p50 %.3g ms, p99 %.3g ms", lr, a.n, stats_percentile(a.v, a.n, 50),
             stats_percentile(a.v, a.n, 99));
    fprintf(f, "plot '%s.dat' index 0 using 1:2 with steps lw 2 lc rgb '#1f77b4' title ", ch->stem);
    report_gp_string(f, ta);
    if (b.n) {
        snprintf(tb, sizeof tb, "%s: n=%zu, p50 %.3g ms, p99 %.3g ms", lb, b.n, stats_percentile(b.v, b.n, 50),
                 stats_percentile(b.v, b.n, 99));
        fprintf(f, ", '' index 1 using 1:2 with steps lw 2 dt 2 lc rgb '#7f7f7f' title ");
        report_gp_string(f, tb);
    }
    fputc('\n', f);
    rp_gp_end(f, ch, 900, 480);
    if (rp_close(c, f, ch->stem, "gp")) goto out;
    ch->made = 1;
    rc = 0;
out:
    free(a.v);
    free(b.v);
    return rc;
}

/* (d) Trace replays: arrival time against TTFT and end-to-end latency, one
 * point per served request of every repetition. */
static int rp_chart_time(rp_ctx *c, rp_chart *ch) {
    if (strcmp(c->run.kind, "trace") && strcmp(c->run.mode, "open")) {
        snprintf(ch->why, sizeof ch->why, "not a trace replay");
        return 0;
    }
    sqlite3_stmt *st;
    const char *sql = "SELECT arrival_ms / 1000.0, ttft_ms, e2e_ms, rep, item, error FROM requests WHERE run_id = ?"
                      " ORDER BY rep, idx";
    if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) != SQLITE_OK) return rp_db_fail(c, "requests");
    sqlite3_bind_int64(st, 1, c->run.id);
    FILE *f = rp_open(c, ch->stem, "dat");
    if (!f) {
        sqlite3_finalize(st);
        return -1;
    }
    fprintf(f, "# %s\n# arrival_s\tttft_ms\te2e_ms\trep\titem\n", ch->title);
    int n = 0, n_err = 0, rc;
    double lo = INFINITY, hi = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*rp_col(st, 5) || sqlite3_column_type(st, 1) == SQLITE_NULL || sqlite3_column_type(st, 2) == SQLITE_NULL) {
            n_err++;
            continue;
        }
        double t = sqlite3_column_double(st, 1), e = sqlite3_column_double(st, 2);
        fprintf(f, "%.6f\t%.6g\t%.6g\t%d\t", sqlite3_column_double(st, 0), t, e, sqlite3_column_int(st, 3));
        report_dat_label(f, rp_col(st, 4));
        fputc('\n', f);
        lo = fmin(lo, fmin(t, e));
        hi = fmax(hi, fmax(t, e));
        n++;
    }
    sqlite3_finalize(st);
    if (rp_close(c, f, ch->stem, "dat")) return -1;
    if (rc != SQLITE_DONE) return rp_db_fail(c, "requests");
    if (!n) {
        snprintf(ch->why, sizeof ch->why, "no request of this trace replay was served (%d failed)", n_err);
        return 0;
    }
    if (n_err) snprintf(ch->why, sizeof ch->why, "%d failed request(s) have no latency and are not plotted", n_err);
    if (!(f = rp_open(c, ch->stem, "gp"))) return -1;
    int logy = lo > 0 && hi / lo > RP_LOG_RATIO;
    rp_gp_begin(f, ch, 900, 480);
    fprintf(f, "set title 'Latency over time: one point per served request (%d repetition%s overlaid)'\n", c->run.reps,
            c->run.reps == 1 ? "" : "s");
    fprintf(f, "set xlabel 'arrival time in the trace (s)'\nset ylabel 'latency (ms%s)'\n", logy ? ", log scale" : "");
    if (logy) fprintf(f, "set logscale y\n");
    else fprintf(f, "set yrange [0:*]\n");
    fprintf(f, "set grid lc rgb '#dddddd'\nset key outside top center horizontal\n"
               "plot '%s.dat' using 1:3 with points pt 7 ps 0.9 lc rgb '#ff7f0e' title 'end-to-end',"
               " '' using 1:2 with points pt 9 ps 1.1 lc rgb '#1f77b4' title 'time to first token'\n",
            ch->stem);
    rp_gp_end(f, ch, 900, 480);
    if (rp_close(c, f, ch->stem, "gp")) return -1;
    ch->made = 1;
    return 0;
}

/* (e) Counters per phase: prefill and decode side by side, log scale. Only
 * counted values are plotted; the missing ones are listed in report.md. */
static int rp_chart_counters(rp_ctx *c, rp_chart *ch) {
    int n = 0;
    for (int i = 0; i < c->n_counters; i++) {
        const rp_counter *k = &c->counters[i];
        n += (k->ok[0] && k->v[0] > 0) || (k->ok[1] && k->v[1] > 0);
    }
    if (!n) {
        snprintf(ch->why, sizeof ch->why, c->n_counters ? "no counter was counted in the prefill or decode phase"
                                                        : "the run has no counters");
        return 0;
    }
    FILE *f = rp_open(c, ch->stem, "dat");
    if (!f) return -1;
    fprintf(f, "# %s\n# counter\tprefill\tdecode   ('?': missing or zero, not plotted)\n", ch->title);
    for (int i = 0; i < c->n_counters; i++) {
        const rp_counter *k = &c->counters[i];
        if (!((k->ok[0] && k->v[0] > 0) || (k->ok[1] && k->v[1] > 0))) continue;
        char label[80];
        snprintf(label, sizeof label, "%s%s%s%s", k->name, strcmp(k->unit, "count") && *k->unit ? " (" : "",
                 strcmp(k->unit, "count") && *k->unit ? k->unit : "", strcmp(k->unit, "count") && *k->unit ? ")" : "");
        report_dat_label(f, label);
        for (int p = 0; p < 2; p++) {
            if (k->ok[p] && k->v[p] > 0) fprintf(f, "\t%.6g", k->v[p]);
            else fprintf(f, "\t?");
        }
        fputc('\n', f);
    }
    if (rp_close(c, f, ch->stem, "dat")) return -1;
    if (!(f = rp_open(c, ch->stem, "gp"))) return -1;
    rp_gp_begin(f, ch, 900, 520);
    fprintf(f, "set title 'Counters per phase (mean over repetitions; missing counters are not plotted)'\n"
               "set ylabel 'events per phase (log scale)'\nset xlabel 'counter'\n"
               "set datafile missing '?'\nset style data histograms\nset style histogram clustered gap 1\n"
               "set style fill solid 0.85 border rgb '#333333'\nset boxwidth 0.9 relative\n"
               "set logscale y\nset format y '%%.0e'\nset grid ytics lc rgb '#dddddd'\n"
               "set xtics rotate by -30 left\nset key outside top center horizontal\n"
               "plot '%s.dat' using 2:xtic(1) title 'prefill' lc rgb '#2ca02c', '' using 3 title 'decode' lc rgb '#9467bd'\n",
            ch->stem);
    rp_gp_end(f, ch, 900, 520);
    if (rp_close(c, f, ch->stem, "gp")) return -1;
    ch->made = 1;
    return 0;
}

/* (f) TTFT p50 and p99 per adapter (adapter_stats, all repetitions). */
static int rp_chart_adapters(rp_ctx *c, rp_chart *ch) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(c->db, "SELECT adapter, requests, ttft_p50, ttft_p99 FROM adapter_stats WHERE run_id = ?"
                                  " ORDER BY adapter", -1, &st, NULL) != SQLITE_OK)
        return rp_db_fail(c, "adapter_stats");
    sqlite3_bind_int64(st, 1, c->run.id);
    FILE *f = NULL;
    int n = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (!f) {
            if (!(f = rp_open(c, ch->stem, "dat"))) {
                sqlite3_finalize(st);
                return -1;
            }
            fprintf(f, "# %s\n# adapter (requests)\tttft_p50_ms\tttft_p99_ms\n", ch->title);
        }
        char label[64];
        snprintf(label, sizeof label, "%d (n=%d)", sqlite3_column_int(st, 0), sqlite3_column_int(st, 1));
        report_dat_label(f, label);
        double p50 = rp_num(st, 2), p99 = rp_num(st, 3);
        if (isnan(p50)) fprintf(f, "\t?");
        else fprintf(f, "\t%.6g", p50);
        if (isnan(p99)) fprintf(f, "\t?\n");
        else fprintf(f, "\t%.6g\n", p99);
        n++;
    }
    sqlite3_finalize(st);
    if (f && rp_close(c, f, ch->stem, "dat")) return -1;
    if (rc != SQLITE_DONE) return rp_db_fail(c, "adapter_stats");
    if (!n) {
        snprintf(ch->why, sizeof ch->why, "no per-adapter statistics (only trace replays have adapters)");
        return 0;
    }
    if (!(f = rp_open(c, ch->stem, "gp"))) return -1;
    rp_gp_begin(f, ch, 900, 480);
    fprintf(f, "set title 'Time to first token per adapter (all repetitions)'\n"
               "set ylabel 'TTFT (ms)'\nset xlabel 'adapter id (served requests)'\n"
               "set datafile missing '?'\nset style data histograms\nset style histogram clustered gap 1\n"
               "set style fill solid 0.85 border rgb '#333333'\nset boxwidth 0.9 relative\n"
               "set grid ytics lc rgb '#dddddd'\nset yrange [0:*]\nset key outside top center horizontal\n"
               "plot '%s.dat' using 2:xtic(1) title 'TTFT p50' lc rgb '#1f77b4', '' using 3 title 'TTFT p99' lc rgb '#d62728'\n",
            ch->stem);
    rp_gp_end(f, ch, 900, 480);
    if (rp_close(c, f, ch->stem, "gp")) return -1;
    ch->made = 1;
    return 0;
}

/* ---------------------------------------------------------------- report.md */

/* Run header: identity, provenance, environment (as `show` prints it). */
static int rp_md_header(rp_ctx *c, FILE *out) {
    fprintf(out, "## Run\n\n");
    if (show_run_facts(c->db, c->run.id, out)) return rp_db_fail(c, "runs");
    if (c->base.id) {
        int same_key = *c->run.key && !strcmp(c->run.key, c->base.key);
        int same_wl = !strcmp(c->run.workload, c->base.workload);
        fprintf(out, "- baseline: run %lld (`%s`, commit %.10s%s, started %s, %s)%s%s\n", (long long)c->base.id,
                c->base.workload, c->base.commit, c->base.dirty ? " dirty" : "", c->base.started, c->base.status,
                same_key && same_wl ? ", same workload and configuration (comparable)" : "",
                !same_key ? ", **different configuration** (compare_key differs: CPU, model, threads, build or context;"
                            " see `cortex-bench compare`)"
                : !same_wl ? ", **different workload**" : "");
    }
    fprintf(out, "\n");
    show_kv(c->db, c->run.id, out);
    return 0;
}

/* Metrics of the baseline comparison table, in order. */
static const struct { const char *name, *label; int higher_better; } RP_HEAD[] = {
    {"tps", "throughput (tok/s)", 1},
    {"output_tps", "output throughput (tok/s)", 1},
    {"total_tps", "total throughput (tok/s)", 1},
    {"prefill_tps", "prefill (tok/s)", 1},
    {"decode_tps", "decode (tok/s)", 1},
    {"req_tps_median", "per-request TPS, median (tok/s)", 1},
    {"ttft_ms_p50", "TTFT p50 (ms)", 0},
    {"ttft_ms_p99", "TTFT p99 (ms)", 0},
    {"itl_ms_p50", "ITL p50 (ms)", 0},
    {"itl_ms_p99", "ITL p99 (ms)", 0},
    {"e2e_ms_p50", "end-to-end p50 (ms)", 0},
    {"peak_rss_mib", "peak RSS (MiB)", 0},
    {"kv_prefix_hit_rate", "KV prefix hit rate", 1},
};

/* Median of a summary metric of a run, NAN if absent. */
static double rp_median(sqlite3 *db, int64_t run, const char *name) {
    sqlite3_stmt *st;
    double v = NAN;
    if (sqlite3_prepare_v2(db, "SELECT median FROM summary WHERE run_id = ? AND name = ?", -1, &st, NULL) != SQLITE_OK)
        return v;
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) v = rp_num(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* Headline medians of the run against the baseline's. */
static void rp_md_baseline(rp_ctx *c, FILE *out) {
    int any = 0;
    for (size_t i = 0; i < sizeof RP_HEAD / sizeof RP_HEAD[0]; i++) {
        double b = rp_median(c->db, c->base.id, RP_HEAD[i].name), r = rp_median(c->db, c->run.id, RP_HEAD[i].name);
        if (isnan(b) || isnan(r)) continue;
        if (!any++)
            fprintf(out, "### Against the baseline (medians)\n\n| metric | baseline run %lld | run %lld | change |\n"
                         "| --- | ---: | ---: | ---: |\n",
                    (long long)c->base.id, (long long)c->run.id);
        char ch[48] = "–";
        if (b != 0) {
            double d = r / b - 1;
            int better = RP_HEAD[i].higher_better ? d > 0 : d < 0;
            snprintf(ch, sizeof ch, "%+.1f %%%s", 100 * d, fabs(d) < 0.005 ? "" : better ? " (better)" : " (worse)");
        }
        fprintf(out, "| %s | %.2f | %.2f | %s |\n", RP_HEAD[i].label, b, r, ch);
    }
    if (any) fprintf(out, "\nChanges are between medians only; `cortex-bench compare %lld %lld` checks comparability"
                          " and correctness canaries.\n\n",
                     (long long)c->base.id, (long long)c->run.id);
    else fprintf(out, "_The baseline shares no headline metric with this run._\n\n");
}

/* The per-request table (means over repetitions), with the baseline's TPS. */
static void rp_md_requests(rp_ctx *c, FILE *out) {
    if (!c->run.n_items) {
        fprintf(out, "## Requests\n\n_No requests recorded._\n\n");
        return;
    }
    int base = c->base.id != 0;
    fprintf(out, "## Requests (mean over repetitions)\n\n| item | adapter | prompt tok | gen tok | queue ms | TTFT ms |"
                 " TPOT ms | e2e ms | TPS |%s canary |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |%s --- |\n",
            base ? " baseline TPS |" : "", base ? " ---: |" : "");
    for (int i = 0; i < c->run.n_items; i++) {
        const rp_item *it = &c->run.items[i];
        char b[8][32];
        fprintf(out, "| ");
        show_md_inline(out, it->item);
        if (it->adapter >= 0) snprintf(b[0], sizeof b[0], "%d", it->adapter);
        else b[0][0] = 0;
        fprintf(out, " | %s | %d | %s | %s | %s | %s | %s | %s |", b[0], it->prompt_tokens, rp_fmt(b[1], 32, it->gen_tokens, 0),
                rp_fmt(b[2], 32, it->queue, 2), rp_fmt(b[3], 32, it->ttft, 2), rp_fmt(b[4], 32, it->tpot, 2),
                rp_fmt(b[5], 32, it->e2e, 2), rp_fmt(b[6], 32, it->tps, 2));
        if (base) {
            double bt = NAN;
            for (int j = 0; j < c->base.n_items; j++)
                if (!strcmp(c->base.items[j].item, it->item)) bt = c->base.items[j].tps;
            fprintf(out, " %s |", rp_fmt(b[7], 32, bt, 2));
        }
        if (it->n_err) {
            fprintf(out, " error%s: ", it->n_err < it->n ? " in some repetitions" : "");
            show_md_inline(out, it->error);
            fprintf(out, " |\n");
        } else {
            fprintf(out, " %s%s |\n", it->hash, it->stable == 0 ? " (UNSTABLE)" : "");
        }
    }
    fprintf(out, "\nTPS = generated tokens / service time (end-to-end minus queueing); for synthetic tests, the test's"
                 " tps. `–`: no repetition served the request.\n\n");
}

/* The per-adapter table (trace runs). */
static void rp_md_adapters(rp_ctx *c, FILE *out) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(c->db, "SELECT adapter, requests, ttft_p50, ttft_p90, ttft_p99, itl_p50, itl_p90, itl_p99,"
                                  " e2e_p50 FROM adapter_stats WHERE run_id = ? ORDER BY adapter", -1, &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, c->run.id);
    int any = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (!any++)
            fprintf(out, "## Per adapter (all repetitions)\n\n| adapter | requests | TTFT p50 | TTFT p90 | TTFT p99 |"
                         " ITL p50 | ITL p90 | ITL p99 | e2e p50 |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        fprintf(out, "| %d | %d |", sqlite3_column_int(st, 0), sqlite3_column_int(st, 1));
        for (int k = 2; k <= 8; k++) {
            char b[32];
            fprintf(out, " %s |", rp_fmt(b, sizeof b, rp_num(st, k), 2));
        }
        fputc('\n', out);
    }
    sqlite3_finalize(st);
    if (any) fprintf(out, "\nLatencies in ms.\n\n");
}

/* The counters table per phase, then every missing counter with its reason. */
static void rp_md_counters(rp_ctx *c, FILE *out) {
    if (!c->n_counters) {
        fprintf(out, "## Counters\n\n_The run has no counters._\n\n");
        return;
    }
    fprintf(out, "## Counters (mean over repetitions)\n\n| counter | unit | prefill | decode | total |\n"
                 "| --- | --- | ---: | ---: | ---: |\n");
    int missing = 0;
    for (int i = 0; i < c->n_counters; i++) {
        const rp_counter *k = &c->counters[i];
        fprintf(out, "| %s | %s |", k->name, k->unit);
        for (int p = 0; p < 3; p++) {
            if (!k->seen[p]) fprintf(out, " |");
            else if (k->ok[p]) fprintf(out, " %.0f |", k->v[p]);
            else {
                fprintf(out, " missing |");
                missing++;
            }
        }
        fputc('\n', out);
    }
    fputc('\n', out);
    if (!missing) return;
    fprintf(out, "Missing counters (not plotted):\n\n");
    for (int i = 0; i < c->n_counters; i++) {
        const rp_counter *k = &c->counters[i];
        for (int p = 0; p < 3; p++) {
            if (!k->seen[p] || k->ok[p]) continue;
            /* One line per counter and reason: the phases sharing it listed together. */
            int first = 1;
            for (int q = 0; q < p; q++) first &= !(k->seen[q] && !k->ok[q] && !strcmp(k->reason[q], k->reason[p]));
            if (!first) continue;
            fprintf(out, "- `%s` (%s", k->name, RP_PHASES[p]);
            for (int q = p + 1; q < 3; q++)
                if (k->seen[q] && !k->ok[q] && !strcmp(k->reason[q], k->reason[p])) fprintf(out, ", %s", RP_PHASES[q]);
            fprintf(out, "): ");
            show_md_inline(out, k->reason[p]);
            fputc('\n', out);
        }
    }
    fputc('\n', out);
}

/* One chart in report.md: the PNG inline, links to the SVG, data and script. */
static void rp_md_chart(FILE *out, const rp_chart *ch) {
    fprintf(out, "### %s\n\n", ch->title);
    if (ch->rendered) fprintf(out, "![%s](%s.png)\n\n[SVG](%s.svg) · ", ch->title, ch->stem, ch->stem);
    fprintf(out, "[data](%s.dat) · [gnuplot script](%s.gp)\n\n", ch->stem, ch->stem);
    if (*ch->why) fprintf(out, "_Note: %s._\n\n", ch->why);
}

/* The charts section: drawn charts, then the ones that do not apply and why. */
static void rp_md_charts(rp_ctx *c, FILE *out, int have_gp, const char *gp_error) {
    fprintf(out, "## Charts\n\n");
    if (!have_gp)
        fprintf(out, "_Charts not drawn: gnuplot was not found (`apt-get install gnuplot-nox`). Their data (`*.dat`)"
                     " and gnuplot scripts (`*.gp`) are in this directory: `gnuplot NAME.gp` draws NAME.png and"
                     " NAME.svg._\n\n");
    else if (gp_error)
        fprintf(out, "_Some charts could not be drawn: %s_\n\n", gp_error);
    for (int i = 0; i < CH_N; i++)
        if (c->charts[i].made) rp_md_chart(out, &c->charts[i]);
    int skipped = 0;
    for (int i = 0; i < CH_N; i++) {
        const rp_chart *ch = &c->charts[i];
        if (ch->made) continue;
        if (!skipped++) fprintf(out, "Not applicable to this run:\n\n");
        fprintf(out, "- %s: %s\n", ch->title, ch->why);
    }
    if (skipped) fputc('\n', out);
}

/* ---------------------------------------------------------------- entry */

/* Free what a context holds. */
static void rp_free(rp_ctx *c) {
    free(c->run.items);
    free(c->base.items);
    free(c->counters);
}

/* Write report.md (via a temporary file). */
static int rp_write_md(rp_ctx *c, int have_gp, const char *gp_error) {
    char path[PATH_MAX + 32], tmp[PATH_MAX + 48];
    snprintf(path, sizeof path, "%s/report.md", c->dir);
    snprintf(tmp, sizeof tmp, "%s/report.md.tmp", c->dir);
    FILE *out = fopen(tmp, "w");
    if (!out) return snprintf(c->err, c->errlen, "cannot write %s: %s", tmp, strerror(errno)), -1;
    char now[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(out, "# cortex-bench report: run %lld\n\n", (long long)c->run.id);
    fprintf(out, "`%s` on %s (%s), %d thread%s. Generated %s by `cortex-bench report`", c->run.workload, c->run.model,
            c->run.type, c->run.threads, c->run.threads == 1 ? "" : "s", now);
    if (c->base.id) fprintf(out, ", against baseline run %lld", (long long)c->base.id);
    fprintf(out, ". Metric definitions: docs/metrics.md.\n\n");
    if (!strcmp(c->run.status, "incomplete"))
        fprintf(out, "> **This run is incomplete**: it was killed or is still running, so it has no results.\n\n");
    else if (strcmp(c->run.status, "complete"))
        fprintf(out, "> **This run %s** (the error is below): its results are partial or absent.\n\n", c->run.status);
    if (rp_md_header(c, out)) {
        fclose(out);
        unlink(tmp);
        return -1;
    }
    fprintf(out, "## Summary (over repetitions)\n\n");
    char serr[256];
    if (show_table(c->s, &c->run.id, 1, "md", 1, out, serr, sizeof serr)) fprintf(out, "_%s_\n", serr);
    fprintf(out, "\n");
    if (c->base.id) rp_md_baseline(c, out);
    rp_md_charts(c, out, have_gp, gp_error);
    rp_md_requests(c, out);
    rp_md_adapters(c, out);
    rp_md_counters(c, out);
    return report_commit_file(out, tmp, path, c->err, c->errlen);
}

/* Load the run (and baseline), write every chart's data and script, draw
 * them with gnuplot when it is there, then write report.md. */
int report_write(store *s, int64_t run_id, int64_t baseline_run, const char *out_dir, char *err, size_t errlen) {
    rp_ctx c;
    memset(&c, 0, sizeof c);
    c.s = s;
    c.db = store_db(s);
    c.err = err;
    c.errlen = errlen;
    static const struct { const char *stem, *title; } CH[CH_N] = {
        {"tps_per_prompt", "TPS per prompt"},
        {"ttft_cdf", "TTFT distribution (CDF)"},
        {"itl_cdf", "Inter-token latency distribution (CDF)"},
        {"latency_time", "Latency over time"},
        {"counters", "Counters per phase"},
        {"adapter_ttft", "TTFT per adapter"},
    };
    for (int i = 0; i < CH_N; i++) {
        c.charts[i].stem = CH[i].stem;
        c.charts[i].title = CH[i].title;
    }
    int rc = -1, found = rp_load_run(c.db, run_id, &c.run);
    if (found < 0) {
        rp_db_fail(&c, "runs");
        goto out;
    }
    if (!found) {
        snprintf(err, errlen, "no run %lld in the database", (long long)run_id);
        goto out;
    }
    if (baseline_run) {
        found = rp_load_run(c.db, baseline_run, &c.base);
        if (found <= 0) {
            if (found < 0) rp_db_fail(&c, "runs");
            else snprintf(err, errlen, "no baseline run %lld in the database", (long long)baseline_run);
            goto out;
        }
    }
    if (out_dir) snprintf(c.dir, sizeof c.dir, "%s", out_dir);
    else snprintf(c.dir, sizeof c.dir, "reports/%lld", (long long)run_id);
    if (report_mkdirs(c.dir, err, errlen)) goto out;
    if (rp_load_items(c.db, &c.run) || (c.base.id && rp_load_items(c.db, &c.base))) {
        rp_db_fail(&c, "requests");
        goto out;
    }
    if (rp_load_counters(&c)) goto out;

    /* Data and scripts; stale images of a previous report are removed so the
     * directory never shows a chart this report did not draw. */
    for (int i = 0; i < CH_N; i++) {
        static const char *const EXT[] = {"png", "svg", "dat", "gp"};
        for (int e = 0; e < 4; e++) {
            char p[PATH_MAX + 64];
            snprintf(p, sizeof p, "%s/%s.%s", c.dir, c.charts[i].stem, EXT[e]);
            unlink(p);
        }
    }
    if (rp_chart_tps(&c, &c.charts[CH_TPS]) || rp_chart_cdf(&c, &c.charts[CH_TTFT], 0) ||
        rp_chart_cdf(&c, &c.charts[CH_ITL], 1) || rp_chart_time(&c, &c.charts[CH_TIME]) ||
        rp_chart_counters(&c, &c.charts[CH_COUNTERS]) || rp_chart_adapters(&c, &c.charts[CH_ADAPTERS]))
        goto out;

    /* Render. */
    char gp[PATH_MAX], gp_err[768] = "";
    int have_gp = report_gnuplot_find(gp, sizeof gp);
    if (!have_gp) fprintf(stderr, "%s\n", REPORT_NO_GNUPLOT_MSG);
    for (int i = 0; have_gp && i < CH_N; i++) {
        rp_chart *ch = &c.charts[i];
        if (!ch->made) continue;
        char script[96], e1[512];
        snprintf(script, sizeof script, "%s.gp", ch->stem);
        if (report_gnuplot_run(gp, c.dir, script, e1, sizeof e1)) {
            if (!*gp_err) snprintf(gp_err, sizeof gp_err, "%s", e1);
            continue;
        }
        int ok = 1;
        for (int e = 0; e < 2; e++) {
            char p[PATH_MAX + 64];
            struct stat st;
            snprintf(p, sizeof p, "%s/%s.%s", c.dir, ch->stem, e ? "svg" : "png");
            if (stat(p, &st) != 0 || st.st_size == 0) {
                ok = 0;
                if (!*gp_err) snprintf(gp_err, sizeof gp_err, "gnuplot (%.200s) wrote no %.300s", gp, p);
            }
        }
        ch->rendered = ok;
    }
    if (rp_write_md(&c, have_gp, *gp_err ? gp_err : NULL)) goto out;
    if (*gp_err) {
        snprintf(err, errlen, "%s (report.md written without that chart)", gp_err);
        goto out;
    }
    rc = 0;
out:
    rp_free(&c);
    return rc;
}

/* A run id, or the best run carrying tag `ref` (see report.h). */
int report_resolve_run(store *s, const char *ref, int64_t run_id, int64_t *out, char *err, size_t errlen) {
    sqlite3 *db = store_db(s);
    char *end;
    errno = 0;
    long long id = strtoll(ref, &end, 10);
    if (*ref && !*end && !errno) {
        rp_run r;
        int found = id > 0 ? rp_load_run(db, id, &r) : 0;
        if (found <= 0) {
            snprintf(err, errlen, found < 0 ? "baseline: %s" : "no run %s in the database",
                     found < 0 ? sqlite3_errmsg(db) : ref);
            return -1;
        }
        *out = id;
        return 0;
    }
    /* A tag: prefer a run of the same configuration, then of the same workload. */
    sqlite3_stmt *st;
    const char *sql =
        "SELECT t.run_id FROM tags t JOIN runs r ON r.id = t.run_id, runs me WHERE t.name = ?1 AND me.id = ?2"
        " ORDER BY (r.compare_key IS me.compare_key AND r.workload = me.workload) DESC, r.workload = me.workload DESC,"
        " t.created_at DESC, t.run_id DESC LIMIT 1";
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "baseline: %s", sqlite3_errmsg(db));
        return -1;
    }
    sqlite3_bind_text(st, 1, ref, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, run_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *out = sqlite3_column_int64(st, 0);
    else if (rc == SQLITE_DONE) snprintf(err, errlen, "no run is tagged '%s' (a baseline is a run id or a tag)", ref);
    else snprintf(err, errlen, "baseline: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : -1;
}
