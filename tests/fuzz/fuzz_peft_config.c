/*
 * fuzz_peft_config.c - libFuzzer target: any byte string given to the
 * adapter_config.json parser (engine/src/lora/lora_peft_config.c) must give
 * either a config or one error, never a crash, undefined behaviour or a
 * leak. On success the config's promises are checked: r >= 1, lora_alpha
 * > 0, and every rank and alpha it gives a module (its rank_pattern and
 * alpha_pattern regular expressions run against a few module names) keeps
 * those bounds; target_modules is asked about the same names.
 * Seeds: tests/fuzz/corpus/peft_config/ (tests/fuzz/make_seeds.py writes them).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lora/lora_peft.h"

/* Keeps the answers observable. */
static volatile int g_sink;

/* Abort (a finding) when a property fails: libFuzzer records the input. */
static void require(int cond) {
    if (!cond) abort();
}

/* The libFuzzer entry point: parse, then query the config. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *keys[] = {"model.layers.0.self_attn.q_proj", "model.layers.11.mlp.down_proj", "lm_head", ""};
    peft_config c;
    cx_err err;
    memset(&err, 0, sizeof err);
    int rc = peft_config_parse((const char *)data, size, "fuzz.json", &c, &err);
    if (rc != 0) {
        require(rc < 0 && rc == err.code && err.msg[0]);
        return 0;
    }
    require(c.r >= 1 && c.alpha > 0);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        g_sink += peft_config_targets(&c, keys[i]);
        require(peft_config_rank(&c, keys[i]) >= 1);
        require(peft_config_alpha(&c, keys[i]) > 0);
    }
    peft_config_free(&c);
    return 0;
}
