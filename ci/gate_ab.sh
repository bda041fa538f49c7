#!/usr/bin/env bash
# ci/gate_ab.sh - the per-commit gate of this CPU's default kernels where the
# deterministic gate cannot see them (called by ci/gate.sh).
#
# The deterministic gate counts instructions under callgrind, and valgrind
# emulates no AVX-512: on an AVX-512 machine it counts the AVX2 kernels, while
# the engine runs its AVX-512 ones by default. Those are gated here instead,
# by wall-clock A/B of the two builds in one time window (docs/gates.md, "What
# each gate covers"):
#
#   kernels      ROUNDS rounds, each timing every kernel of the default table
#                with the base build's and the candidate's tests/kernel_bench
#                (--quick, one table), in ABBA order so drift hits both sides
#                alike; judged by `cortex-bench judge` (the gate's rule: the
#                exact U test at ALPHA and the threshold).
#   whole model  `cortex-bench gate --baseline-bin BASE/cortex-bench` on a
#                stories15m-shaped q8_0 model: tg32 and pp64 alternating one
#                repetition of each build (ci/gates-ab.conf: 12 pairs, 5 %
#                throughput and 10 % latency thresholds).
#
# A regression counts only when a second, independent A/B of the same part
# finds the same metric regressed: a noise false alarm must then strike twice.
#
#   ci/gate_ab.sh BASE_DIR CAND_DIR [OUT_DIR]
#
# BASE_DIR, CAND_DIR: directories holding cortex, cortex-bench and
# tests/kernel_bench (ci/baseline.sh --keep makes BASE_DIR; CAND_DIR is a build
# directory). OUT_DIR (default CAND_DIR/gate): the model, samples, tables, JUnit.
# AB_ROUNDS (16), AB_KERNEL_THRESHOLD (0.05), AB_ALPHA (0.01) tune the kernel
# part; AB_PARTS ("kernel model") names the parts to run (ci/gate_rates.sh
# measures each alone). Exit: 0 pass (or this CPU's default kernels are not AVX-512: nothing
# to add to the deterministic gate, said so), 1 a confirmed regression, 2 error.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: ci/gate_ab.sh BASE_DIR CAND_DIR [OUT_DIR]" >&2; exit 2; }
base=$1 cand=$2 out=${3:-$2/gate}
rounds=${AB_ROUNDS:-16} kthr=${AB_KERNEL_THRESHOLD:-0.05} alpha=${AB_ALPHA:-0.01}
for d in "$base" "$cand"; do
    for b in cortex cortex-bench tests/kernel_bench; do
        [ -x "$d/$b" ] || { echo "gate_ab: $d/$b: not built" >&2; exit 2; }
    done
done
mkdir -p "$out"
model=$out/ab-stories15m-q8_0.gguf
[ -f "$model" ] || "$cand/cortex" synth --shape stories15m --type q8_0 -o "$model" >/dev/null || exit 2
# The kernels the candidate runs by default here (the micro workload names them natively).
micro=$out/gate-micro-q8_0.gguf
[ -f "$micro" ] || "$cand/cortex" synth --shape gate-micro --type q8_0 -o "$micro" >/dev/null || exit 2
isa=$("$cand/cortex-bench" micro --model "$micro" --gen 1 | sed -n 's/.* isa=\([a-z0-9_]*\).*/\1/p')
case "$isa" in
    avx512*) ;;
    "") echo "gate_ab: the candidate's micro workload named no kernel table" >&2; exit 2 ;;
    *) echo "gate_ab: SKIP: this CPU's default kernels are $isa, which the deterministic gate counts"; exit 0 ;;
esac

# One kernel_bench table as "kernel: NAME<TAB>lower<TAB>SIDE<TAB>NS" lines (the markdown rows' first time).
kernels() { # dir side
    "$1/tests/kernel_bench" --quick --base "$isa" --isa "$isa" |
        awk -F' *\\| *' -v side="$2" 'NR > 2 && NF >= 5 { printf "kernel: %s, %s\tlower\t%s\t%s\n", $2, $3, side, $4 }'
}
# The regressed metrics of a verdict table, one per line.
regressed() { sed -n 's/^| \([^|]*\) | .* | \*\*regressed\*\* | .*/\1/p' "$1" | sort; }

kernel_ab() { # try: one kernel A/B into $out/kernel-TRY.{tsv,md}
    local f=$out/kernel-$1.tsv
    : >"$f"
    for r in $(seq "$rounds"); do
        if [ $((r % 2)) = 1 ]; then kernels "$base" base >>"$f" && kernels "$cand" cand >>"$f"
        else kernels "$cand" cand >>"$f" && kernels "$base" base >>"$f"; fi || return 2
    done
    "$cand/cortex-bench" judge --title "kernels A/B, $isa" --threshold "$kthr" --alpha "$alpha" "$f" >"$out/kernel-$1.md"
}
model_ab() { # try: one whole-model A/B into $out/model-TRY.md
    rm -f "$out/ab-$1.db"*
    "$cand/cortex-bench" gate --model "$model" --baseline-bin "$base/cortex-bench" -t 1 --db "$out/ab-$1.db" \
        --gate-file ci/gates-ab.conf --summary "$out/model-$1.md" >/dev/null
}

rc=0
for part in ${AB_PARTS:-kernel model}; do
    case $part in kernel|model) ;; *) echo "gate_ab: AB_PARTS: unknown part '$part'" >&2; exit 2 ;; esac
    ${part}_ab 1; r=$?
    if [ $r = 1 ]; then # a regression must strike twice: a second, independent A/B of the same part
        echo "gate_ab: $part A/B found a regression; measuring again to confirm"
        ${part}_ab 2; r2=$?
        t2=$out/$part-2.md
        both=$(comm -12 <(regressed "$out/$part-1.md") <(regressed "$t2"))
        if [ $r2 = 1 ] && [ -n "$both" ]; then
            echo "gate_ab: $part regression confirmed twice: $(echo $both)"; cat "$t2"; rc=1
        elif [ $r2 -gt 1 ]; then rc=2
        else echo "gate_ab: not confirmed (the second A/B did not regress the same metric): noise, the gate passes"; fi
    elif [ $r -gt 1 ]; then
        echo "gate_ab: the $part A/B failed (exit $r)" >&2; rc=2
    fi
    [ -f "$out/$part-1.md" ] && { echo; cat "$out/$part-1.md"; }
done
exit $rc
