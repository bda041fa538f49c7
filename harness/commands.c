/*
 * commands.c - the table of cortex-bench subcommands (see commands.h): each
 * one's name, positional arguments, every flag with its accepted values and
 * default, and an example. bench_main dispatches on it, and cli_command_main
 * (util/cli_util.c) prints the usage and rejects unknown flags from it, so the
 * help cannot list a flag the command does not take, nor miss one.
 */
#include "commands.h"

#include <stddef.h>

#include "compare_cmd.h"
#include "detmode.h"
#include "gate_cmd.h"
#include "hw_cmd.h"
#include "judge.h"
#include "report_cmd.h"
#include "run_cmd.h"
#include "show_cmd.h"
#include "trace_cmd.h"

#define DB_FLAG {"--db", NULL, "FILE", "the benchmark database (default: reports/cortex.db)"}
#define GATE_FILE_FLAG {"--gate-file", NULL, "FILE", "the gate configuration (default: ci/gates.conf)"}

static const cli_flag run_flags[] = {
    {"--model", "-m", "FILE|NAME", "the GGUF model to benchmark (required); with --endpoint the model name requests ask"
     " for (default: the first model the server lists)"},
    {"--endpoint", NULL, "URL", "measure an OpenAI-compatible server over HTTP instead, e.g. http://127.0.0.1:8080/v1"
     " (prompt sets and traces, streamed completions; default: in-process)"},
    {"--api-key", NULL, "KEY", "with --endpoint: sent as \"Authorization: Bearer KEY\" (default: none)"},
    {"--adapter-names", NULL, "NAME1,NAME2,...", "with --endpoint: the model names of trace adapter ids 1, 2, ...; id 0"
     " is --model (default: none, so a trace naming adapters is refused)"},
    {"--server-cache", NULL, "on|off", "with --endpoint: off asks the server not to reuse cached prompts"
     " (cache_prompt false, a cache_salt per request), and a run it served from its cache anyway is INVALID; on"
     " leaves its prompt cache to it and records what it served (default: off)"},
    {"--tokenizer", "-z", "FILE", "a tokenizer file, for models without an embedded vocabulary (default: none)"},
    {"--workload", "-w", "W",
     "standard | challenge | trace:FILE | prompts:FILE | ppN | tgN | pgN,M | multiseq:NSEQ,CTX,GEN | batched:NSEQ,CTX,GEN"
     " (default: standard)"},
    {"--reps", NULL, "N", "counted repetitions, 1..10000 (default: 3)"},
    {"--warmup", NULL, "N", "warm-up repetitions, not counted, 0..10000 (default: 1)"},
    {"--threads", "-t", "T[,T...]", "thread counts, one run each, 1..256 (default: the CPUs this process may use,"
     " after --pin, capped by its cgroup CPU quota rounded up)"},
    {"--depth", "-d", "N", "KV depth before a synthetic test (ppN, tgN, pgN,M), 0..16777216 (default: 0)"},
    {"--mode", NULL, "closed|open", "prompt sets and traces: closed (back to back) or open (arrival times)"
     " (default: open for a trace, closed for a prompt set)"},
    {"--concurrency", NULL, "C", "requests in flight in closed mode, 1..100000 (default: 1)"},
    {"--rate", NULL, "R[,R...]|sweep", "open loop at a Poisson rate of R requests/s instead of the trace's arrival"
     " times (a prompt set is replayed in order), one run per rate; sweep: measure the saturation rate closed-loop"
     " (concurrency max-seqs; with --endpoint --concurrency, 8 when not given), then run at 25, 50, 75, 90, 100 and"
     " 110% of it (default: the trace's times)"},
    {"--max-seqs", NULL, "N", "scheduler: sequences decoded together, 1..256 (default: 8)"},
    {"--max-batch-tokens", NULL, "T", "scheduler: tokens per step over all sequences, max-seqs..256 (default: 256)"},
    {"--max-queue", NULL, "Q", "scheduler: waiting requests before new ones are rejected, 1..1000000 (default: 1024)"},
    {"--slo", NULL, "ttft=MS,tpot=MS[,e2e=MS]", "goodput: the share and rate of requests meeting every SLO"
     " (default: no SLO, no goodput)"},
    {"--adapters", NULL, "DIR|synth:K,RANK", "traces: serve real LoRA adapters for the trace's adapter ids 1..K: the"
     " adapter files of DIR in name order, or K synthetic ones of rank RANK made once in $CORTEX_CACHE (default: ids"
     " are labels only)"},
    {"--lora-budget", NULL, "BYTES", "resident adapters' memory, e.g. 512M; idle ones are unloaded least recently"
     " used first (default: unlimited)"},
    {"--lora-type", NULL, "f32|q8_0|q4_0|auto", "adapters' in-memory type; q4_0 halves their memory traffic"
     " (default: auto: q8_0 on a quantized base, else f32)"},
    {"--lora-batching", NULL, "mixed|split", "mixed: sequences with different adapters share each step; split: one"
     " adapter per step, as llama.cpp's server (default: mixed)"},
    {"--ctx", "-c", "N", "context length of each sequence, 1..the model's (more is an error) (default: the model's,"
     " at most 4096)"},
    {"--allow-failures", NULL, "SHARE", "tolerate this share of failed or truncated requests, 0..1, and still call the"
     " run VALID (default: 0: any failed or truncated request makes the run INVALID, exit 4)"},
    {"--pin", NULL, "CPUS", "pin the run to these CPUs, e.g. 0-3,8 (default: no pinning)"},
    {"--respect-eos", NULL, NULL, "stop a request at end-of-sequence (default: generate the full length)"},
    DB_FLAG,
    {"-o", NULL, "md|csv|json|jsonl|bmf", "format of the results table: jsonl is json one object a line, bmf is"
     " Bencher Metric Format of VALID runs' headline metrics (default: md)"},
    {"--step-summary", NULL, "FILE", "append a markdown block of the runs (ids, commit, VALID or INVALID, headline"
     " results) to FILE (default: $GITHUB_STEP_SUMMARY when set, else none)"},
    {"--no-progress", NULL, NULL, "no progress line on stderr (default: shown on a terminal outside CI)"},
    {"--kv-type", NULL, "f32|f16|q8", "element type of the hot KV tier (default: f32)"},
    {"--kv-warm-type", NULL, "q8|q4", "element type of the warm KV tier (default: q8)"},
    {"--kv-hot", NULL, "BYTES|unlimited", "hot KV tier budget, e.g. 64K, 1.5M, 2G (default: unlimited)"},
    {"--kv-warm", NULL, "BYTES|unlimited", "warm KV tier budget (default: unlimited)"},
    {"--kv-cold", NULL, "BYTES|unlimited", "cold KV tier budget (default: unlimited)"},
    {"--kv-policy", NULL, "lru|lfu", "KV eviction policy (default: lru)"},
    {"--prefix-cache", NULL, "on|off", "share KV blocks of common prompt prefixes (default: off)"},
    {"--kv-spill", NULL, "FILE", "spill file of the cold tier (default: none)"},
    {NULL, NULL, NULL, NULL},
};

