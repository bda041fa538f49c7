#!/usr/bin/env bash
# ci/batching.sh - what continuous batching buys in decode: N sequences
# decoded in turn (multiseq:N,C,G: one cx_eval per token) against the same
# sequences decoded in one pass per round (batched:N,C,G: cx_batch_eval),
# for N in NS, on one model. Prints aggregate decode tok/s, the speed-up,
# each sequence's inter-token gap (p50) and the roofline fraction (the
# weights are read once per pass, so a batched token carries 1/N of them).
#   ci/batching.sh [DB]        (default reports/batching.db)
# Defaults: synthetic TinyLlama-1.1B q8_0 (synthesized into models/ when
# missing), C=64 prompt tokens and G=32 rounds, NS="1 2 4 8", 2 threads,
# 3 repetitions after 1 warm-up. Environment overrides: MODEL, TYPE, NS, CTX,
# GEN, THREADS, REPS.
set -eu
cd "$(dirname "$0")/.."
DB=${1:-reports/batching.db}
BENCH=build/cortex-bench
CORTEX=build/cortex
TYPE=${TYPE:-q8_0}
MODEL=${MODEL:-models/tinyllama-1.1b-$TYPE.gguf}
NS=${NS:-1 2 4 8} CTX=${CTX:-64} GEN=${GEN:-32} THREADS=${THREADS:-2} REPS=${REPS:-3}
[ -n "${NO_BUILD:-}" ] || make -s "$BENCH" "$CORTEX"
mkdir -p models "$(dirname "$DB")"
[ -f "$MODEL" ] || "$CORTEX" synth --shape tinyllama-1.1b --type "$TYPE" -o "$MODEL"
"$BENCH" hw --db "$DB" >/dev/null # the roofline needs this machine's bandwidth

run() { # workload
    "$BENCH" run --model "$MODEL" --workload "$1" -c $((CTX + GEN)) -t "$THREADS" --reps "$REPS" --warmup 1 \
        --db "$DB" --no-progress >/dev/null
    sqlite3 "$DB" "select max(id) from runs"
}
q() { sqlite3 "$DB" "select coalesce(printf('%.2f', median), '-') from summary where run_id = $1 and name = '$2'"; }
printf '| N | in turn tok/s | batched tok/s | speed-up | ITL p50 in turn / batched (ms) | roofline in turn / batched |\n'
printf '| ---: | ---: | ---: | ---: | ---: | ---: |\n'
for n in $NS; do
    a=$(run "multiseq:$n,$CTX,$GEN")
    b=$(run "batched:$n,$CTX,$GEN")
    ta=$(q "$a" decode_tps) tb=$(q "$b" decode_tps)
    printf '| %s | %s | %s | %s | %s / %s | %s / %s |\n' "$n" "$ta" "$tb" \
        "$(awk -v a="$ta" -v b="$tb" 'BEGIN { if (a > 0) printf "%.2fx", b / a; else print "-" }')" \
        "$(q "$a" itl_ms_p50)" "$(q "$b" itl_ms_p50)" "$(q "$a" roofline_frac)" "$(q "$b" roofline_frac)"
done
