#!/usr/bin/env bash
# tests/cli/engine/moe.sh - mixture-of-experts models from the command line:
# `cortex synth --shape moe-tiny|gpt-oss-tiny` writes them (f32, and mxfp4
# with the experts mxfp4 and the other matrices q8_0), `cortex info` shows
# the experts, the sliding window, the sinks and YaRN, `cortex generate
# --temp 0` gives the same ids on 1 and 2 threads (prefill against decode
# is tests/unit/engine/test_moe.c's), `cortex quantize --type mxfp4`
# quantizes the stacked expert tensors, and dump_logits and cortex-bench run them.
set -u
. "$(dirname "$0")/../lib/common.sh"
PROMPT="the quick brown fox jumps over the lazy dog and then the cat sleeps on the warm mat all day long"
for shape in moe-tiny gpt-oss-tiny; do
    for type in f32 mxfp4; do
        m=$tmp/$shape-$type.gguf
        "$CORTEX" synth --shape $shape --type $type --seed 2 -o "$m" >/dev/null 2>&1
        check "$shape $type: synth writes it" test -f "$m"
        "$CORTEX" info "$m" >"$tmp/info" 2>&1
        check "$shape $type: info shows the experts" grep -q "^experts:        4 per layer, 2 per token, width 96" "$tmp/info"
        a=$("$CORTEX" generate -m "$m" -p "$PROMPT" -n 40 --temp 0 --ids -t 1 2>/dev/null)
        b=$("$CORTEX" generate -m "$m" -p "$PROMPT" -n 40 --temp 0 --ids -t 2 2>/dev/null)
        check "$shape $type: greedy ids on 1 and 2 threads are equal" test -n "$a" -a "$a" = "$b"
        "$BUILD/tests/dump_logits" "$m" -n 24 -t 2 -o "$tmp/d.bin" 2>/dev/null
        check "$shape $type: dump_logits runs it" test -s "$tmp/d.bin"
    done
done
info=$("$CORTEX" info "$tmp/gpt-oss-tiny-mxfp4.gguf")
check "gpt-oss: architecture, window, sinks, YaRN" sh -c "echo '$info' | grep -q '^architecture:   gpt-oss' &&
    echo '$info' | grep -q '^sliding window: 16 positions' && echo '$info' | grep -q 'learned sinks' &&
    echo '$info' | grep -q 'NeoX (i, i+d/2) pairs, yarn scaling x4'"
check "gpt-oss mxfp4: experts mxfp4, router f32, attention q8_0" sh -c "echo '$info' | grep -Eq '^blk.0.ffn_down_exps.weight +mxfp4 +\[96, 64, 4\]' &&
    echo '$info' | grep -Eq '^blk.0.ffn_gate_inp.weight +f32' && echo '$info' | grep -Eq '^blk.0.attn_q.weight +q8_0'"