static const cli_flag trace_flags[] = {
    {"--requests", NULL, "N", "number of requests, 1..10000000 (default: 64)"},
    {"--rate", NULL, "R", "mean arrival rate in requests per second, Poisson (default: 1)"},
    {"--zipf", NULL, "S", "Zipf exponent of adapter popularity, 0..100 (default: 1.1; 0 with --adapters 0)"},
    {"--adapters", NULL, "K", "number of adapters, 0..100000; 0: a plain trace, every request asks for adapter 0 (the"
     " base model), so it replays against any server (default: 4)"},
    {"--prompt-len", NULL, "DIST", "prompt length: fixed:N | uniform:A,B | normal:MEAN,SD | lognormal:MU,SIGMA"
     " (default: uniform:32,256)"},
    {"--gen-len", NULL, "DIST", "generated length, same forms (default: uniform:16,128)"},
    {"--seed", NULL, "X", "random seed; the same seed writes the same file (default: 1)"},
    {"--system-prefix", NULL, "TOKENS", "shared system prompt per adapter, in tokens (default: 0)"},
    {"--priorities", NULL, "W0,W1,...", "priority classes 0..K-1 drawn with these weights, up to 16, written as"
     " \"priority\" (default: no priority field)"},
    {"--deadline-ms", NULL, "MS", "every request's \"deadline_ms\": it ends as timed out this long after it is issued"
     " (default: none)"},
    {"-o", NULL, "FILE", "the JSONL trace to write (required)"},
    {NULL, NULL, NULL, NULL},
};

static const cli_flag list_flags[] = {
    DB_FLAG,
    {"--limit", NULL, "N", "newest runs to list, 1..1000000 (default: 20)"},
    {NULL, NULL, NULL, NULL},
};

static const cli_flag show_flags[] = {
    DB_FLAG,
    {"-o", NULL, "md|csv|json|jsonl|bmf", "output format; with --requests md, csv, json or jsonl (default: md)"},
    {"--requests", NULL, NULL, "instead: every request of every repetition (state, tokens, latencies, canary, error,"
     " the run's validity on each row) (default: the run's summary)"},
    {NULL, NULL, NULL, NULL},
};

