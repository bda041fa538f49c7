/*
 * test_kv_names.c - KV block types and policies have names, and every message
 * about a bad one names it (never a bare number when a name exists) with the
 * accepted ones: cx_kv_type_name, cx_kv_policy_name, cx_kv_tier_types, and
 * cx_session_new_ex's refusals of a type a tier does not store.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

/* Names round-trip through the parsers; unknown numbers have none. */
static void test_names(void) {
    for (int t = CX_KV_F32; t <= CX_KV_Q4H; t++)
        CHECK(cx_kv_type_name(t) && cx_kv_type_from_name(cx_kv_type_name(t)) == t, "type %d round-trips", t);
    CHECK(!strcmp(cx_kv_type_name(CX_KV_Q4), "q4") && !strcmp(cx_kv_type_name(CX_KV_E4M3), "e4m3") &&
              !strcmp(cx_kv_type_name(CX_KV_Q4H), "q4h") && cx_kv_type_name(9) == NULL && cx_kv_type_name(-1) == NULL,
          "q4, e4m3 and q4h named, 9 and -1 not");
    CHECK(!strcmp(cx_kv_policy_name(CX_KV_LRU), "lru") && !strcmp(cx_kv_policy_name(CX_KV_LFU), "lfu") &&
              !strcmp(cx_kv_policy_name(CX_KV_RANDOM), "random") && cx_kv_policy_name(3) == NULL,
          "policy names");
    char buf[64];
    CHECK(!strcmp(cx_kv_tier_types(CX_KV_HOT, buf, sizeof buf), "f32|f16|q8|bf16|e4m3|e5m2|q4g|q4h"), "hot types: %s", buf);
    CHECK(!strcmp(cx_kv_tier_types(CX_KV_WARM, buf, sizeof buf), "f16|q8|q4|bf16|e4m3|e5m2|q4g|q4h"), "warm types: %s", buf);
    CHECK(!strcmp(cx_kv_tier_types(CX_KV_COLD, buf, sizeof buf), ""), "cold: no block type of its own");
    char tiny[6];
    CHECK(!strcmp(cx_kv_tier_types(CX_KV_HOT, tiny, sizeof tiny), "f32"), "a short buffer keeps whole names: %s", tiny);
}

/* Session creation with kv params p fails with exactly `want`. */
static void refused(const cx_model *m, cx_kv_params p, const char *want) {
    cx_session_params sp = cx_session_defaults();
    sp.kv = p;
    cx_session *s = NULL;
    cx_err err = {0};
    int rc = cx_session_new_ex(m, &sp, &s, &err);
    CHECK(rc == CX_EINVAL && s == NULL && !strcmp(err.msg, want), "want '%s', got %d '%s'", want, rc, err.msg);
    cx_session_free(s);
}

/* The engine's own messages for types and policies a tier cannot take. */
static void test_messages(void) {
    cx_model *m = fx_synth_model(cx_shape_find("test-tiny"), CX_TYPE_F32, 1, "tiny.gguf", NULL);
    if (m) {
        cx_kv_params p = cx_kv_defaults();
        p.type = CX_KV_Q4;
        refused(m, p, "KV type q4 is not one of f32|f16|q8|bf16|e4m3|e5m2|q4g|q4h");
        p.type = 9;
        refused(m, p, "KV type 9 is not one of f32|f16|q8|bf16|e4m3|e5m2|q4g|q4h");
        p = cx_kv_defaults();
        p.warm_type = CX_KV_F32;
        refused(m, p, "warm KV type f32 is not one of f16|q8|q4|bf16|e4m3|e5m2|q4g|q4h");
        p = cx_kv_defaults();
        p.policy = 5;
        refused(m, p, "KV policy 5 is not one of lru|lfu|random (CX_KV_LRU, CX_KV_LFU, CX_KV_RANDOM)");
        cx_model_free(m);
    }
    fx_cleanup();
}

TEST_MAIN({
    test_names();
    test_messages();
})
