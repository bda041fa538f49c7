/*
 * cli_util.h - the helpers every `cortex` command shares (cli_util.c):
 * timing, reading files and prompts, loading a model as the environment
 * asks, tokenizing. Each prints its own one-line error ("cortex: ...").
 */
#ifndef CX_CLI_UTIL_H
#define CX_CLI_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "cli_flags.h"
#include "cortex.h"

/* Monotonic seconds, for the timings commands print. */
double cli_now_s(void);
/* Read a whole file into a malloc'd buffer (*len bytes); NULL with errno set if it cannot be opened. */
char *cli_read_file(const char *path, size_t *len);
/* The prompt bytes from -p or -f; NULL (after printing why) if neither works. */
char *cli_load_prompt(const opts *o, size_t *len);
/* Load a model with the parameters the environment asks for (cortex_env.h:
 * CORTEX_WEIGHTS, CORTEX_REPACK, CORTEX_ISA), with -z for a llama2.c
 * checkpoint; NULL after printing why. */
cx_model *cli_load_model(const opts *o, const char *path);
/* Encode text (flags: CX_TOKENIZE_*); a malloc'd id array, or NULL after printing the error. */
int32_t *cli_encode(const cx_model *m, const char *text, size_t len, int flags, int *n);

#endif
