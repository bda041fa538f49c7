#!/usr/bin/env bash
# ci/gate.sh - the short gate run for every change (called by .ci/run).
#
# 1. Deterministic mode: instruction counts of the micro workload (gate-micro
#    q8_0, one thread) under callgrind, candidate = this tree's build, baseline =
#    the parent commit built on the spot by ci/baseline.sh, both measured by the
#    candidate's cortex-bench on the same model file. A count more than the
#    threshold in ci/gates.conf (2 %) above the parent's fails CI. It counts the
#    kernels valgrind runs: the AVX2 table (valgrind emulates no AVX-512), which
#    is the default on AVX2-only machines.
# 2. On a machine whose default kernels are AVX-512, those are gated by
#    ci/gate_ab.sh: wall-clock A/B of the parent's and this build's kernels and
#    whole-model runs, a regression counted only when a second A/B confirms it.
# When the parent predates the micro workload there is nothing to compare with:
# the run is recorded (and tagged as the baseline) and the gate passes, saying
# so. What each gate covers, and the false-alarm and detection rates measured
# for each: docs/gates.md.
#
#   ci/gate.sh [BUILD_DIR]      (default: build; expects cortex, cortex-bench and tests/kernel_bench built)
#
# Writes $BUILD/gate/{gate.db,junit.xml,summary.md} and the A/B's tables there.
# Exit: 0 pass, 1 regression, 2 error, 3 no instruction counter.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
out=$BUILD/gate
mkdir -p "$out"
model=$out/gate-micro-q8_0.gguf
[ -f "$model" ] || "$BUILD/cortex" synth --shape gate-micro --type q8_0 -o "$model" || exit 2
args=(--mode deterministic --model "$model" --db "$out/gate.db" --junit "$out/junit.xml" --summary "$out/summary.md")
parent=$(git rev-parse -q --verify HEAD~1 2>/dev/null) || parent=""
if [ -z "$parent" ]; then
    echo "gate: no parent commit; recording this build as the baseline"
    exec "$BUILD/cortex-bench" gate "${args[@]}" --record-baseline
fi
keep=$(mktemp -d "${TMPDIR:-/tmp}/cortex-parent.XXXXXX") || exit 2
trap 'rm -rf "$keep"' EXIT
line=$(ci/baseline.sh "$parent" --model "$model" --driver "$BUILD/cortex-bench" --keep "$keep")
rc=$?
case $rc in
    0)
        base=$(sed -n 's/.* instructions=\([0-9]*\) .*/\1/p' <<<"$line")
        echo "gate: parent $(git rev-parse --short "$parent"): $base instructions"
        "$BUILD/cortex-bench" gate "${args[@]}" --baseline-instructions "$base"
        rc=$?
        [ $rc -eq 0 ] || exit $rc
        echo
        echo "gate: the default kernels of this CPU, A/B against the parent"
        ci/gate_ab.sh "$keep" "$BUILD" "$out"
        exit $? ;;
    3)
        echo "gate: parent $(git rev-parse --short "$parent") predates the micro workload; recording only"
        exec "$BUILD/cortex-bench" gate "${args[@]}" --record-baseline ;;
    *)
        echo "gate: could not measure the parent commit (ci/baseline.sh exit $rc)" >&2
        exit 2 ;;
esac
