#!/usr/bin/env bash
# tests/run.sh - run every test: C unit tests (tests/unit/engine|harness/,
# built into build/tests/test_*), the CLI checks (tests/cli/engine|harness/*.sh) and the numpy
# reference checks (listed below; docs/testing.md says what each test covers) and the Python module's
# pytest files (tests/python/). Prints one line per
# suite and ends with "N passed, N failed" over the suites; with RESULT_FILE
# set, also writes "PASSED FAILED" there. Exits non-zero if any suite failed.
# Needs ../shared/models for the reference check; without it that suite
# skips with a message (CI sets CI=true, where a missing directory fails).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=${PY:-/usr/bin/python3}
export CORTEX_BIN=${CORTEX_BIN:-$PWD/$BUILD/cortex}
export DUMP_LOGITS=${DUMP_LOGITS:-$PWD/$BUILD/tests/dump_logits}
export CORTEX_MODELS=${CORTEX_MODELS:-$PWD/../shared/models}
export BUILD
unset GITHUB_STEP_SUMMARY # the suites' runs are no CI results: not in the job's step summary
pass=0 fail=0 failed=()
log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT
# The store's tests run on PostgreSQL too: the server in $CORTEX_TEST_PG (CI
# starts one), else a throwaway one of our own where the server is installed
# (ci/pg_server.sh), else those parts print SKIP with the reason.
if [ -z "${CORTEX_TEST_PG:-}" ] && pg_dir=$(mktemp -d /tmp/cortex-test-pg.XXXXXX) &&
    CORTEX_TEST_PG=$(ci/pg_server.sh start "$pg_dir" 2>"$log_dir/pg.log"); then
    export CORTEX_TEST_PG
    trap 'ci/pg_server.sh stop "$pg_dir"; rm -rf "$log_dir"' EXIT
else
    [ -n "${CORTEX_TEST_PG:-}" ] || { rm -rf "${pg_dir:-}"; echo "no PostgreSQL server: $(tail -1 "$log_dir/pg.log" 2>/dev/null)"; }
fi

run() { # name, command...
    local name=$1; shift
    local log="$log_dir/$(echo "$name" | tr '/ ' '__').log"
    local t0=$SECONDS
    if "$@" >"$log" 2>&1; then
        pass=$((pass + 1))
        printf 'ok   %-36s %4ss  %s\n' "$name" $((SECONDS - t0)) "$(grep -E 'passed|SKIP' "$log" | tail -1)"
    else
        fail=$((fail + 1)); failed+=("$name")
        printf 'FAIL %-36s %4ss\n' "$name" $((SECONDS - t0))
        sed 's/^/     | /' "$log" | grep -v '^     | ok ' | tail -40
    fi
}

# Unit tests: tests/unit/{engine,harness}/test_X.c, built as $BUILD/tests/test_X.
for src in tests/unit/*/test_*.c; do
    t="$BUILD/tests/$(basename "$src" .c)" part=$(basename "$(dirname "$src")")
    if [ -x "$t" ]; then run "unit/$part/$(basename "$t")" "$t"
    else run "unit/$part/$(basename "$t") (not built: make all)" false; fi
done
# CLI checks: tests/cli/{engine,harness}/*.sh (tests/cli/lib/ holds their shared preamble).
for t in tests/cli/*/*.sh; do
    part=$(basename "$(dirname "$t")")
    [ "$part" = lib ] && continue
    run "cli/$part/$(basename "$t" .sh)" bash "$t"
done
if [ -x "$PY" ] && "$PY" -c 'import numpy' 2>/dev/null; then
    run "reference/test_reference.py" "$PY" tests/test_reference.py
    run "reference/test_lora_reference.py" "$PY" tests/test_lora_reference.py
    run "reference/kquant_ref.py" "$PY" tests/reference/kquant_ref.py
    run "reference/mxfp4_ref.py" "$PY" tests/reference/mxfp4_ref.py
    run "reference/test_moe_reference.py" "$PY" tests/test_moe_reference.py
else
    echo "FAIL reference: $PY with numpy is missing (apt-get install python3-numpy)"
    fail=$((fail + 1))
fi
# The Python module (make python): each tests/python/test_*.py file one suite, under pytest
# (PYTHON_TESTS=0, the sanitizer build, leaves them out: see docs/testing.md).
if [ "${PYTHON_TESTS:-1}" = 1 ]; then
    if "$PY" -c 'import pytest, numpy' 2>/dev/null; then
        for t in tests/python/test_*.py; do
            run "python/$(basename "$t" .py)" env PY_LIB="${PY_LIB:-$PWD/build/python/lib}" \
                "$PY" -m pytest -q -p no:cacheprovider "$t"
        done
    else
        echo "FAIL python: $PY with pytest and numpy is missing (apt-get install python3-pytest python3-numpy)"
        fail=$((fail + 1))
    fi
fi
echo
[ ${#failed[@]} -gt 0 ] && echo "failed suites: ${failed[*]}"
echo "$pass passed, $fail failed"
# For .ci/run's totals: the counts as data, not as text to scrape.
[ -n "${RESULT_FILE:-}" ] && echo "$pass $fail" >"$RESULT_FILE"
[ "$fail" -eq 0 ]
