#!/usr/bin/env bash
# tests/cli/harness/spec.sh - speculative decoding in cortex-bench (run --spec,
# docs/harness.md "Speculative decoding", docs/metrics.md): on a tiny
# synthetic model a prompt set and a tgN test with --spec ngram (and a draft
# model, and a self-draft) give the same greedy tokens as without (the
# canaries match) and both runs are VALID; the speculating run records that
# it speculated, stores its per-request drafts and its metrics (acceptance in
# [0, 1], tokens per pass >= 1, mean accepted length, draft and verify time),
# prints them in run's output and in show, and is not comparable with the
# plain run (compare refuses, exit 2; --force flags the table and finds no
# canary changed; a baseline tag resolves to no comparable run); --workload
# lookup is a named prompt set; over HTTP the server's timings.draft_n and
# draft_n_accepted are stored, and a server that reports none is "not
# reported by the server"; bad --spec values and flags are one line, exit 2,
# nothing stored. stories260K (a real model), when present: the same tokens
# with lookup and with itself as its draft model (every draft accepted).
set -u
. "$(dirname "$0")/../lib/common.sh"
db=$tmp/spec.db
"$CORTEX" synth --shape test-tiny --type f32 -o "$tmp/tiny.gguf" 2>/dev/null
run() { "$BENCH" run -t 1 --reps 2 --warmup 0 --db "$db" --no-progress "$@"; }
last() { sql "$db" "select max(id) from runs"; }
metric() { sql "$db" "select median from summary where run_id = $1 and name = '$2'"; }
# same_canaries A B: every item of run A has a canary and run B's is the same
same_canaries() {
    test "$(sql "$db" "select count(*) from canaries where run_id = $1")" -gt 0 &&
        test "$(sql "$db" "select count(*) from canaries a join canaries b on b.item = a.item and b.token_hash = a.token_hash
                           where a.run_id = $1 and b.run_id = $2")" = "$(sql "$db" "select count(*) from canaries where run_id = $1")"
}
has() { case "$1" in *"$2"*) return 0 ;; esac; return 1; }
between() { "$PY" -c 'import sys; v = float(sys.argv[1]); sys.exit(0 if float(sys.argv[2]) <= v <= float(sys.argv[3]) else 1)' "$@"; }

# A prompt set whose prompts repeat themselves (lookup finds drafts), short enough for test-tiny's 128 positions.
"$PY" - "$tmp/p.jsonl" <<'EOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(6):
        f.write(json.dumps({"id": "q%02d" % i, "text": "the cat sat on the mat. " * (1 + i), "max_tokens": 16 + 4 * i}) + "\n")
EOF

# Without and with --spec ngram: the same tokens, both VALID.
run --model "$tmp/tiny.gguf" --workload "prompts:$tmp/p.jsonl" >"$tmp/plain.out" 2>"$tmp/plain.err"
check "a plain run of the prompt set is VALID (exit 0)" test $? -eq 0
plain=$(last)
run --model "$tmp/tiny.gguf" --workload "prompts:$tmp/p.jsonl" --spec ngram >"$tmp/spec.out" 2>"$tmp/spec.err"
check "the same with --spec ngram is VALID (exit 0)" test $? -eq 0
spec=$(last)
check "both are stored VALID" test "$(sql "$db" "select group_concat(validity) from runs where id in ($plain, $spec)")" = "valid,valid"
check "--spec ngram: the same greedy tokens for every prompt (the canaries match)" same_canaries "$plain" "$spec"
check "... and every repetition the same (stable)" \
    test "$(sql "$db" "select count(*) from canaries where run_id = $spec and stable = 1")" = 6
check "the drafter is made once, before the run, and said so" grep -q "^cortex-bench: speculation: ngram 2..4, made in" "$tmp/spec.err"

# The record says it speculated.
check "runs.spec_config: what it speculated with" \
    test "$(sql "$db" "select spec_config from runs where id = $spec")" = "ngram,max=8,min=0,adaptive"
