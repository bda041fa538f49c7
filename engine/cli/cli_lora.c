/*
 * cli_lora.c - the adapter side of the `cortex` command: synth-lora,
 * merge-lora, and the --lora adapters generate applies (docs/lora.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_flags.h"
#include "cli_lora.h"

/* The in-memory type --lora-type names; -2 after printing why not. */
static int lora_type(const opts *o) {
    if (!o->lora_type || !strcmp(o->lora_type, "auto")) return -1;
    if (!strcmp(o->lora_type, "f32")) return CX_TYPE_F32;
    if (!strcmp(o->lora_type, "q8_0")) return CX_TYPE_Q8_0;
    if (!strcmp(o->lora_type, "q4_0")) return CX_TYPE_Q4_0;
    die_usage("--lora-type: '%s' is not one of f32|q8_0|q4_0|auto", o->lora_type);
    return -2;
}

/* See cli_lora.h. */
int cli_lora_attach(const cx_model *m, const opts *o, cx_session *s, cx_lora **loaded) {
    cx_lora_params lp = cx_lora_defaults();
    if ((lp.type = lora_type(o)) == -2) return 2;
    cx_lora_use uses[CX_LORA_MAX_SET];
    cx_err err = {0};
    for (int i = 0; i < o->n_lora; i++) {
        if (cx_lora_load(m, o->lora[i], &lp, &loaded[i], &err)) return die("%s", err.msg);
        cx_lora_info in;
        cx_lora_get_info(loaded[i], &in);
        fprintf(stderr, "adapter %s: %d matrices, rank %d..%d, scale %g x alpha/rank, %.1f MiB (%s), loaded in %.1f ms\n",
                o->lora[i], in.n_matrices, in.rank_min, in.rank_max, (double)o->lora_scale[i],
                (double)in.bytes / (1 << 20), cx_type_name(in.type), (double)in.load_ns / 1e6);
        uses[i].lora = loaded[i];
        uses[i].scale = o->lora_scale[i];
    }
    if (o->n_lora && cx_session_set_lora(s, uses, o->n_lora, &err)) return die("%s", err.msg);
    return 0;
}

/* See cli_lora.h: cortex synth-lora. */
int cmd_synth_lora(opts *o) {
    if (!o->model || !o->out) return die_usage("synth-lora needs -m BASE and -o FILE.gguf (see cortex synth-lora --help)");
    cx_lora_synth_params p = {.rank = (int)o->rank, .alpha = o->alpha, .seed = (uint64_t)o->seed,
                              .strength = o->strength};
    cx_err err = {0};
    if (cx_lora_targets_parse(o->targets, &p.targets, &err)) return die_usage("--targets: %s", err.msg);
    p.type = cx_type_from_name(o->type ? o->type : "f32");
    if (p.type != CX_TYPE_F32 && p.type != CX_TYPE_F16 && p.type != CX_TYPE_Q8_0)
        return die_usage("--type: an adapter holds f32, f16 or q8_0, not '%s'", o->type);
    cx_model *m = NULL;
    if (cx_model_load(o->model, o->tokenizer, &m, &err)) return die("%s", err.msg);
    int rc = cx_lora_synth_write(m, &p, o->out, &err);
    cx_model_free(m);
    if (rc) return die("%s", err.msg);
    fprintf(stderr, "wrote %s: rank %d, targets %s, seed %ld\n", o->out, p.rank, o->targets, o->seed);
    return 0;
}

/* See cli_lora.h: cortex merge-lora. */
int cmd_merge_lora(opts *o) {
    if (!o->model || !o->out || !o->n_lora)
        return die_usage("merge-lora needs -m BASE, --lora FILE[:SCALE] and -o FILE.gguf (see cortex merge-lora --help)");
    int type = cx_type_from_name(o->type ? o->type : "f32");
    if (type < 0) return die_usage("--type: unknown type '%s'", o->type);
    cx_err err = {0};
    if (cx_lora_merge(o->model, o->tokenizer, o->lora, o->lora_scale, o->n_lora, o->out, type, &err))
        return die("%s", err.msg);
    fprintf(stderr, "wrote %s: %s with %d adapter%s merged\n", o->out, o->model, o->n_lora, o->n_lora > 1 ? "s" : "");
    return 0;
}
