#!/usr/bin/env bash
# tests/cli/engine/isa.sh - kernel dispatch from the outside: CORTEX_ISA picks the
# table, bad values fail with one clear line, and for F32 (and BF16) models the
# greedy text does not depend on the instruction set (the issue's "greedy text on
# stories260K is unchanged by the ISA choice for F32"), nor, between avx2 and
# avxvnni, for q8_0/q4_0.
set -u
. "$(dirname "$0")/../lib/common.sh"
have_avx2=0 have_avxvnni=0 have_avx512=0 have_vnni=0 have_bf16=0
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && grep -qw f16c /proc/cpuinfo && have_avx2=1
if [ $have_avx2 = 1 ]; then
    grep -qw avx_vnni /proc/cpuinfo && have_avxvnni=1
    have_avx512=1
    for f in avx512f avx512bw avx512vl avx512dq; do grep -qw $f /proc/cpuinfo || have_avx512=0; done
fi
[ $have_avx512 = 1 ] && grep -qw avx512_vnni /proc/cpuinfo && have_vnni=1
[ $have_vnni = 1 ] && grep -qw avx512_bf16 /proc/cpuinfo && have_bf16=1

"$CORTEX" synth --shape test-tiny --type f32 --seed 5 -o "$tmp/tiny.gguf" 2>/dev/null
# Bad and unavailable instruction sets: one line naming the variable, exit non-zero.
for bad in bogus avx512f; do
    CORTEX_ISA=$bad "$CORTEX" generate -m "$tmp/tiny.gguf" -p "hi" -n 2 >"$tmp/out" 2>"$tmp/err"
    rc=$?
    check "CORTEX_ISA=$bad exits non-zero" test $rc -ne 0
    check "CORTEX_ISA=$bad: one error line naming CORTEX_ISA ($(head -1 "$tmp/err"))" \
        sh -c "test \$(wc -l <'$tmp/err') -eq 1 && grep -q 'CORTEX_ISA=' '$tmp/err'"
done
# A table the CPU lacks: one clear line naming what is missing; the others run.
isas="scalar"
for pair in avx2:$have_avx2 avxvnni:$have_avxvnni avx512:$have_avx512 avx512vnni:$have_vnni avx512bf16:$have_bf16; do
    isa=${pair%:*}
    if [ "${pair#*:}" = 0 ]; then
        CORTEX_ISA=$isa "$CORTEX" generate -m "$tmp/tiny.gguf" -p "hi" -n 2 >/dev/null 2>"$tmp/err"
        check "CORTEX_ISA=$isa on a CPU without it fails clearly ($(head -1 "$tmp/err"))" \
            sh -c "test \$(wc -l <'$tmp/err') -eq 1 && grep -q 'does not support it (no ' '$tmp/err'"
        echo "SKIP CORTEX_ISA=$isa greedy-text checks: this CPU lacks it"
    else
        isas="$isas $isa"
    fi
done

# Same greedy text with every table, on synthetic f32 and (when present) the real models.
same_text() { # label, generate args...
    local label=$1; shift
    local first=""
    for isa in $isas; do
        CORTEX_ISA=$isa "$CORTEX" generate "$@" --temp 0 >"$tmp/$isa.out" 2>/dev/null
        check "$label: CORTEX_ISA=$isa generates" test -s "$tmp/$isa.out"
        if [ -z "$first" ]; then first=$isa; else
            check "$label: $isa text equals $first text" cmp -s "$tmp/$first.out" "$tmp/$isa.out"
        fi
    done
}
same_text "test-tiny f32" -m "$tmp/tiny.gguf" -p "hello world" -n 60
# bf16 weights widen exactly to f32 and meet f32 activations: the same text on every
# table too, but avx512bf16, which rounds the activations to bf16 (test_reference.py
# bounds its logits instead); that one must still generate.
"$CORTEX" synth --shape test-tiny --type bf16 --seed 5 -o "$tmp/tiny-bf16.gguf" 2>/dev/null
all_isas=$isas
isas=$(echo "$isas" | sed 's/ avx512bf16//')
same_text "test-tiny bf16" -m "$tmp/tiny-bf16.gguf" -p "hello world" -n 60
isas=$all_isas
if [ $have_bf16 = 1 ]; then
    CORTEX_ISA=avx512bf16 "$CORTEX" generate -m "$tmp/tiny-bf16.gguf" -p "hello world" -n 60 --temp 0 >"$tmp/bf16acts.out" 2>/dev/null
    check "test-tiny bf16: CORTEX_ISA=avx512bf16 generates" test -s "$tmp/bf16acts.out"
fi
# avxvnni does AVX2's q8_0/q4_0 integer products with vpdpbusd: the same sums, so the same text.
if [ $have_avxvnni = 1 ]; then
    all_isas=$isas
    isas="avx2 avxvnni"
    for ty in q8_0 q4_0; do
        "$CORTEX" synth --shape test-tiny --type $ty --seed 5 -o "$tmp/tiny-$ty.gguf" 2>/dev/null
        same_text "test-tiny $ty" -m "$tmp/tiny-$ty.gguf" -p "hello world" -n 60
    done
    isas=$all_isas
fi
if [ -f "$MODELS/stories260K.bin" ]; then
    same_text "stories260K.bin f32" -m "$MODELS/stories260K.bin" -z "$MODELS/tinystories-tok512.bin" -p "Once upon a time" -n 400
    same_text "stories260K.gguf f32" -m "$MODELS/stories260K.gguf" -p "Once upon a time" -n 120
    same_text "aidreams260K.gguf f32" -m "$MODELS/aidreams260K.gguf" -p "Echoes of" -n 100
elif [ "${CI:-}" = true ]; then
    check "models present in CI ($MODELS)" false
else
    echo "SKIP: $MODELS not found (set CORTEX_MODELS); real-model checks skipped"
fi
finish
