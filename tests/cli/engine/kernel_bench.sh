#!/usr/bin/env bash
# tests/cli/engine/kernel_bench.sh - the kernel benchmark's options (a
# benchmark: nothing is timed against a threshold here): --types keeps only
# the named weight types, each gemm row names the weights' layout per table
# (a SIMD table's repacked layout by default, row-major under --rows), and a
# bad argument is one line and exit 2.
set -u
. "$(dirname "$0")/../lib/common.sh"
KB=$BUILD/tests/kernel_bench

"$KB" --quick --types mxfp4 --base scalar --isa scalar >"$tmp/out" 2>&1
check "scalar against scalar runs" test $? -eq 0
check "--types mxfp4: only mxfp4 kernels" sh -c "grep -q '^| mxfp4 gemm' '$tmp/out' && ! grep -q 'q4_0\|rmsnorm' '$tmp/out'"
check "scalar weights stay row-major" grep -q '32 tokens (rows / rows)' "$tmp/out"
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && grep -qw f16c /proc/cpuinfo; then
    "$KB" --quick --types mxfp4 --base scalar --isa avx2 >"$tmp/out" 2>&1
    check "AVX2: mxfp4 weights repacked to x8 ($(grep -o '32 tokens ([^)]*)' "$tmp/out"))" \
        grep -q '32 tokens (rows / x8)' "$tmp/out"
    "$KB" --quick --rows --types mxfp4 --base scalar --isa avx2 >"$tmp/out" 2>&1
    check "--rows: AVX2 runs its row-major kernels" grep -q '32 tokens (rows / rows)' "$tmp/out"
else
    echo "SKIP AVX2 layouts: this CPU lacks AVX2/FMA/F16C"
fi
"$KB" --bogus >"$tmp/out" 2>"$tmp/err"
check "bad argument: exit 2" test $? -eq 2
check "bad argument: one line naming it" sh -c "test \$(wc -l <'$tmp/err') -eq 1 && grep -q \"'--bogus'\" '$tmp/err'"
finish kernel_bench
