/*
 * cli_util.c - see cli_util.h.
 */
#include "cli_util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "cortex-bench: " + message, exit code `code`. */
int cli_fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cortex-bench: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

/* The flag of `c` called `a` (by name or alias), or NULL. */
static const cli_flag *cli_flag_find(const cli_command *c, const char *a) {
    for (const cli_flag *f = c->flags; f && f->name; f++)
        if (!strcmp(a, f->name) || (f->alias && !strcmp(a, f->alias))) return f;
    return NULL;
}

/* See cli_util.h. Flags are listed one per line, aliases first. */
void cli_usage(const cli_command *c, FILE *out) {
    fprintf(out, "usage: cortex-bench %s%s%s [options]\n  %s\n", c->name, *c->args ? " " : "", c->args, c->summary);
    fprintf(out, "\noptions:\n");
    for (const cli_flag *f = c->flags; f && f->name; f++) {
        char head[96];
        snprintf(head, sizeof head, "%s%s%s%s%s", f->alias ? f->alias : "", f->alias ? ", " : "", f->name,
                 f->value ? " " : "", f->value ? f->value : "");
        fprintf(out, "  %-28s %s\n", head, f->help);
    }
    fprintf(out, "  %-28s %s\n", "-h, --help", "print this help and exit");
    fprintf(out, "\nexample:\n  %s\n", c->example);
}

/* See cli_util.h. A lone "-" and anything not starting with '-' are
 * positional arguments, left to the command. */
int cli_command_main(const cli_command *c, int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            cli_usage(c, stdout);
            return 0;
        }
        if (a[0] != '-' || !a[1]) continue;
        const cli_flag *f = cli_flag_find(c, a);
        if (!f) return cli_fail(2, "%s: unknown option '%s' (cortex-bench %s --help lists them)", c->name, a, c->name);
        if (!f->value) continue;
        if (i + 1 >= argc) return cli_fail(2, "%s: %s needs a value (%s)", c->name, a, f->value);
        i++;
    }
    return c->run(argc, argv);
}

/* See cli_util.h. */
int cli_parse_flags(int argc, char **argv, const char *const *names, const char **vals, int n_names, const char **pos,
                    int max_pos, int *n_pos) {
    *n_pos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1]) {
            if (*n_pos >= max_pos) return cli_fail(2, "unexpected argument '%s'", a);
            pos[(*n_pos)++] = a;
            continue;
        }
        int k = -1;
        for (int j = 0; j < n_names; j++)
            if (!strcmp(a, names[j])) k = j;
        if (k < 0) return cli_fail(2, "unknown option '%s' (see cortex-bench --help)", a);
        if (i + 1 >= argc) return cli_fail(2, "%s needs a value", a);
        vals[k] = argv[++i];
    }
    return 0;
}

/* The reader of cli_parse_read_opts and cli_parse_show_opts: --requests is
 * a flag only where `requests` is given. */
static int parse_read(int argc, char **argv, const char **db, const char **fmt, long *limit, int *force, int *requests,
                      const char **pos, int max_pos) {
    int n_pos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--force")) { *force = 1; continue; }
        if (requests && !strcmp(a, "--requests")) { *requests = 1; continue; }
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

/* See cli_util.h. */
int cli_parse_read_opts(int argc, char **argv, const char **db, const char **fmt, long *limit, int *force,
                        const char **pos, int max_pos) {
    return parse_read(argc, argv, db, fmt, limit, force, NULL, pos, max_pos);
}

/* See cli_util.h. */
int cli_parse_show_opts(int argc, char **argv, const char **db, const char **fmt, int *requests, const char **run) {
    long limit = 0;
    int force = 0;
    return parse_read(argc, argv, db, fmt, &limit, &force, requests, run, 1);
}

/* A whole-string integer in [lo, hi], or one error line naming the flag. */
int cli_parse_int(const char *flag, const char *v, long lo, long hi, long *out) {
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

/* A whole-string number in [lo, hi], or one error line naming the flag. */
int cli_parse_double(const char *flag, const char *v, double lo, double hi, double *out) {
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

/* See cli_util.h: argv joined with spaces, for provenance (run and trace record it). */
void cli_join_argv(int argc, char **argv, char *out, size_t cap) {
    size_t k = 0;
    out[0] = 0;
    for (int i = 0; i < argc && k + 1 < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%s%s", i ? " " : "", argv[i]);
}

/* Make the directory holding `path` when it is the default reports/ folder. */
void cli_ensure_default_dir(const char *db) {
    if (!strcmp(db, CLI_DEFAULT_DB)) mkdir("reports", 0777);
}

/* Open an existing database read-write (migrating it), never creating one. */
int cli_open_existing(const char *path, store **s) {
    char err[512];
    if (access(path, F_OK) != 0) return cli_fail(1, "%s: no such database (run cortex-bench run first)", path);
    if (store_open(path, s, err, sizeof err)) return cli_fail(1, "%s", err);
    return 0;
}

int cli_parse_id(const char *v, int64_t *id) {
    long x;
    if (cli_parse_int("run id", v, 1, 0x7fffffffL, &x)) return -1;
    *id = x;
    return 0;
}


int cli_parse_id_quiet(const char *v, int64_t *id) {
    if (!v || !*v) return -1;
    int64_t x = 0;
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '9' || x > 0x7fffffffLL) return -1;
        x = x * 10 + (*p - '0');
    }
    if (x < 1 || x > 0x7fffffffLL) return -1;
    *id = x;
    return 0;
}
