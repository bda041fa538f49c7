#!/usr/bin/env bash
# ci/aa.sh - false alarms and detection of the stored-baseline comparison
# (`cortex-bench compare`, the gate's one verdict rule) at several repetition
# counts, measured on this machine: the numbers of docs/gates.md's tables.
#
# For each repetition count R and injected slowdown P (the knob build's
# CORTEX_SLOWDOWN_PCT), PAIRS pairs of runs are made back to back, each pair
# a base run at P = 0 then a candidate run at P, both `--reps R` after one
# warm-up, and `compare BASE CAND` judges every metric ci/gates.conf names.
# A pair counts as "regressed" when any gated metric was judged regressed
# (what would fail a gate). P = 0 is the A/A: its regressed share is the
# false-alarm rate; P > 0 the detection rate.
#
#   ci/aa.sh [--model FILE] [--workload W] [--pairs N] [--reps "1 2 3 5 10"] [--slowdown "0 5 10"] [--db FILE]
#
# Defaults: models/stories15m-2k-q8_0.gguf (make bench writes it), tg32, 20
# pairs, the lists above, a temporary database. Needs the knob build (make
# KNOBS=1 build-knob/cortex-bench). Prints a markdown table; the runs stay in
# --db when given. Takes minutes: run it on a quiet machine, alone.
set -uo pipefail
cd "$(dirname "$0")/.."
model=models/stories15m-2k-q8_0.gguf wl=tg32 pairs=20 reps_list="1 2 3 5 10" slow_list="0 5 10" db=""
while [ $# -gt 0 ]; do
    case "$1" in
        --model) model=$2; shift 2 ;;
        --workload) wl=$2; shift 2 ;;
        --pairs) pairs=$2; shift 2 ;;
        --reps) reps_list=$2; shift 2 ;;
        --slowdown) slow_list=$2; shift 2 ;;
        --db) db=$2; shift 2 ;;
        *) echo "usage: ci/aa.sh [--model FILE] [--workload W] [--pairs N] [--reps LIST] [--slowdown LIST] [--db FILE]" >&2; exit 2 ;;
    esac
done
bench=build-knob/cortex-bench
[ -x "$bench" ] || { echo "aa.sh: $bench missing (make KNOBS=1 build-knob/cortex-bench)" >&2; exit 2; }
[ -f "$model" ] || { echo "aa.sh: $model missing (make bench writes it)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -n "$db" ] || db=$tmp/aa.db
run() { # pct reps -> run id
    CORTEX_SLOWDOWN_PCT=$1 "$bench" run --model "$model" --workload "$wl" -t 1 --reps "$2" --warmup 1 --no-progress \
        --db "$db" -o csv >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; return 1; }
    sqlite3 "$db" "select max(id) from runs"
}
echo "| workload | reps | injected slowdown | pairs | regressed | inconclusive only | unchanged |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for p in $slow_list; do
    for r in $reps_list; do
        reg=0 inc=0 unch=0
        for _ in $(seq "$pairs"); do
            a=$(run 0 "$r") && b=$(run "$p" "$r") || exit 1
            "$bench" compare "$a" "$b" --db "$db" --gate-file ci/gates.conf >"$tmp/cmp" 2>&1
            # only the gated metrics (a verdict column other than "(not gated)")
            if grep -qE '\| regressed \|$' "$tmp/cmp"; then reg=$((reg + 1))
            elif grep -qE '\| inconclusive \|$' "$tmp/cmp"; then inc=$((inc + 1))
            else unch=$((unch + 1)); fi
        done
        echo "| $wl | $r | $p % | $pairs | $reg | $inc | $unch |"
    done
done
