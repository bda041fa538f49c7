#!/usr/bin/env bash
# ci/server.sh - `cortex serve` measured by `cortex-bench run --endpoint` (issue 15,
# docs/server.md, docs/performance.md), THREADS threads:
#   1. throughput through the server against the in-process run: the same trace
#      (REQUESTS requests, closed loop, 8 clients, --max-seqs 8) on TinyLlama
#      (TYPE), in-process and over HTTP interleaved ROUNDS times; output tok/s;
#   2. 64 concurrent streaming clients: no error, no lost request, every token
#      accounted for (streamed chunks against the server's usage counts);
#   3. what the HTTP path adds to TTFT: one client, short prompts, on a small
#      model (stories15m's shape): per request, the client's TTFT minus the
#      server's own (its `timings.ttft_ms`, submission to first token), and
#      beside it the in-process TTFT of the same requests;
#   4. with LLAMA_SERVER=PATH (llama.cpp's or ik_llama.cpp's llama-server,
#      built outside this repository): the same cortex-bench command against
#      it and against `cortex serve` on the same file, the standard prompts
#      greedy: every request must finish and the texts must match.
#   [LLAMA_SERVER=PATH] ci/server.sh [DB]          (default reports/server.db)
set -eu
cd "$(dirname "$0")/.."
DB=${1:-reports/server.db}
BENCH=build/cortex-bench CORTEX=build/cortex
TYPE=${TYPE:-q4_0} THREADS=${THREADS:-2} ROUNDS=${ROUNDS:-2} REQUESTS=${REQUESTS:-32}
[ -n "${NO_BUILD:-}" ] || make -s "$BENCH" "$CORTEX"
mkdir -p models "$(dirname "$DB")"
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
q() { sqlite3 "$DB" "select coalesce(printf('%.3f', median), '-') from summary where run_id = $1 and name = '$2'"; }
med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
last() { sqlite3 "$DB" "select max(id) from runs"; }
serve() { # model, args...: start cortex serve on a free port; sets URL
    local m=$1; shift
    "$CORTEX" serve -m "$m" --port 0 -t "$THREADS" "$@" 2>"$tmp/serve.log" &
    SPID=$!
    for _ in $(seq 600); do
        URL=$(grep -o 'http://[0-9.]*:[0-9]*' "$tmp/serve.log" | head -1)
        [ -n "$URL" ] && return 0
        sleep 0.1
    done
    echo "cortex serve did not start" >&2; cat "$tmp/serve.log" >&2; exit 1
}
stop() { kill -TERM "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null || true; }

m=models/tinyllama-1.1b-$TYPE.gguf
[ -f "$m" ] || "$CORTEX" synth --shape tinyllama-1.1b --type "$TYPE" -o "$m" >/dev/null
# a trace's requests as a prompt set (no adapter ids: the base model over HTTP, replayed closed-loop)
as_prompts() { /usr/bin/python3 -c 'import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l); print(json.dumps({"id": r["id"], "text": r["text"], "max_tokens": r["max_tokens"]}))' "$1" >"$2"; }
"$BENCH" trace --requests "$REQUESTS" --rate 1000 --prompt-len uniform:32,128 --gen-len uniform:32,64 --seed 3 \
    -o "$tmp/tr.jsonl" >/dev/null 2>&1
t="$tmp/t.jsonl"
as_prompts "$tmp/tr.jsonl" "$t"
echo "== 1. $REQUESTS requests, 8 clients, --max-seqs 8, TinyLlama $TYPE, $THREADS threads: output tok/s"
inp=() http=()
for r in $(seq "$ROUNDS"); do
    "$BENCH" run -m "$m" --workload "prompts:$t" --mode closed --concurrency 8 --max-seqs 8 -t "$THREADS" --reps 1 \
        --warmup 0 --db "$DB" --no-progress >/dev/null
    inp+=("$(q "$(last)" output_tps)")
    serve "$m" --max-seqs 8
    "$BENCH" run --endpoint "$URL/v1" --workload "prompts:$t" --mode closed --concurrency 8 --reps 1 --warmup 0 \
        --db "$DB" --no-progress >/dev/null
    http+=("$(q "$(last)" output_tps)")
    stop
done
I=$(med "${inp[@]}") H=$(med "${http[@]}")
printf '| in-process | over HTTP | HTTP / in-process |\n| ---: | ---: | ---: |\n| %s | %s | %s |\n' "$I" "$H" \
    "$(awk -v a="$I" -v b="$H" 'BEGIN { printf "%.3f", b / a }')"
echo "(runs: in-process ${inp[*]}; HTTP ${http[*]})"

echo
echo "== 2. 64 concurrent streaming clients (64 requests at once, --max-seqs 8, --max-queue 64)"
t64="$tmp/t64.jsonl"
"$BENCH" trace --requests 64 --rate 100000 --prompt-len uniform:16,64 --gen-len uniform:16,32 --seed 4 \
    -o "$tmp/tr64.jsonl" >/dev/null 2>&1
as_prompts "$tmp/tr64.jsonl" "$t64"
serve "$m" --max-seqs 8 --max-queue 64
"$BENCH" run --endpoint "$URL/v1" --workload "prompts:$t64" --mode closed --concurrency 64 --reps 1 --warmup 0 \
    --db "$DB" --no-progress >/dev/null
id=$(last)
stop
echo "| requests | finished | failed | rejected | generated tokens (usage) | streamed chunks |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
echo "| $(q "$id" requests) | $(q "$id" requests_finished) | $(q "$id" requests_failed) | $(q "$id" requests_rejected) | $(q "$id" gen_tokens) | $(q "$id" stream_chunks) |"

echo
# Short prompts: the in-process replay tokenizes before its clock starts, a server after the request
# arrives, so long prompts would count tokenization against HTTP; these are 8 to 16 tokens.
echo "== 3. TTFT over HTTP against in-process: one client, 24 short prompts, stories15m's shape"
s=models/stories15m-2k-q8_0.gguf
[ -f "$s" ] || "$CORTEX" synth --shape stories15m --type q8_0 -c 2048 -o "$s" >/dev/null
"$BENCH" trace --requests 24 --rate 1000 --prompt-len uniform:8,16 --gen-len fixed:8 --seed 6 -o "$tmp/trs.jsonl" \
    >/dev/null 2>&1
as_prompts "$tmp/trs.jsonl" "$tmp/short.jsonl"
ti=() th=() ts=() to=()
for r in $(seq "$ROUNDS"); do
    "$BENCH" run -m "$s" --workload "prompts:$tmp/short.jsonl" --concurrency 1 -t "$THREADS" --reps 3 --warmup 1 \
        --db "$DB" --no-progress >/dev/null
    ti+=("$(q "$(last)" ttft_ms_p50)")
    serve "$s"
    "$BENCH" run --endpoint "$URL/v1" --workload "prompts:$tmp/short.jsonl" --concurrency 1 --reps 3 --warmup 1 \
        --db "$DB" --no-progress >/dev/null
    th+=("$(q "$(last)" ttft_ms_p50)") ts+=("$(q "$(last)" server_ttft_ms)") to+=("$(q "$(last)" http_ttft_overhead_ms)")
    stop
done
TI=$(med "${ti[@]}") TH=$(med "${th[@]}") TS=$(med "${ts[@]}") TO=$(med "${to[@]}")
echo "| TTFT p50 in-process (ms) | over HTTP, client (ms) | over HTTP, the server's own (ms) | HTTP adds, per request (ms) |"
echo "| ---: | ---: | ---: | ---: |"
echo "| $TI | $TH | $TS | $TO |"
echo "(rounds: in-process ${ti[*]}; client ${th[*]}; server ${ts[*]}; added ${to[*]})"

if [ -n "${LLAMA_SERVER:-}" ]; then
    echo
    echo "== 4. the same cortex-bench command against $LLAMA_SERVER and cortex serve: standard prompts, greedy"
    (cd "$tmp" && exec "$LLAMA_SERVER" -m "$OLDPWD/$s" --port 18097 -t "$THREADS" -c 2048) >"$tmp/llama.log" 2>&1 & # (its log file lands in $tmp)
    LPID=$!
    for _ in $(seq 300); do curl -sf http://127.0.0.1:18097/health >/dev/null 2>&1 && break; sleep 0.1; done
    "$BENCH" run --endpoint http://127.0.0.1:18097/v1 --workload standard --concurrency 4 --reps 1 --warmup 0 \
        --db "$DB" --no-progress >/dev/null
    peer=$(last)
    kill "$LPID"; wait "$LPID" 2>/dev/null || true
    serve "$s"
    "$BENCH" run --endpoint "$URL/v1" --workload standard --concurrency 4 --reps 1 --warmup 0 --db "$DB" --no-progress \
        >/dev/null
    ours=$(last)
    stop
    sqlite3 "$DB" "select 'server: ' || server from runs where id = $peer"
    echo "| finished (peer) | finished (cortex serve) | texts equal (token_hash) |"
    echo "| ---: | ---: | ---: |"
    sqlite3 -separator ' | ' "$DB" "select '| ' || sum(a.state = 'finished'), sum(b.state = 'finished'),
        sum(a.token_hash = b.token_hash) || '/' || count(*) || ' |' from requests a join requests b using (item)
        where a.run_id = $peer and b.run_id = $ours"
fi
