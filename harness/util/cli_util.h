/*
 * cli_util.h - small helpers shared by the cortex-bench subcommands: one-line
 * errors, strict number parsing, opening the database.
 */
#ifndef CB_CLI_UTIL_H
#define CB_CLI_UTIL_H

#include <stdint.h>

#include "store.h"

#define CLI_DEFAULT_DB "reports/cortex.db"

/* Print "cortex-bench: " + message (fmt with one %s) and return `code`. */
int cli_fail(int code, const char *fmt, const char *a);
/* Whole-string numbers in [lo, hi]; print the flag and return -1 otherwise. */
int cli_parse_int(const char *flag, const char *v, long lo, long hi, long *out);
int cli_parse_double(const char *flag, const char *v, double lo, double hi, double *out);
/* A positive run id. */
int cli_parse_id(const char *v, int64_t *id);
/* The same without printing: -1 if `v` is not a run id. */
int cli_parse_id_quiet(const char *v, int64_t *id);
/* Create reports/ when `db` is the default database path. */
void cli_ensure_default_dir(const char *db);
/* Open an existing database (migrating it), never creating one; 0 or an exit code. */
int cli_open_existing(const char *path, store **s);

#endif
