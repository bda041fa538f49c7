/*
 * cortex_env.h - the environment convention of the `cortex` and `cortex-bench`
 * commands, written once for both: CORTEX_WEIGHTS=mmap|hugepages,
 * CORTEX_REPACK=0 and CORTEX_ISA=auto|scalar|avx2|avxvnni|avx512|avx512vnni|avx512bf16 become a cx_model_params.
 *
 * The library reads no environment variables (a program embedding it says
 * what it wants through cx_model_params); this header is compiled into each
 * command that follows the convention, which is why its one function is
 * defined here, static inline, rather than in the library.
 */
#ifndef CORTEX_ENV_H
#define CORTEX_ENV_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"

/*
 * Fill *p with cx_model_defaults() changed by the environment: CORTEX_WEIGHTS
 * "mmap" or "hugepages" (any other value: auto), CORTEX_REPACK "0" (off),
 * CORTEX_ISA (unset, empty or "auto": the best). Returns 0, or CX_EINVAL with
 * one line naming the variable when CORTEX_ISA is unknown or unavailable on
 * this CPU, so a command can refuse before it touches anything. p->isa points
 * into the environment: valid while it is not changed.
 */
static inline int cx_model_params_from_env(cx_model_params *p, cx_err *err) {
    *p = cx_model_defaults();
    const char *w = getenv("CORTEX_WEIGHTS");
    if (w && !strcmp(w, "mmap")) p->weights = CX_WEIGHTS_MMAP;
    else if (w && !strcmp(w, "hugepages")) p->weights = CX_WEIGHTS_HUGEPAGES;
    const char *r = getenv("CORTEX_REPACK");
    if (r && !strcmp(r, "0")) p->repack = 0;
    const char *isa = getenv("CORTEX_ISA");
    p->isa = isa && *isa ? isa : NULL;
    cx_err e = {0};
    if (!cx_isa_resolve(p->isa, &e)) {
        if (err) {
            err->code = CX_EINVAL;
            snprintf(err->msg, sizeof err->msg, "CORTEX_ISA=%.40s: %.400s", isa, e.msg);
        }
        return CX_EINVAL;
    }
    return 0;
}

#endif /* CORTEX_ENV_H */
