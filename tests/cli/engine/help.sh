#!/usr/bin/env bash
# tests/cli/engine/help.sh - every `cortex` command's help and flag errors. For each
# command: --help and -h print the same usage to stdout and exit 0; it names
# every flag the command takes (the list below, written independently of the
# CLI's table), and no other; each flag with a valid value is accepted (the
# command then reaches --help); an unknown flag, or one only another command
# takes, is one stderr line naming it and exit 2. The enumerated values the
# help lists (weight types, KV types and policies, shapes) are each accepted,
# and the sampler defaults shown are llama.cpp's. No model is needed.
set -u
. "$(dirname "$0")/../lib/common.sh"

# command -> "flag value" words (a switch has the value "-")
declare -A FLAGS=(
[generate]="-m x --model x -z x --tokenizer x -p x --prompt x -f x --prompt-file x -n 5 --n-predict 5
  --temp 0.5 --top-k 5 --top-p 0.5 --min-p 0.1 --repeat-penalty 1.2 --repeat-last-n 32 --presence-penalty 0.5
  --frequency-penalty 0.5 --seed 7 -t 2 --threads 2 --pin compact --numa interleave -c 64 --ctx 64 --no-echo - --ids - --kv-type f16
  --kv-warm-type q4 --kv-hot 64K --kv-warm 0 --kv-cold 1M --kv-spill x --kv-policy lfu --prefix-cache - --kv-stats - --no-special - --lora a.gguf:0.5 --lora-type q8_0
  --spec ngram --draft x -md x --draft-max 4 --draft-min 1 --draft-p-min 0.5 --draft-fixed -"
[info]="-m x --model x -z x --tokenizer x"
[synth]="--shape test-tiny --type q8_0 -o x --output x --seed 3 -c 64 --ctx 64 --vocab x --list -"
[tokenize]="-m x --model x -z x --tokenizer x -p x --prompt x -f x --prompt-file x --no-bos - --no-special -"
[quantize]="-z x --tokenizer x --type q4_0"
[quality]="--ref x -m x --model x -z x --tokenizer x -t 2 --threads 2 --pin spread --numa local --positions 10 --text x --json - -c 64 --ctx 64 --from 8 --kv-type q8 --ref-kv-type f16"
[synth-lora]="-m x --model x -z x --tokenizer x --rank 8 --alpha 16 --targets q,v --seed 2 --strength 0.5 --type f16 -o x --output x"
[merge-lora]="-m x --model x -z x --tokenizer x --lora x:2 --type f16 -o x --output x"
[serve]="-m x --model x -z x --tokenizer x -t 2 --threads 2 --pin none --numa default -c 64 --ctx 64 -n 5 --n-predict 5 --kv-type f16
  --kv-warm-type q4 --kv-hot 64K --kv-warm 0 --kv-cold 1M --kv-spill x --kv-policy lfu --prefix-cache - --host 0.0.0.0
  --port 0 --api-key k --chat-template chatml --max-seqs 2 --max-batch-tokens 16 --max-queue 4 --request-timeout 2.5
  --max-body 4096 --lora a=x --lora-budget 512M --lora-type q8_0 --lora-dir x --max-adapters 8 --max-conns 64
  --max-conns-per-ip 0 --read-timeout 2.5 --busy-timeout 1 --idle-timeout 10 --drain-timeout 5
  --spec self:q8_0 --draft x -md x --draft-max 4 --draft-min 1 --draft-p-min 0.5 --draft-fixed - --spec-max-batch 2"
)
CMDS="generate info synth tokenize quantize quality serve synth-lora merge-lora"

lines() { wc -l <"$1" | tr -d ' '; }

