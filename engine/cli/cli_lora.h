/*
 * cli_lora.h - the adapter commands of `cortex` and the --lora adapters
 * that generate applies (cli_lora.c).
 */
#ifndef CX_CLI_LORA_H
#define CX_CLI_LORA_H

#include "cli_flags.h"

/* Load o's --lora adapters for m into loaded[0..o->n_lora) and apply them to
 * the empty session s. 0, or an exit code after printing why. */
int cli_lora_attach(const cx_model *m, const opts *o, cx_session *s, cx_lora **loaded);
int cmd_synth_lora(opts *o);
int cmd_merge_lora(opts *o);

#endif
