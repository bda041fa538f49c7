#!/usr/bin/env bash
# tests/cli/harness/bench.sh - cortex-bench end to end on a tiny synthetic model:
# synthetic tests, the standard prompt set (including prompts longer than the
# context, recorded as per-request errors), trace generation and open-loop
# replay with per-adapter statistics, a SIGKILL mid-run, two runs writing one
# database at once, and bad input rejected before the database is touched.
set -u
. "$(dirname "$0")/../lib/common.sh"
db=$tmp/b.db
"$CORTEX" synth --shape test-tiny --type q8_0 -o "$tmp/tiny.gguf" 2>/dev/null

# Synthetic llama-bench tests over a thread grid: one run per thread count.
"$BENCH" run --model "$tmp/tiny.gguf" --workload pp32 -t 1,2 --reps 2 --warmup 1 --db "$db" >"$tmp/pp.out" 2>"$tmp/pp.err"
check "pp32 over -t 1,2 exits 0" test $? -eq 0
check "llama-bench table has a pp32 row for each thread count" test "$(grep -cE '^\| .* \| [12] \| pp32 \| [0-9.]+ ± [0-9.]+ \|$' "$tmp/pp.out")" -eq 2
check "two complete runs stored" test "$(sql "$db" "select count(*) from runs where status = 'complete'")" = 2
check "runs record their thread counts" test "$(sql "$db" "select group_concat(threads) from runs")" = "1,2"
"$BENCH" run --model "$tmp/tiny.gguf" --workload pg16,8 -d 32 -t 1 --reps 2 --db "$db" -o json >"$tmp/pg.json"
check "pg16,8 at depth 32 emits valid JSON" "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert any(r["metric"]=="tps" for r in d)' "$tmp/pg.json"
check "KV depth stored" test "$(sql "$db" "select test_depth from runs order by id desc limit 1")" = 32

# The standard prompt set on a 128-token context: long prompts fail alone,
# others are cut short by the full context; recorded, and the run is INVALID
# (docs/harness.md, "VALID and INVALID"): stored so, exit 4, no figure shown.
"$BENCH" run --model "$tmp/tiny.gguf" --workload standard -t 1 --reps 1 --warmup 0 --db "$db" >"$tmp/std.out" 2>"$tmp/std.err"
check "a run with failed requests exits 4 (INVALID)" test $? -eq 4
id=$(sql "$db" "select max(id) from runs")
check "stored complete and INVALID" test "$(sql "$db" "select status || ' ' || validity from runs where id = $id")" = "complete invalid"
check "its reasons count the failures, with an example" \
    test "$(sql "$db" "select validity_reasons like '9 of 10 requests failed (p02: prompt of % tokens does not fit the context of 128 tokens)' from runs where id = $id")" = 1
check "10 requests recorded" test "$(sql "$db" "select count(*) from requests where run_id = $id")" = 10
check "every request stores how it ended and what it asked" \
    test "$(sql "$db" "select count(*) from requests where run_id = $id and state in ('length', 'stop', 'failed') and max_tokens > 0")" = 10
check "prompts longer than the context are per-request errors" \
    test "$(sql "$db" "select count(*) from requests where run_id = $id and state = 'failed' and error like 'prompt of % tokens does not fit the context of 128 tokens'")" -ge 1
check "requests that fit were served" test "$(sql "$db" "select count(*) from requests where run_id = $id and error is null and gen_tokens > 0")" -ge 1
check "canaries stored for served prompts" test "$(sql "$db" "select count(*) from canaries where run_id = $id")" -ge 1
check "run prints INVALID with the reasons, no figure" sh -c "grep -q '^\*\*run $id\*\*: .standard.: \*\*INVALID\*\*: ' '$tmp/std.out' &&
    ! grep -qE 'throughput|tok/s' '$tmp/std.out'"
check "run prints the outcomes" \
    grep -qE "^  requests 10 over 1 repetition: 1 finished \(1 by length, 0 at a stop\), 0 truncated, 9 failed, 0 rejected, 0 timed out, 0 cancelled$" "$tmp/std.out"
