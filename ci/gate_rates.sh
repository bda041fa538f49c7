#!/usr/bin/env bash
# ci/gate_rates.sh - how often each gate mode fails with nothing changed (the
# false-alarm rate) and with an injected slowdown (the detection rate), on
# this machine: the numbers of docs/gates.md's table, with the command that
# made them.
#
#   ci/gate_rates.sh MODE N "P1 P2 ..."
#
# MODE, each gate as CI or the nightly job runs it:
#   deterministic  gate --mode deterministic against the count at 0 %
#                  (gate-micro q8_0 under callgrind), the knob build
#   ab             gate --baseline-bin: the knob build at P against itself at
#                  0 % (ci/knob0.sh), interleaved, one pass (no confirmation)
#   model          ci/gate_ab.sh's whole-model part: the same, confirmed by a
#                  second A/B when the first regresses
#   kernel         ci/gate_ab.sh's kernel part: kernel_bench at P
#                  (KERNEL_BENCH_SLOWDOWN_PCT) against itself at 0 %, ABBA
#                  rounds, confirmed by a second A/B
# N gates per slowdown P (in %; 0 is the A/A). Prints one markdown row per P:
# gates, how many exited 1 (regression), 0, or otherwise. Needs `make all`
# and the knob build (make KNOBS=1 build-knob/cortex-bench). Minutes per mode:
# run it alone on a quiet machine.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 3 ] || { echo "usage: ci/gate_rates.sh deterministic|ab|model|kernel N \"P1 P2 ...\"" >&2; exit 2; }
mode=$1 n=$2 list=$3
knob=$PWD/build-knob/cortex-bench
[ -x "$knob" ] && [ -x build/cortex ] && [ -x build/tests/kernel_bench ] ||
    { echo "gate_rates: needs make all and make KNOBS=1 build-knob/cortex-bench" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build/cortex synth --shape gate-micro --type q8_0 -o "$tmp/gm.gguf" >/dev/null 2>&1
build/cortex synth --shape stories15m --type q8_0 -o "$tmp/s15.gguf" >/dev/null 2>&1
# Build directories for ci/gate_ab.sh: the base forces both knobs to 0, the candidate takes them from $P.
mkdir -p "$tmp/base/tests" "$tmp/cand/tests"
for d in base cand; do
    ln -s "$PWD/build/cortex" "$tmp/$d/cortex"
    if [ $d = base ]; then pct=0; else pct='${P:-0}'; fi
    printf '#!/bin/sh\nCORTEX_SLOWDOWN_PCT=%s exec "%s" "$@"\n' "$pct" "$knob" >"$tmp/$d/cortex-bench"
    printf '#!/bin/sh\nKERNEL_BENCH_SLOWDOWN_PCT=%s exec "%s" "$@"\n' "$pct" "$PWD/build/tests/kernel_bench" >"$tmp/$d/tests/kernel_bench"
    chmod +x "$tmp/$d/cortex-bench" "$tmp/$d/tests/kernel_bench"
done
base_count=$(CORTEX_SLOWDOWN_PCT=0 "$knob" micro --measure callgrind --model "$tmp/gm.gguf" | sed -n 's/^instructions=\([0-9]*\) .*/\1/p')
one() { # P -> the gate's exit code; its verdict table in $tmp/table.md
    export P=$1
    case $mode in
        deterministic) CORTEX_SLOWDOWN_PCT=$1 "$knob" gate --mode deterministic --det-mode callgrind --model "$tmp/gm.gguf" \
                           --db "$tmp/d.db" --baseline-instructions "$base_count" >"$tmp/table.md" 2>&1 ;;
        ab) rm -f "$tmp/ab.db"*
            CORTEX_SLOWDOWN_PCT=$1 "$knob" gate --model "$tmp/s15.gguf" --baseline-bin ci/knob0.sh -t 1 --db "$tmp/ab.db" \
                >"$tmp/table.md" 2>&1 ;;
        model|kernel) rm -f "$tmp/out/$mode-1.md"
            AB_PARTS=$mode ci/gate_ab.sh "$tmp/base" "$tmp/cand" "$tmp/out" >"$tmp/ab.log" 2>&1
            local rc=$?
            cp "$tmp/out/$mode-1.md" "$tmp/table.md" 2>/dev/null
            return $rc ;;
        *) echo "gate_rates: unknown mode '$mode'" >&2; exit 2 ;;
    esac
}
# The change the gate measured on one metric that shows the slowdown (the knob's effect is smaller than
# P where the knob does not repeat the work: attention, norms, the kernels' call overhead).
case $mode in
    deterministic) probe=micro: ;;   # micro:pP,gG/instructions
    ab|model) probe=tg32/decode_tps ;;
    kernel) probe="kernel: q8_0 matvec" ;;
esac
echo "| mode | injected slowdown | gates | exit 1 (regression) | exit 0 (pass) | other | median change of $probe (first A/B) |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for p in $list; do
    fail=0 pass=0 other=0
    : >"$tmp/changes"
    for _ in $(seq "$n"); do
        one "$p"
        case $? in 1) fail=$((fail + 1)) ;; 0) pass=$((pass + 1)) ;; *) other=$((other + 1)) ;; esac
        grep -F "| $probe" "$tmp/table.md" 2>/dev/null | head -1 | awk -F' *\\| *' '{ sub(/%/, "", $5); print $5 }' >>"$tmp/changes"
    done
    med=$(sort -g "$tmp/changes" | awk '{ v[NR] = $1 } END { if (NR) printf "%+.2f %%", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; else print "-" }')
    echo "| $mode | $p % | $n | $fail | $pass | $other | $med |"
done
