#!/usr/bin/env bash
# ci/baseline.sh - the deterministic-mode baseline of another revision, built
# on the spot, so CI never has to commit numbers (docs/gates.md).
#
#   ci/baseline.sh [REV] [--model FILE] [--mode callgrind|perf|auto] [--driver BIN] [--prompt N] [--gen G] [--keep DIR]
#
# REV defaults to the parent commit HEAD~1 (HEAD itself when there is none).
# Builds REV's cortex-bench and cortex in a temporary `git worktree` (removed
# afterwards, whatever happens), then runs REV's own micro measurement
# (`cortex-bench micro --measure MODE`) and prints one line on stdout:
#
#   rev=<sha> instructions=<count> mode=<callgrind|perf> micro_version=<v> prompt=<N> gen=<G>
#
# --model: the micro model; pass the same file the candidate is measured on
# (cortex synth --shape gate-micro --type q8_0 -o FILE), so only the code
# differs. Without it, REV's own cortex synthesizes one into the temporary
# directory. --mode: pass the mode the candidate used (default auto), since
# counts are comparable only within one mode and one micro_version.
# --driver: a cortex-bench (e.g. the candidate's build/cortex-bench) whose
# det_measure runs REV's binary, so both sides are measured by the same
# procedure (valgrind options, environment); by default REV's own does.
# --keep DIR: also build REV's tests/kernel_bench and keep REV's cortex,
# cortex-bench and tests/kernel_bench in DIR (DIR/cortex-bench, ...) for the
# A/B gate of the default kernels (ci/gate_ab.sh); the worktree still goes.
#
# Exit codes: 0 measured; 1 failure (bad revision, build, measurement);
# 2 bad usage; 3 REV predates the micro subcommand: no baseline, record only;
# 4 neither callgrind nor perf is available on this machine.
# BASELINE_JOBS (default 2) sets make's -j.
set -uo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }

rev="" model="" mode="auto" prompt="" gen="" driver="" keep=""
while [ $# -gt 0 ]; do
    case "$1" in
        --model) [ $# -ge 2 ] || usage; model=$2; shift 2 ;;
        --mode) [ $# -ge 2 ] || usage; mode=$2; shift 2 ;;
        --prompt) [ $# -ge 2 ] || usage; prompt=$2; shift 2 ;;
        --gen) [ $# -ge 2 ] || usage; gen=$2; shift 2 ;;
        --driver) [ $# -ge 2 ] || usage; driver=$2; shift 2 ;;
        --keep) [ $# -ge 2 ] || usage; keep=$2; shift 2 ;;
        -h|--help) usage ;;
        -*) echo "baseline.sh: unknown option '$1'" >&2; usage ;;
        *) [ -z "$rev" ] || usage; rev=$1; shift ;;
    esac
done
case "$mode" in callgrind|perf|auto) ;; *) echo "baseline.sh: --mode must be callgrind, perf or auto" >&2; exit 2 ;; esac

top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null) || { echo "baseline.sh: not inside a git checkout" >&2; exit 1; }
cd "$top" || exit 1
if [ -z "$rev" ]; then
    if git rev-parse -q --verify 'HEAD~1^{commit}' >/dev/null; then rev=HEAD~1; else rev=HEAD; fi
fi
sha=$(git rev-parse -q --verify "$rev^{commit}") || { echo "baseline.sh: '$rev' is not a commit" >&2; exit 1; }
if [ -n "$model" ]; then
    [ -f "$model" ] || { echo "baseline.sh: --model $model: no such file" >&2; exit 2; }
    model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")
fi
if [ -n "$driver" ]; then
    [ -x "$driver" ] || { echo "baseline.sh: --driver $driver: not an executable" >&2; exit 2; }
    driver=$(cd "$(dirname "$driver")" && pwd)/$(basename "$driver")
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cortex-baseline.XXXXXX") || exit 1
wt="$tmp/wt"
cleanup() {
    if [ -d "$wt" ]; then git worktree remove --force "$wt" >/dev/null 2>&1; fi
    rm -rf "$tmp"
    git worktree prune >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

echo "baseline.sh: building ${sha:0:12} ($rev) in a temporary worktree" >&2
git worktree add --detach "$wt" "$sha" >"$tmp/worktree.log" 2>&1 || {
    cat "$tmp/worktree.log" >&2; echo "baseline.sh: git worktree add failed" >&2; exit 1; }
targets=(build/cortex-bench build/cortex)
[ -n "$keep" ] && targets+=(build/tests/kernel_bench)
if ! (cd "$wt" && make -j"${BASELINE_JOBS:-2}" "${targets[@]}") >"$tmp/build.log" 2>&1; then
    tail -30 "$tmp/build.log" >&2
    echo "baseline.sh: ${sha:0:12} does not build" >&2
    exit 1
fi
bench="$wt/build/cortex-bench"
if [ -n "$keep" ]; then
    mkdir -p "$keep/tests" && cp "$wt/build/cortex" "$wt/build/cortex-bench" "$keep/" &&
        cp "$wt/build/tests/kernel_bench" "$keep/tests/" || { echo "baseline.sh: cannot keep the binaries in $keep" >&2; exit 1; }
fi

# A revision older than the micro subcommand answers "unknown command 'micro'".
probe=$("$bench" micro 2>&1)
if printf '%s\n' "$probe" | grep -q "unknown command"; then
    echo "baseline.sh: ${sha:0:12} ($rev) predates the deterministic micro workload (no 'cortex-bench micro'): no baseline, record only" >&2
    exit 3
fi

if [ -z "$model" ]; then
    model="$tmp/gate-micro-q8_0.gguf"
    "$wt/build/cortex" synth --shape gate-micro --type q8_0 -o "$model" >"$tmp/synth.log" 2>&1 || {
        cat "$tmp/synth.log" >&2; echo "baseline.sh: ${sha:0:12}'s cortex cannot synthesize the gate-micro model" >&2; exit 1; }
fi

args=(micro --measure "$mode" --model "$model")
[ -n "$prompt" ] && args+=(--prompt "$prompt")
[ -n "$gen" ] && args+=(--gen "$gen")
if [ -n "$driver" ]; then
    out=$("$driver" "${args[@]}" --bench-bin "$bench")
else
    out=$("$bench" "${args[@]}")
fi
rc=$?
if [ $rc -ne 0 ]; then
    echo "baseline.sh: measurement of ${sha:0:12} failed (exit $rc)" >&2
    case $rc in 3|4) exit $rc ;; 2) exit 2 ;; *) exit 1 ;; esac
fi
echo "rev=$sha $out"
