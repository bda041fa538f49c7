/*
 * commands.c - the tables of cortex-bench (see commands.h): its subcommands
 * (name, options struct and defaults, positional arguments, usage) and one
 * table of every flag of every subcommand, on the parser `cortex` uses too
 * (cortex_tools.h, engine/src/flags.c): which subcommands take a flag, how
 * its value is read, the field of the subcommand's options struct it goes to,
 * its range or accepted values, its help. cli_command_main (util/cli_util.c)
 * parses a subcommand's flags from this table into its options, which its
 * init function filled with the defaults, and prints its usage from it: the
 * help shows those defaults and every flag the parser takes, and no other.
 * Checks across flags ("--max-batch-tokens below --max-seqs") stay in the
 * subcommands.
 */
#include "commands.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "compare_cmd.h"
#include "cortex_tools.h"
#include "detmode.h"
#include "gate_cmd.h"
#include "hw_cmd.h"
#include "hwreport.h"
#include "judge.h"
#include "report_cmd.h"
#include "run_cmd.h"
#include "show_cmd.h"
#include "sync_cmd.h"
#include "trace_cmd.h"
#include "hx_err.h"

/* The subcommands, one bit each in a flag's command mask. */
enum {
    B_RUN = 1 << 0, B_TRACE = 1 << 1, B_LIST = 1 << 2, B_SHOW = 1 << 3, B_COMPARE = 1 << 4, B_TAG = 1 << 5,
    B_GATE = 1 << 6, B_JUDGE = 1 << 7, B_MICRO = 1 << 8, B_CALIBRATE = 1 << 9, B_TREND = 1 << 10,
    B_REPORT = 1 << 11, B_DASHBOARD = 1 << 12, B_HW = 1 << 13, B_PUSH = 1 << 14, B_PULL = 1 << 15,
    B_HWREPORT = 1 << 16, B_ALL = (1 << 17) - 1
};

/* ---- values with a parser of their own ---- */

/* run --lora-type f32|q8_0|q4_0|auto: a tensor type id, -1 for auto (the parser checked the list). */
static int parse_lora_type(const cx_flag *f, const char *name, const char *v, void *opts, char *err, size_t errlen) {
    int t = -1;
    if (strcasecmp(v, "auto") && (t = cx_type_from_name(v)) < 0)
        return hx_fail(err, errlen, "%s: '%s' is not a weight type", name, v);
    *(int *)(void *)((char *)opts + f->off) = t;
    return 0;
}

/* run --spec KIND: none, ngram, self, self:TYPE or model into the cx_spec_params at f->off (cx_spec_parse);
 * its message as every refused value's ("--spec: 'x' is not one of ..."). */
static int parse_spec(const cx_flag *f, const char *name, const char *v, void *opts, char *err, size_t errlen) {
    cx_err e = {0};
    if (cx_spec_parse(v, (cx_spec_params *)(void *)((char *)opts + f->off), &e))
        return hx_fail(err, errlen, "%s: %s", name, strncmp(e.msg, "speculation '", 13) ? e.msg : e.msg + 12);
    return 0;
}

/* trace --prompt-len / --gen-len DIST into a trace_len (trace_len_parse names the flag). */
static int parse_len(const cx_flag *f, const char *name, const char *v, void *opts, char *err, size_t errlen) {
    return trace_len_parse(v, name, (trace_len *)(void *)((char *)opts + f->off), err, errlen) ? -1 : 0;
}

/* A trace_len's default as its spec ("uniform:32,256"). */
static const char *show_len(const cx_flag *f, const void *opts, char *buf, size_t cap) {
    trace_len_format((const trace_len *)(const void *)((const char *)opts + f->off), buf, cap);
    return buf;
}

/* trace --priorities W0,W1,... into the trace_params at f->off. */
static int parse_prio(const cx_flag *f, const char *name, const char *v, void *opts, char *err, size_t errlen) {
    (void)name;
    return trace_prio_parse(v, (trace_params *)(void *)((char *)opts + f->off), err, errlen) ? -1 : 0;
}

/* ---- the flags ---- */

#define DEFAULT_THREADS "the CPUs this process may use, capped by its cgroup CPU quota rounded up"
#define R(f) offsetof(run_opts, f)
#define T(f) offsetof(trace_opts, f)
#define V(f) offsetof(cli_read_opts, f)
#define G(f) offsetof(gate_opts, f)
#define J(f) offsetof(judge_opts, f)
#define M(f) offsetof(micro_opts, f)
#define C(f) offsetof(calibrate_opts, f)
#define TR(f) offsetof(trend_opts, f)
#define RP(f) offsetof(report_opts, f)
#define D(f) offsetof(dashboard_opts, f)
#define H(f) offsetof(hw_cmd_opts, f)
#define SY(f) offsetof(sync_opts, f)
#define HR(f) offsetof(hwreport_opts, f)
#define DB_HELP "the benchmark database: a SQLite file or a postgresql:// URL (default: $CORTEX_DB, else reports/cortex.db)"
/* Each entry's names, placeholder and command bits stay on its first line:
 * tests/cli/harness/bench_help.sh reads them from there. */
