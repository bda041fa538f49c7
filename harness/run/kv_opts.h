/*
 * kv_opts.h - the KV cache options of `cortex-bench run` (--kv-type,
 * --kv-warm-type, --kv-hot/--kv-warm/--kv-cold, --kv-policy, --prefix-cache,
 * --kv-spill; parsed into run_opts.kv by the flag table, harness/commands.c)
 * as the canonical text stored with a run (runs.kv_config, part of the
 * comparability key).
 */
#ifndef CB_KV_OPTS_H
#define CB_KV_OPTS_H

#include <stddef.h>

#include "cortex.h"

/* What cx_kv_defaults() gives, as kv_opts_config writes it: the config of
 * every run recorded before schema v6 (the engine's plain f32 cache). */
#define KV_OPTS_DEFAULT_CONFIG "type=f32 warm_type=q8 hot=unlimited warm=unlimited cold=unlimited policy=lru prefix=off spill=off"

/* The canonical configuration text of *p (KV_OPTS_DEFAULT_CONFIG for the
 * defaults): budgets in bytes, the spill file as on/off (its path does not
 * change what is measured). */
void kv_opts_config(const cx_kv_params *p, char *out, size_t n);

#endif
