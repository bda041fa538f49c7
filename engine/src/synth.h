/*
 * synth.h - the deterministic random streams of synthetic files (synth.c),
 * shared with synthetic adapters (lora/lora_synth.c), so equal seeds give
 * equal bytes on every machine.
 */
#ifndef CX_SYNTH_H
#define CX_SYNTH_H

#include <stdint.h>

/* Fill n values N(0, std^2) by Box-Muller from the splitmix64 stream `st`. */
void synth_fill_normal(uint64_t *st, float *out, int64_t n, float std);
/* The stream seed of one named tensor of a file made with `seed`. */
uint64_t synth_name_seed(uint64_t seed, const char *name);

#endif