static const cx_flag FLAGS[] = {
    /* run */
    {"--model", "-m", "FILE|NAME", B_RUN, CX_FLAG_STR, R(model), 0, 0, NULL,
     .help = "the GGUF model to benchmark (required); with --endpoint the model name requests ask for, by default the"
             " first model the server lists"},
    {"--endpoint", NULL, "URL", B_RUN, CX_FLAG_STR, R(endpoint), 0, 0, "none: in-process",
     .help = "measure an OpenAI-compatible server over HTTP instead, e.g. http://127.0.0.1:8080/v1 (prompt sets and"
             " traces, streamed completions)"},
    {"--api-key", NULL, "KEY", B_RUN, CX_FLAG_STR, R(api_key), 0, 0, "none",
     .help = "with --endpoint: sent as \"Authorization: Bearer KEY\""},
    {"--adapter-names", NULL, "NAME1,NAME2,...", B_RUN, CX_FLAG_STR, R(adapter_names), 0, 0,
     "none, so a trace naming adapters is refused",
     .help = "with --endpoint: the model names of trace adapter ids 1, 2, ...; id 0 is --model"},
    {"--server-cache", NULL, "CACHE", B_RUN, CX_FLAG_CHOICE, R(server_cache), 0, 0, NULL,
     .help = "with --endpoint: off asks the server not to reuse cached prompts (cache_prompt false, a cache_salt per"
             " request), and a run it served from its cache anyway is INVALID; on leaves its prompt cache to it and"
             " records what it served", .choices = "off|on"},
    {"--tokenizer", "-z", "FILE", B_RUN, CX_FLAG_STR, R(tokenizer), 0, 0, "none",
     .help = "a tokenizer file, for models without an embedded vocabulary"},
    {"--workload", "-w", "W", B_RUN, CX_FLAG_STR, R(workload), 0, 0, NULL,
     .help = "standard | challenge | lookup | trace:FILE | prompts:FILE | ppN | tgN | pgN,M | multiseq:NSEQ,CTX,GEN |"
             " batched:NSEQ,CTX,GEN"},
    {"--reps", NULL, "N", B_RUN, CX_FLAG_LONG, R(reps), 1, 10000, NULL, .help = "counted repetitions"},
    {"--warmup", NULL, "N", B_RUN, CX_FLAG_LONG, R(warmup), 0, 10000, NULL, .help = "warm-up repetitions, not counted"},
    {"--threads", "-t", "T[,T...]", B_RUN, CX_FLAG_STR, R(threads), 0, 0,
     "the CPUs this process may use, after --pin, capped by its cgroup CPU quota rounded up",
     .help = "thread counts, 1..256 each, one run each"},
    {"--depth", "-d", "N", B_RUN, CX_FLAG_LONG, R(depth), 0, 1 << 24, NULL,
     .help = "KV depth before a synthetic test (ppN, tgN, pgN,M)"},
    {"--mode", NULL, "LOOP", B_RUN, CX_FLAG_CHOICE, R(mode), 0, 0, "open for a trace, closed for a prompt set",
     .help = "prompt sets and traces: closed (back to back) or open (arrival times)", .choices = "closed|open"},
    {"--concurrency", NULL, "C", B_RUN, CX_FLAG_LONG, R(concurrency), 1, 100000, NULL,
     .help = "requests in flight in closed mode"},
    {"--rate", NULL, "R[,R...]|sweep", B_RUN, CX_FLAG_STR, R(rate), 0, 0, "the trace's times",
     .help = "open loop at a Poisson rate of R requests/s instead of the trace's arrival times (a prompt set is"
             " replayed in order), one run per rate; sweep: measure the saturation rate closed-loop (concurrency"
             " max-seqs; with --endpoint --concurrency, 8 when not given), then run at 25, 50, 75, 90, 100 and 110% of"
             " it"},
    {"--max-seqs", NULL, "N", B_RUN, CX_FLAG_LONG, R(max_seqs), 1, 256, NULL,
     .help = "scheduler: sequences decoded together"},
    {"--max-batch-tokens", NULL, "T", B_RUN, CX_FLAG_LONG, R(max_batch_tokens), 1, 256, NULL,
     .help = "scheduler: tokens per step over all sequences, at least --max-seqs"},
    {"--max-queue", NULL, "Q", B_RUN, CX_FLAG_LONG, R(max_queue), 1, 1000000, NULL,
     .help = "scheduler: waiting requests before new ones are rejected"},
    {"--slo", NULL, "ttft=MS,tpot=MS[,e2e=MS]", B_RUN, CX_FLAG_STR, R(slo), 0, 0, "no SLO, no goodput",
     .help = "goodput: the share and rate of requests meeting every SLO"},
    {"--adapters", NULL, "DIR|synth:K,RANK", B_RUN, CX_FLAG_STR, R(adapters), 0, 0, "none: ids are labels only",
     .help = "traces: serve real LoRA adapters for the trace's adapter ids 1..K: the adapter files of DIR in name"
             " order, or K synthetic ones of rank RANK made once in $CORTEX_CACHE"},
    {"--lora-budget", NULL, "BYTES", B_RUN, CX_FLAG_BUDGET, R(lora_budget), 0, 0, "unlimited",
     .help = "resident adapters' memory, e.g. 512M, or unlimited; idle ones are unloaded least recently used first"},
    {"--lora-type", NULL, "TYPE", B_RUN, CX_FLAG_CUSTOM, R(lora_type), 0, 0, "auto: q8_0 on a quantized base, else f32",
     .help = "adapters' in-memory type; q4_0 halves their memory traffic", .choices = "f32|q8_0|q4_0|auto",
     .parse = parse_lora_type},
    {"--lora-batching", NULL, "BATCHING", B_RUN, CX_FLAG_CHOICE, R(lora_split), 0, 0, NULL,
     .help = "mixed: sequences with different adapters share each step; split: one adapter per step, as llama.cpp's"
             " server", .choices = "mixed|split"},
    {"--ctx", "-c", "N", B_RUN, CX_FLAG_LONG, R(ctx), 1, 1 << 24, "the model's, at most 4096",
     .help = "context length of each sequence; more than the model's is an error"},
    {"--allow-failures", NULL, "SHARE", B_RUN, CX_FLAG_DOUBLE, R(allow_failures), 0, 1, NULL,
     .help = "tolerate this share of failed or truncated requests and still call the run VALID; 0: any failed or"
             " truncated request makes the run INVALID, exit 4"},
    {"--testbed", NULL, "NAME", B_RUN, CX_FLAG_STR, R(testbed), 0, 0, "$CORTEX_TESTBED, else the CPU, cores and memory",
     .help = "the machine class this run's baselines are kept for (runners of one kind share it)"},
    {"--pin", NULL, "CPUS|POLICY", B_RUN, CX_FLAG_STR, R(pin), 0, 0, "none: no pinning",
     .help = "a CPU list (e.g. 0-3,8) confines the whole process to those CPUs; a policy pins each engine thread to"
             " one CPU of those the process may use (taskset -c 0-3 ... --pin spread for both): compact fills a core's"
             " SMT siblings first, spread takes a core of each package/NUMA node in turn, none leaves them to the"
             " kernel"},
    {"--numa", NULL, "POLICY", B_RUN, CX_FLAG_CHOICE, R(numa), 0, 0, NULL,
     .help = "NUMA policy of the weights (when copied into huge pages) and the KV cache: interleave over the nodes,"
             " local to the thread first writing a page, default: the kernel's; recorded with the run (with one node it"
             " has no effect, and the record says so)", .values = cx_flag_numa_policies},
    {"--respect-eos", NULL, NULL, B_RUN, CX_FLAG_SWITCH, R(respect_eos), 0, 0, NULL,
     .help = "stop a request at end-of-sequence (without it every request generates its full length)"},
    {"--db", NULL, "FILE|URL", B_RUN, CX_FLAG_STR, R(db), 0, 0, NULL, .help = DB_HELP},
    {"-o", NULL, "md|csv|json|jsonl|bmf", B_RUN, CX_FLAG_STR, R(fmt), 0, 0, NULL,
     .help = "format of the results table: jsonl is json one object a line, bmf is Bencher Metric Format of VALID"
             " runs' headline metrics"},
    {"--step-summary", NULL, "FILE", B_RUN, CX_FLAG_STR, R(step_summary), 0, 0, "$GITHUB_STEP_SUMMARY when set, else none",
     .help = "append a markdown block of the runs (ids, commit, VALID or INVALID, headline results) to FILE"},
    {"--no-progress", NULL, NULL, B_RUN, CX_FLAG_SWITCH, R(no_progress), 0, 0, NULL,
     .help = "no progress line on stderr (it is shown on a terminal outside CI)"},
    {"--kv-type", NULL, "TYPE", B_RUN, CX_FLAG_CUSTOM, R(kv.type), CX_KV_HOT, 0, NULL,
     .help = "element type of the hot KV tier", CX_FLAG_KV_TYPE_OPS},
    {"--kv-warm-type", NULL, "TYPE", B_RUN, CX_FLAG_CUSTOM, R(kv.warm_type), CX_KV_WARM, 0, NULL,
     .help = "element type of the warm KV tier", CX_FLAG_KV_TYPE_OPS},
    {"--kv-hot", NULL, "BYTES", B_RUN, CX_FLAG_BUDGET, R(kv.budget[CX_KV_HOT]), 0, 0, NULL,
     .help = "hot KV tier budget, e.g. 64K, 1.5M, 2G, or unlimited"},
    {"--kv-warm", NULL, "BYTES", B_RUN, CX_FLAG_BUDGET, R(kv.budget[CX_KV_WARM]), 0, 0, NULL,
     .help = "warm KV tier budget"},
    {"--kv-cold", NULL, "BYTES", B_RUN, CX_FLAG_BUDGET, R(kv.budget[CX_KV_COLD]), 0, 0, NULL,
     .help = "cold KV tier budget"},
    {"--kv-policy", NULL, "POLICY", B_RUN, CX_FLAG_CUSTOM, R(kv.policy), 0, 0, NULL,
     .help = "KV eviction policy", CX_FLAG_KV_POLICY_OPS},
    {"--prefix-cache", NULL, "CACHE", B_RUN, CX_FLAG_CHOICE, R(kv.prefix_cache), 0, 0, NULL,
     .help = "share KV blocks of common prompt prefixes", .choices = "off|on"},
    {"--kv-spill", NULL, "FILE", B_RUN, CX_FLAG_STR, R(kv.spill_path), 0, 0, "none",
     .help = "spill file of the cold tier"},
    {"--spec", NULL, "KIND", B_RUN, CX_FLAG_CUSTOM, R(spec), 0, 0, "none",
     .help = "decode by speculative decoding (greedy output does not change), KIND one of none, ngram (drafts by"
             " looking the last tokens up earlier in the sequence), self:TYPE (the model quantized to TYPE at load;"
             " self: q4_0), model (--draft); prompt sets and traces speculate in the scheduler's steps (while at"
             " most --spec-max-batch sequences decode), tgN and pgN,M after their prompt", .parse = parse_spec},
    {"--draft", NULL, "MODEL", B_RUN, CX_FLAG_STR, R(spec.draft_path), 0, 0, "none",
     .help = "the draft model of --spec model (implied when --spec is not given): a GGUF with the model's vocabulary"},
    {"--draft-max", NULL, "N", B_RUN, CX_FLAG_INT, R(spec.draft_max), 1, CX_SPEC_MAX_DRAFT, NULL,
     .help = "with --spec: most tokens drafted per pass of the model"},
    {"--draft-min", NULL, "N", B_RUN, CX_FLAG_INT, R(spec.draft_min), 0, CX_SPEC_MAX_DRAFT, NULL,
     .help = "with --spec: a draft shorter than N is not checked (the step decodes one token)"},
    {"--draft-fixed", NULL, NULL, B_RUN, CX_FLAG_SWITCH, R(spec_fixed), 0, 0, NULL,
     .help = "with --spec: draft --draft-max tokens every time instead of the length the measured acceptance and times"
             " favour"},
    {"--spec-max-batch", NULL, "N", B_RUN, CX_FLAG_LONG, R(spec_max_batch), 1, 256, NULL,
     .help = "with --spec on a prompt set or trace: the scheduler speculates only in steps where at most N sequences"
             " decode (past that, batching fills each pass)"},

    /* trace */
    {"--requests", NULL, "N", B_TRACE, CX_FLAG_INT, T(p.requests), 1, TRACE_MAX_REQUESTS, NULL,
     .help = "number of requests"},
    {"--rate", NULL, "R", B_TRACE, CX_FLAG_DOUBLE, T(p.rate), 1e-6, 1e6, NULL,
     .help = "mean arrival rate in requests per second, Poisson"},
    {"--zipf", NULL, "S", B_TRACE, CX_FLAG_DOUBLE, T(p.zipf_s), 0, 100, NULL,
     .help = "Zipf exponent of adapter popularity (--adapters 0 writes 0: there is none)"},
    {"--adapters", NULL, "K", B_TRACE, CX_FLAG_INT, T(p.adapters), 0, 100000, NULL,
     .help = "number of adapters; 0: a plain trace, every request asks for adapter 0 (the base model), so it"
             " replays against any server"},
    {"--prompt-len", NULL, "DIST", B_TRACE, CX_FLAG_CUSTOM, T(p.prompt_len), 0, 0, NULL,
     .help = "prompt length: fixed:N | uniform:A,B | normal:MEAN,SD | lognormal:MU,SIGMA, then optionally ,max=M",
     .parse = parse_len, .show = show_len},
    {"--gen-len", NULL, "DIST", B_TRACE, CX_FLAG_CUSTOM, T(p.gen_len), 0, 0, NULL,
     .help = "generated length, same forms", .parse = parse_len, .show = show_len},
    {"--seed", NULL, "X", B_TRACE, CX_FLAG_U64, T(p.seed), 0, 9223372036854775807.0, NULL,
     .help = "random seed; the same seed writes the same file"},
    {"--system-prefix", NULL, "TOKENS", B_TRACE, CX_FLAG_INT, T(p.system_prefix), 0, TRACE_MAX_LEN / 2, NULL,
     .help = "shared system prompt per adapter, in tokens"},
    {"--priorities", NULL, "W0,W1,...", B_TRACE, CX_FLAG_CUSTOM, T(p), 0, 0, "no priority field",
     .help = "priority classes 0..K-1 drawn with these weights, up to 16, written as \"priority\"",
     .parse = parse_prio},
    {"--deadline-ms", NULL, "MS", B_TRACE, CX_FLAG_DOUBLE, T(p.deadline_ms), 1e-3, 1e9, "none",
     .help = "every request's \"deadline_ms\": it ends as timed out this long after it is issued"},
    {"-o", NULL, "FILE", B_TRACE, CX_FLAG_STR, T(out), 0, 0, NULL, .help = "the JSONL trace to write (required)"},

    /* list, show, compare, tag */
    {"--db", NULL, "FILE|URL", B_LIST | B_SHOW | B_COMPARE | B_TAG, CX_FLAG_STR, V(db), 0, 0, NULL, .help = DB_HELP},
    {"--limit", NULL, "N", B_LIST, CX_FLAG_LONG, V(limit), 1, 1000000, NULL, .help = "newest runs to list"},
    {"-o", NULL, "md|csv|json|jsonl|bmf", B_SHOW, CX_FLAG_STR, V(fmt), 0, 0, NULL,
     .help = "output format; with --requests md, csv, json or jsonl"},
    {"--requests", NULL, NULL, B_SHOW, CX_FLAG_SWITCH, V(requests), 0, 0, NULL,
     .help = "instead of the run's summary: every request of every repetition (state, tokens, latencies, canary,"
             " error, the run's validity on each row)"},
    {"--force", NULL, NULL, B_COMPARE, CX_FLAG_SWITCH, V(force), 0, 0, NULL,
     .help = "compare runs whose model, workload or build differ (without it they are refused)"},
    {"--gate-file", NULL, "FILE", B_COMPARE, CX_FLAG_STR, V(gate_file), 0, 0, NULL,
     .help = "thresholds for the verdict column (the default file may be missing; another must load)"},

    /* gate */
    {"--model", "-m", "FILE", B_GATE, CX_FLAG_STR, G(model), 0, 0, NULL, .help = "the model the gate runs (required)"},
    {"--mode", NULL, "MODE", B_GATE, CX_FLAG_CHOICE, G(deterministic), 0, 0, NULL,
     .help = "timed workloads, or instruction counts of the micro workload", .choices = "wallclock|deterministic"},
    {"--baseline", NULL, "REF", B_GATE, CX_FLAG_STR, G(baseline), 0, 0, NULL,
     .help = "run id, tag or git commit to compare against"},
    {"--baseline-bin", NULL, "BIN", B_GATE, CX_FLAG_STR, G(baseline_bin), 0, 0, "none",
     .help = "wall-clock A/B: run this cortex-bench interleaved with this one"},
    {"--baseline-instructions", NULL, "N", B_GATE, CX_FLAG_DOUBLE, G(baseline_instructions), 1, 1e18,
     "from the database", .help = "deterministic: the baseline's instruction count, measured elsewhere"},
    {"--det-mode", NULL, "HOW", B_GATE, CX_FLAG_STR, G(det_mode), 0, 0, NULL,
     .help = "deterministic: how instructions are counted", .choices = "callgrind|perf|auto"},
    {"--record-baseline", NULL, NULL, B_GATE, CX_FLAG_SWITCH, G(record_baseline), 0, 0, NULL,
     .help = "measure and record the runs as the baselines of their configurations, moving the tag, without judging;"
             " refused for a run measured under load or with too wide a spread (max_load, max_spread in the gate"
             " file)"},
    {"--advance-baseline", NULL, NULL, B_GATE, CX_FLAG_SWITCH, G(advance_baseline), 0, 0, NULL,
     .help = "judge; when the gate passes, its VALID candidates fit to be baselines become them (the nightly way:"
             " the baseline advances only on a passing night; the first night records)"},
    {"--gate-file", NULL, "FILE", B_GATE, CX_FLAG_STR, G(gate_file), 0, 0, NULL, .help = "the gate configuration"},
    {"--junit", NULL, "FILE", B_GATE, CX_FLAG_STR, G(junit), 0, 0, "none", .help = "also write the verdicts as JUnit XML"},
    {"--summary", NULL, "FILE.md", B_GATE, CX_FLAG_STR, G(summary), 0, 0, "none", .help = "also write a markdown summary"},
    {"--step-summary", NULL, "FILE", B_GATE, CX_FLAG_STR, G(step_summary), 0, 0, "$GITHUB_STEP_SUMMARY when set, else none",
     .help = "append the verdict table and the runs judged to FILE"},
    {"-t", NULL, "T", B_GATE, CX_FLAG_STR, G(threads), 0, 0, DEFAULT_THREADS "; with --baseline-bin: 1",
     .help = "one thread count"},
    {"--db", NULL, "FILE|URL", B_GATE, CX_FLAG_STR, G(db), 0, 0, NULL, .help = DB_HELP},

    /* judge */
    {"--threshold", NULL, "T", B_JUDGE, CX_FLAG_DOUBLE, J(threshold), 0, 10, NULL, .help = "relative change that counts"},
    {"--alpha", NULL, "A", B_JUDGE, CX_FLAG_DOUBLE, J(alpha), 1e-6, 0.5, NULL,
     .help = "significance level of the U test"},
    {"--title", NULL, "NAME", B_JUDGE, CX_FLAG_STR, J(title), 0, 0, NULL,
     .help = "the table's heading, \"cortex-bench gate (NAME)\""},
    {"--junit", NULL, "FILE", B_JUDGE, CX_FLAG_STR, J(junit), 0, 0, "none", .help = "also write the verdicts as JUnit XML"},
    {"--summary", NULL, "FILE.md", B_JUDGE, CX_FLAG_STR, J(summary), 0, 0, "none",
     .help = "also write the table as markdown"},

    /* micro */
    {"--model", "-m", "FILE", B_MICRO, CX_FLAG_STR, M(model), 0, 0, NULL,
     .help = "the model (required; cortex synth --shape gate-micro --type q8_0 makes it)"},
    {"--prompt", NULL, "N", B_MICRO, CX_FLAG_INT, M(prompt), 1, 1 << 20, NULL, .help = "prompt tokens"},
    {"--gen", NULL, "G", B_MICRO, CX_FLAG_INT, M(gen), 0, 1 << 20, NULL, .help = "generated tokens"},
    {"--count", NULL, NULL, B_MICRO, CX_FLAG_SWITCH, M(count), 0, 0, NULL,
     .help = "also count the workload's instructions with perf"},
    {"--measure", NULL, "HOW", B_MICRO, CX_FLAG_STR, M(measure), 0, 0, "none: run the workload here",
     .help = "measure a child process instead and print its count", .choices = "callgrind|perf|auto"},
    {"--bench-bin", NULL, "BIN", B_MICRO, CX_FLAG_STR, M(bin), 0, 0, "this one",
     .help = "with --measure: the cortex-bench to measure"},

    /* calibrate */
    {"--model", "-m", "FILE", B_CALIBRATE, CX_FLAG_STR, C(model), 0, 0, NULL, .help = "the model (required)"},
    {"--pairs", NULL, "N", B_CALIBRATE, CX_FLAG_LONG, C(pairs), 1, 1000, NULL, .help = "A/A pairs per workload"},
    {"--workload", NULL, "W", B_CALIBRATE, CX_FLAG_STR, C(workload), 0, 0, "the gate file's workloads",
     .help = "one workload instead of the gate's"},
    {"-t", NULL, "T", B_CALIBRATE, CX_FLAG_STR, C(threads), 0, 0, DEFAULT_THREADS, .help = "one thread count"},
    {"--gate-file", NULL, "FILE", B_CALIBRATE, CX_FLAG_STR, C(gate_file), 0, 0, NULL, .help = "the gate configuration"},
    {"--db", NULL, "FILE|URL", B_CALIBRATE, CX_FLAG_STR, C(db), 0, 0, NULL, .help = DB_HELP},

    /* trend */
    {"--workload", NULL, "W", B_TREND, CX_FLAG_STR, TR(workload), 0, 0, "every workload",
     .help = "only runs of this workload"},
    {"--chart", NULL, "DIR", B_TREND, CX_FLAG_STR, TR(chart), 0, 0, "none",
     .help = "also draw the history with gnuplot into DIR"},
    {"--gate-file", NULL, "FILE", B_TREND, CX_FLAG_STR, TR(gate_file), 0, 0,
     "ci/gates.conf when present; none: 3 sigma alone", .help = "the metric's threshold for the newest-run warning"},
    {"--db", NULL, "FILE|URL", B_TREND, CX_FLAG_STR, TR(db), 0, 0, NULL, .help = DB_HELP},

    /* report */
    {"--baseline", NULL, "REF", B_REPORT, CX_FLAG_STR, RP(baseline), 0, 0, "none",
     .help = "a run id, tag or git commit to compare against; of several, one like RUN; it must be a VALID run"
             " comparable with RUN (same configuration and workload), else exit 2"},
    {"--out", NULL, "DIR", B_REPORT, CX_FLAG_STR, RP(out), 0, 0, "reports/RUN/; --challenge: reports/challenge-RUN/",
     .help = "where report.md and its charts go"},
    {"--challenge", NULL, "RUN", B_REPORT, CX_FLAG_STR, RP(challenge), 0, 0, "none",
     .help = "instead: the benchmark challenge's report of RUN (a prompt-set run, e.g. --workload challenge) and its"
             " configuration at other thread counts, against 30 tokens/s, with a projection to the challenge"
             " machine: challenge.md"},
    {"--challenge-gbs", NULL, "GB/s", B_REPORT, CX_FLAG_DOUBLE, RP(chal.gbs), 0.01, 100000, NULL,
     .help = "--challenge: the challenge machine's read bandwidth (the default is an estimate: docs/metrics.md)"},
    {"--challenge-cores", NULL, "N", B_REPORT, CX_FLAG_INT, RP(chal.cores), 1, 4096, NULL,
     .help = "--challenge: the challenge machine's cores"},
    {"--challenge-mem", NULL, "GB", B_REPORT, CX_FLAG_DOUBLE, RP(chal.mem_gb), 0.01, 1e6, NULL,
     .help = "--challenge: the challenge machine's memory in GB"},
    {"--db", NULL, "FILE|URL", B_REPORT, CX_FLAG_STR, RP(db), 0, 0, NULL, .help = DB_HELP},

    /* dashboard */
    {"--out", NULL, "DIR", B_DASHBOARD, CX_FLAG_STR, D(out), 0, 0, NULL, .help = "where index.html and its charts go"},
    {"--db", NULL, "FILE|URL", B_DASHBOARD, CX_FLAG_STR, D(db), 0, 0, NULL, .help = DB_HELP},

    /* hw */
    {"--size", NULL, "MiB", B_HW, CX_FLAG_LONG, H(size_mib), 1, 1 << 20, NULL, .help = "buffer size of the memory tests"},
    {"--reps", NULL, "N", B_HW, CX_FLAG_INT, H(hw.reps), 1, 1000, NULL, .help = "passes, the best is kept"},
    {"--threads", "-t", "N", B_HW, CX_FLAG_INT, H(hw.threads), 1, 1024, DEFAULT_THREADS,
     .help = "threads of the many-thread column"},
    {"--db", NULL, "FILE|URL", B_HW, CX_FLAG_STR, H(db), 0, 0, NULL, .help = DB_HELP},

    /* hwreport */
    {"--db", NULL, "FILE|URL", B_HWREPORT, CX_FLAG_STR, HR(db), 0, 0, NULL, .help = DB_HELP},
    {"--model", "-m", "NAME|SHA", B_HWREPORT, CX_FLAG_STR, HR(p.model), 0, 0, "the model most configurations measured",
     .help = "the model to compare machines on: a model name or sha256 prefix"},
    {"--out", "-o", "DIR", B_HWREPORT, CX_FLAG_STR, HR(p.out_dir), 0, 0, NULL,
     .help = "the folder for hwreport.md, index.html and the charts"},
    {"--price", NULL, "USD|TESTBED=USD,...", B_HWREPORT, CX_FLAG_STR, HR(p.price), 0, 0, "none",
     .help = "each machine's price per hour, for the cost per million tokens"},
    {"--target-read-gbs", NULL, "GBS", B_HWREPORT, CX_FLAG_DOUBLE, HR(p.target_read_gbs), 0.001, 1e6, "no projection",
     .help = "the challenge machine's measured read bandwidth: project each configuration's decode speed there"},

    /* push, pull */
    {"--db", NULL, "FILE|URL", B_PUSH | B_PULL, CX_FLAG_STR, SY(db), 0, 0, NULL,
     .help = "the local store, a SQLite file or a postgresql:// URL: push copies from it, pull into it"},
    {"--workload", NULL, "NAME", B_PUSH | B_PULL, CX_FLAG_STR, SY(workload), 0, 0, "all",
     .help = "only runs of this workload"},
    {"--testbed", NULL, "NAME", B_PUSH | B_PULL, CX_FLAG_STR, SY(testbed), 0, 0, "all",
     .help = "only runs of this testbed (machine class)"},
    {"--since", NULL, "DATE", B_PUSH | B_PULL, CX_FLAG_STR, SY(since), 0, 0, "all",
     .help = "only runs started at or after this ISO-8601 date or time (UTC)"},
    {"--commit", NULL, "SHA", B_PUSH | B_PULL, CX_FLAG_STR, SY(commit), 0, 0, "all",
     .help = "only runs built from a commit starting with this"},
    {"--last", NULL, "N", B_PUSH | B_PULL, CX_FLAG_LONG, SY(last), 1, 1000000000, "all",
     .help = "only the newest N of the selected runs"},

    {"--help", "-h", NULL, B_ALL, CX_FLAG_HELP, 0, 0, 0, NULL, .help = "print this help and exit"},
};
#undef R
#undef T
#undef V
#undef G
#undef J
#undef M
#undef C
#undef TR
#undef RP
#undef D
#undef H
#undef SY
#undef HR

