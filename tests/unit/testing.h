/*
 * testing.h - a minimal unit-test harness: CHECK records a failure with its
 * location and keeps going; TEST_MAIN prints "N passed, N failed" and exits
 * non-zero on any failure. Every test binary is one file.
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

#define TEST_MAIN(body)                                                          \
    int main(int argc, char **argv) {                                            \
        (void)argc; (void)argv;                                                  \
        body;                                                                    \
        printf("%s: %d passed, %d failed\n", argv[0], t_pass, t_fail);           \
        return t_fail ? 1 : 0;                                                   \
    }

#endif
