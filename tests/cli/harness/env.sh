#!/usr/bin/env bash
# tests/cli/harness/env.sh - what a run records about its machine (docs/harness.md,
# "The machine a run records"): the CPU's identity on its environments row; the
# CPUs it may use, the cgroup quota, THP and the load before and after on its
# runs row; -t defaults to the CPUs it may use (taskset -c 0: one thread, for
# run and hw); --pin POLICY and --numa are recorded, each a configuration of its own,
# the affinity unchanged; a pinned and an unpinned run have different compare keys, compare
# refuses them naming each differing field with both values, and the gate,
# finding only the pinned run tagged, says which run is the closest and why it is
# no baseline. Functional only: nothing here is timed.
set -u
. "$(dirname "$0")/../lib/common.sh"
db=$tmp/e.db
"$CORTEX" synth --shape test-tiny --type q8_0 -o "$tmp/tiny.gguf" 2>/dev/null
r() { "$BENCH" run --model "$tmp/tiny.gguf" --workload tg8 --reps 1 --warmup 0 --db "$db" --no-progress "$@" \
    >"$tmp/r.out" 2>"$tmp/r.err"; }

# Any run: the machine's identity and its state.
r
check "an unpinned run without -t exits 0" test $? -eq 0
free=$(sql "$db" "select max(id) from runs")
case $(uname -m) in
x86_64 | i?86)
    check "environments row: vendor, family, model number, stepping" test "$(sql "$db" "select count(*) from environments
        where cpu_vendor in ('GenuineIntel', 'AuthenticAMD') and cpu_family > 0 and cpu_model_id >= 0 and cpu_stepping >= 0")" = 1
    check "... the ones /proc/cpuinfo shows" test "$(sql "$db" "select cpu_family || '/' || cpu_model_id || '/' || cpu_stepping
        from environments")" = "$(awk -F': ' '/^cpu family/ {f=$2} /^model\t/ {m=$2} /^stepping/ {s=$2; print f "/" m "/" s; exit}' /proc/cpuinfo)" ;;
*) echo "SKIP: not x86: the CPU's identity is not read from CPUID here" ;;
esac
check "microcode: /proc/cpuinfo's, or NULL where it has none" test "$(sql "$db" "select coalesce(microcode, 'unknown') from environments")" = \
    "$(awk -F': ' '/^microcode/ {print $2; exit}' /proc/cpuinfo | grep . || echo unknown)"
check "affinity and CPUs allowed: the shell's (nproc)" \
    test "$(sql "$db" "select cpus_allowed from runs where id = $free")" = "$(nproc)" -a -n "$(sql "$db" "select affinity from runs where id = $free")"
check "threads default to the CPUs allowed, capped by the cgroup quota rounded up" "$PY" -c '
import math, sqlite3, sys
t, n, q = sqlite3.connect(sys.argv[1]).execute("select threads, cpus_allowed, cgroup_cpus from runs where id = ?", (sys.argv[2],)).fetchone()
assert t == (min(n, math.ceil(q)) if q else n), (t, n, q)' "$db" "$free"
check "THP mode stored" test "$(sql "$db" "select thp in ('always', 'madvise', 'never', 'unknown') from runs where id = $free")" = 1
check "load before and after stored (three averages each)" \
    test "$(sql "$db" "select (load_before glob '[0-9]*.[0-9][0-9] [0-9]*.[0-9][0-9] [0-9]*.[0-9][0-9]')
        + (load_after glob '[0-9]*.[0-9][0-9] [0-9]*.[0-9][0-9] [0-9]*.[0-9][0-9]') from runs where id = $free")" = 2
"$BENCH" show "$free" --db "$db" >"$tmp/show.out"
check "show prints the machine's state during the run" \
    grep -qE "^- during the run: CPUs [0-9,-]+ \([0-9]+ allowed\), cgroup CPU quota .*, transparent huge pages [a-z]+, load .* before, .* after$" "$tmp/show.out"
check "show prints the CPU's identity on the environment line" grep -qE "^- environment .*; [A-Za-z]+ family [0-9a-z]+ model" "$tmp/show.out"
"$BENCH" run --help >"$tmp/help.out"
check "run --help states the -t default" grep -q "default the CPUs this process may use" "$tmp/help.out"

# --pin POLICY pins the engine's threads and leaves the process every CPU: recorded as the policy, with the
# affinity unchanged, and a configuration of its own (compare key); --pin none is no pinning. --numa likewise.
aff=$(sql "$db" "select affinity from runs where id = $free")
t=$(sql "$db" "select threads from runs where id = $free")
r --pin compact -t "$t"
check "--pin compact run exits 0" test $? -eq 0
pol=$(sql "$db" "select max(id) from runs")
check "--pin compact: pinned 'compact', the process's affinity unchanged" \
    test "$(sql "$db" "select pinned || ' ' || affinity from runs where id = $pol")" = "compact $aff"