const cx_flag *const bench_flags = FLAGS;
const int n_bench_flags = (int)(sizeof FLAGS / sizeof FLAGS[0]);

/* Each subcommand: its options struct and the function giving its defaults, its positional arguments. */
const cli_command bench_commands[] = {
    {"run", cmd_run, B_RUN, sizeof(run_opts), run_opts_init, 0, "",
     "benchmark a model on a workload and store the run",
     "cortex-bench run --model models/stories15m-2k-q8_0.gguf --workload tg32 -t 4 --reps 5"},
    {"trace", cmd_trace, B_TRACE, sizeof(trace_opts), trace_opts_init, 0, "",
     "write a synthetic request trace (JSONL) for --workload trace:FILE",
     "cortex-bench trace --requests 100 --rate 2 --adapters 4 --prompt-len uniform:32,256 -o t.jsonl"},
    {"list", cmd_list, B_LIST, sizeof(cli_read_opts), cli_read_opts_init, 0, "", "list the newest runs",
     "cortex-bench list --limit 5"},
    {"show", cmd_show, B_SHOW, sizeof(cli_read_opts), cli_read_opts_init, 1, "RUN",
     "print one run (RUN: a run id, a tag or a git commit)", "cortex-bench show 12 --requests -o jsonl"},
    {"compare", cmd_compare, B_COMPARE, sizeof(cli_read_opts), cli_read_opts_init, 2, "BASE CAND",
     "compare two runs with the gate's statistics (run ids, tags or commits)", "cortex-bench compare baseline 14"},
    {"tag", cmd_tag, B_TAG, sizeof(cli_read_opts), cli_read_opts_init, 2, "RUN NAME",
     "name a complete run (RUN: a run id, a tag or a git commit)", "cortex-bench tag 12 baseline"},
    {"gate", cmd_gate, B_GATE, sizeof(gate_opts), gate_opts_init, 0, "",
     "judge this build against the baseline; exit 0 pass, 1 regression, 2 error, 3 no counter, 4 an INVALID"
     " candidate",
     "cortex-bench gate --model /tmp/gm.gguf --mode deterministic"},
    {"judge", cmd_judge, B_JUDGE, sizeof(judge_opts), judge_opts_init, 1, "FILE|-",
     "the gate's verdicts over samples measured elsewhere: lines \"METRIC<TAB>lower|higher<TAB>base|cand<TAB>VALUE\";"
     " exit 0 pass, 1 regression, 2 bad input",
     "cortex-bench judge --threshold 0.1 --alpha 0.01 kernels.tsv"},
    {"micro", cmd_micro, B_MICRO, sizeof(micro_opts), micro_opts_init, 0, "",
     "the deterministic gate's fixed workload (used by gate --mode deterministic)",
     "cortex-bench micro --measure callgrind --model /tmp/gm.gguf"},
    {"calibrate", cmd_calibrate, B_CALIBRATE, sizeof(calibrate_opts), calibrate_opts_init, 0, "",
     "A/A runs of this build against itself, to set gate thresholds from",
     "cortex-bench calibrate --model /tmp/gm.gguf --pairs 8"},
    {"trend", cmd_trend, B_TREND, sizeof(trend_opts), trend_opts_init, 1, "METRIC",
     "find the commits where a metric stepped", "cortex-bench trend decode_tps --workload tg32 --chart reports/trend"},
    {"report", cmd_report, B_REPORT, sizeof(report_opts), report_opts_init, 1, "RUN",
     "a markdown report of one run with charts (RUN: a run id, a tag or a git commit); --challenge RUN: the"
     " challenge report",
     "cortex-bench report 12 --baseline baseline"},
    {"dashboard", cmd_dashboard, B_DASHBOARD, sizeof(dashboard_opts), dashboard_opts_init, 0, "",
     "the static HTML dashboard of every run", "cortex-bench dashboard --out dashboards/site"},
    {"hw", cmd_hw, B_HW, sizeof(hw_cmd_opts), hw_cmd_opts_init, 0, "",
     "measure this machine's read bandwidth and peak arithmetic (the roofline)", "cortex-bench hw --size 512 --reps 3"},
    {"hwreport", cmd_hwreport, B_HWREPORT, sizeof(hwreport_opts), hwreport_opts_init, 0, "",
     "the machines in the store side by side on one model: tok/s, thread scaling, roofs, memory, energy, cost",
     "cortex-bench hwreport --db postgresql://bench@db.example/cortex --price zen5-16c=1.20,zen3-16c=0.85 -o reports/hw"},
    {"push", cmd_push, B_PUSH, sizeof(sync_opts), sync_opts_init, 1, "TARGET",
     "copy the runs of --db that TARGET lacks into TARGET (a server's URL or a file): idempotent, resumable",
     "cortex-bench push postgresql://bench@db.example/cortex --db reports/cortex.db"},
    {"pull", cmd_pull, B_PULL, sizeof(sync_opts), sync_opts_init, 1, "SOURCE",
     "copy the selected runs of SOURCE that --db lacks into --db, for offline work",
     "cortex-bench pull postgresql://bench@db.example/cortex --testbed zen5-2c --since 2026-11-01 --db /tmp/z5.db"},
    {NULL, NULL, 0, 0, NULL, 0, NULL, NULL, NULL},
};
