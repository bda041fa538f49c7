/*
 * run_endpoint.c - `cortex-bench run --endpoint URL`: what run_execute does
 * for a run over HTTP before anything is stored (see run_cmd.h): refuse the
 * flags only an in-process run has, know the server, fill the run's
 * record of it (its identity, its build where the probe learnt it, and
 * whether its prompt cache may serve the requests: --server-cache).
 */
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "endpoint.h"
#include "run_cmd.h"
#include "workload.h"

/* See run_cmd.h. */
int run_endpoint_open(const run_opts *o, const wl_workload *wl, ep_target *t, run_meta *meta) {
    const char *local = o->threads ? "-t" : o->pin ? "--pin" : o->numa_given ? "--numa" : o->ctx ? "--ctx"
                      : o->tokenizer ? "--tokenizer"
                      : o->sched_given ? "--max-seqs/--max-batch-tokens/--max-queue" : o->kv_given ? "--kv-*/--prefix-cache"
                      : o->adapters ? "--adapters (over HTTP, --adapter-names maps trace ids to the server's names)"
                      : o->lora_budget || o->lora_split ? "--lora-budget/--lora-batching" : NULL;
    if (local) return cli_fail(2, "%s applies to in-process runs; with --endpoint the server decides it", local);
    if (!wl) return cli_fail(2, "--endpoint replays prompt sets and traces (standard, prompts:FILE, trace:FILE), not the"
                                " synthetic test '%s'", o->workload);
    char err[1024];
    if (ep_init(t, o->endpoint, o->api_key, err, sizeof err)) return cli_fail(2, "%s", err);
    t->server_cache = o->server_cache == 1; /* --server-cache on */
    if (o->adapter_names && ep_set_adapters(t, o->adapter_names, err, sizeof err)) return cli_fail(2, "%s", err);
    if (ep_check_workload(t, wl, err, sizeof err)) return cli_fail(2, "%s", err);
    if (ep_probe(t, o->model, err, sizeof err)) return cli_fail(1, "%s", err);
    if (t->model_unlisted) /* llama-server serves any name; vLLM will answer 404 to every request */
        fprintf(stderr, "cortex-bench: note: %s/models does not list model '%s' (%s)\n", t->base, t->model, t->server);
    snprintf(meta->endpoint, sizeof meta->endpoint, "%s", t->base);
    snprintf(meta->server, sizeof meta->server, "%s", t->server);
    meta->server_info = t->info;
    snprintf(meta->server_cache, sizeof meta->server_cache, "%s", t->server_cache ? "on" : "off");
    snprintf(meta->server_build, sizeof meta->server_build, "%s", t->build); /* the answers' fingerprints win (store.c) */
    snprintf(meta->model_path, sizeof meta->model_path, "%s", t->base);
    snprintf(meta->model_name, sizeof meta->model_name, "%.*s", (int)sizeof meta->model_name - 1, t->model);
    snprintf(meta->model_type, sizeof meta->model_type, "http");
    snprintf(meta->isa, sizeof meta->isa, "remote");
    return 0;
}
