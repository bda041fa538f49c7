#!/usr/bin/env bash
# ci/lora.sh - LoRA adapters' benchmarks (issue 14, docs/lora.md, docs/performance.md),
# on synthetic TinyLlama-1.1B, THREADS threads, adapters on all seven matrices:
#   1. what adapters cost a decode batch: batched:8,128,64 with no adapter, with
#      4 distinct rank-16 adapters and with 8 distinct rank-32 ones (sequence i
#      applies adapter i mod K + 1), interleaved ROUNDS times in one session;
#      the ratio of decode tok/s to the same batch without adapters;
#   2. what a load costs: the scheduler's own adapter load times (lora_load_ms)
#      in the runs of 3, rank-16 adapters read from warm files;
#   3. mixed batches against one adapter per step (--lora-batching split,
#      llama.cpp's behaviour) on the same Zipf trace;
#   4. the sweep over the number of adapters (1, 4, 16, 64) and the Zipf exponent,
#      drawn to reports/lora-sweep.svg.
#   ci/lora.sh [DB]            (default reports/lora.db)
# Environment: TYPES (default "q8_0 q4_0"), THREADS (2), REPS (3), ROUNDS (2),
# SWEEP_TYPE (q8_0), SWEEP_K ("1 4 16 64"), SWEEP_ZIPF ("0.8 1.4"), REQUESTS (48).
# Models are synthesized into models/ when missing; adapters into $CORTEX_CACHE/lora.
set -eu
cd "$(dirname "$0")/.."
DB=${1:-reports/lora.db}
BENCH=build/cortex-bench CORTEX=build/cortex
TYPES=${TYPES:-q8_0 q4_0} THREADS=${THREADS:-2} REPS=${REPS:-3} ROUNDS=${ROUNDS:-2}
SWEEP_TYPE=${SWEEP_TYPE-q8_0} SWEEP_K=${SWEEP_K:-1 4 16 64} SWEEP_ZIPF=${SWEEP_ZIPF:-0.8 1.4} REQUESTS=${REQUESTS:-48}
[ -n "${NO_BUILD:-}" ] || make -s "$BENCH" "$CORTEX"
mkdir -p models "$(dirname "$DB")"
run() { # model, args...: the new run's id
    local m=$1; shift
    "$BENCH" run --model "$m" -t "$THREADS" --db "$DB" --no-progress "$@" >/dev/null
    sqlite3 "$DB" "select max(id) from runs"
}
q() { sqlite3 "$DB" "select coalesce(printf('%.3f', median), '-') from summary where run_id = $1 and name = '$2'"; }
med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%.3f", b / a; else print "-" }'; }

echo "== 1. decode batch of 8 (batched:8,128,64, $THREADS threads): decode tok/s, median of $ROUNDS interleaved rounds x $REPS reps"
printf '| base | adapters held as | no adapter | 4 x rank 16 | ratio | 8 x rank 32 | ratio |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n'
for type in $TYPES; do
    m=models/tinyllama-1.1b-$type.gguf
    [ -f "$m" ] || "$CORTEX" synth --shape tinyllama-1.1b --type "$type" -o "$m" >/dev/null
    n=() a8=() b8=() a4=() b4=()
    bat() { q "$(run "$m" --workload batched:8,128,64 -c 192 --reps "$REPS" --warmup 1 "$@")" decode_tps; }
    for r in $(seq "$ROUNDS"); do
        n+=("$(bat)")
        a8+=("$(bat --adapters synth:4,16 --lora-type q8_0)")
        b8+=("$(bat --adapters synth:8,32 --lora-type q8_0)")
        a4+=("$(bat --adapters synth:4,16 --lora-type q4_0)")
        b4+=("$(bat --adapters synth:8,32 --lora-type q4_0)")
    done
    N=$(med "${n[@]}")
    for lt in q8_0 q4_0; do
        if [ $lt = q8_0 ]; then A=$(med "${a8[@]}") B=$(med "${b8[@]}"); else A=$(med "${a4[@]}") B=$(med "${b4[@]}"); fi
        printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$type" "$lt" "$N" "$A" "$(ratio "$N" "$A")" "$B" "$(ratio "$N" "$B")"
    done
