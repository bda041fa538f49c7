/*
 * judge.c - one sample line of `cortex-bench judge` (see judge.h); no other
 * dependency, so the fuzz target links it alone.
 */
#include "judge.h"
#include "hx_err.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int judge_parse_line(const char *line, judge_sample *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    size_t k = strspn(line, " \r");
    if (!line[k] || line[k] == '#') return 0;
    const char *f[4];
    size_t len[4];
    const char *p = line;
    for (int i = 0; i < 4; i++) {
        f[i] = p;
        len[i] = strcspn(p, "\t");
        p += len[i];
        if (i < 3) {
            if (*p != '\t') return hx_fail(err, errlen,
                                           "expected 4 tab-separated fields (METRIC, lower|higher, base|cand, VALUE)");
            p++;
        }
    }
    while (len[3] && (f[3][len[3] - 1] == '\r' || f[3][len[3] - 1] == ' ')) len[3]--;
    if (*p) return hx_fail(err, errlen, "more than 4 fields");
    if (!len[0] || len[0] >= sizeof s->metric) return hx_fail(err, errlen,
                                                              "the metric name must be 1..%zu bytes", sizeof s->metric - 1);
    memcpy(s->metric, f[0], len[0]);
    if (len[1] == 5 && !memcmp(f[1], "lower", 5)) s->higher_is_better = 0;
    else if (len[1] == 6 && !memcmp(f[1], "higher", 6)) s->higher_is_better = 1;
    else return hx_fail(err, errlen, "the direction must be lower or higher");
    if (len[2] == 4 && !memcmp(f[2], "base", 4)) s->cand = 0;
    else if (len[2] == 4 && !memcmp(f[2], "cand", 4)) s->cand = 1;
    else return hx_fail(err, errlen, "the side must be base or cand");
    char num[64], *end;
    if (!len[3] || len[3] >= sizeof num) return hx_fail(err, errlen, "the value is not a number");
    memcpy(num, f[3], len[3]);
    num[len[3]] = 0;
    errno = 0;
    s->value = strtod(num, &end);
    if (*end || errno || !isfinite(s->value)) return hx_fail(err, errlen, "the value '%s' is not a finite number", num);
    return 1;
}