check "runs.spec_drafter and spec_setup_ms" \
    test "$(sql "$db" "select spec_drafter || ' ' || (spec_setup_ms >= 0) from runs where id = $spec")" = "ngram 2..4 1"
check "the plain run: NULL (no speculation)" \
    test "$(sql "$db" "select count(*) from runs where id = $plain and spec_config is null and spec_setup_ms is null")" = 1
check "the two have different compare keys" \
    test "$(sql "$db" "select count(distinct compare_key) from runs where id in ($plain, $spec)")" = 2
check "served by the scheduler, which speculates while at most 4 sequences decode" \
    test "$(sql "$db" "select sched_config || ' ' || concurrency from runs where id = $spec")" = \
    "seqs=8,batch=256,queue=256,spec_batch=4 1"

# Its metrics, per request and per repetition.
check "every request of every repetition has its passes, drafts and times" \
    test "$(sql "$db" "select count(*) from requests where run_id = $spec and spec_passes >= 1 and spec_verified >= 0
                       and draft_tokens >= accepted_tokens and accepted_tokens >= 0 and draft_ms >= 0 and verify_ms > 0")" = 12
check "a request's tokens after the first came from its passes: passes <= tokens - 1 <= passes + accepted" \
    test "$(sql "$db" "select count(*) from requests where run_id = $spec and spec_passes <= gen_tokens - 1
                       and gen_tokens - 1 <= spec_passes + accepted_tokens")" = 12
check "the plain run's requests: NULL" \
    test "$(sql "$db" "select count(*) from requests where run_id = $plain and spec_passes is null and draft_tokens is null")" = 12
acc=$(metric "$spec" spec_acceptance) tpp=$(metric "$spec" spec_tokens_per_pass)
check "spec_acceptance is in [0, 1] ($acc)" between "$acc" 0 1
check "spec_tokens_per_pass is at least 1 ($tpp)" between "$tpp" 1 9
check "spec_accepted_mean is in [0, draft max] ($(metric "$spec" spec_accepted_mean))" between "$(metric "$spec" spec_accepted_mean)" 0 8
check "spec_draft_ms and spec_verify_ms are stored" \
    test "$(sql "$db" "select count(*) from summary where run_id = $spec and name in ('spec_draft_ms', 'spec_verify_ms') and median >= 0")" = 2
check "the plain run has no spec_* metric" test "$(sql "$db" "select count(*) from summary where run_id = $plain and name like 'spec%'")" = 0
check "acceptance = accepted / drafted of the requests, per repetition" "$PY" -c '
import sqlite3, sys
c = sqlite3.connect(sys.argv[1]); run = int(sys.argv[2])
for rep in (0, 1):
    d, a = c.execute("select sum(draft_tokens), sum(accepted_tokens) from requests where run_id = ? and rep = ?", (run, rep)).fetchone()
    v = c.execute("select value from rep_metrics where run_id = ? and rep = ? and name = ?", (run, rep, "spec_acceptance")).fetchone()[0]
    assert d > 0 and abs(v - a / d) < 1e-12, (rep, d, a, v)' "$db" "$spec"
check "ITL: the tokens of one pass share its end (zero gaps when passes chose more than one)" "$PY" -c '
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
zeros = sum(json.loads(r[0]).count(0) for r in c.execute("select itl_ms from requests where run_id = ?", (int(sys.argv[2]),)))
extra = c.execute("select sum(gen_tokens - 1 - spec_passes) from requests where run_id = ?", (int(sys.argv[2]),)).fetchone()[0]
assert zeros == extra, (zeros, extra)' "$db" "$spec"

