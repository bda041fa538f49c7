/*
 * cli_util.c - see cli_util.h.
 */
#include "cli_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "cortex-bench: " + message, exit code `code`. */
int cli_fail(int code, const char *fmt, const char *a) {
    fprintf(stderr, "cortex-bench: ");
    fprintf(stderr, fmt, a);
    fputc('\n', stderr);
    return code;
}

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
