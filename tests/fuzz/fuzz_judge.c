/*
 * fuzz_judge.c - libFuzzer target for `cortex-bench judge`'s sample lines
 * (harness/gate/judge_cmd.c, judge_parse_line): any bytes, split at newlines,
 * must parse to a sample, a skipped line or one error message, never a crash,
 * an out-of-bounds access or undefined behaviour. A parsed sample must hold a
 * NUL-terminated metric name of 1..95 bytes without a tab, and a finite value;
 * an error must say something.
 * Seeds: tests/fuzz/corpus/judge/.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "judge.h"

static void require(int cond) {
    if (!cond) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    for (char *line = buf, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        judge_sample s;
        char err[256] = "";
        int k = judge_parse_line(line, &s, err, sizeof err);
        require(k >= -1 && k <= 1);
        if (k == 1) {
            size_t n = strnlen(s.metric, sizeof s.metric);
            require(n >= 1 && n < sizeof s.metric && !strchr(s.metric, '\t') && isfinite(s.value));
        } else if (k < 0) {
            require(err[0] != 0);
        }
    }
    free(buf);
    return 0;
}
