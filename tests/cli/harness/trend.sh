#!/usr/bin/env bash
# tests/cli/harness/trend.sh - `cortex-bench trend METRIC` on synthetic
# histories: one real run of a tiny synthetic model gives a schema-current
# database, then copies of its row (sqlite3 inserts) with chosen medians make
# the series. Checked: a step inside the history is named; a drop on the
# newest run alone is no confirmed step but a warning naming the run, the
# percentage and the level (3 sigma and, from a gate file, the metric's
# threshold); a steady series or a drop within the threshold is not warned
# about; INVALID runs stay out of the series; a metric or workload no stored
# run has is one line, exit 2. Run from the repository root (tests/run.sh).
set -u
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
. tests/cli/lib/common.sh
fails_with() { # rc want file pattern: exit status `want`, one stderr line matching
    [ "$1" -eq "$2" ] && [ "$(wc -l <"$3")" -eq 1 ] && grep -q -- "$4" "$3"
}

"$CORTEX" synth --shape test-tiny --type q8_0 -c 256 -o "$tmp/tiny.gguf" 2>/dev/null
db=$tmp/t.db
"$BENCH" run --model "$tmp/tiny.gguf" --workload pp8 -t 1 --reps 1 --warmup 0 --no-progress --db "$db" >/dev/null 2>&1
check "a seed run" test "$(sql "$db" "select count(*) from runs where validity = 'valid'")" = 1

# history DB NAME V1 V2 ...: copies of run 1 (the same configuration) under workload NAME, one per
# value, each with a summary row of `tps` = the value (medians in run order).
history() {
    "$PY" - "$@" <<'EOF'
import sqlite3, sys, uuid
c = sqlite3.connect(sys.argv[1])
name, values = sys.argv[2], [float(v) for v in sys.argv[3:]]
cols = [r[1] for r in c.execute("pragma table_info(runs)") if r[1] not in ("id", "uuid")]
for v in values:
    cur = c.execute("insert into runs (%s) select %s from runs where id = 1" % (",".join(cols), ",".join(cols)))
    rid = cur.lastrowid
    c.execute("update runs set workload = ?, git_commit = ?, git_dirty = 0, uuid = ? where id = ?",
              (name, "c0ffee%034x" % rid, str(uuid.uuid4()), rid))
    c.execute("insert into summary (run_id, name, n, median, min, max, mean, stddev) values (?, 'tps', 1, ?, ?, ?, ?, 0)",
              (rid, v, v, v, v))
c.commit()
EOF
}
noise="100.4 99.2 100.9 99.6 100.1 98.9 100.7 99.8 100.3 99.5 100.6"

# A step in the middle: named, with its run.
history "$db" step $noise 90.2 89.6 90.5 89.9 90.3 89.4 90.8 90.1 89.7 90.4
first90=$(sql "$db" "select min(id) from runs r join summary m on m.run_id = r.id where r.workload = 'step' and m.median < 95")
"$BENCH" trend tps --workload step --db "$db" >"$tmp/step.out" 2>&1
check "trend with a step exits 0" test $? -eq 0
check "the step is named at its first run" grep -q "step at run $first90, commit" "$tmp/step.out"
check "a confirmed step needs no newest-run warning" sh -c "! grep -q 'possible step' '$tmp/step.out'"

# A drop on the newest run alone: no step can be fitted (segments need 2 runs), so a warning.
history "$db" lastnight $noise 80.0
last=$(sql "$db" "select max(id) from runs where workload = 'lastnight'")
commit=$(sql "$db" "select substr(git_commit, 1, 10) from runs where id = $last")
"$BENCH" trend tps --workload lastnight --gate-file ci/gates.conf --db "$db" >"$tmp/last.out" 2>&1
check "trend with a newest-run drop exits 0 (a warning, not a verdict)" test $? -eq 0
check "no confirmed step" grep -q "no confirmed step" "$tmp/last.out"
check "the warning names the run, commit, percentage, level and that it is unconfirmed" \
    grep -qE "latest run $last \\($commit\\) is 20\\.[0-9]% below the level of the last 11 runs \\(80 against 100\\.[0-9]*, [0-9.]+ sigma; threshold 7\\.0% in ci/gates.conf\\): a possible step, not confirmed until another run agrees" "$tmp/last.out"

# Steady: no warning. A drop past 3 sigma but within the gate file's threshold (7 % for tps): no warning.
history "$db" steady $noise 100.2
"$BENCH" trend tps --workload steady --db "$db" >"$tmp/steady.out" 2>&1
check "steady series: no step, no warning" sh -c "grep -q ': no step$' '$tmp/steady.out' && ! grep -q 'possible step' '$tmp/steady.out'"
history "$db" small $noise 95.5
"$BENCH" trend tps --workload small --db "$db" >"$tmp/small.out" 2>&1
check "a 4.5% drop under the 7% threshold: no warning" sh -c "! grep -q 'possible step' '$tmp/small.out'"
printf 'version 1\nmetric tps higher 0.02\n' >"$tmp/tight.conf"
"$BENCH" trend tps --workload small --gate-file "$tmp/tight.conf" --db "$db" >"$tmp/small2.out" 2>&1
check "the same drop past a 2% threshold: warned" grep -q "latest run .* is 4\\.[0-9]% below .*threshold 2\\.0%" "$tmp/small2.out"

# INVALID runs are no measurement: left out of the series (an INVALID newest run warns of nothing).
history "$db" invalid $noise 50
sql "$db" "update runs set validity = 'invalid', validity_reasons = '3 of 3 requests failed' where id = (select max(id) from runs where workload = 'invalid')" >/dev/null
"$BENCH" trend tps --workload invalid --db "$db" >"$tmp/inv.out" 2>&1
check "an INVALID newest run is not in the series" sh -c "grep -q ', 11 runs,' '$tmp/inv.out' && ! grep -q 'possible step' '$tmp/inv.out'"
history "$db" allbad 100
sql "$db" "update runs set validity = 'invalid' where workload = 'allbad'" >/dev/null
"$BENCH" trend tps --workload allbad --db "$db" >"$tmp/allbad.out" 2>&1
rc=$?
check "only INVALID runs have it: says so, exit 0" sh -c "[ $rc -eq 0 ] && grep -q 'no measurement of tps on allbad' '$tmp/allbad.out'"

# Bad input: one line, exit 2.
"$BENCH" trend nosuchmetric --db "$db" >"$tmp/e1.out" 2>"$tmp/e1"
check "a metric no run has: exit 2, one line naming it" fails_with $? 2 "$tmp/e1" "no stored run has metric 'nosuchmetric'"
check "... and nothing on stdout" test ! -s "$tmp/e1.out"
"$BENCH" trend tps --workload nosuchworkload --db "$db" >/dev/null 2>"$tmp/e2"
check "a workload no run has: exit 2, one line naming it" fails_with $? 2 "$tmp/e2" "no stored run of workload 'nosuchworkload'"
printf 'version 1\nmetric tps sideways 0.1\n' >"$tmp/bad.conf"
"$BENCH" trend tps --gate-file "$tmp/bad.conf" --db "$db" >/dev/null 2>"$tmp/e3"
check "a bad gate file: exit 2, one line naming file:line" fails_with $? 2 "$tmp/e3" "bad.conf:2:"

finish trend
