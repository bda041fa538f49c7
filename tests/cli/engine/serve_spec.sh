#!/usr/bin/env bash
# tests/cli/engine/serve_spec.sh - `cortex serve` with speculative decoding
# (--spec, --draft; docs/serving.md, "Speculative decoding"):
#   - the start line names the drafter; greedy text with speculation (the
#     model as its own draft, the n-gram lookup, a q4_0 self-draft) equals
#     `cortex generate --temp 0`, whole and streamed, and two concurrent
#     requests each equal it too;
#   - timings carry draft_n and draft_n_accepted (the model drafting for
#     itself: every draft token accepted); "speculative": false and
#     "speculative.n_max": 0 draft nothing and give the same text; a bad
#     value is a 400 naming the field;
#   - a sampled request with a seed gives the plain server's text with every
#     drafter (the rule draws each token as plain decoding does);
#   - /metrics: the cortex_spec_* counters equal the sums over the answers'
#     timings; without --spec they are 0 and timings have no draft_n;
#   - a bad --spec is exit 2; a draft model that cannot load stops the start.
# Needs ../shared/models/stories260K.gguf (skips without it) and curl.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/serve.sh"
M=$MODELS/stories260K.gguf
[ -f "$M" ] || { echo "SKIP: $M is missing: no model to serve"; finish; exit; }
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; finish; exit; }

P="Once upon a time"
"$CORTEX" generate -m "$M" -p "$P" -n 60 --temp 0 --no-echo >"$tmp/gen.txt" 2>"$tmp/gen.err"
"$PY" -c 'import sys; t = open(sys.argv[1], encoding="utf-8").read(); open(sys.argv[2], "w", encoding="utf-8").write(t[:-1])' \
    "$tmp/gen.txt" "$tmp/want.txt" # generate ends with a newline of its own
BODY="\"prompt\": \"$P\", \"max_tokens\": 60, \"temperature\": 0"
# sampled with a seed: speculation draws each token as plain decoding does, so the text is the plain
# server's (checked against it below: the sampled text has bytes JSON carries replaced)
SBODY="\"prompt\": \"$P\", \"max_tokens\": 60, \"temperature\": 0.9, \"seed\": 7"

# text NAME: the answer's text in $tmp/NAME.txt (no trailing newline added)
text() { "$PY" -c 'import json, sys; sys.stdout.write(json.load(open(sys.argv[1]))["choices"][0]["text"])' "$tmp/body" >"$tmp/$1.txt"; }
# timing KEY: timings[KEY] of the last answer ("None" when absent)
timing() { field "$tmp/body" "d[\"timings\"].get(\"$1\")"; }
# SSE stream in FILE -> the joined text
sse_text() {
    "$PY" - "$1" <<'EOF'
import json, sys
events = [l[6:] for l in open(sys.argv[1], encoding="utf-8").read().split("\n") if l.startswith("data: ")]
assert events[-1] == "[DONE]", "stream does not end with [DONE]"
sys.stdout.write("".join(c["text"] for e in events[:-1] for c in json.loads(e)["choices"]))
EOF
}

# ---- the model as its own draft ------------------------------------------
start "$tmp/a.log" -m "$M" --draft "$M" --draft-max 6 --draft-fixed --max-seqs 4 || { finish; exit 1; }
check "start line names the drafter (--draft alone means --spec model)" \
    grep -q "speculation: model stories260K.gguf.*drafts of up to 6 tokens, while at most 4 sequences decode" "$tmp/a.log"
drafted=0 accepted=0
code=$(post /v1/completions "{$BODY}")
text spec
check "draft: 200, text = cortex generate --temp 0" test "$code" = 200 -a "$(cmp -s "$tmp/spec.txt" "$tmp/want.txt"; echo $?)" = 0
dn=$(timing draft_n) da=$(timing draft_n_accepted)
check "draft: timings draft_n $dn > 0, every one accepted ($da)" test "$dn" -gt 0 -a "$dn" = "$da"
drafted=$((drafted + dn)) accepted=$((accepted + da))
curl -sN -o "$tmp/stream" -H 'Content-Type: application/json' "$URL/v1/completions" -d "{$BODY, \"stream\": true}"
sse_text "$tmp/stream" >"$tmp/streamed.txt"
check "draft: streamed text = cortex generate --temp 0" cmp -s "$tmp/streamed.txt" "$tmp/want.txt"
grep '"timings":' "$tmp/stream" | cut -c7- >"$tmp/body"
drafted=$((drafted + $(timing draft_n))) accepted=$((accepted + $(timing draft_n_accepted)))
code=$(post /v1/completions "{$SBODY}")
text s_draft
check "draft, sampled with seed 7: 200" test "$code" = 200
drafted=$((drafted + $(timing draft_n))) accepted=$((accepted + $(timing draft_n_accepted)))
for off in '"speculative": false' '"speculative.n_max": 0'; do
    code=$(post /v1/completions "{$BODY, $off}")
    text off
    check "$off: 200, same text, nothing drafted" test "$code" = 200 -a "$(cmp -s "$tmp/off.txt" "$tmp/want.txt"; echo $?)" = 0 \
        -a "$(timing draft_n)" = 0