check "run says why it exits 4, on stderr" grep -q "exit 4: INVALID runs are stored as such" "$tmp/std.err"
"$BENCH" show "$id" --db "$db" >"$tmp/show.out"
check "show puts INVALID and its reasons first" sh -c "sed -n 3p '$tmp/show.out' | grep -q '^- \*\*INVALID\*\*: .* requests failed'"
check "show prints the request table with outcomes and the error" sh -c "grep -q '| failed | .*error: prompt of' '$tmp/show.out' &&
    grep -qE '^\| p[0-9]+ \|  \| length \| [0-9]+ \| [0-9]+ / [0-9]+ \|' '$tmp/show.out'"
check "show prints no figure of an INVALID run" sh -c "! grep -qE '### summary|### counters|### KV cache' '$tmp/show.out'"
"$BENCH" list --db "$db" >"$tmp/list.out"
check "list shows it INVALID without a TPS" grep -qE "^\| $id \| [^|]+ \| \*\*INVALID\*\* \| standard \| .* \|  \|$" "$tmp/list.out"
"$BENCH" run --model "$tmp/tiny.gguf" --workload standard -t 1 --reps 1 --warmup 0 --db "$db" -o json >"$tmp/std.json" 2>/dev/null
check "-o json of an INVALID run: its verdict, no metric" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d) == 1 and d[0]["validity"] == "invalid" and "requests failed" in d[0]["reasons"] and "metric" not in d[0], d' "$tmp/std.json"
# --allow-failures names the tolerated share: then VALID, with what it tolerated.
"$BENCH" run --model "$tmp/tiny.gguf" --workload standard -t 1 --reps 1 --warmup 0 --allow-failures 1 --db "$db" >"$tmp/std2.out" 2>&1
check "--allow-failures 1: exit 0" test $? -eq 0
id2=$(sql "$db" "select max(id) from runs")
check "--allow-failures 1: VALID, noting what it tolerated" \
    test "$(sql "$db" "select validity || ': ' || validity_reasons from runs where id = $id2")" = "valid: $(sql "$db" "select count(*) from requests where run_id = $id2 and (state = 'failed' or gen_tokens < max_tokens)") of 10 requests failed or were truncated, within --allow-failures 1"
check "--allow-failures is part of the comparison key" \
    test "$(sql "$db" "select count(distinct compare_key) from runs where id in ($id, $id2)")" = 2
"$BENCH" run --model "$tmp/tiny.gguf" --workload standard -t 1 --reps 1 --warmup 0 --allow-failures 0.1 --db "$db" >/dev/null 2>&1
check "--allow-failures 0.1 does not cover them: exit 4" test $? -eq 4
check "  and says the share is more than it tolerates" \
    test "$(sql "$db" "select validity_reasons like '%is more than --allow-failures 0.1 tolerates' from runs order by id desc limit 1")" = 1
# A request the full context cuts short is truncated: INVALID too.
printf '{"id": "fits", "max_tokens": 8, "text": "Once upon a time"}\n{"id": "cut", "max_tokens": 120, "text": "%s"}\n' \
    "$(printf 'Once upon a time there was a little dog. %.0s' 1 2 3)" >"$tmp/cut.jsonl"
"$BENCH" run --model "$tmp/tiny.gguf" --workload "prompts:$tmp/cut.jsonl" -t 1 --reps 1 --warmup 0 --db "$db" >"$tmp/cut.out" 2>&1
check "a truncated request: exit 4" test $? -eq 4
check "  truncation can be found from the database" \
    test "$(sql "$db" "select group_concat(item || ':' || state || ':' || (gen_tokens < max_tokens)) from requests where run_id = (select max(id) from runs)")" = "fits:length:0,cut:length:1"
check "  the reasons say so, with the tokens and why" \
    test "$(sql "$db" "select validity_reasons like '1 of 2 requests were truncated (cut: % of 120 tokens, stopped by length: the context was full)' from runs order by id desc limit 1")" = 1
