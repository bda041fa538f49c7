/*
 * run_cmd.c - `cortex-bench run`. A run loads the model once, opens the
 * counters (before any engine thread exists, so the thread pool is counted),
 * records the run as incomplete, runs warm-up and counted repetitions, and
 * stores everything in one transaction. One run per thread count of -t.
 */
#include "run_cmd.h"

#include "adapters.h"
#include "cortex_tools.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"
#include "cortex.h"
#include "cortex_env.h"
#include "counters.h"
#include "endpoint.h"
#include "env.h"
#include "export.h"
#include "hw_store.h"
#include "kv_opts.h"
#include "roofline.h"
#include "runner.h"
#include "sha256.h"
#include "show.h"
#include "store.h"
#include "store_read.h"
#include "summary.h"
#include "validity.h"
#include "version.h"
#include "workload.h"
#include "hx_err.h"

/* The model file's SHA-256, from the database's cache when size and mtime match. */
static int model_hash(store *s, const char *path, char out[65], char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) != 0) return hx_fail(err, errlen, "%s: %s", path, strerror(errno));
    int64_t mt = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    if (store_cached_hash(s, path, (int64_t)st.st_size, mt, out)) return 0;
    if (sha256_hex_file(path, out, err, errlen)) return -1;
    store_cache_hash(s, path, (int64_t)st.st_size, mt, out);
    return 0;
}

/* The prompt sets selected by name (--workload NAME): prompts/NAME.jsonl.
 * "challenge" stands in for the benchmark challenge's own 10 prompts;
 * "lookup" asks to edit, repeat or summarise text the prompt holds, what
 * --spec ngram drafts well (prompts/README.md). */
static const char *const NAMED_SETS[] = {"standard", "challenge", "lookup"};

/* Resolve a named set to prompts/NAME.jsonl: $CORTEX_PROMPTS, ./prompts, or
 * the source tree. 1 when `name` is one of NAMED_SETS, else 0. */
static int named_set_path(const char *name, char *out, size_t n) {
    size_t k = 0;
    while (k < sizeof NAMED_SETS / sizeof *NAMED_SETS && strcmp(name, NAMED_SETS[k])) k++;
    if (k == sizeof NAMED_SETS / sizeof *NAMED_SETS) return 0;
    const char *dir = getenv("CORTEX_PROMPTS");
    if (dir) { snprintf(out, n, "%s/%s.jsonl", dir, name); return 1; }
    snprintf(out, n, "prompts/%s.jsonl", name);
    if (access(out, R_OK) != 0) snprintf(out, n, "%s/prompts/%s.jsonl", CORTEX_SRC_DIR, name);
    return 1;
}

/* The NUMA policy as the run had it, for run_meta.numa: its name, then the
 * nodes it spread over (a list cut at 24 characters: run_meta.numa is 64),
 * or that the machine has one node and the policy did nothing, or that the
 * weights were mapped from the file (page cache, not placed). Read after the
 * model loaded. */
static void numa_record(char *out, size_t n) {
    cx_placement_info pi;
    cx_placement_get(&pi);
    const char *name = cx_numa_policy_name(pi.numa);
    if (pi.numa_nodes <= 1)
        snprintf(out, n, "%s (one NUMA node%s)", name, pi.numa == CX_NUMA_DEFAULT ? "" : ": no effect");
    else
        snprintf(out, n, "%s nodes=%.24s%s", name, pi.nodes, pi.mapped_unplaced ? " (mapped: not placed)" : "");
}

