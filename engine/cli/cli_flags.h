/*
 * cli_flags.h - the `cortex` command's options: one table of flags (which
 * commands take each, how its value is parsed, where it goes, what it means)
 * drives both the parser and every command's --help, and the defaults the
 * help shows are read from the options the parser starts from, so the help
 * cannot drift from the code. Messages go to stderr as one line
 * "cortex: <what>: <problem>".
 */
#ifndef CX_CLI_FLAGS_H
#define CX_CLI_FLAGS_H

#include <stdio.h>

#include "cortex_tools.h"

#if defined(__GNUC__)
#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLI_PRINTF(a, b)
#endif

/* The commands, one bit each in a flag's command mask. */
enum {
    CMD_GENERATE = 1, CMD_INFO = 2, CMD_SYNTH = 4, CMD_TOKENIZE = 8, CMD_QUANTIZE = 16, CMD_QUALITY = 32,
    CMD_SERVE = 64, CMD_SYNTH_LORA = 128, CMD_MERGE_LORA = 256, CMD_ALL = 511
};

/* Every option of every command; a command reads the ones it takes. */
typedef struct opts {
    const char *model, *tokenizer, *prompt, *prompt_file, *out, *shape, *type, *ref, *text, *vocab;
    long n_predict, threads, ctx, seed, positions;
    long from;                   /* quality --from N: score positions from N on */
    int ref_kv_type;             /* quality --ref-kv-type: the reference session's hot KV format */
    int pin, numa;               /* --pin, --numa: cx_set_placement (CX_PIN_*, CX_NUMA_*) */
    const char *host, *api_key, *chat_template;               /* serve */
    long port, max_seqs, max_batch_tokens, max_queue, max_body;
    long max_conns, max_conns_per_ip, idle_timeout;           /* serve: connections */
    float read_timeout, busy_timeout, drain_timeout;          /* serve: seconds */
    const char *serve_lora[64];  /* serve --lora NAME=FILE (repeatable) */
    int n_serve_lora;
    int64_t lora_budget;         /* serve --lora-budget BYTES (0: unlimited) */
    const char *lora_dir;        /* serve --lora-dir DIR: the adapter routes load from DIR only; NULL: routes off */
    long max_adapters;           /* serve --max-adapters N */
    float request_timeout;                                    /* serve: seconds, 0: none */
    int no_bos, no_special, no_echo, list, json, ids, kv_stats;
    int random_seed;    /* generate --seed -1: draw the seed at start */
    const char *pos[2]; /* positional arguments (info MODEL, quantize IN OUT) */
    int n_pos;
    cx_sampler_params sp;
    cx_kv_params kv;
    cx_spec_params spec;         /* --spec, --draft, --draft-max, --draft-min, --draft-p-min, --draft-fixed */
    int spec_fixed;
    long spec_max_batch;         /* serve --spec-max-batch N */
    /* adapters: --lora FILE[:SCALE] (repeatable), their in-memory type; synth-lora's shape */
    const char *lora[CX_LORA_MAX_SET];
    float lora_scale[CX_LORA_MAX_SET];
    int n_lora;
    const char *lora_type, *targets;
    long rank;
    float alpha, strength;
} opts;

/* A subcommand: its bit in a flag's command mask, its positional arguments,
 * the text of its --help, and what runs it. */
typedef struct cli_command {
    const char *name;
    unsigned bit;
    int max_pos;          /* positional arguments it takes */
    const char *synopsis; /* after "cortex NAME ", e.g. "-m MODEL -p PROMPT [options]" */
    const char *about;    /* what it does: a paragraph, lines ending in \n */
    const char *example;  /* one command line */
    int (*run)(opts *o);
} cli_command;

/* The options every command starts from: the defaults --help shows. */
void cli_defaults(opts *o);
/* Parse argv (the words after the command name) into o for command c.
 * Returns 0; 1 if -h/--help was given (the caller prints the help); or 2
 * after printing one line naming a bad flag or value. */
int cli_parse(const cli_command *c, int argc, char **argv, opts *o);
/* Print command c's usage: synopsis, about, every flag it takes with its
 * accepted values and default, the example. To stdout. */
void cli_help(const cli_command *c);
/* The general usage: every command's synopsis, to f. */
void cli_usage(const cli_command *cmds, int n, FILE *f);
/* Print "cortex: <message>" and a newline to stderr; return 1 (die) or 2 (die_usage). */
int die(const char *fmt, ...) CLI_PRINTF(1, 2);
int die_usage(const char *fmt, ...) CLI_PRINTF(1, 2);

#endif