static const cli_flag compare_flags[] = {
    DB_FLAG,
    {"--force", NULL, NULL, "compare runs whose model, workload or build differ (default: refuse)"},
    {"--gate-file", NULL, "FILE", "thresholds for the verdict column (default: ci/gates.conf, if present)"},
    {NULL, NULL, NULL, NULL},
};

static const cli_flag tag_flags[] = {
    DB_FLAG,
    {NULL, NULL, NULL, NULL},
};

static const cli_flag gate_flags[] = {
    {"--model", "-m", "FILE", "the model the gate runs (required)"},
    {"--mode", NULL, "wallclock|deterministic", "timed workloads, or instruction counts of the micro workload"
     " (default: wallclock)"},
    {"--baseline", NULL, "REF", "run id, tag or git commit to compare against (default: the tag 'baseline')"},
    {"--baseline-bin", NULL, "BIN", "wall-clock A/B: run this cortex-bench interleaved with this one (default: none)"},
    {"--baseline-instructions", NULL, "N", "deterministic: the baseline's instruction count, measured elsewhere"
     " (default: from the database)"},
    {"--det-mode", NULL, "callgrind|perf|auto", "deterministic: how instructions are counted (default: auto)"},
    {"--record-baseline", NULL, NULL, "measure and record the runs as the baselines of their configurations, moving the"
     " tag, without judging; refused for a run measured under load or with too wide a spread (max_load, max_spread in"
     " the gate file) (default: judge)"},
    {"--advance-baseline", NULL, NULL, "judge; when the gate passes, its VALID candidates fit to be baselines become"
     " them (the nightly way: the baseline advances only on a passing night; the first night records) (default: the"
     " baseline stays)"},
    GATE_FILE_FLAG,
    {"--junit", NULL, "FILE", "also write the verdicts as JUnit XML (default: none)"},
    {"--summary", NULL, "FILE.md", "also write a markdown summary (default: none)"},
    {"--step-summary", NULL, "FILE", "append the verdict table and the runs judged to FILE (default:"
     " $GITHUB_STEP_SUMMARY when set, else none)"},
    {"-t", NULL, "T", "one thread count (default: the CPUs this process may use, capped by its cgroup CPU quota"
     " rounded up; with --baseline-bin: 1)"},
    DB_FLAG,
    {NULL, NULL, NULL, NULL},
};

static const cli_flag judge_flags[] = {
    {"--threshold", NULL, "T", "relative change that counts, 0..10 (default: 0.10)"},
    {"--alpha", NULL, "A", "significance level of the U test, 0.000001..0.5 (default: 0.05)"},
    {"--title", NULL, "NAME", "the table's heading, \"cortex-bench gate (NAME)\" (default: judge)"},
    {"--junit", NULL, "FILE", "also write the verdicts as JUnit XML (default: none)"},
    {"--summary", NULL, "FILE.md", "also write the table as markdown (default: none)"},
    {NULL, NULL, NULL, NULL},
};

static const cli_flag micro_flags[] = {
    {"--model", "-m", "FILE", "the model (required; cortex synth --shape gate-micro --type q8_0 makes it)"},
    {"--prompt", NULL, "N", "prompt tokens, 1..1048576 (default: 16)"},
    {"--gen", NULL, "G", "generated tokens, 0..1048576 (default: 8)"},
    {"--count", NULL, NULL, "also count the workload's instructions with perf (default: off)"},
    {"--measure", NULL, "callgrind|perf|auto", "measure a child process instead and print its count (default: off)"},
    {"--bench-bin", NULL, "BIN", "with --measure: the cortex-bench to measure (default: this one)"},
    {NULL, NULL, NULL, NULL},
};

static const cli_flag calibrate_flags[] = {
    {"--model", "-m", "FILE", "the model (required)"},
    {"--pairs", NULL, "N", "A/A pairs per workload, 1..1000 (default: 5)"},
    {"--workload", NULL, "W", "one workload instead of the gate's (default: the gate file's workloads)"},
    {"-t", NULL, "T", "one thread count (default: the CPUs this process may use, capped by its cgroup CPU quota"
     " rounded up)"},
    GATE_FILE_FLAG,
    DB_FLAG,
    {NULL, NULL, NULL, NULL},
};

static const cli_flag trend_flags[] = {
    {"--workload", NULL, "W", "only runs of this workload (default: every workload)"},
    {"--chart", NULL, "DIR", "also draw the history with gnuplot into DIR (default: none)"},
    {"--gate-file", NULL, "FILE", "the metric's threshold for the newest-run warning (default: ci/gates.conf when"
     " present; none: 3 sigma alone)"},
    DB_FLAG,
    {NULL, NULL, NULL, NULL},
};

