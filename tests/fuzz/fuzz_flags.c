/*
 * fuzz_flags.c - libFuzzer target for the shared command-line parser
 * (engine/src/flags.c, cortex_tools.h) that `cortex` and `cortex-bench` use:
 * any bytes, split at NUL bytes into argv words, parsed against a table with
 * every kind of flag (the library's KV callbacks included), must give 0, 1
 * (-h) or 2 (one error line), never a crash, an out-of-bounds access or
 * undefined behaviour; a successful parse leaves every number in its range,
 * at most max_pos positional arguments, and a help text that prints.
 * Seeds: tests/fuzz/corpus/flags/ (words separated by NUL bytes).
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cortex_tools.h"

typedef struct f_opts {
    int sw, i, choice, kvt, warm, pol;
    long l;
    uint64_t u;
    float f;
    double d;
    int64_t budget;
    const char *s, *listed;
} f_opts;

#define O(f) offsetof(f_opts, f)
static const cx_flag TABLE[] = {
    {"--switch", "-s", NULL, 1, CX_FLAG_SWITCH, O(sw), 0, 0, NULL, .help = "switch"},
    {"--int", "-i", "N", 1, CX_FLAG_INT, O(i), -3, 300, NULL, .help = "int"},
    {"--long", NULL, "L", 1, CX_FLAG_LONG, O(l), -9e18, 9e18, NULL, .help = "long"},
    {"--u64", NULL, "U", 1, CX_FLAG_U64, O(u), 0, 9223372036854775807.0, NULL, .help = "u64"},
    {"--float", NULL, "F", 1, CX_FLAG_FLOAT, O(f), -1, 1, NULL, .help = "float"},
    {"--double", NULL, "D", 1, CX_FLAG_DOUBLE, O(d), 1e-6, 1e18, NULL, .help = "double"},
    {"--budget", NULL, "B", 1, CX_FLAG_BUDGET, O(budget), 0, 0, NULL, .help = "budget"},
    {"--choice", NULL, "C", 1, CX_FLAG_CHOICE, O(choice), 0, 0, NULL, .help = "choice", .choices = "a|bb|ccc"},
    {"--listed", NULL, "L", 1, CX_FLAG_STR, O(listed), 0, 0, NULL, .help = "listed", .choices = "x|y"},
    {"--kv-type", NULL, "T", 1, CX_FLAG_CUSTOM, O(kvt), CX_KV_HOT, 0, NULL, .help = "hot", CX_FLAG_KV_TYPE_OPS},
    {"--kv-warm-type", NULL, "T", 1, CX_FLAG_CUSTOM, O(warm), CX_KV_WARM, 0, NULL, .help = "warm", CX_FLAG_KV_TYPE_OPS},
    {"--kv-policy", NULL, "P", 1, CX_FLAG_CUSTOM, O(pol), 0, 0, NULL, .help = "policy", CX_FLAG_KV_POLICY_OPS},
    {"-o", NULL, "FILE", 1, CX_FLAG_STR, O(s), 0, 0, NULL, .help = "string"},
    {"--other", NULL, "X", 2, CX_FLAG_STR, O(s), 0, 0, NULL, .help = "another command's"},
    {"--help", "-h", NULL, 3, CX_FLAG_HELP, 0, 0, 0, NULL, .help = "help"},
};
#undef O

static void require(int cond) {
    if (!cond) abort();
}

/* The parser's error lines go to /dev/null during a parse; libFuzzer's own
 * output keeps the real stderr. */
static int devnull = -1, real_stderr = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    devnull = open("/dev/null", O_WRONLY);
    real_stderr = dup(2);
    if (devnull < 0 || real_stderr < 0) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    char *argv[64];
    int argc = 0;
    for (size_t at = 0; at < size && argc < 64; at += strlen(buf + at) + 1) argv[argc++] = buf + at;
    f_opts o = {.i = 1, .f = 0.5f, .d = 1, .budget = CX_KV_UNLIMITED, .kvt = CX_KV_F32, .warm = CX_KV_Q8};
    cx_flags p = {.prog = "fuzz", .cmd = "cmd", .table = TABLE, .n = (int)(sizeof TABLE / sizeof TABLE[0]), .bit = 1,
                  .max_pos = 2};
    fflush(stderr);
    dup2(devnull, 2);
    int rc = cx_flags_parse(&p, argc, argv, &o);
    fflush(stderr);
    dup2(real_stderr, 2);
    require(rc == 0 || rc == 1 || rc == 2);
    require(p.n_pos >= 0 && p.n_pos <= p.max_pos);
    if (rc == 0) {
        require(o.i >= -3 && o.i <= 300 && o.f >= -1 && o.f <= 1 && o.d >= 1e-6 && o.d <= 1e18);
        require(o.u <= 9223372036854775807ull && (o.budget >= 0 || o.budget == CX_KV_UNLIMITED));
        require(o.choice >= 0 && o.choice <= 2 && cx_kv_type_name(o.kvt) && cx_kv_type_name(o.warm));
        require(cx_kv_policy_name(o.pol) != NULL);
        for (int i = 0; i < p.n_pos; i++) require(p.pos[i] >= buf && p.pos[i] < buf + size + 1);
        FILE *out = fopen("/dev/null", "w");
        if (out) {
            cx_flags_help(&p, &o, out);
            fclose(out);
        }
        (void)cx_flags_given(&p, 0, sizeof o);
    }
    free(buf);
    return 0;
}