done

[ -n "$SWEEP_TYPE" ] || exit 0
m=models/tinyllama-1.1b-$SWEEP_TYPE.gguf
[ -f "$m" ] || "$CORTEX" synth --shape tinyllama-1.1b --type "$SWEEP_TYPE" -o "$m" >/dev/null
tr() { # K ZIPF -> a trace file: REQUESTS requests arriving at once, Zipf over K adapters
    local f=$(mktemp --suffix=.jsonl)
    "$BENCH" trace --requests "$REQUESTS" --rate 1000 --adapters "$1" --zipf "$2" --prompt-len uniform:32,128 \
        --gen-len uniform:32,96 --seed 11 -o "$f" >/dev/null 2>&1
    echo "$f"
}
echo
echo "== 2, 3. $REQUESTS requests at once, Zipf 1.1 over 8 rank-16 adapters, --max-seqs 8 ($SWEEP_TYPE, $THREADS threads)"
t=$(tr 8 1.1)
# the adapters' files written (and read once) before anything is timed: loads are from warm files
run "$m" --workload "trace:$t" --reps 1 --warmup 0 --adapters synth:8,16 --mode closed --concurrency 8 >/dev/null
mix=$(run "$m" --workload "trace:$t" --reps 1 --warmup 0 --adapters synth:8,16)
spl=$(run "$m" --workload "trace:$t" --reps 1 --warmup 0 --adapters synth:8,16 --lora-batching split)
base=$(run "$m" --workload "trace:$t" --reps 1 --warmup 0)
printf '| batching | output tok/s | vs mixed | TTFT p50 ms | e2e p50 ms | steps | adapter loads | load ms mean / max |\n'
printf '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n'
for row in "no adapter (ids as labels):$base" "mixed (Cortex):$mix" "one adapter per step (llama.cpp):$spl"; do
    id=${row##*:}
    printf '| %s | %s | %s | %s | %s | %s | %s | %s / %s |\n' "${row%:*}" "$(q "$id" output_tps)" \
        "$(ratio "$(q "$mix" output_tps)" "$(q "$id" output_tps)")" "$(q "$id" ttft_ms_p50)" "$(q "$id" e2e_ms_p50)" \
        "$(q "$id" steps)" "$(q "$id" lora_loads)" "$(q "$id" lora_load_ms_mean)" "$(q "$id" lora_load_ms_max)"
done
rm -f "$t" "$t.meta.json"

echo
echo "== 4. sweep: output tok/s against the number of rank-16 adapters, mixed batches"
tsv=reports/lora-sweep.tsv
printf 'adapters' >"$tsv"
for z in $SWEEP_ZIPF; do printf '\tzipf%s' "$z" >>"$tsv"; done
echo >>"$tsv"
printf '| adapters |'; for z in $SWEEP_ZIPF; do printf ' zipf %s |' "$z"; done; echo
printf '| ---: |'; for z in $SWEEP_ZIPF; do printf ' ---: |'; done; echo
for k in $SWEEP_K; do
    line="$k" cells=""
    for z in $SWEEP_ZIPF; do
        t=$(tr "$k" "$z")
        id=$(run "$m" --workload "trace:$t" --reps 1 --warmup 0 --adapters "synth:$k,16")
        v=$(q "$id" output_tps)
        line="$line	$v" cells="$cells $v (run $id) |"
        rm -f "$t" "$t.meta.json"
    done
    echo "$line" >>"$tsv"
    echo "| $k |$cells"
done
if command -v gnuplot >/dev/null; then
    cols=$(head -1 "$tsv" | awk -F'\t' '{ print NF }')
    gnuplot <<GP
set terminal svg size 720,420 font "sans,11"
set output "reports/lora-sweep.svg"
set title "Output throughput against the number of LoRA adapters (rank 16, mixed batches)"
set xlabel "adapters (log scale)"; set ylabel "output tokens/s"; set logscale x 2; set grid; set key bottom left
plot for [c=2:$cols] "$tsv" using 1:c with linespoints lw 2 title columnheader(c)
GP
    echo "chart: reports/lora-sweep.svg"
fi