check "  run prints it" grep -qE "^  requests 2 over 1 repetition: 2 finished \(2 by length, 0 at a stop\), 1 truncated, 0 failed" "$tmp/cut.out"
# Every request failing: INVALID, "no request finished".
"$BENCH" run --model "$tmp/tiny.gguf" --workload standard -c 16 -t 1 --reps 1 --warmup 0 --db "$db" >/dev/null 2>&1
check "a run whose every request fails exits 4" test $? -eq 4
check "  INVALID: no request finished" \
    test "$(sql "$db" "select validity_reasons like '10 of 10 requests failed %; no request finished (0 rejected, 0 timed out, 10 failed)' from runs order by id desc limit 1")" = 1
# -c past the model's context is an error, not a silent cap.
before_c=$(sql "$db" "select count(*) from runs")
"$BENCH" run --model "$tmp/tiny.gguf" --workload pp8 -c 4096 -t 1 --db "$db" >/dev/null 2>"$tmp/ctx.err"
check "-c past the model's context: exit 2" test $? -eq 2
check "  one line naming both contexts" sh -c "test \$(wc -l <'$tmp/ctx.err') -eq 1 && grep -q -- '-c 4096 is more than the model.s context of 128 tokens' '$tmp/ctx.err'"
check "  nothing stored" test "$(sql "$db" "select count(*) from runs")" = "$before_c"
"$BENCH" show 1 --db "$db" >"$tmp/show_pp.out"
check "show of a VALID run prints counters, hardware ones missing or counted" grep -qE "\| (prefill|decode|total) \| cycles \| " "$tmp/show_pp.out"
check "show of a VALID run says so" grep -q "^run 1: VALID$" "$tmp/show_pp.out"

# Trace generation and open-loop replay with per-adapter statistics.
"$BENCH" trace --requests 8 --rate 50 --zipf 1.1 --adapters 3 --prompt-len uniform:8,24 --gen-len fixed:4 --seed 7 -o "$tmp/t.jsonl"
check "trace written" test -s "$tmp/t.jsonl"
check "trace is plain JSONL: one line per request" test "$(wc -l <"$tmp/t.jsonl")" -eq 8
check "every trace line is a JSON object" "$PY" -c "import json,sys; [json.loads(l) for l in open(sys.argv[1])]" "$tmp/t.jsonl"
check "every trace line is a request" "$PY" -c '
import json, sys
assert all(isinstance(json.loads(l), dict) and "arrival_s" in json.loads(l) for l in open(sys.argv[1]))' "$tmp/t.jsonl"
check "sidecar holds the parameters, the hash and the command" "$PY" -c '
import hashlib, json, sys
m = json.load(open(sys.argv[1] + ".meta.json"))
assert m["format"] == "cortex-bench trace" and m["version"] == 2, m
assert (m["requests"], m["rate"], m["zipf"], m["adapters"], m["seed"]) == (8, 50, 1.1, 3, 7), m
assert (m["prompt_len"], m["gen_len"], m["system_prefix"]) == ("uniform:8,24", "fixed:4", 0), m
assert m["trace_sha256"] == hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest(), m
assert m["cmdline"].endswith(" trace --requests 8 --rate 50 --zipf 1.1 --adapters 3 --prompt-len uniform:8,24 --gen-len fixed:4 --seed 7 -o " + sys.argv[1]), m' "$tmp/t.jsonl"
check "no temporaries left" sh -c "! ls '$tmp'/t.jsonl*.tmp 2>/dev/null | grep -q ."
"$BENCH" trace --requests 8 --rate 50 --zipf 1.1 --adapters 3 --prompt-len uniform:8,24 --gen-len fixed:4 --seed 7 -o "$tmp/t2.jsonl"
check "same seed, same trace" cmp -s "$tmp/t.jsonl" "$tmp/t2.jsonl"
"$BENCH" run --model "$tmp/tiny.gguf" --workload "trace:$tmp/t.jsonl" -t 1 --reps 1 --warmup 0 --db "$db" >/dev/null 2>&1
check "trace replay exits 0" test $? -eq 0
id=$(sql "$db" "select max(id) from runs")
check "open loop mode recorded" test "$(sql "$db" "select mode from runs where id = $id")" = open
check "per-adapter statistics stored" test "$(sql "$db" "select sum(requests) from adapter_stats where run_id = $id")" = 8
check "arrivals follow the trace" test "$(sql "$db" "select count(*) from requests where run_id = $id and arrival_ms > 0")" = 8
check "the run stores the trace's sidecar" "$PY" -c '
import json, sys
assert json.loads(sys.argv[1]) == json.load(open(sys.argv[2] + ".meta.json"))' "$(sql "$db" "select workload_meta from runs where id = $id")" "$tmp/t.jsonl"
"$BENCH" show "$id" --db "$db" >"$tmp/show_t.out"
check "show prints the trace's command and parameters" sh -c "grep -q '^- workload made by .*trace --requests 8 ' '$tmp/show_t.out' &&
    grep -q '^- workload parameters (sidecar): format=cortex-bench trace version=2 requests=8 rate=50 zipf=1.1 ' '$tmp/show_t.out'"
