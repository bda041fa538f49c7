/*
 * cli_util.h - what every cortex-bench subcommand shares: its table entry
 * (name, flags, usage), the common flag check run before it (-h/--help, an
 * unknown flag, a flag missing its value), one-line errors, strict number
 * parsing, opening the database.
 */
#ifndef CB_CLI_UTIL_H
#define CB_CLI_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include "store.h"

#define CLI_DEFAULT_DB "reports/cortex.db"

/* cortex-bench's exit codes, one table for every command (docs/harness.md,
 * "Exit codes"). gate and compare judge with one rule (gate.h) and exit alike. */
enum {
    CB_EXIT_OK = 0,          /* done: every run VALID; no regression proven (inconclusive metrics are listed) */
    CB_EXIT_REGRESSED = 1,   /* gate, compare: a metric regressed, or a correctness canary changed */
    CB_EXIT_FAILED = 1,      /* the other commands: the engine, a server or the database failed */
    CB_EXIT_USAGE = 2,       /* bad input: a flag or its value, a workload, model, database path, run reference;
                              * runs that may not be compared; no baseline; a gate file that cannot decide */
    CB_EXIT_UNAVAILABLE = 3, /* gate --mode deterministic: no instruction counter on this machine */
    CB_EXIT_INVALID = 4      /* a run is INVALID (validity.h): run stored one; gate, compare and report were given one */
};

/* One flag of a subcommand. `value` names what it takes ("FILE"), NULL for a
 * switch; `help` says what it does, every accepted value and the default. */
typedef struct cli_flag {
    const char *name, *alias, *value, *help;
} cli_flag;

/* A cortex-bench subcommand: what bench_main dispatches on, and its usage.
 * `flags` ends with an entry whose name is NULL. */
typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *args;    /* positional arguments ("RUN", "BASE CAND"), or "" */
    const char *summary; /* one line: what it does */
    const cli_flag *flags;
    const char *example; /* one complete command line */
} cli_command;

/* The usage of `c`: synopsis, summary, every flag with its help, an example. */
void cli_usage(const cli_command *c, FILE *out);
/* Run `c` on its arguments: -h/--help prints its usage to stdout (exit 0); an
 * unknown flag or a flag without its value is one error line (exit 2);
 * otherwise c->run decides. Values are skipped, so `--db -h` names a file. */
int cli_command_main(const cli_command *c, int argc, char **argv);

/* Print "cortex-bench: " + the formatted message + newline; return `code`. */
int cli_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parse `[POSITIONAL] --flag VALUE...` for the flags named in `names` (values
 * into `vals`); at most `max_pos` positional arguments. 0 or 2 after a message. */
int cli_parse_flags(int argc, char **argv, const char *const *names, const char **vals, int n_names, const char **pos,
                    int max_pos, int *n_pos);
/* The flags of list and compare (--db, -o, --limit, --force) and
 * exactly `max_pos` positional arguments into `pos`; 0 or 2 after a message. */
int cli_parse_read_opts(int argc, char **argv, const char **db, const char **fmt, long *limit, int *force,
                        const char **pos, int max_pos);
/* The flags of show (--db, -o, the switch --requests) and its one run
 * reference into *run; 0 or 2 after a message. */
int cli_parse_show_opts(int argc, char **argv, const char **db, const char **fmt, int *requests, const char **run);
/* Whole-string numbers in [lo, hi]; print the flag and return -1 otherwise. */
int cli_parse_int(const char *flag, const char *v, long lo, long hi, long *out);
int cli_parse_double(const char *flag, const char *v, double lo, double hi, double *out);
/* A positive run id. */
int cli_parse_id(const char *v, int64_t *id);
/* The same without printing: -1 if `v` is not a run id. */
int cli_parse_id_quiet(const char *v, int64_t *id);
/* argv[0..argc) joined with spaces into out (truncated to cap - 1 bytes):
 * the command line as typed, for provenance. */
void cli_join_argv(int argc, char **argv, char *out, size_t cap);
/* Create reports/ when `db` is the default database path. */
void cli_ensure_default_dir(const char *db);
/* Open an existing database (migrating it), never creating one; 0 or an exit code. */
int cli_open_existing(const char *path, store **s);

#endif
