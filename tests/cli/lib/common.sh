# tests/cli/lib/common.sh - what every CLI check script starts with; sourced
# right after `set -u`. It sets the programs under test (overridable from
# the environment, as tests/run.sh does: BUILD, CORTEX_BIN, CORTEX_BENCH, PY,
# CORTEX_MODELS), makes a scratch directory $tmp removed on exit (background
# jobs killed first), and defines
#   check DESCRIPTION COMMAND...   run COMMAND; count and print "ok -"/"FAIL -"
#   sql DB QUERY                   the first column of the first row ("" if none)
#   finish [NAME]                  print "[NAME: ]N passed, N failed"; status 0 if none failed
# (In tests/cli/lib/, beside engine/ and harness/, so tests/run.sh does not run it as a suite.)
BUILD=${BUILD:-build}
CORTEX=${CORTEX_BIN:-$BUILD/cortex}
BENCH=${CORTEX_BENCH:-$BUILD/cortex-bench}
PY=${PY:-/usr/bin/python3}
MODELS=${CORTEX_MODELS:-../shared/models}
# Test runs are no CI results: never appended to the job's step summary (summary.h).
unset GITHUB_STEP_SUMMARY
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0 fail=0

check() { # description, command...
    local what=$1; shift
    if "$@"; then pass=$((pass + 1)); echo "ok - $what"; else fail=$((fail + 1)); echo "FAIL - $what"; fi
}

sql() { # database, query
    "$PY" -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); r = c.execute(sys.argv[2]).fetchone(); c.commit(); print("" if r is None else r[0])' "$@"
}

finish() { # [name]
    echo "${1:+$1: }$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
