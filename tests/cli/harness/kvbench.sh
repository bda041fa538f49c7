#!/usr/bin/env bash
# tests/cli/harness/kvbench.sh - the KV cache in cortex-bench: bad KV flags are one
# error line and leave the database untouched; a shared-system-prefix trace
# with --prefix-cache on records a prefix hit rate > 0; the KV counters are
# stored as metrics and shown; runs with different KV settings are not
# compared silently; multiseq keeps several sequences in one tiered cache;
# batched decodes them in one pass per round and generates the same tokens;
# byte budgets below what two sequences need end (no livelock), the prompt
# they can never hold failed by name.
set -u
. "$(dirname "$0")/../lib/common.sh"
db=$tmp/kv.db
"$CORTEX" synth --shape test-tiny --type f32 -c 1024 -o "$tmp/tiny.gguf" 2>/dev/null

# A trace whose prompts share a system prompt.
"$BENCH" trace --requests 6 --rate 200 --zipf 0 --adapters 1 --prompt-len fixed:8 --gen-len fixed:4 --seed 5 \
    --system-prefix 96 -o "$tmp/sp.jsonl" 2>/dev/null
check "trace sidecar records the system prefix" grep -q '^  "system_prefix": 96,$' "$tmp/sp.jsonl.meta.json"
check "every prompt starts with the same system prompt" "$PY" -c '
import json, sys
t = [json.loads(l)["text"] for l in open(sys.argv[1])]
p = t[0][:200]
assert len(t) == 6 and all(x.startswith(p) for x in t) and len(set(t)) == 6' "$tmp/sp.jsonl"

run() { "$BENCH" run --model "$tmp/tiny.gguf" --workload "trace:$tmp/sp.jsonl" -t 1 --reps 2 --warmup 0 --db "$db" "$@"; }
run --prefix-cache on >"$tmp/on.out" 2>"$tmp/on.err"
check "prefix-cache run exits 0" test $? -eq 0
on=$(sql "$db" "select max(id) from runs")
check "KV configuration stored with the run" test "$(sql "$db" "select kv_config like '%prefix=on%' from runs where id = $on")" = 1
check "prefix hit rate > 0 recorded per repetition" \
    test "$(sql "$db" "select count(*) from rep_metrics where run_id = $on and name = 'kv_prefix_hit_rate' and value > 0")" = 2
check "prefix tokens reused recorded" test "$(sql "$db" "select median > 0 from summary where run_id = $on and name = 'kv_prefix_tokens'")" = 1
check "per-tier block reads stored as metrics" test "$(sql "$db" "select median > 0 from summary where run_id = $on and name = 'kv_hits_hot'")" = 1
check "peak bytes per tier stored" test "$(sql "$db" "select count(*) from summary where run_id = $on and name like 'kv_peak_bytes_%'")" = 3
check "run prints the KV cache section with the hit rate" grep -q "^| prefix hit rate" "$tmp/on.out"
run --prefix-cache off >/dev/null 2>&1
off=$(sql "$db" "select max(id) from runs")
check "no prefix metrics with the prefix cache off" \
    test "$(sql "$db" "select count(*) from rep_metrics where run_id = $off and name like 'kv_prefix%'")" = 0
"$BENCH" show "$on" --db "$db" >"$tmp/show.out"
check "show has a KV cache section" grep -q "^### KV cache" "$tmp/show.out"
"$BENCH" compare "$off" "$on" --db "$db" >/dev/null 2>"$tmp/cmp.err"
check "compare refuses different KV settings (exit 2)" test $? -eq 2
check "refusal names the KV configuration" grep -q "KV cache configuration" "$tmp/cmp.err"

# Tiering: 3 sequences of 200 tokens alive at once, a hot tier of 4 blocks
# (test-tiny f32: 8 KiB a block) and no warm tier: blocks go cold and come back.
"$BENCH" run --model "$tmp/tiny.gguf" --workload multiseq:3,200,8 -t 1 --reps 1 --warmup 0 --db "$db" \
    --kv-hot 32K --kv-warm 0 --kv-policy lfu >"$tmp/ms.out" 2>&1
check "multiseq with a small hot tier exits 0" test $? -eq 0
ms=$(sql "$db" "select max(id) from runs")
check "multiseq: demotions and cold reads recorded" \
    test "$(sql "$db" "select count(*) from summary where run_id = $ms and name in ('kv_demotions', 'kv_hits_cold', 'kv_restores') and median > 0")" = 3
check "multiseq: hot bytes stayed within the budget" \
    test "$(sql "$db" "select median <= 32768 from summary where run_id = $ms and name = 'kv_peak_bytes_hot'")" = 1
check "multiseq: 3 x 8 tokens generated" test "$(sql "$db" "select gen_tokens from requests where run_id = $ms")" = 24

