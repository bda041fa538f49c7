#!/usr/bin/env bash
# tests/cli/harness/fleet.sh - many machines, one history, end to end on a
# real PostgreSQL server ($CORTEX_TEST_PG; tests/run.sh and .ci/run start
# one): two ephemeral "runners" (this machine under two kernel tables,
# CORTEX_ISA, and two testbed names, labelled as such) benchmark into their
# own SQLite files and push to the server; pushing again copies nothing;
# the server answers list, show and compare as the files do; a baseline is
# found per testbed; pull brings a selection back; --db URL and CORTEX_DB
# reach every command; the hardware report sets both side by side; a bad
# URL is one line and exit 2.
set -u
. "$(dirname "$0")/../lib/common.sh"
if [ -z "${CORTEX_TEST_PG:-}" ]; then
    echo "SKIP: CORTEX_TEST_PG is not set (ci/pg_server.sh start DIR prints a URL for it)"
    finish fleet
    exit
fi
command -v psql >/dev/null || { echo "SKIP: psql is not installed (apt-get install postgresql)"; finish fleet; exit; }
db="cxfleet_$$"
psql "$CORTEX_TEST_PG" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null 2>"$tmp/psql.err"
check "a fresh database on the server" test $? -eq 0
case $CORTEX_TEST_PG in *\?*) URL="$CORTEX_TEST_PG&dbname=$db" ;; *) URL="$CORTEX_TEST_PG?dbname=$db" ;; esac
trap 'psql "$CORTEX_TEST_PG" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1; kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
pq() { psql "$URL" -Atc "$1"; }
"$CORTEX" synth --shape test-tiny --type q8_0 -o "$tmp/tiny.gguf" 2>/dev/null

# Two runners, each its own file: one thread count and two, two repetitions.
isa_b=avx2
grep -qw avx2 /proc/cpuinfo || isa_b=scalar
for r in a b; do
    isa=; [ $r = b ] && isa=$isa_b
    CORTEX_ISA=$isa "$BENCH" hw --size 32 --reps 1 -t 1 --db "$tmp/$r.db" >/dev/null 2>&1
    CORTEX_ISA=$isa "$BENCH" run --model "$tmp/tiny.gguf" --workload tg8 -t 1,2 --reps 2 --warmup 0 --testbed "vm-$r" \
        --db "$tmp/$r.db" --no-progress >"$tmp/run-$r.out" 2>&1
    check "runner $r: two runs stored" test "$(sql "$tmp/$r.db" "select count(*) from runs where status = 'complete'")" = 2
done
check "the run says what writing its results cost" grep -qE '^writing the results took [0-9.]+ ms, [0-9.]+% of the runs' "$tmp/run-a.out"
check "the testbed is stored" test "$(sql "$tmp/b.db" "select testbed from runs limit 1")" = vm-b

"$BENCH" push "$URL" --db "$tmp/a.db" >"$tmp/push1.out" 2>&1
check "push a: exit 0" test $? -eq 0
check "push a: 2 runs copied" grep -q ': 2 runs copied, 0 already there' "$tmp/push1.out"
check "push names the server without a password" grep -q "^push $tmp/a.db -> postgresql://" "$tmp/push1.out"
"$BENCH" push "$URL" --db "$tmp/b.db" >/dev/null 2>&1
"$BENCH" push "$URL" --db "$tmp/a.db" >"$tmp/push2.out" 2>&1
check "push a again: nothing copied (push twice = once)" grep -q ': 0 runs copied, 2 already there' "$tmp/push2.out"
check "the server holds 4 runs, each once" test "$(pq "select count(*) || ',' || count(distinct uuid) from runs")" = "4,4"
check "and every request row" test "$(pq "select count(*) from requests")" = \
    "$(( $(sql "$tmp/a.db" "select count(*) from requests") + $(sql "$tmp/b.db" "select count(*) from requests") ))"
check "the machines' hw rows came along" test "$(pq "select count(*) from hw")" = 2

