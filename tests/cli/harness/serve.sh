#!/usr/bin/env bash
# tests/cli/harness/serve.sh - prompt sets and traces served through the
# request scheduler (docs/serving.md): the same greedy tokens whether 1 or
# 4 sequences are batched (f32: exact), a burst of 64 simultaneous requests
# into a 16-request queue rejects exactly the overflow and finishes every
# admitted one, goodput against SLOs, priorities and deadlines from the
# trace, Poisson rates and the rate sweep stored one run per rate, and bad
# scheduler flags or trace fields refused with one line (exit 2).
set -u
. "$(dirname "$0")/../lib/common.sh"
db=$tmp/s.db
"$CORTEX" synth --shape test-tiny --type f32 -o "$tmp/tiny.gguf" 2>/dev/null
run() { "$BENCH" run --model "$tmp/tiny.gguf" -t 1 --reps 1 --warmup 0 --db "$db" --no-progress "$@"; }
last() { sql "$db" "select max(id) from runs"; }
metric() { sql "$db" "select median from summary where run_id = $1 and name = '$2'"; }

# A prompt set of 12 short prompts (the standard set's longest exceed test-tiny's 128 positions).
"$PY" - "$tmp/p.jsonl" <<'EOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(12):
        f.write(json.dumps({"id": "q%02d" % i, "text": "word " * (1 + i), "max_tokens": 8 + 3 * i}) + "\n")
EOF
run --workload "prompts:$tmp/p.jsonl" --max-seqs 1 >/dev/null 2>"$tmp/e1"
check "max-seqs 1: the prompt set is served" test $? -eq 0
one=$(last)
run --workload "prompts:$tmp/p.jsonl" --max-seqs 4 --concurrency 4 >/dev/null 2>"$tmp/e4"
four=$(last)
check "max-seqs 4, 4 clients: the same greedy tokens for every prompt (f32)" test \
    "$(sql "$db" "select count(*) from canaries a join canaries b on a.item = b.item and a.token_hash = b.token_hash where a.run_id = $one and b.run_id = $four")" = 12
check "batching took fewer steps than requests' tokens" \
    "$PY" -c "import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)" "$(metric "$four" steps)" "$(metric "$one" steps)"
check "the scheduler's configuration is stored" test "$(sql "$db" "select sched_config from runs where id = $four")" = "seqs=4,batch=256,queue=256"
# The defaults `run --help` states are the ones a run without the flags uses, and the engine's own
# (cx_sched_defaults, cx_kv_defaults: `cortex serve --help` states the scheduler's).
"$BENCH" run --help >"$tmp/run.help"
"$CORTEX" serve --help >"$tmp/serve.help"
default_of() { # help file, flag -> the default it states
    grep -E -- "^ +(-[a-z], )?$2 " "$1" | grep -oE 'default [^;)]+' | tail -1 | sed 's/^default //'
}
check "run --help: --max-queue defaults to 256" test "$(default_of "$tmp/run.help" --max-queue)" = 256
for f in --max-seqs --max-batch-tokens --max-queue; do
    check "run --help: $f defaults to cortex serve's" \
        test -n "$(default_of "$tmp/run.help" $f)" -a "$(default_of "$tmp/run.help" $f)" = "$(default_of "$tmp/serve.help" $f)"
done
check "a run without --max-batch-tokens and --max-queue stores the defaults run --help states" \
    test "$(sql "$db" "select sched_config from runs where id = $one")" = \
    "seqs=1,batch=$(default_of "$tmp/run.help" --max-batch-tokens),queue=$(default_of "$tmp/run.help" --max-queue)"
kv_help="type=$(default_of "$tmp/run.help" --kv-type) warm_type=$(default_of "$tmp/run.help" --kv-warm-type)"
kv_help="$kv_help hot=$(default_of "$tmp/run.help" --kv-hot) warm=$(default_of "$tmp/run.help" --kv-warm)"
kv_help="$kv_help cold=$(default_of "$tmp/run.help" --kv-cold) policy=$(default_of "$tmp/run.help" --kv-policy)"
kv_help="$kv_help prefix=$(default_of "$tmp/run.help" --prefix-cache) spill=off"
check "a run without KV flags stores the KV defaults run --help states ($kv_help)" \
    test "$(sql "$db" "select kv_config from runs where id = $one")" = "$kv_help"
check "runs with different schedulers are not comparable" \
    test "$(sql "$db" "select count(distinct compare_key) from runs where id in ($one, $four)")" = 2
check "every request finished" test "$(metric "$four" requests_finished)" = 12.0

# A burst: 64 requests arriving at once into a queue of 16 with one sequence running.
"$PY" - "$tmp/burst.jsonl" <<'EOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(64):
        f.write(json.dumps({"id": "b%02d" % i, "arrival_s": 0, "adapter": 0, "prompt_len": 4, "max_tokens": 4,
                            "text": "burst number %d" % i}) + "\n")
EOF
run --workload "trace:$tmp/burst.jsonl" --max-seqs 1 --max-queue 16 >/dev/null 2>"$tmp/eb"
check "burst run completes" test $? -eq 0
b=$(last)
check "exactly the overflow (48) is rejected" test "$(metric "$b" requests_rejected)" = 48.0
check "every admitted request (16) finishes" test "$(metric "$b" requests_finished)" = 16.0
check "rejections are stored per request, with their reason" \
    test "$(sql "$db" "select count(*) from requests where run_id = $b and state = 'rejected' and error like 'rejected: the waiting queue is full%'")" = 48

