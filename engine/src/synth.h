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

/* A synthetic byte-level BPE vocabulary in o200k's shape (synth_bpe.c):
 * tokens in GPT-2's byte characters with their types, the merges, and the
 * first control token's id (bos = special, eos = special + 4 "<|return|>",
 * eot = special + 9 "<|end|>", padding = special + 1). */
typedef struct synth_bpe {
    char **tokens;
    int32_t *types;
    int n;
    char **merges;
    int n_merges;
    int special;
} synth_bpe;

/* Build n tokens (n >= 298); 0, or -1 when n is too small or memory runs out. */
int synth_bpe_make(synth_bpe *v, int n);
void synth_bpe_free(synth_bpe *v);

#endif