# The server answers as the file does (runner a's runs are runs 1 and 2 on both).
"$BENCH" compare 1 2 --force --db "$tmp/a.db" >"$tmp/cmp-file.out" 2>&1
"$BENCH" compare 1 2 --force --db "$URL" >"$tmp/cmp-srv.out" 2>&1
check "compare: the same statistics from the file and the server" diff "$tmp/cmp-file.out" "$tmp/cmp-srv.out"
CORTEX_DB="$URL" "$BENCH" list >"$tmp/list.out" 2>&1
check "CORTEX_DB reaches list: 4 runs" test "$(grep -cE '^\| [0-9]+ \|' "$tmp/list.out")" = 4
"$BENCH" show 1 --db "$tmp/a.db" | grep -v '^stored' >"$tmp/show-file.out"
"$BENCH" show 1 --db "$URL" | grep -v '^stored' >"$tmp/show-srv.out"
check "show: the same run from the file and the server" diff "$tmp/show-file.out" "$tmp/show-srv.out"

# Baselines per testbed: both runners' 2-thread runs are tagged 'baseline'; each runner's next run finds its own.
for id in 2 4; do "$BENCH" tag $id baseline --db "$URL" >/dev/null; done
for r in a b; do
    isa=; [ $r = b ] && isa=$isa_b
    CORTEX_ISA=$isa "$BENCH" run --model "$tmp/tiny.gguf" --workload tg8 -t 2 --reps 2 --warmup 0 --testbed "vm-$r" \
        --db "$URL" --no-progress >/dev/null 2>&1
done
"$BENCH" compare baseline 6 --db "$URL" >"$tmp/cmp-b.out" 2>&1
check "runner b's candidate is held to runner b's baseline (run 4), not a's" grep -qE '(run 4|base.*4)' "$tmp/cmp-b.out"
"$BENCH" compare baseline 5 --db "$URL" >"$tmp/cmp-a.out" 2>&1
check "runner a's candidate to runner a's (run 2)" grep -qE '(run 2|base.*2)' "$tmp/cmp-a.out"

# Pull a selection back for offline work.
"$BENCH" pull "$URL" --testbed vm-b --db "$tmp/pulled.db" >"$tmp/pull.out" 2>&1
check "pull --testbed vm-b: its 3 runs" grep -q ': 3 runs copied' "$tmp/pull.out"
check "only vm-b's runs" test "$(sql "$tmp/pulled.db" "select group_concat(distinct testbed) from runs")" = vm-b

# The hardware report: the two configurations side by side.
"$BENCH" hwreport --db "$URL" -o "$tmp/hwr" --price vm-a=0.40,vm-b=0.40 >"$tmp/hwr.out" 2>&1
check "hwreport: exit 0" test $? -eq 0
md=$tmp/hwr/hwreport.md
check "two configurations, labelled by testbed and kernel table" \
    test "$(grep -cE "^\| [AB] \| vm-[ab] \|" "$md")" = 2
check "tokens/s of tg8 for both" grep -qE '^\| tg8 \| [0-9.]+ \([12] t, run [0-9]+\) \| [0-9.]+ \([12] t' "$md"
check "thread scaling with speedup and efficiency" grep -qE '^\| A \| 2 \| [0-9.]+ \| [0-9.]+x \([0-9.]+\) \|' "$md"
check "roof shares from the hw rows" grep -qE '^\| tg8 \| read [0-9]+%, compute [0-9.]+% \|' "$md"
check "energy: missing with the reason, never 0" grep -qE '^[AB]: energy missing: .+' "$md"
check "no energy figure of 0" bash -c "! grep -qE '^\| tg8 \| 0\.0000' '$md'"
check "cost per million tokens" grep -qE '^## Cost per million' "$md"
check "an HTML page of the same tables" grep -q '<table>' "$tmp/hwr/index.html"
"$BENCH" hwreport --db "$URL" -o "$tmp/hwr2" --price nosuch=1 >/dev/null 2>"$tmp/hwr2.err"
check "hwreport --price for an unknown testbed: exit 2, one line" test $? -eq 2 -a "$(wc -l <"$tmp/hwr2.err")" = 1

# A server that is not there: one line naming it (no password), exit 2.
"$BENCH" list --db "postgresql://u:secret@127.0.0.1:1/none?connect_timeout=2" >/dev/null 2>"$tmp/bad.err"
rc=$?
check "unreachable server: non-zero exit" test $rc -ne 0
check "one line naming it without the password" test "$(wc -l <"$tmp/bad.err")" = 1 -a -z "$(grep secret "$tmp/bad.err")"
finish fleet
