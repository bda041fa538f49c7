/*
 * cli_util.c - see cli_util.h.
 */
#include "cli_util.h"

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

/* The parse of command c over the flag table. */
static cx_flags flags_of(const cli_command *c, const cx_flag *table, int n) {
    cx_flags p = {.prog = "cortex-bench", .cmd = c->name, .table = table, .n = n, .bit = c->bit, .max_pos = c->max_pos};
    return p;
}

/* See cli_util.h. */
void cli_usage(const cli_command *c, const cx_flag *table, int n, FILE *out) {
    void *d = calloc(1, c->opts_size);
    if (!d) return;
    c->init(d);
    cx_flags p = flags_of(c, table, n);
    fprintf(out, "usage: cortex-bench %s%s%s [options]\n  %s\n", c->name, *c->args ? " " : "", c->args, c->summary);
    fprintf(out, "\noptions:\n");
    cx_flags_help(&p, d, out);
    fprintf(out, "\nexample:\n  %s\n", c->example);
    free(d);
}

/* See cli_util.h. */
int cli_command_main(const cli_command *c, const cx_flag *table, int n, int argc, char **argv) {
    void *o = calloc(1, c->opts_size);
    if (!o) return cli_fail(CB_EXIT_FAILED, "%s", "out of memory");
    c->init(o);
    cx_flags p = flags_of(c, table, n);
    int rc = cx_flags_parse(&p, argc - 2, argv + 2, o);
    if (rc == 1) { /* -h/--help */
        cli_usage(c, table, n, stdout);
        rc = CB_EXIT_OK;
    } else if (rc == 0) {
        cli_args a = {argc, argv, &p};
        rc = c->run(o, &a);
    }
    free(o);
    return rc;
}

/* See cli_util.h. */
void cli_read_opts_init(void *op) {
    cli_read_opts *o = op;
    memset(o, 0, sizeof *o);
    o->db = cli_default_db();
    o->fmt = "md";
    o->gate_file = "ci/gates.conf";
    o->limit = 20;
}

/* A whole-string integer in [lo, hi], or one error line naming the flag. */
int cli_parse_int(const char *flag, const char *v, long lo, long hi, long *out) {
    long long x;
    if (cx_parse_int_in(v, lo, hi, &x)) {
        fprintf(stderr, "cortex-bench: %s: '%s' is not an integer in [%ld, %ld]\n", flag, v ? v : "", lo, hi);
        return -1;
    }
    *out = (long)x;
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

/* See cli_util.h. */
const char *cli_default_db(void) {
    const char *e = getenv("CORTEX_DB");
    return e && *e ? e : CLI_DEFAULT_DB;
}

/* Open an existing database read-write (migrating it), never creating one
 * (a server's database is created by its administrator: connecting is the test). */
int cli_open_existing(const char *path, store **s) {
    char err[512];
    if (!store_is_url(path) && access(path, F_OK) != 0)
        return cli_fail(1, "%s: no such database (run cortex-bench run first)", path);
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