done
code=$(post /v1/completions "{$BODY, \"speculative.n_max\": 2}")
text capped
check "speculative.n_max 2: same text" test "$code" = 200 -a "$(cmp -s "$tmp/capped.txt" "$tmp/want.txt"; echo $?)" = 0
drafted=$((drafted + $(timing draft_n))) accepted=$((accepted + $(timing draft_n_accepted)))
code=$(post /v1/completions "{$BODY, \"speculative\": 1}")
check "\"speculative\": 1 is a 400 naming the field" test "$code" = 400 -a "$(field "$tmp/body" 'd["error"]["param"]')" = speculative
C=()
for i in 1 2; do # two at once: batched verify passes
    curl -s -o "$tmp/c$i.json" -H 'Content-Type: application/json' "$URL/v1/completions" -d "{$BODY}" &
    C+=($!)
done
wait "${C[@]}"
for i in 1 2; do
    cp "$tmp/c$i.json" "$tmp/body"
    text "c$i"
    check "concurrent $i: text = cortex generate --temp 0" cmp -s "$tmp/c$i.txt" "$tmp/want.txt"
    drafted=$((drafted + $(timing draft_n))) accepted=$((accepted + $(timing draft_n_accepted)))
done
check "/metrics: cortex_spec_drafted_tokens_total = the answers' draft_n ($drafted)" \
    test "$(metric cortex_spec_drafted_tokens_total)" = "$drafted"
check "/metrics: cortex_spec_accepted_tokens_total = the answers' draft_n_accepted ($accepted)" \
    test "$(metric cortex_spec_accepted_tokens_total)" = "$accepted"
for k in cortex_spec_steps_total cortex_spec_verify_steps_total cortex_spec_verify_passes_total cortex_spec_tokens_total; do
    check "/metrics: $k > 0" test "$(metric $k)" -gt 0
done
check "/metrics: draft and verify seconds counted" "$PY" -c 'import sys; assert float(sys.argv[1]) > 0 and float(sys.argv[2]) > 0' \
    "$(metric cortex_spec_draft_seconds_total)" "$(metric cortex_spec_verify_seconds_total)"
kill -TERM $PID; wait $PID
check "draft: the server drains and exits 0" test $? = 0

# ---- the n-gram lookup, and a self-draft quantized at load ------------------
for spec in ngram self:q4_0; do
    start "$tmp/b.log" -m "$M" --spec $spec || { finish; exit 1; }
    check "--spec $spec: start line names it" grep -q "speculation: ${spec%%:*}" "$tmp/b.log"
    code=$(post /v1/completions "{$BODY}")
    text b
    check "--spec $spec: text = cortex generate --temp 0" test "$code" = 200 -a "$(cmp -s "$tmp/b.txt" "$tmp/want.txt"; echo $?)" = 0
    check "--spec $spec: draft_n_accepted <= draft_n" test "$(timing draft_n_accepted)" -le "$(timing draft_n)"
    code=$(post /v1/completions "{$SBODY}")
    text "s_${spec%%:*}"
    check "--spec $spec, sampled with seed 7: 200" test "$code" = 200
    kill -TERM $PID; wait $PID
done

# ---- without speculation ------------------------------------------------------
start "$tmp/c.log" -m "$M" || { finish; exit 1; }
check "no --spec: no speculation line" test -z "$(grep speculation "$tmp/c.log")"
code=$(post /v1/completions "{$BODY}")
text plain
check "no --spec: same text, timings without draft_n" test "$code" = 200 -a "$(cmp -s "$tmp/plain.txt" "$tmp/want.txt"; echo $?)" = 0 \
    -a "$(timing draft_n)" = None
check "no --spec: cortex_spec_steps_total 0" test "$(metric cortex_spec_steps_total)" = 0
code=$(post /v1/completions "{$SBODY}")
text s_plain
for k in draft ngram self; do
    check "sampled with seed 7, --spec ${k/draft/model}: the plain server's text" cmp -s "$tmp/s_$k.txt" "$tmp/s_plain.txt"
done
kill -TERM $PID; wait $PID

# ---- bad flags ------------------------------------------------------------------
"$CORTEX" serve -m "$M" --port 0 --spec bogus >/dev/null 2>"$tmp/err"
check "--spec bogus: exit 2 naming the kinds" test $? = 2 -a -n "$(grep "none, ngram, self" "$tmp/err")"
"$CORTEX" serve -m "$M" --port 0 --draft "$tmp/missing.gguf" >/dev/null 2>"$tmp/err"
check "--draft missing file: exit 1, the start stops with the reason" test $? = 1 -a -n "$(grep "speculation" "$tmp/err")"
finish
