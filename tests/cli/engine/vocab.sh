#!/usr/bin/env bash
# tests/cli/engine/vocab.sh - `cortex tokenize` and `cortex info` on llama.cpp's
# vocabulary-only GGUF files (../shared/vocab, CORTEX_VOCAB overrides): ids
# llama.cpp gives (from the files' .out vectors), BOS only where the
# vocabulary asks for it, control tokens parsed unless --no-special, and a
# vocabulary-only file refused by generate with one clear line. Skips with a
# message without the folder, fails under CI=true.
set -u
. "$(dirname "$0")/../lib/common.sh"
VOCAB=${CORTEX_VOCAB:-../shared/vocab}
if [ ! -d "$VOCAB" ]; then
    if [ "${CI:-}" = true ]; then echo "FAIL: $VOCAB is missing in CI"; echo "0 passed, 1 failed"; exit 1; fi
    echo "SKIP: $VOCAB is missing: no vocabularies to check"
    exit 0
fi
G=$VOCAB/ggml-vocab-gpt-2.gguf S=$VOCAB/ggml-vocab-llama-spm.gguf C=$VOCAB/ggml-vocab-starcoder.gguf

check "gpt-2: 'Hello world' is 15496 995 (no BOS: GPT-2 does not ask for it)" \
    test "$("$CORTEX" tokenize -m "$G" -p "Hello world")" = "15496 995"
check "gpt-2: digits, contractions and spaces" \
    test "$("$CORTEX" tokenize -m "$G" -p "it's 2024!  ok")" = "270 338 48609 0 220 12876"
check "gpt-2: <|endoftext|> is one control token by default" \
    test "$("$CORTEX" tokenize -m "$G" -p "a<|endoftext|>b")" = "64 50256 65"
check "gpt-2: --no-special keeps it as text" \
    test "$("$CORTEX" tokenize -m "$G" --no-special -p "a<|endoftext|>b")" != "64 50256 65"
check "llama-spm: BOS first, as the vocabulary asks" \
    test "$("$CORTEX" tokenize -m "$S" -p "Hello world")" = "1 15043 3186"
check "llama-spm: --no-bos" test "$("$CORTEX" tokenize -m "$S" --no-bos -p "Hello world")" = "15043 3186"
check "starcoder: one digit per token" test "$("$CORTEX" tokenize -m "$C" -p "333")" = "56 56 56"
"$CORTEX" info "$C" >"$tmp/info" 2>&1
check "info names the tokenizer and pre-tokenizer" grep -q "tokenizer:      gpt2, pre-tokenizer starcoder, 49152 tokens" "$tmp/info"
check "info says vocabulary only" grep -q "vocabulary only" "$tmp/info"
"$CORTEX" generate -m "$G" -p hi >"$tmp/out" 2>"$tmp/err"
rc=$?
check "generate refuses a vocabulary-only file (exit 1)" test $rc -eq 1
check "with one line naming it" test "$(cat "$tmp/err")" = "cortex: gpt-2: a vocabulary-only file (no weights): it can tokenize, not run"
finish vocab
