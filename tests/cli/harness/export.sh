#!/usr/bin/env bash
# tests/cli/harness/export.sh - cortex-bench's exports for other tools and
# plain traces: `trace --adapters 0` and the committed plain trace (replayed
# in-process, and over HTTP against the mock server without
# --adapter-names), -o jsonl (run, show), the per-request export
# (show RUN --requests: one row per request per repetition, states, the
# run's validity on each row, no timing of an INVALID run), Bencher Metric
# Format (-o bmf: shape, VALID runs only) and the CI step summary
# ($GITHUB_STEP_SUMMARY or --step-summary FILE, from run and gate).
set -u
. "$(dirname "$0")/../lib/common.sh"
MOCK="$PY $(dirname "$0")/../../tools/mock_openai.py"
db=$tmp/x.db
"$CORTEX" synth --shape test-tiny --type q8_0 -o "$tmp/tiny.gguf" 2>/dev/null
run() { "$BENCH" run --db "$db" --no-progress "$@"; }
last() { sql "$db" "select max(id) from runs"; }

# ---- plain traces ------------------------------------------------------------
"$BENCH" trace --requests 6 --rate 40 --adapters 0 --prompt-len uniform:4,12 --gen-len fixed:3 --seed 9 \
    -o "$tmp/plain.jsonl" 2>/dev/null
check "trace --adapters 0 writes a trace" test "$(wc -l <"$tmp/plain.jsonl")" -eq 6
check "... every request asks for adapter 0; the sidecar says adapters 0, zipf 0" "$PY" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert all(r["adapter"] == 0 for r in rows), rows
m = json.load(open(sys.argv[1] + ".meta.json"))
assert m["adapters"] == 0 and m["zipf"] == 0, m' "$tmp/plain.jsonl"
"$BENCH" trace --requests 6 --rate 40 --adapters 3 --prompt-len uniform:4,12 --gen-len fixed:3 --seed 9 \
    -o "$tmp/named.jsonl" 2>/dev/null
check "... the same arrivals, lengths and texts as with --adapters 3" "$PY" -c '
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
drop = lambda r: {k: v for k, v in r.items() if k != "adapter"}
assert [drop(r) for r in a] == [drop(r) for r in b] and any(r["adapter"] > 0 for r in b)' "$tmp/plain.jsonl" "$tmp/named.jsonl"
"$BENCH" trace --adapters 0 --zipf 1.5 -o "$tmp/z.jsonl" 2>"$tmp/z.err"
check "--adapters 0 with a --zipf: exit 2, one line" sh -c "test $? -eq 2 && grep -q 'adapters 0 writes a plain trace' '$tmp/z.err' &&
    test \$(wc -l <'$tmp/z.err') -eq 1 && ! ls '$tmp'/z.jsonl* 2>/dev/null"
"$BENCH" trace --adapters -1 -o "$tmp/z.jsonl" 2>/dev/null
check "--adapters -1: exit 2" test $? -eq 2

# The committed plain trace replays in-process (each request fits the tiny model's context).
run --model "$tmp/tiny.gguf" --workload trace:prompts/traces/plain-smoke.jsonl -t 1 --reps 2 --warmup 0 \
    -o jsonl --step-summary "$tmp/run.md" >"$tmp/plain.out" 2>"$tmp/plain.err"
check "the committed plain trace replays in-process: exit 0 (VALID)" test $? -eq 0
pr=$(last)
check "... 16 requests a repetition, all finished by length" \
    test "$(sql "$db" "select count(*) || '/' || sum(state = 'length') || '/' || max(adapter) from requests where run_id = $pr")" = "32/32/0"

# -o jsonl: every line one JSON object with json's fields, the same rows as -o json.
check "run -o jsonl: one JSON object a line, json's fields" "$PY" -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
rows = [json.loads(l) for l in lines]
assert len(rows) > 5 and all(isinstance(r, dict) for r in rows), lines
keys = {"run", "model", "type", "threads", "workload", "metric", "unit", "median", "min", "max", "stddev", "n", "validity"}
assert all(set(r) == keys and r["validity"] == "valid" for r in rows), rows[0]' "$tmp/plain.out"
"$BENCH" show "$pr" --db "$db" -o jsonl >"$tmp/show.jsonl"
"$BENCH" show "$pr" --db "$db" -o json >"$tmp/show.json"
check "show -o jsonl: the objects of show -o json, one a line" "$PY" -c '
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = json.load(open(sys.argv[2]))
assert a == b and len(a) > 5, (len(a), len(b))' "$tmp/show.jsonl" "$tmp/show.json"