for c in $CMDS; do
    "$CORTEX" $c --help >"$tmp/$c.help" 2>"$tmp/$c.err"
    check "$c --help exits 0, quiet on stderr" test $? -eq 0 -a ! -s "$tmp/$c.err"
    check "$c --help starts with its usage" sh -c "head -1 '$tmp/$c.help' | grep -q '^usage: cortex $c '"
    check "$c --help has an example" sh -c "grep -A1 '^example:' '$tmp/$c.help' | grep -q '^  cortex $c '"
    "$CORTEX" $c -h >"$tmp/$c.h" 2>&1
    check "$c -h exits 0 with the same text" test $? -eq 0 -a -n "$(cat "$tmp/$c.h")"
    check "$c -h equals --help" cmp -s "$tmp/$c.help" "$tmp/$c.h"
    set -- ${FLAGS[$c]}
    want=""
    while [ $# -ge 2 ]; do
        f=$1 v=$2; shift 2
        want="$want $f"
        check "$c --help names $f" grep -qE -- "(^|[ ,])$f( |,|$)" "$tmp/$c.help"
        if [ "$v" = - ]; then "$CORTEX" $c $f --help >/dev/null 2>"$tmp/err"
        else "$CORTEX" $c $f "$v" --help >/dev/null 2>"$tmp/err"; fi
        check "$c accepts $f${v/#-/}" test $? -eq 0 -a ! -s "$tmp/err"
    done
    # and names no flag beyond those (the options section's flags)
    for f in $(sed -n '/^options:/,/^example:/p' "$tmp/$c.help" | grep -oE -- '^ +(-[a-z], )?--[a-z-]+' |
               grep -oE -- '--[a-z-]+'); do
        [ "$f" = --help ] && continue
        check "$c: listed flag $f is one it takes" sh -c "echo '$want ' | grep -q -- ' $f '"
    done
    "$CORTEX" $c --no-such-flag >"$tmp/out" 2>"$tmp/err"
    rc=$?
    check "$c --no-such-flag: exit 2" test $rc -eq 2
    check "$c --no-such-flag: one stderr line naming it, nothing on stdout" \
        test "$(lines "$tmp/err")" = 1 -a ! -s "$tmp/out" -a -n "$(grep -- "'--no-such-flag'" "$tmp/err")"
done

# A flag of another command is unknown here.
"$CORTEX" info --temp 1 >/dev/null 2>"$tmp/err"
check "info --temp: exit 2, one line naming --temp" test $? -eq 2 -a "$(lines "$tmp/err")" = 1 -a -n "$(grep -- "'--temp'" "$tmp/err")"
"$CORTEX" synth --kv-type f16 >/dev/null 2>"$tmp/err"
check "synth --kv-type: exit 2" test $? -eq 2 -a "$(lines "$tmp/err")" = 1
"$CORTEX" generate -p >/dev/null 2>"$tmp/err"
check "a flag without its value: exit 2, one line naming it" test $? -eq 2 -a "$(lines "$tmp/err")" = 1 -a -n "$(grep -- "-p needs a value" "$tmp/err")"

# Enumerated values: the help lists every accepted one, each is accepted, others are not.
values() { # command flag -> the '|' list after "one of " on the flag's help line
    grep -E -- "^ +(-[a-z], )?$2 " "$tmp/$1.help" | grep -oE 'one of [^;)]+' | sed 's/^one of //' | tr '|' ' '
}
check "synth --type lists f32 f16 bf16 q8_0 q4_0 q4_k q6_k mxfp4 q4_k_m" \
    test "$(values synth --type | tr ' ' '\n' | sort | tr '\n' ' ')" = "bf16 f16 f32 mxfp4 q4_0 q4_k q4_k_m q6_k q8_0 "
check "quantize --type lists the same types" test "$(values quantize --type)" = "$(values synth --type)"
check "generate --kv-type lists f32 f16 q8 bf16 e4m3 e5m2 q4g q4h" \
    test "$(values generate --kv-type)" = "f32 f16 q8 bf16 e4m3 e5m2 q4g q4h"
check "generate --kv-warm-type lists f16 q8 q4 bf16 e4m3 e5m2 q4g q4h" \
    test "$(values generate --kv-warm-type)" = "f16 q8 q4 bf16 e4m3 e5m2 q4g q4h"
check "generate --kv-policy lists lru lfu random" test "$(values generate --kv-policy)" = "lru lfu random"
check "quality takes generate's KV types" test "$(values quality --kv-type)" = "$(values generate --kv-type)"
check "serve --chat-template lists chatml llama2 llama3 zephyr phi3 gemma gpt-oss harmony" \
    test "$(values serve --chat-template)" = "chatml llama2 llama3 zephyr phi3 gemma gpt-oss harmony"
check "serve takes generate's KV cache flags, with the same values" \
    test "$(values serve --kv-type)/$(values serve --kv-policy)" = "$(values generate --kv-type)/$(values generate --kv-policy)"
check "generate --pin lists none compact spread" test "$(values generate --pin)" = "none compact spread"
check "generate --numa lists default local interleave" test "$(values generate --numa)" = "default local interleave"
check "serve and quality take the same placement values" \
    test "$(values serve --pin)/$(values quality --numa)" = "$(values generate --pin)/$(values generate --numa)"
check "synth --shape lists test-tiny and tinyllama-1.1b" sh -c "echo ' $(values synth --shape) ' | grep -q ' test-tiny .* tinyllama-1.1b '"
for spec in "synth --type" "quantize --type" "generate --kv-type" "generate --kv-warm-type" "generate --kv-policy" \
            "synth --shape" "serve --chat-template" "generate --pin" "generate --numa"; do
    set -- $spec
    for v in $(values "$1" "$2"); do
        "$CORTEX" "$1" "$2" "$v" --help >/dev/null 2>&1
        check "$1 $2 $v is accepted" test $? -eq 0
    done
done
"$CORTEX" generate --kv-type q4 >/dev/null 2>"$tmp/err"
check "generate --kv-type q4: exit 2, names q4 and the accepted types" \
    test $? -eq 2 -a "$(cat "$tmp/err")" = "cortex: --kv-type: 'q4' is not one of f32|f16|q8|bf16|e4m3|e5m2|q4g|q4h"
"$CORTEX" synth --type q5_1 >/dev/null 2>"$tmp/err"
check "synth --type q5_1: exit 2, one line naming it" test $? -eq 2 -a -n "$(grep -- "'q5_1' is not one of" "$tmp/err")"

# The sampler defaults shown are llama.cpp's (common_params_sampling).
default_of() { grep -E -- "^ +$1 " "$tmp/generate.help" | grep -oE 'default [^;)]+' | tail -1 | sed 's/^default //'; }
for pair in "--temp 0.8" "--top-k 40" "--top-p 0.95" "--min-p 0.05" "--repeat-penalty 1" "--repeat-last-n 64" \
            "--presence-penalty 0" "--frequency-penalty 0" "--seed 42" "-n 128"; do
    set -- $pair
    f=$1
    [ "$f" = -n ] && f="-n, --n-predict"
    check "generate $1 default is $2" test "$(default_of "$f")" = "$2"
done

# The general usage.
"$CORTEX" --help >"$tmp/usage" 2>"$tmp/err"
check "cortex --help exits 0 to stdout" test $? -eq 0 -a -s "$tmp/usage" -a ! -s "$tmp/err"
for c in $CMDS; do check "cortex --help lists $c" grep -qE "^  $c " "$tmp/usage"; done
"$CORTEX" help generate >"$tmp/hg" 2>&1
check "cortex help generate = cortex generate --help" cmp -s "$tmp/hg" "$tmp/generate.help"
"$CORTEX" >/dev/null 2>"$tmp/err"
check "cortex alone: usage on stderr, exit 2" test $? -eq 2 -a -s "$tmp/err"
"$CORTEX" frobnicate >/dev/null 2>"$tmp/err"
check "unknown command: exit 2, one line naming it" test $? -eq 2 -a "$(lines "$tmp/err")" = 1 -a -n "$(grep frobnicate "$tmp/err")"
finish
