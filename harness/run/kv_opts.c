/*
 * kv_opts.c - describe a KV cache configuration canonically (see kv_opts.h).
 */
#include "kv_opts.h"

#include <stdio.h>

static const char *const TYPE_NAMES[] = {"f32", "f16", "q8", "q4"}; /* CX_KV_F32.. */

/* A budget as text: "unlimited" or a byte count. */
static void budget_text(int64_t b, char *out, size_t n) {
    if (b == CX_KV_UNLIMITED) snprintf(out, n, "unlimited");
    else snprintf(out, n, "%lld", (long long)b);
}

/* See kv_opts.h. */
void kv_opts_config(const cx_kv_params *p, char *out, size_t n) {
    char b[CX_KV_TIERS][32];
    for (int t = 0; t < CX_KV_TIERS; t++) budget_text(p->budget[t], b[t], sizeof b[t]);
    int ty = p->type >= 0 && p->type < 4 ? p->type : 0, wt = p->warm_type >= 0 && p->warm_type < 4 ? p->warm_type : 2;
    snprintf(out, n, "type=%s warm_type=%s hot=%s warm=%s cold=%s policy=%s prefix=%s spill=%s", TYPE_NAMES[ty],
             TYPE_NAMES[wt], b[0], b[1], b[2], p->policy == CX_KV_LFU ? "lfu" : "lru", p->prefix_cache ? "on" : "off",
             p->spill_path ? "on" : "off");
}