# ---- the per-request export -------------------------------------------------------
"$BENCH" show "$pr" --db "$db" --requests -o jsonl >"$tmp/req.jsonl"
check "show --requests -o jsonl: one row per request per repetition, in order" "$PY" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 32, len(rows)
assert [(r["rep"], r["idx"]) for r in rows] == [(p, i) for p in range(2) for i in range(16)]
keys = ["run", "validity", "rep", "idx", "item", "adapter", "state", "max_tokens", "prompt_tokens", "gen_tokens",
        "cached_tokens", "arrival_s", "queue_ms", "ttft_ms", "tpot_ms", "e2e_ms", "spec_passes", "spec_verified",
        "draft_tokens", "accepted_tokens", "draft_ms", "verify_ms", "canary", "error"]
assert all(r[k] is None for r in rows for k in keys[16:22]), "no speculation: null"
assert all(list(r) == keys for r in rows), list(rows[0])
assert all(r["validity"] == "valid" and r["state"] == "length" and r["gen_tokens"] == r["max_tokens"] for r in rows)
assert all(r["ttft_ms"] > 0 and r["e2e_ms"] >= r["ttft_ms"] and r["error"] is None and len(r["canary"]) == 16 for r in rows)
items = [json.loads(l)["id"] for l in open("prompts/traces/plain-smoke.jsonl")]
assert [r["item"] for r in rows[:16]] == items' "$tmp/req.jsonl"
"$BENCH" show "$pr" --db "$db" --requests -o csv >"$tmp/req.csv"
check "show --requests -o csv: a header and the same rows" "$PY" -c '
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
js = [json.loads(l) for l in open(sys.argv[2])]
assert len(rows) == 32 and [r["item"] for r in rows] == [j["item"] for j in js]
assert all(float(r["ttft_ms"]) == j["ttft_ms"] and r["state"] == j["state"] for r, j in zip(rows, js))' "$tmp/req.csv" "$tmp/req.jsonl"
"$BENCH" show "$pr" --db "$db" --requests -o json >"$tmp/req.json"
check "show --requests -o json: an array of the same objects" "$PY" -c '
import json, sys
assert json.load(open(sys.argv[1])) == [json.loads(l) for l in open(sys.argv[2])]' "$tmp/req.json" "$tmp/req.jsonl"
check "show --requests (md): a table row per request" test "$("$BENCH" show "$pr" --db "$db" --requests | grep -c "^| $pr | valid | ")" -eq 32
"$BENCH" show "$pr" --db "$db" --requests -o bmf 2>"$tmp/rb.err"
check "show --requests -o bmf: exit 2, one line" sh -c "test $? -eq 2 && grep -q \"unknown format 'bmf' for --requests\" '$tmp/rb.err'"
"$BENCH" show "$pr" --db "$db" -o xml 2>"$tmp/xml.err"
check "show -o xml: exit 2 naming the formats" sh -c "test $? -eq 2 && grep -q 'md, csv, json, jsonl, bmf' '$tmp/xml.err'"
"$BENCH" run --model "$tmp/tiny.gguf" --workload tg4 -o yaml --db "$db" 2>"$tmp/yaml.err"
check "run -o yaml: exit 2 before anything is stored" sh -c "test $? -eq 2 && test $(last) -eq $pr"

