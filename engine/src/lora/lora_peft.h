/*
 * lora_peft.h - a PEFT adapter_config.json, parsed into what the reader
 * needs: the default rank and alpha, which modules are adapted, and the
 * per-module rank/alpha overrides (PEFT's rank_pattern / alpha_pattern).
 *
 * Module keys are the base model's module names as PEFT sees them, e.g.
 * "model.layers.3.self_attn.q_proj". PEFT's matching rules are kept:
 * target_modules as a list matches a key equal to an entry or ending in
 * "." + entry; as a string it is a regular expression the whole key must
 * match ("all-linear": every linear module); a pattern key K matches when
 * the key matches ^(.*\.)?(K)$, the first such pattern in the file winning.
 * Refused with one message: lora_alpha <= 0, r < 1, use_dora, lora_bias,
 * fan_in_fan_out (Conv1D-style transposed weights), a peft_type other than
 * "LORA", and anything of the wrong JSON type.
 */
#ifndef CX_LORA_PEFT_H
#define CX_LORA_PEFT_H

#include <stddef.h>

#include "cortex.h"

typedef struct peft_pattern {
    void *re;        /* the compiled ^(?:.*\.)?(?:KEY)$ (a pcre2_code) */
    int rank;        /* rank_pattern value (0 in alpha patterns) */
    float alpha;     /* alpha_pattern value (0 in rank patterns) */
} peft_pattern;

typedef struct peft_config {
    int r;                 /* the default rank */
    float alpha;           /* lora_alpha */
    int use_rslora;        /* scale alpha / sqrt(r) instead of alpha / r */
    int all_linear;        /* target_modules is "all-linear" */
    void *target_re;       /* target_modules as a regular expression (a pcre2_code), or NULL */
    int n_targets;         /* target_modules as a list */
    char **targets;
    int n_rank_pat, n_alpha_pat;
    peft_pattern *rank_pat, *alpha_pat;
} peft_config;

/* Parse the JSON text [text, text + len); `label` names it in errors. 0, or a
 * CX_E* code with one message. On failure *c holds nothing to free. */
int peft_config_parse(const char *text, size_t len, const char *label, peft_config *c, cx_err *err);
void peft_config_free(peft_config *c);
/* Is the module `key` adapted according to target_modules? */
int peft_config_targets(const peft_config *c, const char *key);
/* The rank and alpha the config gives module `key` (its patterns, else r and lora_alpha). */
int peft_config_rank(const peft_config *c, const char *key);
float peft_config_alpha(const peft_config *c, const char *key);

#endif