static const cli_flag report_flags[] = {
    {"--baseline", NULL, "REF", "a run id, tag or git commit to compare against; of several, one like RUN; it must be a"
     " VALID run comparable with RUN (same configuration and workload), else exit 2 (default: none)"},
    {"--out", NULL, "DIR", "where report.md and its charts go (default: reports/RUN/; --challenge: reports/challenge-RUN/)"},
    {"--challenge", NULL, "RUN", "instead: the benchmark challenge's report of RUN (a prompt-set run, e.g. --workload"
     " challenge) and its configuration at other thread counts, against 30 tokens/s, with a projection to the challenge"
     " machine: challenge.md (default: none)"},
    {"--challenge-gbs", NULL, "GB/s", "--challenge: the challenge machine's read bandwidth, 0.01..100000 (default: 40, an"
     " estimate: docs/metrics.md)"},
    {"--challenge-cores", NULL, "N", "--challenge: the challenge machine's cores, 1..4096 (default: 8)"},
    {"--challenge-mem", NULL, "GB", "--challenge: the challenge machine's memory in GB, 0.01..1000000 (default: 32)"},
    DB_FLAG,
    {NULL, NULL, NULL, NULL},
};

static const cli_flag dashboard_flags[] = {
    {"--out", NULL, "DIR", "where index.html and its charts go (default: dashboards/site)"},
    DB_FLAG,
    {NULL, NULL, NULL, NULL},
};

static const cli_flag hw_flags[] = {
    {"--size", NULL, "MiB", "buffer size of the memory tests, 1..1048576 (default: 1024)"},
    {"--reps", NULL, "N", "passes, the best is kept, 1..1000 (default: 5)"},
    {"--threads", "-t", "N", "threads of the many-thread column, 1..1024 (default: the CPUs this process may use,"
     " capped by its cgroup CPU quota rounded up)"},
    DB_FLAG,
    {NULL, NULL, NULL, NULL},
};

const cli_command bench_commands[] = {
    {"run", cmd_run, "", "benchmark a model on a workload and store the run", run_flags,
     "cortex-bench run --model models/stories15m-2k-q8_0.gguf --workload tg32 -t 4 --reps 5"},
    {"trace", cmd_trace, "", "write a synthetic request trace (JSONL) for --workload trace:FILE", trace_flags,
     "cortex-bench trace --requests 100 --rate 2 --adapters 4 --prompt-len uniform:32,256 -o t.jsonl"},
    {"list", cmd_list, "", "list the newest runs", list_flags, "cortex-bench list --limit 5"},
    {"show", cmd_show, "RUN", "print one run (RUN: a run id, a tag or a git commit)", show_flags,
     "cortex-bench show 12 --requests -o jsonl"},
    {"compare", cmd_compare, "BASE CAND", "compare two runs with the gate's statistics (run ids, tags or commits)",
     compare_flags, "cortex-bench compare baseline 14"},
    {"tag", cmd_tag, "RUN NAME", "name a complete run (RUN: a run id, a tag or a git commit)", tag_flags,
     "cortex-bench tag 12 baseline"},
    {"gate", cmd_gate, "", "judge this build against the baseline; exit 0 pass, 1 regression, 2 error, 3 no counter,"
     " 4 an INVALID candidate", gate_flags, "cortex-bench gate --model /tmp/gm.gguf --mode deterministic"},
    {"judge", cmd_judge, "FILE|-", "the gate's verdicts over samples measured elsewhere: lines \"METRIC<TAB>lower|higher"
     "<TAB>base|cand<TAB>VALUE\"; exit 0 pass, 1 regression, 2 bad input", judge_flags,
     "cortex-bench judge --threshold 0.1 --alpha 0.01 kernels.tsv"},
    {"micro", cmd_micro, "", "the deterministic gate's fixed workload (used by gate --mode deterministic)",
     micro_flags, "cortex-bench micro --measure callgrind --model /tmp/gm.gguf"},
    {"calibrate", cmd_calibrate, "", "A/A runs of this build against itself, to set gate thresholds from",
     calibrate_flags, "cortex-bench calibrate --model /tmp/gm.gguf --pairs 8"},
    {"trend", cmd_trend, "METRIC", "find the commits where a metric stepped", trend_flags,
     "cortex-bench trend decode_tps --workload tg32 --chart reports/trend"},
    {"report", cmd_report, "RUN", "a markdown report of one run with charts (RUN: a run id, a tag or a git commit);"
     " --challenge RUN: the challenge report",
     report_flags, "cortex-bench report 12 --baseline baseline"},
    {"dashboard", cmd_dashboard, "", "the static HTML dashboard of every run", dashboard_flags,
     "cortex-bench dashboard --out dashboards/site"},
    {"hw", cmd_hw, "", "measure this machine's read bandwidth and peak arithmetic (the roofline)", hw_flags,
     "cortex-bench hw --size 512 --reps 3"},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};
