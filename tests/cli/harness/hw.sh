#!/usr/bin/env bash
# tests/cli/harness/hw.sh - `cortex-bench hw` end to end: a short measurement (64 MiB,
# 2 passes) lands in one hw row with positive bandwidth; bad flags and an
# unwritable database fail with one line and a non-zero exit; a tiny run then
# reports its decode speed as a fraction of the bandwidth roofline, a run on a
# machine without a hw row says how to get one (once), and runs with different
# kernel instruction sets (CORTEX_ISA) are never compared silently.
set -u
. "$(dirname "$0")/../lib/common.sh"
lines() { wc -l <"$1" | tr -d ' '; }
db=$tmp/hw.db
"$CORTEX" synth --shape test-tiny --type q8_0 -o "$tmp/tiny.gguf" 2>/dev/null

# The measurement.
"$BENCH" hw --size 64 --reps 2 --db "$db" >"$tmp/hw.out" 2>"$tmp/hw.err"
check "hw exits 0" test $? -eq 0
check "table has read, copy, triad, fp32 and int8 rows" \
    test "$(grep -cE '^\| (read \(sum\)|copy|triad|fp32 scalar|fp32 AVX2|int8 AVX2)' "$tmp/hw.out")" -eq 6
check "read bandwidth printed as a number" grep -qE '^\| read \(sum\) \| [0-9]+\.[0-9]+ \([0-9.]+\) \| [0-9]+\.[0-9]+' "$tmp/hw.out"
check "AVX-512 availability stated, or its peak measured" grep -qE '^- AVX-512: (not available on this CPU|measured: FMA [0-9.]+ GFLOP/s)' "$tmp/hw.out"
if grep -qw avx512f /proc/cpuinfo; then
    check "AVX-512 FMA row on an AVX-512 CPU" grep -qE '^\| fp32 AVX-512 FMA \| [0-9]+\.[0-9]+' "$tmp/hw.out"
fi
if grep -qw avx512_vnni /proc/cpuinfo; then
    check "VNNI row on an AVX-512 VNNI CPU" grep -qE '^\| int8 AVX-512 VNNI dot \(vpdpbusd\) \| [0-9]+\.[0-9]+' "$tmp/hw.out"
    check "VNNI peak stored" test "$(sql "$db" "select vnni like 'measured: AVX-512 VNNI %' from hw")" = 1
fi
check "one hw row" test "$(sql "$db" "select count(*) from hw")" = 1
check "positive read bandwidth, 1 and N threads" test "$(sql "$db" "select read_gbs > 0 and read_gbs_1t > 0 and read_gbs_median > 0 from hw")" = 1
check "buffer size and passes recorded" test "$(sql "$db" "select buffer_bytes || ',' || reps from hw")" = "67108864,2"
check "copy and triad recorded" test "$(sql "$db" "select copy_gbs > 0 and triad_gbs > 0 from hw")" = 1
check "hw row tied to an environment" test "$(sql "$db" "select count(*) from hw h join environments e on e.id = h.env_id")" = 1
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    # measured, not compared: a timing comparison would make this test flaky on a busy machine
    check "AVX2 peaks measured on an AVX2 CPU" test "$(sql "$db" "select fp32_gflops_avx2 > 0 and fp32_gflops_scalar > 0 and int8_gops_avx2 > 0 from hw")" = 1
fi

# Bad input: one line on stderr, non-zero exit, nothing created.
"$BENCH" hw --bogus 1 --db "$tmp/bad.db" >/dev/null 2>"$tmp/bad.err"
rc=$?
check "unknown flag exits 2" test $rc -eq 2
check "unknown flag: one error line" test "$(lines "$tmp/bad.err")" = 1
check "unknown flag: no database created" test ! -e "$tmp/bad.db"
"$BENCH" hw --size 0 --db "$tmp/bad.db" >/dev/null 2>"$tmp/size.err"
check "--size 0 exits 2 with one line" test $? -eq 2 -a "$(lines "$tmp/size.err")" = 1
"$BENCH" hw --size 64 --db /nonexistent-dir/x.db >/dev/null 2>"$tmp/db.err"
rc=$?
check "unwritable database exits non-zero" test $rc -ne 0
check "unwritable database: one error line naming it" test "$(lines "$tmp/db.err")" = 1 -a -n "$(grep /nonexistent-dir/x.db "$tmp/db.err")"

