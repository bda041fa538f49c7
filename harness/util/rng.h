/*
 * rng.h - the harness's one random number generator: xoshiro256** seeded by
 * splitmix64, explicit state (no globals), the same bits on every platform.
 * Traces (trace_gen.c) and the bootstrap (significance.c) both draw from it.
 */
#ifndef CB_RNG_H
#define CB_RNG_H

#include <stdint.h>

/* ---- random numbers: xoshiro256**, state seeded by splitmix64 ------------- */

typedef struct rng {
    uint64_t s[4];
} rng;

/* Seed stream `stream` of `seed`: distinct (seed, stream) pairs give
 * independent-looking sequences. */
void rng_seed(rng *r, uint64_t seed, uint64_t stream);
/* Next 64 random bits. */
uint64_t rng_next(rng *r);
/* Uniform double in [0, 1) with 53 random bits. */
double rng_uniform(rng *r);
/* Uniform integer in [0, n), n >= 1, without modulo bias. */
uint64_t rng_below(rng *r, uint64_t n);
/* Exponential with the given rate (> 0): mean 1/rate. */
double rng_exponential(rng *r, double rate);
/* Standard normal (Marsaglia's polar method; one value per call). */
double rng_normal(rng *r);
/* Natural log and exp computed with IEEE basic operations only, so results
 * are bit-identical on every platform (accurate to ~1e-15 relative). */
double rng_log(double x);
double rng_exp(double x);

#endif