# ---- BMF ------------------------------------------------------------------------------
# bmf_check FILE [N]: the shape Bencher validates (bencher.dev/bmf.json), N benchmarks.
bmf_check() { "$PY" -c '
import json, math, sys
d = json.load(open(sys.argv[1]))
assert isinstance(d, dict) and len(d) == int(sys.argv[2]), d
for name, measures in d.items():
    assert name and isinstance(measures, dict) and measures, name
    for m, v in measures.items():
        assert m and len(m) <= 64 and m == m.lower() and " " not in m, m
        assert isinstance(v, dict) and set(v) <= {"value", "lower_value", "upper_value"}, v
        assert all(isinstance(x, (int, float)) and math.isfinite(x) for x in v.values()), v
        assert v.get("lower_value", v["value"]) <= v["value"] <= v.get("upper_value", v["value"]), (name, m, v)' "$@"; }
run --model "$tmp/tiny.gguf" --workload tg8 -t 1,2 --reps 2 --warmup 0 -o bmf >"$tmp/tg.bmf" 2>/dev/null
check "run -o bmf over -t 1,2: BMF, one benchmark per thread count" bmf_check "$tmp/tg.bmf" 2
check "... named MODEL/TYPE/WORKLOAD/tT, throughput in tok/s, latency in ms" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert sorted(k.split("/", 1)[1] for k in d) == ["q8_0/tg8/t1", "q8_0/tg8/t2"], list(d)
assert all("throughput-tok-s" in v and "ttft-p50-ms" in v for v in d.values()), d' "$tmp/tg.bmf"
"$BENCH" show "$pr" --db "$db" -o bmf >"$tmp/pr.bmf"
check "show -o bmf of the plain trace run: one benchmark named by the trace's file name" sh -c "\"$PY\" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d) == 1 and list(d)[0].endswith(\"/q8_0/trace:plain-smoke.jsonl/t1\"), d
v = list(d.values())[0]
assert {\"output-throughput-tok-s\", \"ttft-p50-ms\", \"tpot-p50-ms\", \"e2e-latency-p50-ms\", \"request-throughput-req-s\"} <= set(v), v' '$tmp/pr.bmf'"
check "... valid BMF" bmf_check "$tmp/pr.bmf" 1

# An INVALID run (prompts longer than the context fail): no BMF entry, a line on stderr.
run --model "$tmp/tiny.gguf" --workload standard -t 1 --reps 1 --warmup 0 -o bmf \
    --step-summary "$tmp/run.md" >"$tmp/inv.bmf" 2>"$tmp/inv.err"
check "an INVALID run: exit 4" test $? -eq 4
inv=$(last)
check "... -o bmf writes no entry for it" bmf_check "$tmp/inv.bmf" 0
check "... and says so on stderr" grep -q "run $inv is INVALID: .*no BMF entry (not a measurement)" "$tmp/inv.err"
"$BENCH" show "$inv" --db "$db" -o jsonl >"$tmp/inv.jsonl"
check "show -o jsonl of an INVALID run: its verdict only, no metric" "$PY" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 1 and rows[0]["validity"] == "invalid" and "metric" not in rows[0] and "median" not in rows[0], rows' "$tmp/inv.jsonl"
"$BENCH" show "$inv" --db "$db" --requests -o jsonl >"$tmp/invreq.jsonl"
check "show --requests of an INVALID run: its outcomes, INVALID on each row, no timing" "$PY" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 10 and all(r["validity"] == "invalid" for r in rows), rows
assert {r["state"] for r in rows} <= {"failed", "length", "stop"} and any(r["state"] == "failed" for r in rows)
assert all(r["error"] for r in rows if r["state"] == "failed")
assert all(r[k] is None for r in rows for k in ("arrival_s", "queue_ms", "ttft_ms", "tpot_ms", "e2e_ms"))' "$tmp/invreq.jsonl"

# ---- the step summary ----------------------------------------------------------------------
c10=$(sql "$db" "select substr(git_commit, 1, 10) from runs where id = $pr")
check "run --step-summary: a block per run command, appended" test "$(grep -c '^### cortex-bench run$' "$tmp/run.md")" -eq 2
check "... with the run id, commit, VALID and its throughput" \
    grep -qE "^\| $pr \| \`trace:prompts/traces/plain-smoke.jsonl\` \| .* \| 1 \| \`$c10(\+dirty)?\` \| VALID \| [0-9.]+ \| [0-9.]+ \|" "$tmp/run.md"
check "... and the INVALID run with its reasons and no figure" \
    grep -qE "^\| $inv \| \`standard\` \| .* \| \*\*INVALID\*\*: [0-9]+ of 10 requests failed .* \| \| \| \| \| \| \|$" "$tmp/run.md"
GITHUB_STEP_SUMMARY=$tmp/gh.md run --model "$tmp/tiny.gguf" --workload tg4 -t 1 --reps 1 --warmup 0 >/dev/null 2>&1
tg=$(last)
check "\$GITHUB_STEP_SUMMARY receives run's block" grep -qE "^\| $tg \| \`tg4\` \| .* \| \`$c10(\+dirty)?\` \| VALID \| [0-9.]+ \|" "$tmp/gh.md"
GITHUB_STEP_SUMMARY= run --model "$tmp/tiny.gguf" --workload tg4 -t 1 --reps 1 --warmup 0 >/dev/null 2>&1
check "an empty \$GITHUB_STEP_SUMMARY: nothing written" test "$(grep -c '^### cortex-bench run$' "$tmp/gh.md")" -eq 1
run --model "$tmp/tiny.gguf" --workload tg4 -t 1 --reps 1 --warmup 0 --step-summary /nonexistent-dir/s.md >/dev/null 2>"$tmp/ss.err"
check "an unwritable step summary: a warning, the run still stored (exit 0)" \
    sh -c "test $? -eq 0 && grep -q 'step summary /nonexistent-dir/s.md: cannot append' '$tmp/ss.err'"

# The gate's block: its verdict table and the runs it judged (deterministic mode against a given
# baseline count, so it needs no baseline run; where no instruction counter exists it is an error block).
"$CORTEX" synth --shape gate-micro --type q8_0 -o "$tmp/gm.gguf" 2>/dev/null
mode=auto # valgrind cannot run AddressSanitizer binaries: sanitizer builds count with perf
if nm "$BENCH" 2>/dev/null | grep -q __asan_init; then mode=perf; fi
GITHUB_STEP_SUMMARY=$tmp/gate.md "$BENCH" gate --mode deterministic --det-mode $mode --model "$tmp/gm.gguf" \
    --baseline-instructions 1e12 --db "$tmp/g.db" >/dev/null 2>&1
grc=$?
check "gate appends its verdict table to \$GITHUB_STEP_SUMMARY" sh -c "grep -q '^## cortex-bench gate (deterministic): ' '$tmp/gate.md' &&
    grep -q '^| metric | base | candidate |' '$tmp/gate.md'"
if [ "$grc" -eq 0 ]; then
    gc=$(sql "$tmp/g.db" "select max(id) from runs")
    check "... and the candidate run with its commit" grep -qE "candidate: run $gc \(\`micro:.*\`, commit \`[0-9a-f]+(\+dirty)?\`, VALID\)" "$tmp/gate.md"
else
    check "... (no instruction counter here: the error block, exit 3)" sh -c "test $grc -eq 3 && grep -q 'candidate: no stored run' '$tmp/gate.md'"
fi

# ---- a plain trace over HTTP: no --adapter-names needed ---------------------------
$MOCK --models base-model,lora-a --token-delay-ms 0.2 >"$tmp/mock.port" 2>"$tmp/mock.err" &
for _ in $(seq 100); do grep -q '^PORT' "$tmp/mock.port" 2>/dev/null && break; sleep 0.05; done
url=http://127.0.0.1:$(awk '/^PORT/ {print $2}' "$tmp/mock.port")/v1
run --endpoint "$url" --workload "trace:$tmp/plain.jsonl" --reps 1 --warmup 0 -o bmf >"$tmp/http.bmf" 2>"$tmp/http.err"
check "a plain trace over HTTP without --adapter-names: exit 0" test $? -eq 0
hp=$(last)
check "... every request to the base model finished" \
    test "$(sql "$db" "select count(*) || '/' || sum(state = 'length') from requests where run_id = $hp")" = "6/6"
check "... BMF names it MODEL/WORKLOAD/http" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert list(d) == ["base-model/trace:plain.jsonl/http"], d' "$tmp/http.bmf"
run --endpoint "$url" --workload "trace:$tmp/named.jsonl" --reps 1 --warmup 0 >/dev/null 2>"$tmp/named.err"
check "the same trace naming adapters is still refused without --adapter-names (exit 2)" \
    sh -c "test $? -eq 2 && grep -q 'asks for adapter [1-3], but --adapter-names names 0 adapters' '$tmp/named.err'"

finish export
