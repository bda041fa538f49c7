/*
 * kv_opts.c - parse the KV cache flags of `cortex-bench run` and describe a
 * configuration canonically (see kv_opts.h).
 */
#include "kv_opts.h"

#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "cortex_tools.h"

/* One error line naming the flag and its value; returns 2 (a usage error). */
static int bad_value(const char *flag, const char *v, const char *what) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s: '%s' %s", flag, v, what);
    return cli_fail(2, "%s", msg);
}

static const char *const TYPE_NAMES[] = {"f32", "f16", "q8", "q4"}; /* CX_KV_F32.. */

/* A tier budget: bytes with an optional K/M/G suffix, or "unlimited". */
static int parse_budget(const char *flag, const char *v, int64_t *out) {
    if (!strcmp(v, "unlimited")) {
        *out = CX_KV_UNLIMITED;
        return 0;
    }
    *out = cx_parse_bytes(v);
    if (*out < 0) return bad_value(flag, v, "is not a byte count (e.g. 65536, 64K, 1.5M, 2G) or 'unlimited'");
    return 0;
}

/* See kv_opts.h. Types are checked against what each tier can hold, so a
 * bad value stops the run before the model is loaded. */
int kv_opts_parse(const char *a, const char *v, cx_kv_params *p) {
    static const char *const tiers[CX_KV_TIERS] = {"--kv-hot", "--kv-warm", "--kv-cold"};
    for (int t = 0; t < CX_KV_TIERS; t++)
        if (!strcmp(a, tiers[t])) return parse_budget(a, v, &p->budget[t]);
    if (!strcmp(a, "--kv-type")) {
        int f = cx_kv_type_from_name(v);
        if (f != CX_KV_F32 && f != CX_KV_F16 && f != CX_KV_Q8) return bad_value(a, v, "is not f32, f16 or q8");
        p->type = f;
        return 0;
    }
    if (!strcmp(a, "--kv-warm-type")) {
        int f = cx_kv_type_from_name(v);
        if (f != CX_KV_Q8 && f != CX_KV_Q4) return bad_value(a, v, "is not q8 or q4");
        p->warm_type = f;
        return 0;
    }
    if (!strcmp(a, "--kv-policy")) {
        int pol = cx_kv_policy_from_name(v);
        if (pol < 0) return bad_value(a, v, "is not lru or lfu");
        p->policy = pol;
        return 0;
    }
    if (!strcmp(a, "--prefix-cache")) {
        if (strcmp(v, "on") && strcmp(v, "off")) return bad_value(a, v, "is not on or off");
        p->prefix_cache = !strcmp(v, "on");
        return 0;
    }
    if (!strcmp(a, "--kv-spill")) {
        if (!*v) return cli_fail(2, "%s", "--kv-spill needs a file path");
        p->spill_path = v;
        return 0;
    }
    return -1;
}

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
