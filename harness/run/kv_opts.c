/*
 * kv_opts.c - describe a KV cache configuration canonically (see kv_opts.h).
 */
#include "kv_opts.h"

#include <stdio.h>

#include "cortex_tools.h"

/* A budget as text: "unlimited" or a byte count. */
static void budget_text(int64_t b, char *out, size_t n) {
    if (b == CX_KV_UNLIMITED) snprintf(out, n, "unlimited");
    else snprintf(out, n, "%lld", (long long)b);
}

/* See kv_opts.h. */
void kv_opts_config(const cx_kv_params *p, char *out, size_t n) {
    char b[CX_KV_TIERS][32];
    for (int t = 0; t < CX_KV_TIERS; t++) budget_text(p->budget[t], b[t], sizeof b[t]);
    const char *ty = cx_kv_type_name(p->type), *wt = cx_kv_type_name(p->warm_type), *pol = cx_kv_policy_name(p->policy);
    snprintf(out, n, "type=%s warm_type=%s hot=%s warm=%s cold=%s policy=%s prefix=%s spill=%s", ty ? ty : "f32",
             wt ? wt : "q8", b[0], b[1], b[2], pol ? pol : "lru", p->prefix_cache ? "on" : "off", p->spill_path ? "on" : "off");
}
