#!/usr/bin/env bash
# ci/perf.sh - the measurement campaign behind docs/performance.md (issue 5):
# this machine's bandwidth and peak arithmetic, then llama-bench-style decode
# (tg128) and prefill (pp512) runs of synthetic TinyLlama-1.1B in every weight
# type, prefill on 1 and 2 threads (scaling), and the same model forced onto
# the scalar kernels (CORTEX_ISA=scalar) against AVX2. Everything lands in one
# SQLite database; `cortex-bench list/show` read it back.
#   ci/perf.sh [DB]            (default reports/perf.db; about 30 minutes)
# Synthesizes the models it needs into models/ first (about a minute each).
# Run it on an otherwise idle machine: the numbers are wall-clock.
set -eu
cd "$(dirname "$0")/.."
DB=${1:-reports/perf.db}
BENCH=build/cortex-bench
CORTEX=build/cortex
[ -n "${NO_BUILD:-}" ] || make -s "$BENCH" "$CORTEX" build/tests/kernel_bench
mkdir -p models reports
for type in f16 q8_0 q4_0 q4_k_m; do
    m=models/tinyllama-1.1b-$type.gguf
    [ -f "$m" ] || "$CORTEX" synth --shape tinyllama-1.1b --type "$type" -o "$m"
done

echo "== hw: read bandwidth and peak arithmetic"
"$BENCH" hw --db "$DB"

for type in q8_0 q4_0 q4_k_m f16; do
    m=models/tinyllama-1.1b-$type.gguf
    echo "== $type: decode tg128 (2 threads), prefill pp512 (1 and 2 threads)"
    "$BENCH" run --model "$m" --workload tg128 --reps 5 --warmup 1 -t 2 --db "$DB" --no-progress
    "$BENCH" run --model "$m" --workload pp512 --reps 3 --warmup 1 -t 1,2 --db "$DB" --no-progress
done

echo "== scalar against AVX2 kernels, whole model (tinyllama q8_0, 2 threads)"
for isa in scalar avx2; do
    CORTEX_ISA=$isa "$BENCH" run --model models/tinyllama-1.1b-q8_0.gguf --workload tg16 --reps 3 --warmup 1 -t 2 \
        --db "$DB" --no-progress
    CORTEX_ISA=$isa "$BENCH" run --model models/tinyllama-1.1b-q8_0.gguf --workload pp64 --reps 3 --warmup 1 -t 2 \
        --db "$DB" --no-progress
done

echo "== weights memory: mapped, huge pages, huge pages + repacked (tinyllama q8_0, tg128, 2 threads)"
for cfg in "CORTEX_WEIGHTS=mmap" "CORTEX_WEIGHTS=hugepages CORTEX_REPACK=0" "CORTEX_WEIGHTS=hugepages CORTEX_REPACK=1"; do
    env $cfg "$BENCH" run --model models/tinyllama-1.1b-q8_0.gguf --workload tg128 --reps 5 --warmup 1 -t 2 \
        --db "$DB" --no-progress
done

echo "== each kernel, scalar against AVX2 (median of 7, one process)"
build/tests/kernel_bench
