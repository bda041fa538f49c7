#!/usr/bin/env bash
# tests/cli/engine/kv.sh - the KV cache options of cortex generate: tiering with a
# lossless cold tier changes no greedy token, --kv-stats reports the tiers,
# q8 hot blocks and int8 warm pages still generate, bad values are refused.
set -u
. "$(dirname "$0")/../lib/common.sh"

"$CORTEX" synth --shape test-tiny --type f32 --seed 9 -o "$tmp/tiny.gguf" 2>/dev/null
gen() { "$CORTEX" generate -m "$tmp/tiny.gguf" -p "kv cache check" -n 100 --temp 0 --no-echo "$@" 2>"$tmp/err"; }
gen >"$tmp/plain.out"
check "default generate exits 0" test $? -eq 0
# test-tiny: 2 layers, kv_dim 32: an f32 block is 8 KiB
gen --kv-hot 16K --kv-warm 0 --kv-stats >"$tmp/tiered.out"
check "tiered generate exits 0" test $? -eq 0
check "lossless cold tier: the same greedy text" cmp -s "$tmp/plain.out" "$tmp/tiered.out"
check "--kv-stats reports cold blocks" grep -qE '^kv cold: [1-9][0-9]* blocks' "$tmp/err"
check "--kv-stats reports restores" grep -qE 'restores: [1-9][0-9]* pages' "$tmp/err"
gen --kv-hot 16K --kv-warm 0 --kv-cold 4K --kv-spill "$tmp/spill.kv" --kv-policy lfu >"$tmp/spill.out"
check "spilled cold pages, LFU: the same greedy text" cmp -s "$tmp/plain.out" "$tmp/spill.out"
check "the spill file is removed" test ! -e "$tmp/spill.kv"
gen --kv-type q8 --kv-hot 8K --kv-warm 4K --prefix-cache >"$tmp/q8.out"
check "q8 hot, int8 warm, prefix cache: generates" test $? -eq 0 -a -s "$tmp/q8.out"
gen --kv-hot 1K >/dev/null
check "a hot budget below one block is refused" grep -q "less than one f32 block" "$tmp/err"
gen --kv-type q3 >/dev/null
check "an unknown KV type is refused, naming the accepted ones" grep -q "^cortex: --kv-type: 'q3' is not one of f32|f16|q8|bf16|e4m3|e5m2|q4g|q4h$" "$tmp/err"
gen --kv-cold lots >/dev/null
check "a bad byte count is refused" grep -q "is not a byte count" "$tmp/err"

# stories260K: 300 greedy tokens through a 2-block hot tier, f32 and f16 pages.
if [ -f "$MODELS/stories260K.bin" ]; then
    st() { "$CORTEX" generate -m "$MODELS/stories260K.bin" -z "$MODELS/tinystories-tok512.bin" -p "Once upon a time" \
           -n 300 --temp 0 --no-echo "$@" 2>/dev/null; }
    st >"$tmp/s1.out"
    st --kv-hot 40K --kv-warm 0 >"$tmp/s2.out"
    check "stories260K: lossless tiering, the same 300 greedy tokens" cmp -s "$tmp/s1.out" "$tmp/s2.out"
    st --kv-type f16 >"$tmp/s3.out"
    st --kv-type f16 --kv-hot 20K --kv-warm 0 >"$tmp/s4.out"
    check "stories260K: f16 with f16 cold pages equals untiered f16" cmp -s "$tmp/s3.out" "$tmp/s4.out"
elif [ "${CI:-}" = true ]; then
    check "models present in CI ($MODELS)" false
else
    echo "SKIP stories260K checks: $MODELS/stories260K.bin not found"
fi
finish
