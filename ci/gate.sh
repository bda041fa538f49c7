#!/usr/bin/env bash
# ci/gate.sh - the short gate run for every change (called by .ci/run).
#
# Deterministic mode: instruction counts of the micro workload (gate-micro
# q8_0, one thread) under callgrind, candidate = this tree's build, baseline =
# the parent commit built on the spot by ci/baseline.sh, both measured by the
# candidate's cortex-bench on the same model file. A count more than the
# threshold in ci/gates.conf (2 %) above the parent's fails CI. When the parent
# predates the micro workload there is nothing to compare with: the run is
# recorded (and tagged as the baseline) and the gate passes, saying so.
#
#   ci/gate.sh [BUILD_DIR]      (default: build; expects cortex and cortex-bench built)
#
# Writes $BUILD/gate/{gate.db,junit.xml,summary.md}. Exit: 0 pass, 1 regression, 2 error, 3 no instruction counter.
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
line=$(ci/baseline.sh "$parent" --model "$model" --driver "$BUILD/cortex-bench")
rc=$?
case $rc in
    0)
        base=$(sed -n 's/.* instructions=\([0-9]*\) .*/\1/p' <<<"$line")
        echo "gate: parent $(git rev-parse --short "$parent"): $base instructions"
        exec "$BUILD/cortex-bench" gate "${args[@]}" --baseline-instructions "$base" ;;
    3)
        echo "gate: parent $(git rev-parse --short "$parent") predates the micro workload; recording only"
        exec "$BUILD/cortex-bench" gate "${args[@]}" --record-baseline ;;
    *)
        echo "gate: could not measure the parent commit (ci/baseline.sh exit $rc)" >&2
        exit 2 ;;
esac
