/*
 * fuzz_lora.c - libFuzzer target: any byte string given as a GGUF LoRA
 * adapter must load (and then run) or fail with one error, never crash,
 * read out of bounds, hit undefined behaviour or leak.
 *
 * Once: a synthetic test-tiny model (f32) is written to a temporary file
 * and loaded. Per input: the bytes go to an in-memory file (memfd, read
 * back through /proc/self/fd like any path), cx_lora_load reads and checks
 * them against the model (names, shapes, ranks, types) and lays them out
 * both as f32 and as q8_0; an adapter that loads is applied to a session
 * that evaluates two tokens, so the layout is exercised too.
 * Seeds: tests/fuzz/corpus/lora/ (tests/fuzz/make_seeds.py writes them).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cortex.h"
#include "cortex_tools.h"

static cx_model *model;

/* Make and load the model once. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    char path[] = "/tmp/cortex-fuzz-lora-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) abort();
    close(fd);
    cx_err err = {0};
    if (cx_synth_write(cx_shape_find("test-tiny"), CX_TYPE_F32, 1, path, &err) ||
        cx_model_load(path, NULL, &model, &err)) {
        fprintf(stderr, "fuzz_lora: %s\n", err.msg);
        abort();
    }
    unlink(path); /* the mapping stays valid */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("adapter", 0);
    if (fd < 0) abort();
    if (size && write(fd, data, size) != (ssize_t)size) abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    static const int types[2] = {CX_TYPE_F32, CX_TYPE_Q8_0};
    for (int i = 0; i < 2; i++) {
        cx_lora_params p = cx_lora_defaults();
        p.type = types[i];
        cx_lora *a = NULL;
        cx_err err = {0};
        if (cx_lora_load(model, path, &p, &a, &err)) {
            if (a || !err.msg[0]) abort(); /* a failure says why and returns nothing */
            continue;
        }
        cx_session *s = NULL;
        if (cx_session_new(model, 16, 1, &s, &err) == 0) {
            cx_lora_use u = {a, 1.0f};
            int32_t toks[2] = {1, 5};
            const float *l;
            if (cx_session_set_lora(s, &u, 1, &err) || cx_eval(s, toks, 2, &l, &err)) abort();
            cx_session_free(s);
        }
        cx_lora_free(a);
    }
    close(fd);
    return 0;
}
