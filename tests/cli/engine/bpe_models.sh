#!/usr/bin/env bash
# tests/cli/engine/bpe_models.sh - synthetic models with a real byte-level BPE
# vocabulary (cortex synth --vocab ../shared/vocab/ggml-vocab-gpt-2.gguf) in
# the new shapes at test size (test-llama3: RoPE factors; test-qwen2: qwen2,
# QKV biases, NeoX RoPE) run end to end: `cortex generate --temp 0 --ids`
# continues a prompt with exactly the numpy reference's greedy ids,
# cortex-bench runs and stores them, and cortex quantize keeps their features. With CORTEX_FULL_SHAPES=1 the real
# llama-3.2-1b and qwen2.5-0.5b shapes (q4_0, 512-token context) go through
# generate and cortex-bench too (minutes and gigabytes, so not by default).
# Skips without ../shared/vocab (CORTEX_VOCAB), fails so under CI=true.
set -u
. "$(dirname "$0")/../lib/common.sh"
VOCAB=${CORTEX_VOCAB:-../shared/vocab}/ggml-vocab-gpt-2.gguf
if [ ! -f "$VOCAB" ]; then
    if [ "${CI:-}" = true ]; then echo "FAIL: $VOCAB is missing in CI"; echo "0 passed, 1 failed"; exit 1; fi
    echo "SKIP: $VOCAB is missing: no BPE vocabulary for the synthetic models"
    exit 0
fi
PROMPT="The quick brown fox, it's 2024: jumps over 12345 lazy dogs!"
for shape in test-llama3 test-qwen2; do
    m=$tmp/$shape.gguf
    "$CORTEX" synth --shape $shape --seed 3 --vocab "$VOCAB" -o "$m" 2>/dev/null
    check "$shape: synth --vocab writes it" test -f "$m"
    check "$shape: it carries the BPE vocabulary" sh -c "'$CORTEX' info '$m' | grep -q 'tokenizer:      gpt2, pre-tokenizer gpt-2, 50257 tokens'"
    ids=$("$CORTEX" tokenize -m "$m" -p "$PROMPT")
    check "$shape: prompt tokenized as GPT-2 does (no BOS)" test "$ids" = "$("$CORTEX" tokenize -m "$VOCAB" -p "$PROMPT")"
    want=$("$PY" tests/reference/llama_ref.py --model "$m" --prompt-ids "$ids" --steps 12)
    got=$("$CORTEX" generate -m "$m" -p "$PROMPT" -n 12 --temp 0 --ids 2>"$tmp/err")
    check "$shape: generate exits 0" test $? -eq 0
    check "$shape: greedy ids equal the numpy reference's" test -n "$want" -a "$got" = "$want"
    [ "$got" = "$want" ] || { echo "  cortex:    $got"; echo "  reference: $want"; }
    "$BENCH" run --model "$m" --workload pg16,8 -t 1 --reps 1 --warmup 0 --db "$tmp/b.db" >/dev/null 2>"$tmp/berr"
    check "$shape: cortex-bench runs it" test $? -eq 0
done
check "cortex-bench stored both runs" test "$(sql "$tmp/b.db" "select count(*) from runs")" = 2
# quantize keeps the architecture, biases, RoPE factors and the BPE vocabulary
for shape in test-llama3 test-qwen2; do
    "$CORTEX" quantize "$tmp/$shape.gguf" "$tmp/$shape-q8.gguf" --type q8_0 >/dev/null 2>&1
    check "$shape: quantize to q8_0" test $? -eq 0
    "$CORTEX" info "$tmp/$shape-q8.gguf" >"$tmp/qinfo" 2>&1
    check "$shape: the q8_0 file keeps its features" grep -q "$([ $shape = test-qwen2 ] && echo 'qkv bias:       yes' || echo 'rope_freqs.weight factors')" "$tmp/qinfo"
    check "$shape: and its tokenizer" test "$("$CORTEX" tokenize -m "$tmp/$shape-q8.gguf" -p "$PROMPT")" = "$("$CORTEX" tokenize -m "$tmp/$shape.gguf" -p "$PROMPT")"
    "$CORTEX" generate -m "$tmp/$shape-q8.gguf" -p "$PROMPT" -n 4 --temp 0 >/dev/null 2>&1
    check "$shape: the q8_0 file generates" test $? -eq 0
done
if [ "${CORTEX_FULL_SHAPES:-0}" = 1 ]; then
    for shape in llama-3.2-1b qwen2.5-0.5b; do
        m=$tmp/$shape.gguf
        "$CORTEX" synth --shape $shape --type q4_0 -c 512 --vocab "$VOCAB" -o "$m" 2>/dev/null
        check "$shape: synth writes it" test -f "$m"
        "$CORTEX" generate -m "$m" -p "$PROMPT" -n 8 --temp 0 >/dev/null 2>"$tmp/err"
        check "$shape: generate runs" test $? -eq 0
        "$BENCH" run --model "$m" --workload pg16,8 -t 2 --reps 1 --warmup 0 --db "$tmp/full.db" >/dev/null 2>&1
        check "$shape: cortex-bench runs it" test $? -eq 0
        rm -f "$m"
    done
fi
finish bpe_models