# Goodput against SLOs: everything meets a loose SLO, nothing meets an impossible one.
run --workload "prompts:$tmp/p.jsonl" --max-seqs 4 --concurrency 4 --slo ttft=100000,tpot=100000 >/dev/null 2>&1
check "a loose SLO: goodput share 1" test "$(metric "$(last)" goodput_share)" = 1.0
check "goodput rate equals the request rate then" test "$(metric "$(last)" goodput_rps)" = "$(metric "$(last)" request_rps)"
run --workload "prompts:$tmp/p.jsonl" --max-seqs 4 --concurrency 4 --slo ttft=0.0001 >/dev/null 2>&1
check "an impossible TTFT SLO: goodput share 0" test "$(metric "$(last)" goodput_share)" = 0.0
check "the SLO is stored with the run" test "$(sql "$db" "select slo from runs where id = $(last)")" = "ttft=0.0001"

# Priorities and deadlines from the trace generator.
"$BENCH" trace --requests 24 --rate 1000 --priorities 1,1 --deadline-ms 0.5 --prompt-len uniform:4,24 \
    --gen-len fixed:40 --seed 3 -o "$tmp/pd.jsonl" 2>/dev/null
check "the trace carries priority and deadline_ms" "$PY" -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; assert {x["priority"] for x in r} == {0, 1} and all(x["deadline_ms"] == 0.5 for x in r)' "$tmp/pd.jsonl"
run --workload "trace:$tmp/pd.jsonl" --max-seqs 2 >/dev/null 2>&1
check "a 0.5 ms deadline times requests out" \
    "$PY" -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)" "$(metric "$(last)" requests_timed_out)"
check "priorities are stored per request" \
    test "$(sql "$db" "select count(distinct priority) from requests where run_id = $(last)")" = 2

# Open loop at Poisson rates: one run per rate; the sweep: saturation, then 6 rates.
run --workload "prompts:$tmp/p.jsonl" --rate 200,400 --max-seqs 4 >/dev/null 2>&1
check "--rate 200,400: two open-loop runs with their rates" \
    test "$(sql "$db" "select group_concat(rate) from (select rate from runs where mode = 'open' and workload like 'prompts:%' order by id)")" = "200.0,400.0"
run --workload "prompts:$tmp/p.jsonl" --rate sweep --max-seqs 4 >"$tmp/sweep.out" 2>&1
check "the sweep names its saturation rate" grep -q "^rate sweep: saturation [0-9.]* requests/s" "$tmp/sweep.out"
sat=$(sql "$db" "select min(id) from runs where sweep is not null and sweep = id")
check "the sweep stores 7 runs under its saturation run" test "$(sql "$db" "select count(*) from runs where sweep = $sat")" = 7
check "the sweep's rates are 25..110% of the saturation rate" \
    "$PY" -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); s=c.execute('select median from summary where run_id=? and name=\"request_rps\"',(int(sys.argv[2]),)).fetchone()[0]; r=[x[0]/s for x in c.execute('select rate from runs where sweep=? and rate is not null order by id',(int(sys.argv[2]),))]; assert [round(x,2) for x in r]==[0.25,0.5,0.75,0.9,1.0,1.1], r" "$db" "$sat"

# Bad input: one line, exit 2, nothing stored.
n0=$(sql "$db" "select count(*) from runs")
bad() { # description, pattern, args...
    local what=$1 pat=$2; shift 2
    run "$@" >/dev/null 2>"$tmp/bad.err"
    local rc=$?
    check "$what: exit 2" test $rc -eq 2
    check "$what: one line" test "$(wc -l <"$tmp/bad.err")" -eq 1
    check "$what: names it" grep -qF -- "$pat" "$tmp/bad.err"
}
bad "max-seqs 0" "max-seqs" --workload "prompts:$tmp/p.jsonl" --max-seqs 0
bad "a budget below max-seqs" "max-batch-tokens 4 is below" --workload "prompts:$tmp/p.jsonl" --max-seqs 8 --max-batch-tokens 4
bad "a negative queue" "max-queue" --workload "prompts:$tmp/p.jsonl" --max-queue -3
bad "a negative rate" "--rate" --workload "prompts:$tmp/p.jsonl" --rate -1
bad "an unknown SLO" "--slo: 'latency'" --workload "prompts:$tmp/p.jsonl" --slo latency=5
bad "scheduler flags on a synthetic test" "applies to prompt sets and traces" --workload tg8 --max-seqs 2
printf '{"id": "x", "arrival_s": 0, "adapter": 0, "prompt_len": 3, "max_tokens": 4, "priority": "high", "text": "a b c"}\n' >"$tmp/badprio.jsonl"
bad "a priority that is not an integer" 'badprio.jsonl:1: "priority" must be an integer class, not a string' --workload "trace:$tmp/badprio.jsonl"
printf '{"id": "x", "arrival_s": 0, "adapter": 0, "prompt_len": 3, "max_tokens": 4, "deadline_ms": -5, "text": "a b c"}\n' >"$tmp/baddl.jsonl"
bad "a negative deadline" '"deadline_ms" must be in (0, 1e9]' --workload "trace:$tmp/baddl.jsonl"
check "bad input stored nothing" test "$(sql "$db" "select count(*) from runs")" = "$n0"
finish serve
