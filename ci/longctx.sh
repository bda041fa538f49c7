#!/usr/bin/env bash
# ci/longctx.sh - the long-context benchmark of the tiered KV cache (issue 6):
# NSEQ sequences each holding CTX tokens of context in one shared cache
# (cortex-bench's multiseq:NSEQ,CTX,GEN workload: prefill every sequence,
# then decode GEN tokens for each in turn), once untiered (every block hot,
# f32) and once with tier budgets whose sum is well below what the untiered
# cache needs (NSEQ x (CTX+GEN) x n_layer x 2 x kv_dim x 4 bytes). Prints
# both runs' TPS and the tiered run's per-tier counters.
#   ci/longctx.sh [DB]        (default reports/longctx.db)
# Defaults: synthetic TinyLlama-1.1B q4_0 with a 4096-token context
# (synthesized into models/ when missing), 3 sequences of 4000 tokens, 32
# generated each, hot 64M + warm 96M (q8) + cold 64M = 224 MiB against
# 533 MiB untiered. Environment overrides: MODEL, SHAPE, CTXSIZE, NSEQ, CTX,
# GEN, HOT, WARM, COLD, THREADS, e.g. the quick check
#   MODEL=models/stories15m-2k-q8_0.gguf CTXSIZE=2048 CTX=1000 GEN=16 HOT=2M WARM=4M COLD=4M ci/longctx.sh /tmp/l.db
set -eu
cd "$(dirname "$0")/.."
DB=${1:-reports/longctx.db}
BENCH=build/cortex-bench
CORTEX=build/cortex
SHAPE=${SHAPE:-tinyllama-1.1b}
CTXSIZE=${CTXSIZE:-4096}
MODEL=${MODEL:-models/$SHAPE-4k-q4_0.gguf}
NSEQ=${NSEQ:-3} CTX=${CTX:-4000} GEN=${GEN:-32}
HOT=${HOT:-64M} WARM=${WARM:-96M} COLD=${COLD:-64M}
THREADS=${THREADS:-2}
[ -n "${NO_BUILD:-}" ] || make -s "$BENCH" "$CORTEX"
mkdir -p models "$(dirname "$DB")"
[ -f "$MODEL" ] || "$CORTEX" synth --shape "$SHAPE" --type q4_0 -c "$CTXSIZE" -o "$MODEL"

# Bytes the untiered (all-hot f32) cache needs for these sequences.
info=$("$CORTEX" info "$MODEL")
field() { echo "$info" | awk -v k="$1:" '$1 == k { print $2; exit }'; }
n_layer=$(field n_layer) n_head_kv=$(field n_head_kv) head_dim=$(field head_dim)
untiered=$((NSEQ * (CTX + GEN) * n_layer * 2 * n_head_kv * head_dim * 4))
echo "== $MODEL: $NSEQ sequences x ($CTX + $GEN) tokens; untiered f32 KV needs $untiered bytes ($((untiered >> 20)) MiB)"
echo "== budgets: hot $HOT, warm $WARM (q8), cold $COLD"

run() { # label, extra flags...
    local label=$1; shift
    "$BENCH" run --model "$MODEL" --workload "multiseq:$NSEQ,$CTX,$GEN" -c "$CTXSIZE" -t "$THREADS" --reps 1 --warmup 0 \
        --db "$DB" --no-progress "$@" >/dev/null
    sqlite3 "$DB" "select max(id) from runs"
}
base=$(run untiered)
tier=$(run tiered --kv-hot "$HOT" --kv-warm "$WARM" --kv-cold "$COLD")
q() { sqlite3 "$DB" "select coalesce(printf('%.2f', median), '-') from summary where run_id = $1 and name = '$2'"; }
printf '\n| run | KV | tps | prefill tok/s | decode tok/s | peak hot B | peak warm B | peak cold B |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n'
for id in "$base" "$tier"; do
    printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$id" "$(sqlite3 "$DB" "select kv_config from runs where id = $id")" \
        "$(q "$id" tps)" "$(q "$id" prefill_tps)" "$(q "$id" decode_tps)" "$(q "$id" kv_peak_bytes_hot)" \
        "$(q "$id" kv_peak_bytes_warm)" "$(q "$id" kv_peak_bytes_cold)"
done
echo
echo "tiered run's counters (block reads per tier, moves, zlib, restores):"
sqlite3 "$DB" "select name || ' = ' || printf('%.3f', median) from summary where run_id = $tier and name like 'kv_%' order by name"
bt=$(sqlite3 "$DB" "select median from summary where run_id = $base and name = 'decode_tps'")
tt=$(sqlite3 "$DB" "select median from summary where run_id = $tier and name = 'decode_tps'")
awk -v b="$bt" -v t="$tt" 'BEGIN { if (b > 0) printf "\nTPS cost of tiering (decode): %.1f%%\n", 100 * (1 - t / b) }'