# Exported per request by show --requests (the stored columns, as stored).
"$BENCH" show "$spec" --db "$db" --requests -o jsonl >"$tmp/req.jsonl"
check "show --requests: each request's speculation columns are the stored ones" "$PY" -c '
import json, sqlite3, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
c = sqlite3.connect(sys.argv[2])
db = c.execute("select spec_passes, spec_verified, draft_tokens, accepted_tokens, draft_ms, verify_ms from requests"
               " where run_id = ? order by rep, idx", (int(sys.argv[3]),)).fetchall()
got = [(r["spec_passes"], r["spec_verified"], r["draft_tokens"], r["accepted_tokens"], r["draft_ms"], r["verify_ms"])
       for r in rows]
assert len(rows) == 12 and all(abs(a - b) <= 1e-9 * max(1, abs(b)) for g, d in zip(got, db) for a, b in zip(g, d)), (got, db)
assert all(r["draft_tokens"] >= r["accepted_tokens"] >= 0 for r in rows)' "$tmp/req.jsonl" "$db" "$spec"

# The report: its speculation section and a chart of tokens per pass and acceptance by prompt; a plain
# run's report says the chart does not apply. The CI step summary's row names the speculation.
"$BENCH" report "$spec" --db "$db" --out "$tmp/rep" >/dev/null 2>"$tmp/rep.err"
check "report of a --spec run: exit 0 (every chart drawn where gnuplot is)" test $? -eq 0
check "report of a --spec run: the speculation section" grep -q "^### Speculative decoding" "$tmp/rep/report.md"
if command -v gnuplot >/dev/null; then
    check "... the speculation chart drawn" test -s "$tmp/rep/spec_per_prompt.png" -a -s "$tmp/rep/spec_per_prompt.svg"
fi
check "... and spec_per_prompt.dat: a row per prompt, tokens per pass >= 1, acceptance in [0, 1]" "$PY" -c '
import sys
rows = [l.split("\t") for l in open(sys.argv[1]) if not l.startswith("#")]
assert len(rows) == 6, rows
assert all(float(r[1]) >= 1 and 0 <= float(r[2]) <= 1 for r in rows), rows' "$tmp/rep/spec_per_prompt.dat"
check "... with its gnuplot script" test -s "$tmp/rep/spec_per_prompt.gp"
"$BENCH" report "$plain" --db "$db" --out "$tmp/repp" >/dev/null 2>&1
check "a plain run's report: no speculation chart, and why" \
    sh -c "test ! -e '$tmp/repp/spec_per_prompt.dat' && grep -q 'the run did not speculate' '$tmp/repp/report.md'"
run --model "$tmp/tiny.gguf" --workload "prompts:$tmp/p.jsonl" --spec ngram --step-summary "$tmp/sum.md" >/dev/null 2>&1
check "the step summary's row: the speculation, its acceptance and tokens per pass" \
    grep -qE "^\| $(last) \| .* \| VALID \| .* \| \`ngram,max=8,min=0,adaptive\`, [0-9.]+% accepted, [0-9.]+ tokens/pass \|$" "$tmp/sum.md"

# Printed by run and by show.
check "run prints the speculation section" grep -q "^### Speculative decoding" "$tmp/spec.out"
check "... with the acceptance rate and tokens per pass" \
    grep -q "^| acceptance rate (accepted / drafted) | " "$tmp/spec.out"