check "... a compare key of its own" test "$(sql "$db" "select count(distinct compare_key) from runs where id in ($free, $pol)")" = 2
r --pin Spread -t "$t"
check "--pin Spread: recorded as spread, another key again" test "$(sql "$db" "select pinned from runs where id = (select max(id)
    from runs)")/$(sql "$db" "select count(distinct compare_key) from runs where id in ($free, $pol, (select max(id) from runs))")" = spread/3
r --pin none -t "$t"
check "--pin none: recorded as no pinning, the unpinned run's key" test "$(sql "$db" "select coalesce(pinned, '') from runs where id =
    (select max(id) from runs)")/$(sql "$db" "select count(distinct compare_key) from runs where id in ($free, (select max(id) from runs))")" = /1
r --numa interleave -t "$t"
check "--numa interleave run exits 0 (with one node: no effect, and not an error)" test $? -eq 0
check "... a compare key of its own" \
    test "$(sql "$db" "select count(distinct compare_key) from runs where id in ($free, (select max(id) from runs))")" = 2
r --pin 0-x
check "--pin 0-x: exit 2, neither a policy nor a CPU list" test $? -eq 2 -a -n "$(grep -F "'0-x' is not a CPU list" "$tmp/r.err")"
"$BENCH" run --endpoint http://127.0.0.1:9/v1 --model m --numa local --db "$db" >/dev/null 2>"$tmp/ep.err"
check "--numa with --endpoint: exit 2, the server decides it" test $? -eq 2 -a -n "$(grep -F -- "--numa applies to in-process" "$tmp/ep.err")"

if [ "$(nproc)" -lt 2 ]; then
    echo "SKIP: one CPU: the pinned-versus-unpinned checks need two"
    finish env
    exit
fi
# taskset -c 0, no -t: one thread on CPU 0, and not the unpinned run's configuration.
taskset -c 0 "$BENCH" run --model "$tmp/tiny.gguf" --workload tg8 --reps 1 --warmup 0 --db "$db" --no-progress >/dev/null 2>&1
check "taskset -c 0 run exits 0" test $? -eq 0
pin=$(sql "$db" "select max(id) from runs")
check "taskset -c 0: threads 1, affinity 0, 1 CPU allowed" \
    test "$(sql "$db" "select threads || ' ' || affinity || ' ' || cpus_allowed from runs where id = $pin")" = "1 0 1"
check "... a compare key of its own" \
    test "$(sql "$db" "select count(distinct compare_key) from runs where id in ($free, $pin)")" = 2
check "... on the same environments row (the machine did not change)" \
    test "$(sql "$db" "select count(distinct env_id) from runs where id in ($free, $pin)")" = 1
n=$(sql "$db" "select cpus_allowed from runs where id = $free")
"$BENCH" compare "$pin" "$free" --db "$db" >/dev/null 2>"$tmp/cmp.err"
check "compare of the pinned and the unpinned run is refused (exit 2)" test $? -eq 2
check "... naming the CPUs allowed with both values" grep -qF "CPUs allowed: 0 vs $aff" "$tmp/cmp.err"
check "... and how many, with both values" grep -qF "number of CPUs allowed: 1 vs $n" "$tmp/cmp.err"
check "... in one line" test "$(wc -l <"$tmp/cmp.err")" -eq 1
# --pin 0 is the same state as taskset -c 0: comparable.
r --pin 0
check "--pin 0 run exits 0" test $? -eq 0
check "--pin 0 and taskset -c 0: the same compare key" \
    test "$(sql "$db" "select count(distinct compare_key) from runs where id in ($pin, $(sql "$db" "select max(id) from runs"))")" = 1
# The gate finds only the pinned run tagged: it names it and the differences.
"$BENCH" tag "$pin" baseline --db "$db" >/dev/null
printf 'version 1\nreps 4\nworkload tg8\nmetric tps higher 0.07\n' >"$tmp/g.conf"
"$BENCH" gate --model "$tmp/tiny.gguf" --gate-file "$tmp/g.conf" --db "$db" >"$tmp/g.out" 2>"$tmp/g.err"
check "gate without a comparable baseline: exit 2" test $? -eq 2
check "... naming the closest run and its differences, both values" \
    grep -qF "the closest is run $pin ('baseline'), which differs (baseline vs candidate) in " "$tmp/g.err"
check "... CPUs allowed among them" grep -qF "CPUs allowed: 0 vs $aff" "$tmp/g.err"
# hw's -t default: the CPUs it may use.
taskset -c 0 "$BENCH" hw --size 8 --reps 1 --db "$db" >/dev/null 2>&1
check "taskset -c 0 hw measures with 1 thread" test "$(sql "$db" "select threads || ' ' || cpus from hw")" = "1 0"
finish env
