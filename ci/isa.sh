#!/usr/bin/env bash
# ci/isa.sh - each kernel table's speed on the same models, side by side
# (issue 16): synthetic TinyLlama-1.1B in q8_0, q4_0, q4_k_m and f16, prefill
# (pp512) and decode (tg128) on THREADS threads (default 2) under every
# CORTEX_ISA table this CPU runs (scalar excepted: minutes per prefill), plus,
# with 2 threads, pp512 and tg128 on 1 thread under the best table (thread
# scaling).
# Runs are interleaved round by round (table A, B, C, then again), one
# repetition each after a warm-up, so a shared machine's slow minutes spread
# over every table; medians over rounds. TYPES picks the models (bf16 too: a
# bf16 model also runs under avx512bf16, which rounds its activations to bf16).
#   [THREADS=1] [TYPES="q8_0 q4_0"] ci/isa.sh [DB] [ROUNDS]
#   (default reports/isa.db, 3 rounds, all four types: ~15-40 minutes)
set -eu
cd "$(dirname "$0")/.."
DB=${1:-reports/isa.db}
ROUNDS=${2:-3}
THREADS=${THREADS:-2}
TYPES=${TYPES:-q8_0 q4_0 q4_k_m f16}
BENCH=build/cortex-bench
CORTEX=build/cortex
[ -n "${NO_BUILD:-}" ] || make -s "$BENCH" "$CORTEX"
mkdir -p models reports
for type in $TYPES; do
    m=models/tinyllama-1.1b-$type.gguf
    [ -f "$m" ] || "$CORTEX" synth --shape tinyllama-1.1b --type "$type" -o "$m"
done
isas="" bf16_isa=""
# The tables this CPU runs (the others say why not), in the order the default
# prefers them, so the last is what auto picks; avx512bf16 (never auto) apart.
for isa in avx2 avx512 avxvnni avx512vnni avx512bf16; do
    if CORTEX_ISA=$isa "$CORTEX" generate -m "models/tinyllama-1.1b-${TYPES%% *}.gguf" -p hi -n 1 >/dev/null 2>"$DB.err"; then
        if [ $isa = avx512bf16 ]; then bf16_isa=$isa; else isas="$isas $isa"; fi
    else
        echo "skip $isa: $(head -1 "$DB.err")"
    fi
done
rm -f "$DB.err"
best=${isas##* }
echo "tables:$isas${bf16_isa:+ (bf16 models: $bf16_isa)}; $THREADS threads"
"$BENCH" hw --db "$DB"
for type in $TYPES; do
    m=models/tinyllama-1.1b-$type.gguf
    for round in $(seq "$ROUNDS"); do
        type_isas=$isas
        [ "$type" != bf16 ] || type_isas="$isas $bf16_isa"
        for isa in $type_isas; do
            echo "== $type round $round: $isa"
            for wl in pp512 tg128; do
                CORTEX_ISA=$isa "$BENCH" run --model "$m" --workload $wl --reps 1 --warmup 1 -t "$THREADS" \
                    --db "$DB" --no-progress >/dev/null
            done
        done
        if [ "$THREADS" = 2 ]; then
            for wl in pp512 tg128; do
                CORTEX_ISA=$best "$BENCH" run --model "$m" --workload $wl --reps 1 --warmup 1 -t 1 --db "$DB" \
                    --no-progress >/dev/null
            done
        fi
    done
done
# Medians over the rounds: model type, table (+ weights layout), workload, threads.
sqlite3 -header -column "$DB" "
  WITH v AS (SELECT r.model_type AS type, r.isa, r.workload, r.threads,
                    s.median AS tps FROM runs r JOIN summary s ON s.run_id = r.id
             WHERE s.name = 'tps'),
       o AS (SELECT type, isa, workload, threads, tps,
                    row_number() OVER (PARTITION BY type, isa, workload, threads ORDER BY tps) AS k,
                    count(*) OVER (PARTITION BY type, isa, workload, threads) AS n FROM v)
  SELECT type, isa, workload, threads, n, round(avg(tps), 1) AS median_tps FROM o
  WHERE k IN ((n + 1) / 2, (n + 2) / 2) GROUP BY type, isa, workload, threads ORDER BY type, workload, threads, isa;"