/* SHA-256 of everything that must match for two runs to be compared. */
static void compare_key(const run_meta *m, const env_info *e, char out[65]) {
    char buf[2048];
    /* The KV configuration only when not the default, so default runs keep
     * the key runs had before schema v6 (trends and baselines continue). */
    int kv_default = !m->kv_config[0] || !strcmp(m->kv_config, KV_OPTS_DEFAULT_CONFIG);
    int k = snprintf(buf, sizeof buf, "cpu=%s|isa=%s|cores=%d|model=%s|type=%s|threads=%d|build=%s|ctx=%d|conc=%d|eos=%d|kernels=%s%s%s",
             e->cpu_model, e->isa_flags, e->logical_cores, m->model_sha256, m->model_type, m->threads, m->build_type,
             m->n_ctx, m->concurrency, m->ignore_eos, m->isa, kv_default ? "" : "|kv=", kv_default ? "" : m->kv_config);
    /* Served workloads: the scheduler, the offered rate and the SLOs decide what the numbers mean. */
    if (m->sched_config[0] && k > 0 && (size_t)k < sizeof buf)
        k += snprintf(buf + k, sizeof buf - (size_t)k, "|sched=%s|rate=%.6g|slo=%s", m->sched_config, m->rate, m->slo);
    /* Prompts in a chat format are other tokens than the plain text (only when set: older keys stay). */
    if (m->chat_format[0] && k > 0 && (size_t)k < sizeof buf)
        k += snprintf(buf + k, sizeof buf - (size_t)k, "|chat=%s", m->chat_format);
    /* a run that tolerated failures measured fewer requests than one that did not */
    if (m->allow_failures > 0 && k > 0 && (size_t)k < sizeof buf)
        k += snprintf(buf + k, sizeof buf - (size_t)k, "|allow_failures=%g", m->allow_failures);
    /* Over HTTP: the server and what it serves decide what the numbers mean (the rate and SLOs too), and
     * whether its prompt cache may serve prompts. "on" asks the server nothing, as every run over HTTP
     * did before --server-cache: those keep their key; "off" is another configuration. */
    if (m->endpoint[0] && k > 0 && (size_t)k < sizeof buf)
        k += snprintf(buf + k, sizeof buf - (size_t)k, "|endpoint=%s|server=%s|rate=%.6g|slo=%s", m->endpoint, m->server,
                      m->rate, m->slo);
    if (m->endpoint[0] && strcmp(m->server_cache, "on") && k > 0 && (size_t)k < sizeof buf)
        k += snprintf(buf + k, sizeof buf - (size_t)k, "|server_cache=%s", m->server_cache);
    /* A testbed named by the user (--testbed, CORTEX_TESTBED) is a configuration of its own; the default
     * one is made of fields the key has already (only when named: older keys stay). */
    char derived[sizeof m->testbed];
    env_testbed(e, derived, sizeof derived);
    if (m->testbed[0] && strcmp(m->testbed, derived) && k > 0 && (size_t)k < sizeof buf)
        k += snprintf(buf + k, sizeof buf - (size_t)k, "|testbed=%s", m->testbed);
    /* Thread placement and the NUMA policy decide what is measured, but only when set, so runs without them keep
     * their key: a pin policy (a CPU list is in `affinity` below already), a NUMA policy other than default (its
     * name, the first word of m->numa; asked for is what counts, with one node or several). */
    if (cx_pin_policy_from_name(m->pinned) > CX_PIN_NONE && k > 0 && (size_t)k < sizeof buf)
        k += snprintf(buf + k, sizeof buf - (size_t)k, "|pin=%s", m->pinned);
    int numa_len = (int)strcspn(m->numa, " ");
    if (numa_len && !(numa_len == 7 && !strncmp(m->numa, "default", 7)) && k > 0 && (size_t)k < sizeof buf)
        k += snprintf(buf + k, sizeof buf - (size_t)k, "|numa=%.*s", numa_len, m->numa);
    /* Speculative decoding (schema v14): other passes, other timings; only when set, so other runs keep their key. */
    if (m->spec_config[0] && k > 0 && (size_t)k < sizeof buf)
        k += snprintf(buf + k, sizeof buf - (size_t)k, "|spec=%s", m->spec_config);
    /* The silicon beyond its brand string, and the machine as this run had it (schema v12): the CPUs the
     * process could use (taskset, cpusets), the cgroup's CPU quota, transparent huge pages. */
    if (k > 0 && (size_t)k < sizeof buf)
        snprintf(buf + k, sizeof buf - (size_t)k, "|cpu_id=%s/%d/%d/%d|microcode=%s|affinity=%s|cpus_allowed=%d|quota=%.6g|thp=%s",
                 e->cpu_vendor, e->cpu_family, e->cpu_model_id, e->cpu_stepping, e->microcode, m->affinity,
                 m->cpus_allowed, m->cgroup_cpus, m->thp);
    sha256_ctx c;
    uint8_t d[32];
    sha256_init(&c);
    sha256_update(&c, buf, strlen(buf));
    sha256_final(&c, d);
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* --slo "ttft=MS,tpot=MS[,e2e=MS]" (any subset, each at most once) into
 * cfg; its normal form ("ttft=500,tpot=50") into out. 0, or 2 after the message. */
static int parse_slo(const char *v, run_config *cfg, char *out, size_t n) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", v);
    int k = 0;
    out[0] = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        double *slot = NULL;
        if (eq) {
            *eq = 0;
            slot = !strcmp(tok, "ttft") ? &cfg->slo_ttft_ms : !strcmp(tok, "tpot") ? &cfg->slo_tpot_ms
                 : !strcmp(tok, "e2e") ? &cfg->slo_e2e_ms : NULL;
        }
        if (!slot) return cli_fail(2, "--slo: '%s' is not ttft=MS, tpot=MS or e2e=MS", tok);
        if (*slot > 0) return cli_fail(2, "--slo: %s given twice", tok);
        char *end;
        double ms = strtod(eq + 1, &end);
        if (end == eq + 1 || *end || !(ms > 0) || ms > 1e9)
            return cli_fail(2, "--slo: %s=%s is not a number of milliseconds in (0, 1e9]", tok, eq + 1);
        *slot = ms;
        k += snprintf(out + k, n - (size_t)k, "%s%s=%g", k ? "," : "", tok, ms);
    }
    if (!k) return cli_fail(2, "%s", "--slo needs ttft=MS, tpot=MS and/or e2e=MS");
    return 0;
}

