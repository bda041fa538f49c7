/*
 * cli_util.h - what every cortex-bench subcommand shares: its table entry
 * (name, options, usage), running it with its flags parsed by the flag table
 * (commands.c, on the shared parser of cortex_tools.h), one-line errors,
 * strict number parsing, opening the database.
 */
#ifndef CB_CLI_UTIL_H
#define CB_CLI_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include "cortex_tools.h"
#include "hx_err.h"
#include "store.h"

#define CLI_DEFAULT_DB "reports/cortex.db"
/* --db's default: $CORTEX_DB (a file or a postgresql:// URL) when set, else CLI_DEFAULT_DB. */
const char *cli_default_db(void);

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

/* What a command gets besides its options (the parse filled them): the
 * command line as typed, for provenance, and the parse itself (positional
 * arguments, and which flags were given: cx_flags_given). */
typedef struct cli_args {
    int argc;              /* the whole command line: "cortex-bench", the command, its words */
    char **argv;
    const cx_flags *flags; /* pos[0..n_pos), given */
} cli_args;

/* A cortex-bench subcommand: what bench_main dispatches on, its options and
 * their defaults, and its usage. Its flags are the entries of the flag table
 * (commands.c) whose command mask has `bit`; they store into its options
 * struct, which `init` fills with the defaults first (--help shows them). */
typedef struct cli_command {
    const char *name;
    int (*run)(void *opts, const cli_args *a);
    unsigned bit;
    size_t opts_size;         /* sizeof its options struct */
    void (*init)(void *opts); /* the defaults */
    int max_pos;              /* positional arguments it takes, at most */
    const char *args;         /* their names ("RUN", "BASE CAND"), or "" */
    const char *summary;      /* one line: what it does */
    const char *example;      /* one complete command line */
} cli_command;

/* The usage of `c`: synopsis, summary, every flag of the table with its
 * accepted values and default (cx_flags_help), an example. */
void cli_usage(const cli_command *c, const cx_flag *table, int n, FILE *out);
/* Run `c` on the whole command line (argv[0] "cortex-bench", argv[1] the
 * command): its options set to their defaults, then parsed from argv[2..]
 * by the flag table (cx_flags_parse); -h/--help prints its usage to stdout
 * (exit 0); an unknown flag, a flag without its value, a bad value or an
 * extra positional argument is one error line (exit 2); otherwise c->run
 * decides. */
int cli_command_main(const cli_command *c, const cx_flag *table, int n, int argc, char **argv);

/* Print "cortex-bench: " + the formatted message + newline; return `code`. */
int cli_fail(int code, const char *fmt, ...) HX_PRINTF(2, 3);

/* The options of the commands that read the database: list, show, compare, tag. */
typedef struct cli_read_opts {
    const char *db, *fmt; /* --db, show -o */
    const char *gate_file; /* compare --gate-file (the default may be missing) */
    long limit;            /* list --limit */
    int force, requests;   /* compare --force, show --requests */
} cli_read_opts;
void cli_read_opts_init(void *o);
/* A whole-string integer in [lo, hi] (run's -t list, run ids); print the flag and return -1 otherwise. */
int cli_parse_int(const char *flag, const char *v, long lo, long hi, long *out);
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
