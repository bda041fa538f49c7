/*
 * cli_quality.h - `cortex quality`: a model against a reference model on the
 * same tokens (KL divergence per position, top-1 agreement, the largest
 * logit difference), over the reference's greedy continuations of built-in
 * prompts or over --text (cli_quality.c).
 */
#ifndef CX_CLI_QUALITY_H
#define CX_CLI_QUALITY_H

#include "cli_flags.h"

/* Run the command; 0, or 1 after printing the error. */
int cli_quality(opts *o);

#endif