# A run on the measured machine reports decode against the roofline.
"$BENCH" run --model "$tmp/tiny.gguf" --workload tg16 -t 1 --reps 2 --warmup 0 --db "$db" --no-progress >"$tmp/run.out" 2>"$tmp/run.err"
check "run exits 0" test $? -eq 0
check "run prints decode as a fraction of the roofline" \
    grep -qE '^roofline: decode [0-9.]+ tok/s = [0-9]+% of roofline [0-9.]+ tok/s \([0-9.]+ MB read per token at [0-9.]+ GB/s, hw row 1\)$' "$tmp/run.out"
id=$(sql "$db" "select max(id) from runs")
check "run points at its hw row" test "$(sql "$db" "select hw_id from runs where id = $id")" = 1
check "roofline fraction and bytes per token stored per repetition" \
    test "$(sql "$db" "select count(*) from rep_metrics where run_id = $id and name in ('roofline_frac', 'bytes_per_token', 'roofline_tps')")" = 6
check "roofline fraction summarized like other metrics" test "$(sql "$db" "select n from summary where run_id = $id and name = 'roofline_frac'")" = 2
check "run records its kernel ISA" test -n "$(sql "$db" "select isa from runs where id = $id")"
"$BENCH" show "$id" --db "$db" >"$tmp/show.out"
check "show prints the roofline sentence" grep -qE '^roofline: decode .* of roofline' "$tmp/show.out"
check "show names the kernels" grep -qE '^- build .* kernels [a-z0-9]+, counters' "$tmp/show.out"

# No hw row for this machine: the hint, once, and no number.
"$BENCH" run --model "$tmp/tiny.gguf" --workload tg8 -t 1,2 --reps 1 --warmup 0 --db "$tmp/nohw.db" --no-progress >"$tmp/nohw.out" 2>&1
check "without hw: the hint exactly once" test "$(grep -c '^roofline: run `cortex-bench hw` first$' "$tmp/nohw.out")" = 1
check "without hw: no fraction printed" test "$(grep -c 'of roofline' "$tmp/nohw.out")" = 0
check "without hw: no roofline stored" test "$(sql "$tmp/nohw.db" "select count(*) from rep_metrics where name like 'roofline%'")" = 0

# Kernel instruction sets: a bad CORTEX_ISA is refused before the database;
# runs with different ones are not comparable.
CORTEX_ISA=bogus "$BENCH" run --model "$tmp/tiny.gguf" --workload tg8 -t 1 --db "$tmp/isa-bad.db" >/dev/null 2>"$tmp/isa.err"
check "unknown CORTEX_ISA exits 2 with one line" test $? -eq 2 -a "$(lines "$tmp/isa.err")" = 1
check "unknown CORTEX_ISA: no database created" test ! -e "$tmp/isa-bad.db"
CORTEX_ISA=scalar "$BENCH" run --model "$tmp/tiny.gguf" --workload tg16 -t 1 --reps 2 --warmup 0 --db "$db" --no-progress >/dev/null 2>&1
sid=$(sql "$db" "select max(id) from runs")
check "CORTEX_ISA=scalar recorded" test "$(sql "$db" "select isa from runs where id = $sid")" = scalar
if [ "$(sql "$db" "select isa from runs where id = $id")" != scalar ]; then
    "$BENCH" compare "$id" "$sid" --db "$db" >/dev/null 2>"$tmp/cmp.err"
    check "runs of different kernel ISAs refused by compare" test $? -eq 2
    check "refusal names the instruction set" grep -q "kernel instruction set" "$tmp/cmp.err"
fi

finish hw