check "gpt-oss: a byte-level BPE vocabulary with o200k's pre-tokenizer" sh -c "echo '$info' | grep -q '^tokenizer:      gpt2, pre-tokenizer gpt-4o, 512 tokens'"
ids=$("$CORTEX" tokenize -m "$tmp/gpt-oss-tiny-f32.gguf" -p "<|start|>hello<|end|>")
check "gpt-oss: harmony's control tokens are single ids (<|start|> 504, <|end|> 505)" test "${ids%% *}" = 504 -a "${ids##* }" = 505
"$BENCH" run --model "$tmp/gpt-oss-tiny-mxfp4.gguf" --workload pg16,8 -t 2 --reps 1 --warmup 0 --db "$tmp/b.db" >/dev/null 2>&1
check "cortex-bench runs gpt-oss-tiny and stores the run" test "$(sql "$tmp/b.db" "select count(*) from runs")" = 1
# the expert bytes a prompt pass reads: one token reads its 2 of 4 experts per layer exactly; 16 tokens read each
# chosen expert once, so between one token's experts and all of them, whatever the routing
xall=$(echo "$info" | sed -n 's/^experts: .*(\([0-9]*\) bytes.*/\1/p')
"$BENCH" run --model "$tmp/gpt-oss-tiny-mxfp4.gguf" --workload pp1 -t 1 --reps 1 --warmup 0 --db "$tmp/b.db" >/dev/null 2>&1
xb() { sql "$tmp/b.db" "select cast(median * $2 as integer) from summary where name = 'expert_bytes_per_prompt_token' and run_id = $1"; }
check "pp1: expert bytes per prompt token = 2/4 of the experts' bytes ($xall)" test "$(xb 2 1)" = $((xall / 2))
x16=$(xb 1 16)
check "pg16,8: the prompt pass read each chosen expert once ($x16 bytes)" test "$x16" -ge $((xall / 2)) -a "$x16" -le "$xall"
# quantize: stacked experts become mxfp4, their biases stay f32, the model runs
"$CORTEX" quantize "$tmp/gpt-oss-tiny-f32.gguf" "$tmp/q.gguf" --type mxfp4 >/dev/null 2>&1
check "quantize --type mxfp4 of gpt-oss-tiny" test $? -eq 0
"$CORTEX" info "$tmp/q.gguf" >"$tmp/qinfo"
check "quantize: experts mxfp4, expert biases f32" sh -c "grep -Eq '^blk.1.ffn_up_exps.weight +mxfp4' '$tmp/qinfo' &&
    grep -Eq '^blk.1.ffn_up_exps.bias +f32 +\[96, 4\]' '$tmp/qinfo'"
q=$("$CORTEX" generate -m "$tmp/q.gguf" -p "$PROMPT" -n 8 --temp 0 --ids 2>/dev/null)
check "quantized gpt-oss-tiny generates" test -n "$q"
# adapters: attention ones apply; feed-forward ones are refused (no dense feed-forward to adapt)
"$CORTEX" synth-lora -m "$tmp/gpt-oss-tiny-f32.gguf" --targets q,v,o -o "$tmp/a.gguf" >/dev/null 2>&1
l=$("$CORTEX" generate -m "$tmp/gpt-oss-tiny-f32.gguf" --lora "$tmp/a.gguf" -p "$PROMPT" -n 4 --temp 0 --ids 2>/dev/null)
check "an attention adapter on gpt-oss-tiny generates" test -n "$l"
"$CORTEX" synth-lora -m "$tmp/gpt-oss-tiny-f32.gguf" --targets gate -o "$tmp/g.gguf" 2>"$tmp/err"
check "synth-lora --targets gate on experts: refused" sh -c "test ! -f '$tmp/g.gguf' && grep -q 'mixture of experts' '$tmp/err'"
"$CORTEX" synth --shape test-tiny -o "$tmp/dense.gguf" >/dev/null 2>&1
"$CORTEX" synth-lora -m "$tmp/dense.gguf" --targets gate -o "$tmp/g.gguf" >/dev/null 2>&1
"$CORTEX" generate -m "$tmp/moe-tiny-f32.gguf" --lora "$tmp/g.gguf" -p hi -n 2 2>"$tmp/err" >/dev/null
check "a feed-forward adapter on moe-tiny: refused, naming the tensor" grep -q "'blk.0.ffn_gate.weight' adapts a dense feed-forward matrix" "$tmp/err"
# an unknown shape is refused with the list
"$CORTEX" synth --shape gpt-oss-huge -o "$tmp/x.gguf" 2>"$tmp/err"
check "unknown shape: exit 2" test $? -eq 2
check "the shape list names gpt-oss-20b" grep -q "gpt-oss-20b" "$tmp/err"
check "synth --list shows gpt-oss-20b's 32 experts, 4 used" sh -c "'$CORTEX' synth --list | grep -Eq '^gpt-oss-20b .* 131072  32 \(4\)$'"
finish moe
