/*
 * testing.h - a minimal unit-test harness: CHECK records a failure with its
 * location and keeps going; TEST_MAIN prints "N passed, N failed" and exits
 * non-zero on any failure, and on a run that made no check at all (a test
 * whose body was skipped by mistake must not pass silently: a test that
 * legitimately has nothing to check here prints SKIP and calls
 * TEST_SKIP_ALL). Every test binary is one file.
 */
#ifndef CX_TESTING_H
#define CX_TESTING_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int t_pass, t_fail;

#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (cond) {                                                              \
            t_pass++;                                                            \
        } else {                                                                 \
            t_fail++;                                                            \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
        }                                                                        \
    } while (0)

#define CHECK_NEAR(a, b, tol, what)                                              \
    CHECK(fabs((double)(a) - (double)(b)) <= (tol), "%s: %.9g vs %.9g (tol %g)", \
          what, (double)(a), (double)(b), (double)(tol))

/* Relative RMS difference of b from a: sqrt(sum (a-b)^2 / sum a^2), or the
 * plain RMS sum when a is all zeros. For logits of two computations. */
static inline double rel_rms(const float *a, const float *b, int n) {
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)a[i] * a[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Whole binary skipped on purpose (e.g. its ISA is missing): prints SKIP
 * with the reason and exits 0 from TEST_MAIN even with no check made. */
static int t_skipped_all;
#define TEST_SKIP_ALL(...)                                                       \
    do {                                                                         \
        t_skipped_all = 1;                                                       \
        printf("SKIP: ");                                                        \
        printf(__VA_ARGS__);                                                     \
        putchar('\n');                                                           \
    } while (0)

#define TEST_MAIN(body)                                                          \
    int main(int argc, char **argv) {                                            \
        (void)argc; (void)argv;                                                  \
        body;                                                                    \
        printf("%s: %d passed, %d failed\n", argv[0], t_pass, t_fail);           \
        if (t_pass + t_fail == 0 && !t_skipped_all) {                            \
            fprintf(stderr, "FAIL %s: ran no check\n", argv[0]);                 \
            return 1;                                                            \
        }                                                                        \
        return t_fail ? 1 : 0;                                                   \
    }

#endif