check "... and tokens per pass" grep -q "^| tokens per target pass (decode tokens / passes) | " "$tmp/spec.out"
check "a plain run prints no such section" test "$(grep -c "Speculative decoding" "$tmp/plain.out")" = 0
"$BENCH" show "$spec" --db "$db" >"$tmp/show.out"
check "show: the run's facts say it speculated" grep -q '^- speculative decoding `ngram,max=8,min=0,adaptive`, drafter ngram 2..4' "$tmp/show.out"
check "show: the section with every metric" \
    test "$(grep -cE "^\| (acceptance rate|mean accepted length|tokens per target pass|time drafting|time in the target's passes)" "$tmp/show.out")" = 5
check "show: no nan anywhere" test "$(grep -ci nan "$tmp/show.out")" = 0

# Not the same configuration: compare refuses; --force compares, flagged, and the tokens did not change.
"$BENCH" compare "$plain" "$spec" --db "$db" >"$tmp/cmp.out" 2>"$tmp/cmp.err"
check "compare refuses a plain run against a speculating one (exit 2)" test $? -eq 2
check "... naming the difference" grep -q "speculative decoding (--spec): none vs ngram,max=8,min=0,adaptive" "$tmp/cmp.err"
"$BENCH" compare "$plain" "$spec" --db "$db" --force >"$tmp/cmpf.out" 2>&1
check "compare --force flags the table" grep -q "^\*\*FLAGGED: not comparable (.*speculative decoding" "$tmp/cmpf.out"
check "... and finds no correctness canary changed" test "$(grep -c "Correctness canary changed" "$tmp/cmpf.out")" = 0
"$BENCH" tag "$plain" plainbase --db "$db" >/dev/null 2>&1
"$BENCH" compare plainbase "$spec" --db "$db" >/dev/null 2>"$tmp/cmpt.err"
check "a tag on the plain run is no baseline for the speculating one (exit 2)" test $? -eq 2

# A draft model (the model itself: every draft token accepted) and a self-draft: the same tokens.
run --model "$tmp/tiny.gguf" --workload "prompts:$tmp/p.jsonl" --draft "$tmp/tiny.gguf" --draft-max 4 --draft-fixed >/dev/null 2>&1
dm=$(last)
check "--draft (the model as its own draft): VALID, the same tokens" same_canaries "$plain" "$dm"
check "... its configuration names the draft file and its hash, the lengths, fixed" \
    test "$(sql "$db" "select spec_config from runs where id = $dm")" = \
    "model:tiny.gguf@$(sha256sum "$tmp/tiny.gguf" | cut -c1-16),max=4,min=0,fixed"
check "... acceptance 1 (it drafts what it will choose)" test "$(metric "$dm" spec_acceptance)" = 1.0
check "... more than 1 token per pass" between "$(metric "$dm" spec_tokens_per_pass)" 1.5 5
run --model "$tmp/tiny.gguf" --workload "prompts:$tmp/p.jsonl" --spec self:q8_0 >/dev/null 2>&1
check "--spec self:q8_0: the same tokens" same_canaries "$plain" "$(last)"
check "... stored as self:q8_0" test "$(sql "$db" "select spec_config from runs where id = $(last)")" = "self:q8_0,max=8,min=0,adaptive"

# Several clients: the scheduler speculates inside continuous batching, the same tokens; with
# --spec-max-batch 1 it speculates only in the steps where one sequence decodes, and a request's
# passes count its plain steps too.
run --model "$tmp/tiny.gguf" --workload "prompts:$tmp/p.jsonl" --concurrency 3 >/dev/null 2>&1
plain3=$(last)
run --model "$tmp/tiny.gguf" --workload "prompts:$tmp/p.jsonl" --spec ngram --concurrency 3 >/dev/null 2>&1
check "--concurrency 3 --spec ngram: VALID (exit 0)" test $? -eq 0
c3=$(last)
check "... the same tokens as one client without speculation" same_canaries "$plain" "$c3"
check "... and as three clients without" same_canaries "$plain3" "$c3"
check "... every request drafted something checked" \
    test "$(sql "$db" "select count(*) from requests where run_id = $c3 and draft_tokens > 0 and spec_verified > 0")" = 12
check "... a pass of several sequences checked drafts (fewer passes than tokens)" \
    test "$(sql "$db" "select sum(spec_passes) < sum(gen_tokens - 1) from requests where run_id = $c3")" = 1
run --model "$tmp/tiny.gguf" --workload "prompts:$tmp/p.jsonl" --spec ngram --concurrency 3 --spec-max-batch 1 \
    >/dev/null 2>&1
c31=$(last)
check "--spec-max-batch 1 with 3 clients: the same tokens" same_canaries "$plain" "$c31"
check "... recorded in the scheduler's configuration, another compare key" \
    test "$(sql "$db" "select (sched_config like '%,spec_batch=1') || (compare_key != (select compare_key from runs
                       where id = $c3)) from runs where id = $c31")" = 11
check "... each request's passes: its speculative steps and its plain ones (passes <= tokens - 1 <= passes + accepted)" \
    test "$(sql "$db" "select count(*) from requests where run_id = $c31 and spec_passes <= gen_tokens - 1
                       and gen_tokens - 1 <= spec_passes + accepted_tokens")" = 12
check "... fewer drafts checked than with 4 (steps of 2 or 3 decoding sequences did not speculate)" \
    test "$(sql "$db" "select (select sum(draft_tokens) from requests where run_id = $c31) <
                       (select sum(draft_tokens) from requests where run_id = $c3)")" = 1

# A trace's deadlines hold with --spec: generous ones are met (VALID, the same tokens as without),
# 1 ms ones (the scheduler's resolution) on 900-token requests end them as timeouts (INVALID, exit 4).
"$CORTEX" synth --shape test-tiny --type f32 -c 1024 -o "$tmp/tiny1k.gguf" 2>/dev/null
"$PY" - "$tmp/dl.jsonl" "$tmp/dl1.jsonl" <<'EOF'
import json, sys
for path, dl, n in ((sys.argv[1], 600000, 24), (sys.argv[2], 1, 900)):
    with open(path, "w") as f:
        for i in range(4):
            text = "the cat sat on the mat. " * (2 + i)
            f.write(json.dumps({"id": "d%d" % i, "arrival_s": 0.01 * i, "adapter": 0, "prompt_len": len(text.split()),
                                "deadline_ms": dl, "max_tokens": n, "text": text}) + "\n")
EOF
run --model "$tmp/tiny.gguf" --workload "trace:$tmp/dl.jsonl" >/dev/null 2>&1
dlp=$(last)
run --model "$tmp/tiny.gguf" --workload "trace:$tmp/dl.jsonl" --spec ngram >/dev/null 2>&1
check "a trace with deadlines under --spec: VALID (exit 0)" test $? -eq 0
check "... the same tokens as without" same_canaries "$dlp" "$(last)"
run --model "$tmp/tiny1k.gguf" --workload "trace:$tmp/dl1.jsonl" --spec ngram >/dev/null 2>&1
check "1 ms deadlines on 900-token requests under --spec: INVALID (exit 4)" test $? -eq 4
check "... its requests timed out" \
    test "$(sql "$db" "select count(*) from requests where run_id = $(last) and state = 'timeout'")" -gt 0

# A trace naming LoRA adapters (--adapters synth:2,4): with --spec ngram, VALID and the same tokens as without;
# the record names both.
"$PY" - "$tmp/ad.jsonl" <<'EOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(6):
        text = "the cat sat on the mat. " * (2 + i % 3)
        f.write(json.dumps({"id": "a%d" % i, "arrival_s": 0.01 * i, "adapter": i % 3, "prompt_len": len(text.split()),
                            "max_tokens": 20, "text": text}) + "\n")
EOF
run --model "$tmp/tiny.gguf" --workload "trace:$tmp/ad.jsonl" --adapters synth:2,4 >/dev/null 2>&1
check "a trace with adapters: VALID (exit 0)" test $? -eq 0
adp=$(last)
run --model "$tmp/tiny.gguf" --workload "trace:$tmp/ad.jsonl" --adapters synth:2,4 --spec ngram >/dev/null 2>"$tmp/ad.err"
check "... with --spec ngram: VALID (exit 0)" test $? -eq 0
ads=$(last)
check "... the same tokens as without" same_canaries "$adp" "$ads"
check "... it drafted under the adapters" \
    test "$(sql "$db" "select sum(draft_tokens) > 0 from requests where run_id = $ads and adapter > 0")" = 1
check "... sched_config names the speculation's batch and the adapters" \
    has "$(sql "$db" "select sched_config from runs where id = $ads")" "spec_batch=4,adapters=synth:2,4,"
check "... and is not comparable with the plain adapter run" \
    test "$(sql "$db" "select count(*) from runs a join runs b on a.compare_key = b.compare_key where a.id = $adp and b.id = $ads")" = 0

# A synthetic test decodes by speculation after its prompt; the same tokens as without.
run --model "$tmp/tiny.gguf" --workload pg16,32 -d 8 >/dev/null 2>&1
pg=$(last)
run --model "$tmp/tiny.gguf" --workload pg16,32 -d 8 --spec ngram >"$tmp/pgs.out" 2>&1
check "pg16,32 at depth 8 with --spec ngram: VALID, the same tokens" same_canaries "$pg" "$(last)"
check "... with its metrics" test -n "$(metric "$(last)" spec_tokens_per_pass)"

# --workload lookup: the named prompt set (prompts/lookup.jsonl), on a model with room for it (tiny1k).
"$BENCH" run --model "$tmp/tiny1k.gguf" --workload lookup -t 1 --reps 1 --warmup 0 --db "$db" --no-progress --spec ngram \
    >/dev/null 2>"$tmp/lookup.err"
check "--workload lookup --spec ngram runs (exit 0)" test $? -eq 0
check "... the file's 10 prompts, by hash" test "$(sql "$db" "select workload_hash || ' ' || (select count(*) from requests
    where run_id = runs.id) from runs where id = $(last)")" = "$(sha256sum prompts/lookup.jsonl | cut -d' ' -f1) 10"

# Over HTTP: the server's draft counts when it reports them, else "not reported by the server".
MOCK="$PY $(dirname "$0")/../../tools/mock_openai.py"
start_mock() { # name, args...: its port into $port
    local name=$1; shift
    $MOCK "$@" >"$tmp/$name.port" 2>"$tmp/$name.err" &
    for _ in $(seq 100); do grep -q '^PORT' "$tmp/$name.port" 2>/dev/null && break; sleep 0.05; done
    port=$(awk '/^PORT/ {print $2}' "$tmp/$name.port")
}
start_mock drafts --models m --token-delay-ms 0 --draft-report
"$BENCH" run --endpoint "http://127.0.0.1:$port/v1" --workload "prompts:$tmp/p.jsonl" --reps 1 --warmup 0 --db "$db" \
    --no-progress >"$tmp/http.out" 2>&1
check "over HTTP, a server reporting draft_n: VALID" test $? -eq 0
h=$(last)
check "... its acceptance stored (draft_n_accepted / draft_n = 0.5)" test "$(metric "$h" spec_acceptance)" = 0.5
check "... per request: the counts, passes and times NULL (not reported)" \
    test "$(sql "$db" "select count(*) from requests where run_id = $h and draft_tokens = 2 * accepted_tokens and
                       spec_passes is null and draft_ms is null")" = 6
check "... no tokens per pass made up" test -z "$(metric "$h" spec_tokens_per_pass)"
check "... show says which are the server's and which it did not report" \
    test "$(grep -c "not reported by the server" "$tmp/http.out")" -ge 4
start_mock plain --models m --token-delay-ms 0
"$BENCH" run --endpoint "http://127.0.0.1:$port/v1" --workload "prompts:$tmp/p.jsonl" --reps 1 --warmup 0 --db "$db" \
    --no-progress >"$tmp/http2.out" 2>&1
check "a server reporting nothing: no spec metric, and show says it was not reported" \
    test -z "$(metric "$(last)" spec_acceptance)" -a "$(grep -c "^Not reported by the server" "$tmp/http2.out")" = 1

# stories260K (a real model): the tokens unchanged by lookup and by a draft model.
st=$MODELS/stories260K.gguf
if [ -f "$st" ]; then
    "$PY" - "$tmp/rep.jsonl" <<'EOF'
import json, sys
text = "Lily and Ben went to the park. They played on the swings. " * 2  # 46 tokens: 110 of its 128 positions
json.dump({"id": "r1", "text": text, "max_tokens": 64}, open(sys.argv[1], "w"))
EOF
    run --model "$st" --workload "prompts:$tmp/rep.jsonl" >/dev/null 2>&1
    a=$(last)
    run --model "$st" --workload "prompts:$tmp/rep.jsonl" --spec ngram >/dev/null 2>&1
    check "stories260K: --spec ngram, the same tokens" same_canaries "$a" "$(last)"
    check "stories260K: both VALID" test "$(sql "$db" "select group_concat(validity) from runs where id in ($a, $(last))")" = "valid,valid"
    run --model "$st" --workload "prompts:$tmp/rep.jsonl" --draft "$st" >/dev/null 2>&1
    check "stories260K as its own draft: the same tokens" same_canaries "$a" "$(last)"
    check "... every draft token accepted" test "$(metric "$(last)" spec_acceptance)" = 1.0
else
    echo "SKIP stories260K checks: $st not found"
fi

# Bad input: one line, exit 2, nothing stored.
n0=$(sql "$db" "select count(*) from runs")
bad() { # description, pattern, args...
    local what=$1 pat=$2; shift 2
    run --model "$tmp/tiny.gguf" "$@" >/dev/null 2>"$tmp/bad.err"
    local rc=$?
    check "$what: exit 2" test $rc -eq 2
    check "$what: one line" test "$(wc -l <"$tmp/bad.err")" -eq 1
    check "$what: names it" grep -qF -- "$pat" "$tmp/bad.err"
}
bad "--spec bogus" "--spec: 'bogus' is not one of none, ngram, self, self:TYPE, model" \
    --workload "prompts:$tmp/p.jsonl" --spec bogus
bad "--spec self:f32" "'f32' is not a type a self-draft can be quantized to" --workload "prompts:$tmp/p.jsonl" --spec self:f32
bad "--spec model without --draft" "--spec model needs --draft MODEL" --workload "prompts:$tmp/p.jsonl" --spec model
bad "--draft with --spec ngram" "--draft applies to --spec model, not --spec ngram" --workload "prompts:$tmp/p.jsonl" \
    --spec ngram --draft "$tmp/tiny.gguf"
bad "--draft-max without --spec" "apply with --spec KIND" --workload "prompts:$tmp/p.jsonl" --draft-max 4
bad "--draft-max out of range" "--draft-max: '33'" --workload "prompts:$tmp/p.jsonl" --spec ngram --draft-max 33
bad "--draft-min above --draft-max" "--draft-min 6 is above --draft-max 4" --workload "prompts:$tmp/p.jsonl" --spec ngram \
    --draft-min 6 --draft-max 4
bad "--spec on ppN" "it applies to decoding" --workload pp8 --spec ngram
bad "--spec on batched" "it applies to decoding" --workload batched:2,8,8 --spec ngram
bad "--spec-max-batch without --spec" "apply with --spec KIND" --workload "prompts:$tmp/p.jsonl" --spec-max-batch 2
bad "--spec-max-batch on a synthetic test" "applies to prompt sets and traces" --workload tg8 --spec ngram \
    --spec-max-batch 2
bad "--spec over HTTP" "--spec applies in-process" --workload "prompts:$tmp/p.jsonl" --spec ngram --endpoint http://127.0.0.1:9/v1
[ -f "$st" ] && bad "a draft model of another vocabulary" "vocabulary" --workload "prompts:$tmp/p.jsonl" --draft "$st"
check "nothing stored by any of them" test "$(sql "$db" "select count(*) from runs")" = "$n0"

finish spec
