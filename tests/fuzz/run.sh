#!/usr/bin/env bash
# tests/fuzz/run.sh - run libFuzzer targets one after another.
#
#   tests/fuzz/run.sh build-fuzz/fuzz_gguf build-fuzz/fuzz_tokenizer
#
# Each target runs for $FUZZ_SECONDS (default 60) as one process, one job,
# with -rss_limit_mb=2048 and -timeout=10, on a scratch copy of its seed
# corpus tests/fuzz/corpus/<name without fuzz_>/ (if present), so the
# repository is never written to. Crash artifacts go to build-fuzz/artifacts/.
# Prints per target the executions and "ok" or "CRASH"; exits non-zero if any
# target failed (with RESULT_FILE set, "PASSED FAILED" targets are written
# there too). Run from anywhere: paths are taken relative to the repo root.
set -u
cd "$(dirname "$0")/../.."
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
ART=build-fuzz/artifacts
mkdir -p "$ART"
[ $# -gt 0 ] || { echo "usage: $0 build-fuzz/fuzz_<name>..." >&2; exit 2; }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=0
for bin in "$@"; do
    name=$(basename "$bin")
    if [ ! -x "$bin" ]; then
        printf '%-16s CRASH (binary %s missing)\n' "$name" "$bin"
        failed=$((failed + 1))
        continue
    fi
    corpus="$scratch/$name"
    mkdir -p "$corpus"
    seeds="tests/fuzz/corpus/${name#fuzz_}"
    [ -d "$seeds" ] && cp -R "$seeds/." "$corpus/"
    n_seeds=$(ls "$corpus" | wc -l)
    log="$ART/$name.log"
    "$bin" -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$ART/$name-" "$corpus" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    [ -n "$execs" ] || execs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -1)
    if [ "$rc" -eq 0 ]; then
        printf '%-16s ok     %s executions in %ss (corpus %s -> %s inputs)\n' "$name" "${execs:-?}" \
            "$FUZZ_SECONDS" "$n_seeds" "$(ls "$corpus" | wc -l)"
    else
        failed=$((failed + 1))
        printf '%-16s CRASH  exit %d after %s executions; log %s\n' "$name" "$rc" "${execs:-?}" "$log"
        grep -E 'ERROR|SUMMARY|runtime error|Test unit written|^ *#[0-9]+ .*(engine/|tests/)' "$log" | head -20 |
            sed 's/^/    /'
    fi
done
[ -n "${RESULT_FILE:-}" ] && echo "$(($# - failed)) $failed" >"$RESULT_FILE"
exit $((failed > 0))
