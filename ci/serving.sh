#!/usr/bin/env bash
# ci/serving.sh - the request scheduler's benchmarks (issue 13, docs/performance.md):
#   1. what the scheduler keeps of batching: the standard prompts, 8 clients
#      (closed loop), --max-seqs 8 against --max-seqs 1, beside the
#      microbenchmark batched:8,64,32 against multiseq:8,64,32 (the same
#      model, interleaved in one session);
#   2. the scheduler's own overhead (sched_overhead_pct of those runs), and
#      the microbenchmark's shape (64 requests of 64 + 32 tokens) served by
#      the scheduler against the microbenchmark itself;
#   3. a burst of 64 simultaneous requests into --max-queue 16;
#   4. the rate sweep of the zipf-chat trace (saturation closed loop, then
#      25..110 % of it), drawn by `cortex-bench report`.
#   ci/serving.sh [DB]         (default reports/serving.db)
# Environment: TYPES (default "q4_0 q8_0"), THREADS (2), REPS (1), WARMUP (0),
# SWEEP_TYPE (q4_0; empty: no sweep), SWEEP_TRACE (prompts/traces/zipf-chat.jsonl).
# Models are synthesized into models/ when missing (about a minute each).
set -eu
cd "$(dirname "$0")/.."
DB=${1:-reports/serving.db}
BENCH=build/cortex-bench
CORTEX=build/cortex
TYPES=${TYPES:-q4_0 q8_0} THREADS=${THREADS:-2} REPS=${REPS:-1}
SWEEP_TYPE=${SWEEP_TYPE-q4_0} SWEEP_TRACE=${SWEEP_TRACE:-prompts/traces/zipf-chat.jsonl}
[ -n "${NO_BUILD:-}" ] || make -s "$BENCH" "$CORTEX"
mkdir -p models "$(dirname "$DB")"
run() { # model, args...: the new run's id (warm-up: WARMUP, default 0; each run is its own process)
    local m=$1; shift
    "$BENCH" run --model "$m" -t "$THREADS" --reps "$REPS" --warmup "${WARMUP:-0}" --db "$DB" --no-progress "$@" >/dev/null
    sqlite3 "$DB" "select max(id) from runs"
}
q() { sqlite3 "$DB" "select coalesce(printf('%.3f', median), '-') from summary where run_id = $1 and name = '$2'"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%.2fx", b / a; else print "-" }'; }

printf '| type | standard, 8 clients: output tok/s seqs 1 / 8 | gain | TTFT p50 ms seqs 1 / 8 | micro: tps multiseq / batched | gain | decode tok/s multiseq / batched | gain | scheduler overhead (seqs 8) |\n'
printf '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n'
for type in $TYPES; do
    m=models/tinyllama-1.1b-$type.gguf
    [ -f "$m" ] || "$CORTEX" synth --shape tinyllama-1.1b --type "$type" -o "$m" >/dev/null
    s1=$(run "$m" --workload standard --concurrency 8 --max-seqs 1)
    ms=$(run "$m" --workload multiseq:8,64,32 -c 96)
    s8=$(run "$m" --workload standard --concurrency 8 --max-seqs 8)
    mb=$(run "$m" --workload batched:8,64,32 -c 96)
    printf '| %s | %s / %s | %s | %s / %s | %s / %s | %s | %s / %s | %s | %s %% |\n' "$type" \
        "$(q "$s1" output_tps)" "$(q "$s8" output_tps)" "$(ratio "$(q "$s1" output_tps)" "$(q "$s8" output_tps)")" \
        "$(q "$s1" ttft_ms_p50)" "$(q "$s8" ttft_ms_p50)" \
        "$(q "$ms" tps)" "$(q "$mb" tps)" "$(ratio "$(q "$ms" tps)" "$(q "$mb" tps)")" \
        "$(q "$ms" decode_tps)" "$(q "$mb" decode_tps)" "$(ratio "$(q "$ms" decode_tps)" "$(q "$mb" decode_tps)")" \
        "$(q "$s8" sched_overhead_pct)"
done

echo
echo "== the microbenchmark's shape through the scheduler: 64 requests of 64 prompt and 32 generated tokens, 8 clients"
shape=$(mktemp --suffix=.jsonl)
"$BENCH" trace --requests 64 --rate 1000 --prompt-len fixed:64 --gen-len fixed:32 --seed 5 -o "$shape" 2>/dev/null
printf '| type | output tok/s seqs 1 / 8 | gain | total tok/s seqs 8 | batched:8,64,32 tps | scheduler / microbenchmark |\n'
printf '| --- | ---: | ---: | ---: | ---: | ---: |\n'
for type in $TYPES; do
    m=models/tinyllama-1.1b-$type.gguf
    a=$(run "$m" --workload "trace:$shape" --mode closed --concurrency 8 --max-seqs 1)
    b=$(run "$m" --workload "trace:$shape" --mode closed --concurrency 8 --max-seqs 8)
    mb=$(run "$m" --workload batched:8,64,32 -c 96)
    printf '| %s | %s / %s | %s | %s | %s | %s |\n' "$type" "$(q "$a" output_tps)" "$(q "$b" output_tps)" \
        "$(ratio "$(q "$a" output_tps)" "$(q "$b" output_tps)")" "$(q "$b" total_tps)" "$(q "$mb" tps)" \
        "$(ratio "$(q "$mb" tps)" "$(q "$b" total_tps)")"
done
rm -f "$shape" "$shape.meta.json"

echo
echo "== burst: 64 requests at once into --max-queue 16 (one sequence)"
burst=$(mktemp)
for i in $(seq 1 64); do
    printf '{"id": "b%02d", "arrival_s": 0, "adapter": 0, "prompt_len": 8, "max_tokens": 8, "text": "a burst of requests number %d"}\n' "$i" "$i"
done >"$burst"
m=models/tinyllama-1.1b-${TYPES%% *}.gguf
b=$(run "$m" --workload "trace:$burst" --max-seqs 1 --max-queue 16)
rm -f "$burst"
echo "rejected $(q "$b" requests_rejected), finished $(q "$b" requests_finished) of 64 (run $b)"

if [ -n "$SWEEP_TYPE" ]; then
    m=models/tinyllama-1.1b-$SWEEP_TYPE.gguf
    [ -f "$m" ] || "$CORTEX" synth --shape tinyllama-1.1b --type "$SWEEP_TYPE" -o "$m" >/dev/null
    echo
    echo "== rate sweep: $SWEEP_TRACE on $m, --max-seqs 8, SLO ttft 2000 ms, tpot 200 ms"
    "$BENCH" run --model "$m" --workload "trace:$SWEEP_TRACE" --rate sweep --max-seqs 8 --slo ttft=2000,tpot=200 \
        -t "$THREADS" --reps 1 --warmup 0 --db "$DB" --no-progress >/dev/null
    sat=$(sqlite3 "$DB" "select max(sweep) from runs")
    printf '| run | offered req/s | achieved req/s | output tok/s | TTFT p50 / p99 ms | TPOT p50 ms | goodput req/s |\n'
    printf '| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n'
    for id in $(sqlite3 "$DB" "select id from runs where sweep = $sat order by id"); do
        rate=$(sqlite3 "$DB" "select coalesce(printf('%.3f', rate), 'closed loop') from runs where id = $id")
        printf '| %s | %s | %s | %s | %s / %s | %s | %s |\n' "$id" "$rate" "$(q "$id" request_rps)" "$(q "$id" output_tps)" \
            "$(q "$id" ttft_ms_p50)" "$(q "$id" ttft_ms_p99)" "$(q "$id" tpot_ms_p50)" "$(q "$id" goodput_rps)"
    done
    "$BENCH" report "$sat" --db "$DB" --out "reports/sweep-$sat" >/dev/null && echo "chart: reports/sweep-$sat/rate_sweep.png"
fi