check "runs without a sidecar store NULL" test "$(sql "$db" "select count(*) = sum(workload_meta is null) from runs where workload = 'standard'")" = 1
# An old-format trace (the v1 header line, no sidecar) still replays.
{ echo "# cortex-bench trace v1 requests=8 rate=50 zipf=1.1 adapters=3 prompt_len=uniform:8,24 gen_len=fixed:4 seed=7"; cat "$tmp/t.jsonl"; } >"$tmp/old.jsonl"
"$BENCH" run --model "$tmp/tiny.gguf" --workload "trace:$tmp/old.jsonl" -t 1 --reps 1 --warmup 0 --db "$db" >/dev/null 2>&1
check "old-format trace replays" test $? -eq 0
id=$(sql "$db" "select max(id) from runs")
check "old-format trace: all 8 requests, no sidecar" \
    test "$(sql "$db" "select count(*) from requests where run_id = $id"),$(sql "$db" "select workload_meta is null from runs where id = $id")" = "8,1"

# SIGKILL mid-run: the database stays valid and the run stays 'incomplete'.
"$BENCH" run --model "$tmp/tiny.gguf" --workload tg64 -t 1 --reps 10000 --warmup 0 --db "$tmp/kill.db" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 100); do
    [ "$(sql "$tmp/kill.db" "select count(*) from runs" 2>/dev/null)" = 1 ] && break
    sleep 0.1
done
sleep 0.3
kill -9 $pid; wait $pid 2>/dev/null
check "killed run is marked incomplete" test "$(sql "$tmp/kill.db" "select status from runs")" = incomplete
check "database intact after SIGKILL" test "$(sql "$tmp/kill.db" "pragma integrity_check")" = ok
check "nothing half-written: no results for the killed run" test "$(sql "$tmp/kill.db" "select count(*) from rep_metrics")" = 0

# Two runs writing one database at once both land.
for k in 1 2; do
    "$BENCH" run --model "$tmp/tiny.gguf" --workload tg16 -t 1 --reps 3 --warmup 0 --db "$tmp/two.db" >/dev/null 2>"$tmp/two$k.err" &
done
wait
check "two concurrent runs both complete" test "$(sql "$tmp/two.db" "select count(*) from runs where status = 'complete'")" = 2
check "both runs' results landed" test "$(sql "$tmp/two.db" "select count(distinct run_id) from rep_metrics")" = 2

# Comparability: different thread counts are refused unless forced.
"$BENCH" compare 1 2 --db "$db" >/dev/null 2>"$tmp/cmp.err"
check "compare refuses runs with different thread counts (exit 2)" test $? -eq 2
check "refusal names the difference" grep -q "thread count" "$tmp/cmp.err"
"$BENCH" compare 1 2 --db "$db" --force >"$tmp/cmp.out"
check "--force compares and flags" grep -q "FLAGGED" "$tmp/cmp.out"
# An A/A pair at --reps 1 is never "regressed": one value a side cannot show a change (docs/gates.md).
for k in 1 2; do "$BENCH" run --model "$tmp/tiny.gguf" --workload tg16 -t 1 --reps 1 --warmup 0 --db "$tmp/aa.db" >/dev/null 2>&1; done
"$BENCH" compare 1 2 --db "$tmp/aa.db" --gate-file ci/gates.conf >"$tmp/aa.out" 2>&1
check "A/A at --reps 1: exit 0, never regressed" sh -c "test $? -eq 0 && ! grep -q regressed '$tmp/aa.out'"
check "... every gated metric inconclusive, saying why" sh -c "grep -q '| tps | .* | inconclusive |' '$tmp/aa.out' &&
    grep -q 'inconclusive: 1 vs 1 repetitions cannot show a change at p < 0.05 (the U test needs 4 per side)' '$tmp/aa.out'"
