/*
 * adapters.h - the LoRA adapters a run serves (cortex-bench run --adapters):
 * trace adapter ids 1..K mapped to files, either the adapter files of a
 * directory (sorted by name: the first is id 1) or K deterministic synthetic
 * adapters of one rank written once into a cache directory and reused.
 */
#ifndef CB_ADAPTERS_H
#define CB_ADAPTERS_H

#include "cortex.h"
#include "workload.h"

#define ADAPTERS_MAX 1024

typedef struct adapter_set {
    int n;                            /* ids 1..n */
    char *path[ADAPTERS_MAX];         /* malloc'd */
    char name[ADAPTERS_MAX][64];      /* the file's base name, or synth-K */
    char spec[300];                   /* as given, for the run's record */
} adapter_set;

/* Resolve `spec` ("DIR" or "synth:K,RANK") for model m (loaded from
 * model_path; synthetic adapters are made for it). 0, or -1 with one message. */
int adapters_resolve(const char *spec, const char *model_path, const cx_model *m, adapter_set *out, char *err,
                     size_t errlen);
/* -1 with a message naming the first request whose adapter id no adapter covers, else 0. */
int adapters_check(const adapter_set *a, const wl_workload *wl, char *err, size_t errlen);
/* Free the paths (a may be NULL; the struct itself is the caller's). */
void adapters_free(adapter_set *a);

#endif