# The same sequences decoded in one batched pass per round: same greedy
# tokens (f32: bit-identical logits), the same tiered cache at work.
"$BENCH" run --model "$tmp/tiny.gguf" --workload batched:3,200,8 -t 2 --reps 1 --warmup 0 --db "$db" \
    --kv-hot 32K --kv-warm 0 --kv-policy lfu >"$tmp/bt.out" 2>&1
check "batched with a small hot tier exits 0" test $? -eq 0
bt=$(sql "$db" "select max(id) from runs")
check "batched: the token canary equals multiseq's" \
    test "$(sql "$db" "select token_hash from requests where run_id = $bt")" = "$(sql "$db" "select token_hash from requests where run_id = $ms")"
check "batched: 3 x 8 tokens generated" \
    test "$(sql "$db" "select gen_tokens from requests where run_id = $bt")" = 24
check "batched: demotions and cold reads recorded" \
    test "$(sql "$db" "select count(*) from summary where run_id = $bt and name in ('kv_demotions', 'kv_hits_cold', 'kv_restores') and median > 0")" = 3
"$BENCH" compare "$ms" "$bt" --db "$db" >/dev/null 2>&1
check "compare refuses multiseq against batched (different workloads)" test $? -eq 2

# A context that is not a multiple of the block size: the shared cache
# still holds every sequence's blocks (each rounds up to whole blocks).
"$BENCH" run --model "$tmp/tiny.gguf" --workload multiseq:3,90,10 -c 100 -t 1 --reps 1 --warmup 0 --db "$db" \
    >"$tmp/odd.out" 2>&1
check "multiseq with a 100-token context (not whole blocks) exits 0" test $? -eq 0

# Bad KV flags: one line naming the problem, exit 2, no run recorded.
before=$(sql "$db" "select count(*) from runs")
bad() { # description, expected stderr pattern, args...
    local what=$1 pat=$2; shift 2
    "$BENCH" run --model "$tmp/tiny.gguf" --workload tg4 -t 1 --db "$db" "$@" >"$tmp/bad.out" 2>"$tmp/bad.err"
    local rc=$?
    check "$what: exit 2" test $rc -eq 2
    check "$what: one line naming it" sh -c "test \$(wc -l <'$tmp/bad.err') -eq 1 && grep -q -- '$pat' '$tmp/bad.err'"
}
bad "unknown KV type" "--kv-type: .q3. is not" --kv-type q3
bad "q4 is not a hot type" "--kv-type: .q4. is not" --kv-type q4
bad "f32 is not a warm type" "--kv-warm-type: .f32. is not" --kv-warm-type f32
# Two sequences under budgets below their needs (issue 25: this never ended;
# every pass ran out of cold room, preempted one and readmitted it at once).
"$CORTEX" synth --shape stories15m --type q8_0 -c 2048 -o "$tmp/s15.gguf" 2>/dev/null
timeout 120 "$BENCH" run --model "$tmp/s15.gguf" --workload standard --concurrency 2 --reps 1 --warmup 0 -t 1 \
    --kv-hot 4M --kv-warm 2M --kv-cold 2M --db "$tmp/tight.db" >"$tmp/tight.out" 2>&1
rc=$?
check "tight KV budgets at concurrency 2 end (exit 4: INVALID, not a timeout) (rc $rc)" test $rc -eq 4
check "... the prompt the budgets can never hold failed by name, the others finished" \
    grep -q 'p10: the request needs [0-9]* KV blocks of 16 positions; the cache.s budgets hold [0-9]*' "$tmp/tight.out"
check "... 9 of 10 finished" grep -q '9 finished' "$tmp/tight.out"
bad "bad byte count" "--kv-cold: .lots. is not a byte count" --kv-cold lots
bad "unknown policy" "--kv-policy: .mru." --kv-policy mru
bad "prefix cache needs on or off" "--prefix-cache: .yes. is not one of off|on" --prefix-cache yes
bad "hot budget below one block" "less than one f32 block" --kv-hot 1K
bad "unwritable spill file" "spill" --kv-hot 16K --kv-spill /nonexistent-dir/spill.kv
bad "bad multiseq spec" "multiseq:NSEQ,CTX,GEN" --workload multiseq:0,10,1
bad "bad batched spec" "batched:NSEQ,CTX,GEN" --workload batched:65,10,1
bad "multiseq spec missing a field" "multiseq:NSEQ,CTX,GEN" --workload multiseq:3,10
bad "batched spec with trailing text" "batched:NSEQ,CTX,GEN" --workload batched:3,10,1x
bad "KV depth with multiseq" "not multiseq or batched" --workload multiseq:3,10,1 -d 8
check "bad KV flags wrote no run" test "$(sql "$db" "select count(*) from runs")" = "$before"
"$BENCH" run --model "$tmp/tiny.gguf" --workload tg4 --db "$tmp/never.db" --kv-type q3 2>/dev/null
check "bad KV flags create no database" test ! -e "$tmp/never.db"

finish
