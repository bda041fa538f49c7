/*
 * judge.h - `cortex-bench judge`: the gate's one verdict rule (gate_judge)
 * over samples measured elsewhere, such as ci/gate_ab.sh's alternating kernel
 * timings of two builds (docs/gates.md, "What each gate covers").
 *
 * Input: one sample per line,
 *     METRIC <TAB> lower|higher <TAB> base|cand <TAB> VALUE
 * METRIC is 1..95 bytes without tabs; every line of a metric gives the same
 * direction; VALUE a finite number. Blank lines and lines starting with '#'
 * are skipped. A metric with values on one side only is listed as
 * inconclusive (not judged); at least one metric must have both.
 */
#ifndef CB_JUDGE_H
#define CB_JUDGE_H

#include <stddef.h>

#define JUDGE_MAX_METRICS 256

/* One parsed line. */
typedef struct judge_sample {
    char metric[96];
    int higher_is_better, cand;
    double value;
} judge_sample;

/* Parse one line (without its newline) into *s: 1 a sample, 0 a blank or
 * comment line, -1 malformed with the problem in err. */
int judge_parse_line(const char *line, judge_sample *s, char *err, size_t errlen);

/* judge's options (the flag table, harness/commands.c, fills them); FILE is its positional argument. */
typedef struct judge_opts {
    const char *title, *junit, *summary;
    double threshold, alpha;
} judge_opts;
/* The defaults: threshold 0.10, alpha 0.05, the title "judge". */
void judge_opts_init(void *o);
/* `cortex-bench judge FILE|- [--threshold T] [--alpha A] [--title NAME] [--junit F] [--summary F]`. */
struct cli_args;
int cmd_judge(void *opts, const struct cli_args *a);

#endif