/* --rate "R[,R...]" (requests/s, each > 0) into rates, or "sweep". 0, or 2 after the message. */
static int parse_rates(const char *v, double *rates, int *n, int *sweep) {
    *n = 0;
    *sweep = !strcmp(v, "sweep");
    if (*sweep) return 0;
    for (const char *p = v; *p;) {
        char *end;
        double r = strtod(p, &end);
        if (end == p || !(r > 0) || r > 1e6 || (*end && *end != ',') || *n == RUN_MAX_RATES)
            return cli_fail(2, "--rate '%s' is not sweep or up to %d rates R[,R...] in requests/s (0 < R <= 1e6)", v,
                            RUN_MAX_RATES);
        rates[(*n)++] = r;
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* /proc/loadavg's three averages as stored ("0.52 0.31 0.20"); "" when unreadable (stored as NULL). */
static void load_text(char *out, size_t n) {
    double l[3];
    if (env_loadavg(l) == 0) snprintf(out, n, "%.2f %.2f %.2f", l[0], l[1], l[2]);
    else if (n) out[0] = 0;
}

/* Wall time of this command's runs and the part of it spent writing them to the
 * store (store_begin_run + store_finish_run), printed with "stored as run":
 * what a store on a server costs a run. */
static double g_run_ms, g_store_ms;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The drafter of the runs at `threads` threads (--spec): made once the model
 * has loaded, its making timed (a self-draft quantizes the model: seconds per
 * GiB) and recorded in *meta, never inside a request's time. 0, or the exit
 * code after the message (2: the drafter does not fit the model). */
static int spec_open(const run_opts *o, const cx_model *model, int threads, cx_drafter **out, run_meta *meta) {
    cx_spec_params p = o->spec;
    p.adapt = !o->spec_fixed;
    p.n_threads = threads;
    p.tmp_dir = getenv("TMPDIR"); /* a self-draft's quantized copy, written, loaded and unlinked */
    cx_err e = {0};
    double t0 = now_ms();
    if (cx_drafter_new(model, &p, out, &e))
        return cli_fail(e.code == CX_EINVAL ? CB_EXIT_USAGE : CB_EXIT_FAILED, "--spec: %s", e.msg);
    meta->spec_setup_ms = now_ms() - t0;
    snprintf(meta->spec_drafter, sizeof meta->spec_drafter, "%s", cx_drafter_describe(*out));
    fprintf(stderr, "cortex-bench: speculation: %s, made in %.1f ms (before the run: part of no request)\n",
            meta->spec_drafter, meta->spec_setup_ms);
    return 0;
}

/* The speculation as stored and compared (runs.spec_config): the kind ("ngram",
 * "self:q4_0", or "model:FILE@SHA" with the draft file's name and the first 16
 * hex digits of its SHA-256), the draft lengths, adaptive or fixed. */
static void spec_config_text(const run_opts *o, const char *draft_sha, char *out, size_t n) {
    char kind[96];
    const char *path = o->spec.draft_path ? o->spec.draft_path : "", *base = strrchr(path, '/');
    if (o->spec.kind == CX_SPEC_SELF) snprintf(kind, sizeof kind, "self:%s", cx_type_name(o->spec.self_type));
    else if (o->spec.kind == CX_SPEC_MODEL) snprintf(kind, sizeof kind, "model:%.48s@%.16s", base ? base + 1 : path, draft_sha);
    else snprintf(kind, sizeof kind, "%s", cx_spec_kind_name(o->spec.kind));
    snprintf(out, n, "%s,max=%d,min=%d,%s", kind, o->spec.draft_max, o->spec.draft_min, o->spec_fixed ? "fixed" : "adaptive");
}

/* One run at one thread count: record, warm up, measure, add the roofline
 * figures (rm may be NULL: the model's bytes per token are unknown), store. */
static int run_one(store *db, const cx_model *model, const wl_workload *wl, const run_opts *o, run_config cfg,
                   run_meta meta, const env_info *env, ctr_set *ctr, const roof_model *rm, int64_t *id_out) {
    char err[512], fp[65];
    compare_key(&meta, env, meta.compare_key);
    load_text(meta.load_before, sizeof meta.load_before); /* the load the run starts under */
    /* The machine's measured read bandwidth at this thread count, if `cortex-bench hw` ran here. */
    hw_ref hw;
    env_fingerprint(env, fp);
    if (hw_store_lookup(db, fp, 0, meta.threads, &hw) != 1) memset(&hw, 0, sizeof hw);
    meta.hw_id = hw.id;
    int64_t id;
    double t_run = now_ms();
    if (store_begin_run(db, &meta, env, &id, err, sizeof err)) return cli_fail(1, "%s", err);
    g_store_ms += now_ms() - t_run;
    *id_out = id;
    rep_result *reps = calloc((size_t)o->reps, sizeof(rep_result));
    if (!reps) return cli_fail(1, "%s", "out of memory");
    char label[64];
    int rc = 0;
    for (long w = 0; w < o->warmup && !rc; w++) {
        rep_result tmp;
        snprintf(label, sizeof label, "run %lld warm-up", (long long)id);
        cfg.label = label;
        cfg.rep_index = (int)w;
        cfg.reps_total = (int)o->warmup;
        rc = runner_rep(model, wl, &cfg, NULL, &tmp, err, sizeof err);
        rep_free(&tmp);
    }
    snprintf(label, sizeof label, "run %lld t=%d", (long long)id, cfg.threads);
    cfg.label = label;
    cfg.reps_total = (int)o->reps;
    for (long r = 0; r < o->reps && !rc; r++) {
        cfg.rep_index = (int)r;
        rc = runner_rep(model, wl, &cfg, ctr, &reps[r], err, sizeof err);
    }
    if (!rc && rm) roof_apply(reps, (int)o->reps, rm, hw.read_gbs, cfg.batched ? cfg.n_seq : 1);
    char load_after[sizeof meta.load_after];
    load_text(load_after, sizeof load_after);
    run_verdict v;
    if (!rc) validity_judge(reps, (int)o->reps, &meta, &v);
    double t_store = now_ms();
    int stored = rc ? 0 : !store_finish_run(db, id, reps, (int)o->reps, &v, load_after, err, sizeof err);
    g_store_ms += now_ms() - t_store;
    g_run_ms += now_ms() - t_run;
    if (rc) {
        store_fail_run(db, id, err);
        fprintf(stderr, "cortex-bench: run %lld failed: %s\n", (long long)id, err);
    } else if (!stored) {
        fprintf(stderr, "cortex-bench: %s\n", err);
        rc = -1;
    } else if (!v.valid) {
        fprintf(stderr, "cortex-bench: run %lld is INVALID: %s\n", (long long)id, v.reasons);
    }
    for (long r = 0; r < o->reps; r++) rep_free(&reps[r]);
    free(reps);
    return rc ? CB_EXIT_FAILED : v.valid ? 0 : CB_EXIT_INVALID;
}

/* The in-process half of run_execute's checks: the thread grid (-t), pinning,
 * the model loaded (*model) and the KV options tried against it; the
 * model's and kernels' fields of *meta. 0, or the exit code after the message. */
static int run_model_open(const run_opts *o, run_meta *meta, cx_model **model, int *threads,
                          int *n_threads) {
    char err[512], tbuf[128];
    *model = NULL;
    *n_threads = 0;
    snprintf(tbuf, sizeof tbuf, "%s", o->threads ? o->threads : "");
    for (char *tok = strtok(tbuf, ","); tok && *n_threads < 32; tok = strtok(NULL, ",")) { /* "2" or "1,2,4" */
        long t;
        if (cli_parse_int("-t", tok, 1, 256, &t)) return 2;
        threads[(*n_threads)++] = (int)t;
    }
    if (o->pin_cpus && env_pin_cpus(o->pin_cpus, err, sizeof err)) return cli_fail(2, "--pin: %s", err);
    if (!*n_threads) { /* the CPUs this process may use (after --pin; taskset, cpusets), capped by its cgroup's quota */
        env_run_state rs;
        env_run_state_collect(&rs);
        threads[(*n_threads)++] = env_default_threads(&rs);
    }
    cx_err ce = {0};
    /* The engine's placement (--pin POLICY, --numa) before the model loads: its weights are bound as they are
     * read in. Set on every run, so a run in this process never inherits another's. */
    if (cx_set_placement((cx_pin_policy)o->pin_policy, (cx_numa_policy)o->numa, &ce)) return cli_fail(2, "%s", ce.msg);
    cx_model_params mp; /* CORTEX_WEIGHTS, CORTEX_REPACK, CORTEX_ISA */
    if (cx_model_params_from_env(&mp, &ce)) return cli_fail(2, "%s", ce.msg);
    const char *isa = cx_isa_resolve(mp.isa, NULL); /* the kernels' instruction set (valid: checked above) */
    snprintf(meta->isa, sizeof meta->isa, "%s", isa);
    if (cx_model_load_ex(o->model, o->tokenizer, &mp, model, &ce)) return cli_fail(1, "%s", ce.msg);
    /* The KV options against this model (a hot budget below one block, an
     * unwritable spill file): a small cache made and freed at once. */
    cx_kv_params probe = o->kv;
    probe.max_tokens = 4 * CX_KV_BLOCK;
    cx_kv_cache *probe_cache = NULL;
    if (cx_kv_cache_new(*model, &probe, &probe_cache, &ce)) {
        cx_model_free(*model);
        *model = NULL;
        return cli_fail(2, "%s", ce.msg);
    }
    cx_kv_cache_free(probe_cache);
    kv_opts_config(&o->kv, meta->kv_config, sizeof meta->kv_config);
    numa_record(meta->numa, sizeof meta->numa);
    if (o->pin_policy != CX_PIN_NONE || o->numa != CX_NUMA_DEFAULT) { /* what was asked for, and what it met */
        char line[512];
        cx_placement_describe(line, sizeof line);
        fprintf(stderr, "cortex-bench: placement: %s\n", line);
    }
    /* Weights in huge pages decode faster than mapped ones: part of the
     * kernel configuration, so runs differing in it are not compared. */
    const cx_model_info *mi = cx_model_get_info(*model);
    if (!strncmp(mi->weights_memory, "hugepages", 9))
        snprintf(meta->isa, sizeof meta->isa, "%s+hp%s", isa,
                 strstr(mi->weights_memory, "repacked x16") ? "x16" : strstr(mi->weights_memory, "repacked") ? "x8" : "");
    snprintf(meta->model_path, sizeof meta->model_path, "%s", o->model);
    snprintf(meta->model_type, sizeof meta->model_type, "%s", cx_type_name(mi->main_type));
    snprintf(meta->model_name, sizeof meta->model_name, "%s", mi->name);
    meta->model_params = mi->n_params;
    meta->model_bytes = mi->weight_bytes;
    /* The context the sessions will have: -c as given, never silently capped (a run at 256 is not a run at 2048) */
    if (o->ctx > mi->n_ctx) {
        cli_fail(CB_EXIT_USAGE, "-c %ld is more than the model's context of %d tokens (%s)", o->ctx, mi->n_ctx, o->model);
        cx_model_free(*model); /* after the message: mi is the model's */
        *model = NULL;
        return CB_EXIT_USAGE;
    }
    meta->n_ctx = runner_n_ctx(*model, (int)o->ctx);
    return 0;
}

/* See run_cmd.h. */
void run_opts_init(void *op) {
    run_opts *o = op;
    memset(o, 0, sizeof *o);
    o->workload = "standard";
    o->db = cli_default_db();
    o->fmt = "md";
    o->reps = 3;
    o->warmup = 1;
    o->concurrency = 1;
    o->mode = -1;
    o->kv = cx_kv_defaults();
    o->spec = cx_spec_defaults(); /* the engine's draft lengths; speculation itself is asked for (--spec) */
    o->spec.kind = CX_SPEC_NONE;
    cx_sched_params sp = cx_sched_defaults(); /* the scheduler as `cortex serve` starts it */
    o->max_seqs = sp.max_seqs;
    o->max_batch_tokens = sp.max_batch_tokens;
    o->max_queue = sp.max_queue;
    o->spec_max_batch = CX_SCHED_SPEC_MAX_BATCH;
    o->lora_type = -1;
}

/* See run_cmd.h. */
int run_opts_check(run_opts *o, const cx_flags *f) {
    o->sched_given = cx_flags_given(f, offsetof(run_opts, max_seqs), sizeof o->max_seqs) ||
                     cx_flags_given(f, offsetof(run_opts, max_batch_tokens), sizeof o->max_batch_tokens) ||
                     cx_flags_given(f, offsetof(run_opts, max_queue), sizeof o->max_queue) ||
                     cx_flags_given(f, offsetof(run_opts, spec_max_batch), sizeof o->spec_max_batch);
    o->kv_given = cx_flags_given(f, offsetof(run_opts, kv), sizeof o->kv);
    o->lora_type_given = cx_flags_given(f, offsetof(run_opts, lora_type), sizeof o->lora_type);
    o->server_cache_given = cx_flags_given(f, offsetof(run_opts, server_cache), sizeof o->server_cache);
    o->numa_given = cx_flags_given(f, offsetof(run_opts, numa), sizeof o->numa);
    /* --pin: a policy name, else a CPU list (env_pin_cpus checks it when the run starts) */
    int pp = o->pin ? cx_pin_policy_from_name(o->pin) : -1;
    o->pin_policy = pp > 0 ? pp : CX_PIN_NONE;
    o->pin_cpus = o->pin && pp < 0 ? o->pin : NULL;
    if (o->lora_budget == CX_KV_UNLIMITED) o->lora_budget = 0; /* the scheduler's "unlimited" */
    if (!o->model && !o->endpoint) return cli_fail(2, "%s", "run needs --model MODEL (or --endpoint URL)");
    if (!o->endpoint && (o->api_key || o->adapter_names || o->server_cache_given))
        return cli_fail(2, "%s applies to runs over HTTP: give --endpoint URL",
                        o->api_key ? "--api-key" : o->adapter_names ? "--adapter-names" : "--server-cache");
    if (!export_format_known(o->fmt)) return cli_fail(2, "-o: unknown format '%s' (%s)", o->fmt, EXPORT_FORMATS);
    if (o->kv.spill_path && !*o->kv.spill_path) return cli_fail(2, "%s", "--kv-spill needs a file path");
    if (o->max_batch_tokens < o->max_seqs)
        return cli_fail(2, "--max-batch-tokens %ld is below --max-seqs %ld: every running sequence decodes one token "
                        "per step", o->max_batch_tokens, o->max_seqs);
    /* --spec and its draft flags (as `cortex generate` takes them: --draft alone means --spec model) */
    int kind_given = cx_flags_given(f, offsetof(run_opts, spec.kind), sizeof o->spec.kind);
    if (o->spec.draft_path && !kind_given) o->spec.kind = CX_SPEC_MODEL;
    if (o->spec.kind == CX_SPEC_MODEL && !o->spec.draft_path) return cli_fail(2, "%s", "--spec model needs --draft MODEL");
    if (o->spec.draft_path && o->spec.kind != CX_SPEC_MODEL)
        return cli_fail(2, "--draft applies to --spec model, not --spec %s", cx_spec_kind_name(o->spec.kind));
    if (o->spec.kind == CX_SPEC_NONE &&
        (o->spec_fixed || cx_flags_given(f, offsetof(run_opts, spec.draft_max), sizeof o->spec.draft_max) ||
         cx_flags_given(f, offsetof(run_opts, spec.draft_min), sizeof o->spec.draft_min) ||
         cx_flags_given(f, offsetof(run_opts, spec_max_batch), sizeof o->spec_max_batch)))
        return cli_fail(2, "%s", "--draft-max, --draft-min, --draft-fixed and --spec-max-batch apply with --spec KIND");
    if (o->spec.draft_min > o->spec.draft_max)
        return cli_fail(2, "--draft-min %d is above --draft-max %d: no draft would be checked", o->spec.draft_min,
                        o->spec.draft_max);
    if (o->spec.kind != CX_SPEC_NONE && o->endpoint)
        return cli_fail(2, "%s", "--spec applies in-process; over HTTP speculation is the server's own configuration"
                        " (its timings' draft_n and draft_n_accepted are recorded when it reports them)");
    return 0;
}

int run_execute(const run_opts *op, int64_t *ids, int *n_ids_out) {
    run_opts o = *op;
    int argc = o.argc;
    char **argv = o.argv;
    /* The workload: a prompt set, a trace, or a synthetic test. */
    run_config cfg = {0};
    run_meta meta = {0};
    wl_workload wl = {0};
    char err[512], path[1024];
    int np = 0, ng = 0, nseq = 0, batched = 0;
    const char *wl_path = NULL;
    if (named_set_path(o.workload, path, sizeof path)) {
        wl_path = path;
    } else if (!strncmp(o.workload, "trace:", 6) || !strncmp(o.workload, "prompts:", 8)) {
        wl_path = strchr(o.workload, ':') + 1;
    } else if (!strncmp(o.workload, "multiseq:", 9) || !strncmp(o.workload, "batched:", 8)) {
        if (runner_parse_multiseq(o.workload, &nseq, &np, &ng, &batched))
            return cli_fail(2, batched ? "'%s' is not batched:NSEQ,CTX,GEN (NSEQ in 1..64, CTX and GEN >= 1)"
                                       : "'%s' is not multiseq:NSEQ,CTX,GEN (NSEQ in 1..64, CTX and GEN >= 1)",
                            o.workload);
        if (o.depth) return cli_fail(2, "%s", "-d (KV depth) applies to ppN, tgN, pgN,M, not multiseq or batched");
    } else if (runner_parse_test(o.workload, &np, &ng) != 0) {
        return cli_fail(2, "unknown workload '%s' (a prompt set: standard, challenge or lookup; trace:FILE, prompts:FILE, ppN,"
                        " tgN, pgN,M, multiseq:N,C,G, batched:N,C,G)", o.workload);
    }
    if (wl_path && wl_load(wl_path, &wl, err, sizeof err)) return cli_fail(2, "%s", err);
    if (!wl_path && o.mode >= 0) return cli_fail(2, "--mode %s applies to prompt sets and traces, not synthetic tests",
                                             o.mode == RUN_OPEN ? "open" : "closed");
    if (o.depth && wl_path) return cli_fail(2, "%s", "-d (KV depth) applies to synthetic tests (ppN, tgN, pgN,M)");
    cfg.mode = wl_path ? (o.mode >= 0 ? o.mode : wl.kind == WL_TRACE ? RUN_OPEN : RUN_CLOSED) : RUN_SYNTHETIC;
    if (cfg.mode == RUN_OPEN && wl.kind != WL_TRACE) {
        wl_free(&wl);
        return cli_fail(2, "--mode open needs a trace with arrival times; '%s' is a prompt set", o.workload);
    }
    /* The request scheduler serves prompt sets and traces; synthetic tests drive the engine directly. */
    double rates[RUN_MAX_RATES];
    int n_rates = 0, sweep = 0;
    if (o.adapters && !nseq && (!wl_path || wl.kind != WL_TRACE)) {
        wl_free(&wl);
        return cli_fail(2, "--adapters applies to traces (their requests name adapters) and multiseq/batched (sequence i "
                        "applies adapter i mod K + 1), not '%s'", o.workload);
    }
    if ((o.lora_budget || o.lora_split) && (!wl_path || wl.kind != WL_TRACE)) {
        wl_free(&wl);
        return cli_fail(2, "--%s applies to traces served by the scheduler, not '%s'",
                        o.lora_budget ? "lora-budget" : "lora-batching", o.workload);
    }
    if ((o.lora_budget || o.lora_split || o.lora_type_given) && !o.adapters) {
        wl_free(&wl);
        return cli_fail(2, "--%s needs --adapters",
                        o.lora_budget ? "lora-budget" : o.lora_split ? "lora-batching" : "lora-type");
    }
    if (!wl_path && (o.sched_given || o.rate || o.slo)) {
        wl_free(&wl);
        return cli_fail(2, "--%s applies to prompt sets and traces (served by the scheduler), not synthetic tests",
                        o.rate ? "rate" : o.slo ? "slo" : "max-seqs/--max-batch-tokens/--max-queue/--spec-max-batch");
    }
    if (o.rate && parse_rates(o.rate, rates, &n_rates, &sweep)) { wl_free(&wl); return 2; }
    if (o.rate && o.mode == RUN_CLOSED) {
        wl_free(&wl);
        return cli_fail(2, "%s", "--rate is an open loop (Poisson arrivals); --mode closed takes --concurrency instead");
    }
    if (o.slo && parse_slo(o.slo, &cfg, meta.slo, sizeof meta.slo)) { wl_free(&wl); return 2; }
    /* --spec: decoding by speculation: prompt sets and traces through the scheduler, which speculates in its
     * steps (serve.c); synthetic tgN and pgN,M after their prompt (spec_run.h). */
    int spec = o.spec.kind != CX_SPEC_NONE;
    const char *no_spec =
        spec && !wl_path && (nseq || !ng) ? "it applies to decoding: prompt sets, traces, tgN and pgN,M" : NULL;
    if (no_spec) {
        cli_fail(2, "--spec %s on '%s': %s", cx_spec_kind_name(o.spec.kind), o.workload, no_spec);
        wl_free(&wl);
        return 2;
    }
    cfg.max_seqs = (int)o.max_seqs;
    cfg.max_batch_tokens = (int)o.max_batch_tokens;
    cfg.max_queue = (int)o.max_queue;
    cfg.spec_max_batch = (int)o.spec_max_batch;
    if (wl_path && spec) /* the scheduler speculates while at most spec_batch sequences decode */
        snprintf(meta.sched_config, sizeof meta.sched_config, "seqs=%d,batch=%d,queue=%d,spec_batch=%d", cfg.max_seqs,
                 cfg.max_batch_tokens, cfg.max_queue, cfg.spec_max_batch);
    else if (wl_path)
        snprintf(meta.sched_config, sizeof meta.sched_config, "seqs=%d,batch=%d,queue=%d", cfg.max_seqs,
                 cfg.max_batch_tokens, cfg.max_queue);
    cfg.concurrency = (int)o.concurrency;
    cfg.ignore_eos = !o.respect_eos;
    cfg.test_prompt = np;
    cfg.test_gen = ng;
    cfg.test_depth = (int)o.depth;
    cfg.n_seq = nseq;
    cfg.batched = batched;
    cfg.n_ctx = (int)o.ctx;
    cfg.progress = !o.no_progress && isatty(2) && !(getenv("CI") && !strcmp(getenv("CI"), "true"));

    env_info env;
    env_collect(&env);
    /* Everything that can be wrong with the input (the server included) is
     * checked before the database is touched, so bad input leaves no trace in it. */
    cx_model *model = NULL;
    ep_target ep;
    memset(&ep, 0, sizeof ep);
    int threads[32], n_threads = 0, rc0 = o.endpoint ? run_endpoint_open(&o, wl_path ? &wl : NULL, &ep, &meta)
                                                      : run_model_open(&o, &meta, &model, threads, &n_threads);
    if (rc0) {
        ep_free(&ep);
        wl_free(&wl);
        return rc0;
    }
    /* The machine as these runs have it: after --pin, before any engine thread exists. */
    env_run_state rs;
    env_run_state_collect(&rs);
    snprintf(meta.affinity, sizeof meta.affinity, "%s", rs.affinity);
    meta.cpus_allowed = rs.cpus_allowed;
    meta.cgroup_cpus = rs.cgroup_cpus;
    snprintf(meta.thp, sizeof meta.thp, "%s", rs.thp);
    /* --pin POLICY: this thread is thread 0 of every pass (sessions, batches and the scheduler are stepped from
     * it), so it goes on the policy's first CPU, after the affinity above was recorded as the process's. */
    cx_err pe = {0};
    if (model && cx_pin_caller(&pe)) {
        cx_model_free(model);
        wl_free(&wl);
        return cli_fail(1, "--pin %s: %s", o.pin, pe.msg);
    }
    /* --spec: the drafter of the first thread count's runs (a bad draft model stops here, before the database) */
    cx_drafter *drafter = NULL;
    if (spec && model && (rc0 = spec_open(&o, model, threads[0], &drafter, &meta))) {
        cx_model_free(model);
        wl_free(&wl);
        return rc0;
    }
    cfg.drafter = drafter;
    if (o.endpoint) {
        n_threads = 1;
        threads[0] = 0; /* the server's threads are its own */
        cfg.endpoint = &ep;
        meta.sched_config[0] = 0; /* the server's scheduler is not ours to describe */
    }
    /* The challenge measures GPT-OSS answering its prompts: on a model whose
     * chat format is harmony, each prompt goes in as a harmony user turn, as
     * a chat client's would (in-process only: over HTTP, rendering chat is
     * the server's chat route's job, and the replay uses /v1/completions). */
    if (model && !strcmp(o.workload, "challenge") && cx_harmony_detect(cx_model_get_info(model)->chat_template)) {
        cfg.harmony = 1;
        snprintf(meta.chat_format, sizeof meta.chat_format, "harmony");
    }
    /* Adapters: every trace id covered before the run starts */
    adapter_set *ads = NULL;
    if (o.adapters) {
        char aerr[512];
        if (!(ads = malloc(sizeof *ads)) || adapters_resolve(o.adapters, o.model, model, ads, aerr, sizeof aerr) ||
            (wl_path && adapters_check(ads, &wl, aerr, sizeof aerr))) {
            int oom = !ads;
            adapters_free(ads);
            free(ads);
            cx_drafter_free(drafter);
            cx_model_free(model);
            wl_free(&wl);
            return cli_fail(2, "%s", oom ? "out of memory" : aerr);
        }
        cfg.adapters = ads;
        cfg.lora_budget = o.lora_budget;
        cfg.lora_split = o.lora_split;
        cfg.lora_type = o.lora_type;
        const char *lt = o.lora_type < 0 ? "auto" : cx_type_name(o.lora_type);
        size_t k = strlen(meta.sched_config);
        if (wl_path)
            snprintf(meta.sched_config + k, sizeof meta.sched_config - k, ",adapters=%s,lora_budget=%lld,lora=%s,lora_type=%s",
                     o.adapters, (long long)o.lora_budget, o.lora_split ? "split" : "mixed", lt);
        else /* a synthetic test: the adapters still make runs incomparable with runs without them */
            snprintf(meta.sched_config, sizeof meta.sched_config, "adapters=%s,lora_type=%s", o.adapters, lt);
    }
    cfg.kv = &o.kv;
    cli_ensure_default_dir(o.db);
    store *db;
    if (store_open(o.db, &db, err, sizeof err)) {
        cx_drafter_free(drafter);
        cx_model_free(model);
        adapters_free(ads);
        free(ads);
        ep_free(&ep);
        wl_free(&wl);
        return cli_fail(1, "%s", err);
    }
    char draft_sha[65] = "";
    if ((model && model_hash(db, o.model, meta.model_sha256, err, sizeof err)) ||
        (drafter && o.spec.kind == CX_SPEC_MODEL && model_hash(db, o.spec.draft_path, draft_sha, err, sizeof err))) {
        cx_drafter_free(drafter);
        cx_model_free(model);
        adapters_free(ads);
        free(ads);
        store_close(db);
        wl_free(&wl);
        return cli_fail(1, "%s", err);
    }
    if (drafter) spec_config_text(&o, draft_sha, meta.spec_config, sizeof meta.spec_config);
    /* Counters open before any session exists, so every engine thread is
     * counted; over HTTP the work happens in another process: none. */
    ctr_set *ctr = model ? ctr_open(err, sizeof err) : NULL;
    if (model && !ctr) fprintf(stderr, "cortex-bench: counters unavailable: %s\n", err);

    snprintf(meta.workload, sizeof meta.workload, "%s", o.workload);
    snprintf(meta.workload_kind, sizeof meta.workload_kind, "%s", wl_path ? wl_kind_name(wl.kind) : "synthetic");
    /* multiseq/batched have the sizes of a pg test: the name tells them apart in compare */
    snprintf(meta.workload_hash, sizeof meta.workload_hash, "%s", wl_path ? wl.sha256 : nseq ? o.workload : "");
    meta.workload_meta = wl.meta; /* the sidecar, if the file has one; wl outlives every run_one */
    snprintf(meta.mode, sizeof meta.mode, "%s", cfg.mode == RUN_OPEN ? "open" : cfg.mode == RUN_CLOSED ? "closed" : "synthetic");
    meta.concurrency = cfg.mode == RUN_CLOSED ? cfg.concurrency : 0;
    meta.reps = (int)o.reps;
    meta.warmup = (int)o.warmup;
    meta.ignore_eos = cfg.ignore_eos;
    meta.allow_failures = o.allow_failures;
    meta.test_prompt = np;
    meta.test_gen = ng;
    meta.test_depth = (int)o.depth;
    snprintf(meta.pinned, sizeof meta.pinned, "%s", o.pin_cpus                     ? o.pin_cpus
                                                     : o.pin_policy != CX_PIN_NONE ? cx_pin_policy_name(o.pin_policy)
                                                                                   : "");
    const char *tb = o.testbed && *o.testbed ? o.testbed : getenv("CORTEX_TESTBED");
    if (tb && *tb) snprintf(meta.testbed, sizeof meta.testbed, "%s", tb);
    else env_testbed(&env, meta.testbed, sizeof meta.testbed);
    snprintf(meta.git_commit, sizeof meta.git_commit, "%s", CORTEX_GIT_COMMIT);
    meta.git_dirty = CORTEX_GIT_DIRTY;
    snprintf(meta.build_type, sizeof meta.build_type, "%s", CORTEX_BUILD_TYPE);
    snprintf(meta.build_flags, sizeof meta.build_flags, "%s", CORTEX_BUILD_FLAGS);
    snprintf(meta.counter_mode, sizeof meta.counter_mode, "%s", ctr ? ctr_mode(ctr) : "none");
    cli_join_argv(argc, argv, meta.cmdline, sizeof meta.cmdline);

    roof_model rm;
    char why[256];
    int have_rm = model && roof_model_of(model, o.kv.type, &rm, why, sizeof why) == 0;
    if (model && !have_rm) fprintf(stderr, "cortex-bench: no bytes per token (no roofline): %s\n", why);
    int rc = 0, n_ids = 0, invalid = 0;
    const roof_model *rmp = have_rm ? &rm : NULL;
    /* An INVALID run is stored as such and the next one still runs; the exit code says so at the end. */
#define RUN_ONE(c, m) ((rc = run_one(db, model, wlp, &o, c, m, &env, ctr, rmp, &ids[n_ids])) == CB_EXIT_INVALID \
                           ? (invalid = 1, rc = 0) : rc)
    const wl_workload *wlp = wl_path ? &wl : NULL;
    for (int t = 0; t < n_threads && !rc && n_ids < RUN_MAX_RUNS; t++) {
        cfg.threads = threads[t];
        meta.threads = threads[t];
        if (drafter && t > 0) { /* its draft passes run on this many threads too */
            cx_drafter_free(drafter);
            cfg.drafter = drafter = NULL;
            if ((rc = spec_open(&o, model, threads[t], &drafter, &meta)) != 0) break;
            cfg.drafter = drafter;
        }
        if (sweep) { /* the saturation rate closed loop (every sequence busy), then open loops below and past it */
            static const double share[] = {0.25, 0.5, 0.75, 0.9, 1.0, 1.1};
            run_config sat_cfg = cfg;
            run_meta sat_meta = meta;
            sat_cfg.mode = RUN_CLOSED;
            /* over HTTP the server's batch size is unknown: --concurrency clients (8 when not given) */
            sat_cfg.concurrency = !o.endpoint ? cfg.max_seqs : o.concurrency > 1 ? (int)o.concurrency : 8;
            snprintf(sat_meta.mode, sizeof sat_meta.mode, "closed");
            sat_meta.concurrency = sat_cfg.concurrency;
            int sat_invalid = (rc = run_one(db, model, wlp, &o, sat_cfg, sat_meta, &env, ctr, rmp, &ids[n_ids])) ==
                              CB_EXIT_INVALID;
            int64_t sat_id = ids[n_ids++];
            double sat = rc ? NAN : store_metric_median(db, sat_id, "request_rps");
            if (sat_invalid) /* its rate is no measurement: the sweep has nothing to scale */
                cli_fail(CB_EXIT_INVALID, "rate sweep: the saturation run %lld is INVALID: no sweep", (long long)sat_id);
            else if (!rc && (store_run_set_sweep(db, sat_id, sat_id) || !(sat > 0)))
                rc = cli_fail(CB_EXIT_FAILED, "rate sweep: run %lld measured no saturation rate", (long long)sat_id);
            if (!rc) printf("rate sweep: saturation %.3f requests/s (run %lld, closed loop, %d clients)\n", sat,
                            (long long)sat_id, sat_cfg.concurrency);
            for (int k = 0; k < 6 && !rc && n_ids < RUN_MAX_RUNS; k++) {
                cfg.rate = meta.rate = sat * share[k];
                meta.sweep = sat_id;
                snprintf(meta.mode, sizeof meta.mode, "open");
                meta.concurrency = 0;
                RUN_ONE(cfg, meta);
                n_ids++;
            }
            continue;
        }
        for (int k = 0; k < (n_rates ? n_rates : 1) && !rc && n_ids < RUN_MAX_RUNS; k++) {
            if (n_rates) {
                cfg.rate = meta.rate = rates[k];
                snprintf(meta.mode, sizeof meta.mode, "open");
                meta.concurrency = 0;
            }
            RUN_ONE(cfg, meta);
            n_ids++;
        }
    }
#undef RUN_ONE
    if (!rc && invalid) rc = CB_EXIT_INVALID;
    *n_ids_out = n_ids;
    ctr_close(ctr);
    cx_drafter_free(drafter); /* before its target */
    cx_model_free(model);
    adapters_free(ads);
    free(ads);
    ep_free(&ep);
    store_close(db);
    wl_free(&wl);
    return rc;
}

/* See run_cmd.h. */
int64_t run_once(const char *model, const char *wl, const char *db, const char *threads, int reps, int warmup, int argc,
                 char **argv) {
    run_opts ro;
    run_opts_init(&ro);
    ro.model = model;
    ro.workload = wl;
    ro.db = db;
    ro.reps = reps;
    ro.warmup = warmup;
    ro.threads = threads;
    ro.no_progress = 1;
    ro.argc = argc;
    ro.argv = argv;
    int64_t ids[RUN_MAX_RUNS];
    int n = 0;
    if (run_execute(&ro, ids, &n) || n != 1) return -1;
    return ids[0];
}

/* Check, execute, print the results table and where the runs are stored. */
int cmd_run(void *opts, const cli_args *a) {
    run_opts o = *(run_opts *)opts;
    o.argc = a->argc;
    o.argv = a->argv; /* "cortex-bench run ..." */
    int rc = run_opts_check(&o, a->flags);
    if (rc) return rc;
    int64_t ids[RUN_MAX_RUNS];
    int n_ids = 0;
    rc = run_execute(&o, ids, &n_ids);
    if ((rc && rc != CB_EXIT_INVALID) || !n_ids) return rc;
    store *db;
    char err[512];
    if (store_open(o.db, &db, err, sizeof err)) return cli_fail(CB_EXIT_FAILED, "%s", err);
    if (show_table(db, ids, n_ids, o.fmt, 0, stdout, err, sizeof err)) rc = cli_fail(CB_EXIT_FAILED, "%s", err);
    else if (!strcmp(o.fmt, "md")) {
        for (int i = 0; i < n_ids; i++) { /* under Zipf popularity: who pays */
            store_run r;
            if (store_run_load(db, ids[i], &r) == 1 && !strcmp(r.validity, "invalid")) continue;
            printf("\n");
            show_adapters(db, ids[i], stdout);
            show_kv(db, ids[i], stdout);
            show_server(db, ids[i], stdout);
            show_spec(db, ids[i], stdout);
        }
        printf("\n");
        for (int i = 0; i < n_ids; i++) show_verdict(db, ids[i], stdout);
        printf("\nstored as run%s", n_ids > 1 ? "s" : "");
        for (int i = 0; i < n_ids; i++) printf("%s %lld", i ? "," : "", (long long)ids[i]);
        printf(" in %s (cortex-bench show RUN for details)\n", store_name(db));
        if (g_run_ms > 0)
            printf("writing the results took %.1f ms, %.3f%% of the runs' %.1f s\n", g_store_ms,
                   100 * g_store_ms / g_run_ms, g_run_ms / 1e3);
    }
    FILE *ss = summary_open(o.step_summary); /* the CI step summary (report/summary.c) */
    if (ss) {
        summary_runs(ss, db, ids, n_ids);
        summary_close(ss);
    }
    if (rc == CB_EXIT_INVALID) /* the last line: which runs are no measurement, and the exit code */
        fprintf(stderr, "cortex-bench: exit %d: INVALID runs are stored as such and are no measurement"
                        " (--allow-failures SHARE tolerates failed or truncated requests)\n", CB_EXIT_INVALID);
    store_close(db);
    return rc;
}