# An INVALID run is no measurement: compare refuses it (exit 4), even with --force.
inv=$(sql "$db" "select min(id) from runs where validity = 'invalid'")
"$BENCH" compare "$inv" "$inv" --db "$db" --force >/dev/null 2>"$tmp/cmpi.err"
check "compare of an INVALID run: exit 4 naming it" sh -c "test $? -eq 4 && grep -q 'run $inv is INVALID: ' '$tmp/cmpi.err'"

# Bad input: one clear line naming the problem, non-zero exit, database untouched.
before=$(sql "$db" "select count(*) from runs")
printf '{"id": "a", "arrival_s": 0, "adapter": 1, "prompt_len": 4, "max_tokens": 4, "text": "hi"}\n{"id": "b", "arrival_s": 1, oops}\n' >"$tmp/bad.jsonl"
bad() { # description, expected stderr pattern, args...
    local what=$1 pat=$2; shift 2
    "$BENCH" "$@" >"$tmp/bad.out" 2>"$tmp/bad.err"
    local rc=$?
    check "$what: non-zero exit" test $rc -ne 0 -a $rc -lt 128
    check "$what: one line naming it" sh -c "test \$(wc -l <'$tmp/bad.err') -eq 1 && grep -q '$pat' '$tmp/bad.err'"
}
bad "malformed trace line" "bad.jsonl:2" run --model "$tmp/tiny.gguf" --workload "trace:$tmp/bad.jsonl" --db "$db"
bad "unknown workload" "unknown workload .pp-x" run --model "$tmp/tiny.gguf" --workload pp-x --db "$db"
bad "missing model" "nope.gguf" run --model "$tmp/nope.gguf" --db "$db"
bad "unwritable database path" "/nonexistent-dir/b.db" run --model "$tmp/tiny.gguf" --workload pp8 --db /nonexistent-dir/b.db
bad "bad flag value" "reps" run --model "$tmp/tiny.gguf" --reps zero --db "$db"
bad "bad trace distribution" "prompt-len" trace --prompt-len "uniform:5" -o "$tmp/x.jsonl"
bad "unwritable trace path" "/nonexistent-dir/t.jsonl.tmp: cannot create" trace -o /nonexistent-dir/t.jsonl
cp "$tmp/t.jsonl.meta.json" "$tmp/old.jsonl.meta.json"
bad "sidecar of another file" "old.jsonl.meta.json: describes another file" run --model "$tmp/tiny.gguf" --workload "trace:$tmp/old.jsonl" --db "$db"
bad "show of a missing run" "no run 999" show 999 --db "$db"
check "bad input wrote no run" test "$(sql "$db" "select count(*) from runs")" = "$before"
check "no half-written trace file or sidecar" sh -c "! ls '$tmp'/x.jsonl* 2>/dev/null | grep -q ."

# Every command takes the same run references: an id, a tag, a commit prefix.
first=$(sql "$db" "select min(id) from runs where status = 'complete'")
commit=$(sql "$db" "select git_commit from runs where id = $first")
"$BENCH" tag "$first" smoke --db "$db" >/dev/null
check "tag RUN NAME" test "$(sql "$db" "select run_id from tags where name = 'smoke'")" = "$first"
"$BENCH" show smoke --db "$db" >"$tmp/show-tag.out"
check "show TAG shows the tagged run" grep -q "^## run $first\$" "$tmp/show-tag.out"
"$BENCH" tag smoke smoke2 --db "$db" >/dev/null
check "tag TAG NAME tags the same run" test "$(sql "$db" "select run_id from tags where name = 'smoke2'")" = "$first"
if [ -n "$commit" ] && [ "$commit" != unknown ]; then
    "$BENCH" show "${commit:0:8}" --db "$db" >/dev/null
    check "show COMMIT-PREFIX resolves" test $? -eq 0
fi
bad "show of an unknown reference" "no-such-ref. is neither a run id, a tag, nor the commit" show no-such-ref --db "$db"

finish
