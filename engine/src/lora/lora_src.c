/*
 * lora_src.c - what both adapter readers share: freeing a lora_src.
 */
#include "lora_src.h"

#include <stdlib.h>
#include <string.h>

void lora_src_free(lora_src *s) {
    for (int i = 0; i < s->n_pairs; i++) {
        free(s->pairs[i].a);
        free(s->pairs[i].b);
    }
    free(s->pairs);
    memset(s, 0, sizeof *s);
}
