#!/usr/bin/env bash
# tests/cli/engine/malformed.sh - the cortex CLI on bad input: every case must exit
# non-zero without crashing (exit code < 128, i.e. no signal), print nothing on
# stdout and exactly one line on stderr starting with "cortex: ".
# Run from the repo root (tests/run.sh does); the binary is $CORTEX_BIN
# (default build/cortex). Bad files are made in a temporary directory.
# Ends with "N passed, N failed"; exits non-zero if any case failed.
set -u
BIN=${CORTEX_BIN:-build/cortex}
pass=0 fail=0

if [ ! -x "$BIN" ]; then
    echo "FAIL: cortex binary $BIN not found (make build/cortex)"
    echo "0 passed, 1 failed"
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# check NAME CMD...: run CMD, then assert the exit code, stdout and stderr rules.
check() {
    local name=$1; shift
    "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    local rc=$? lines first problem=""
    lines=$(wc -l <"$tmp/err")
    first=$(head -n 1 "$tmp/err")
    if [ "$rc" -eq 0 ]; then problem="exit code 0"
    elif [ "$rc" -ge 128 ]; then problem="killed by a signal (exit code $rc)"
    elif [ -s "$tmp/out" ]; then problem="stdout not empty: $(head -c 200 "$tmp/out")"
    elif [ "$lines" -ne 1 ] || [ "$(tail -c 1 "$tmp/err" | od -An -c | tr -d ' ')" != '\n' ]; then
        problem="stderr is $lines lines, not exactly one"
    elif [[ "$first" != "cortex: "* ]]; then problem="stderr does not start with 'cortex: '"
    fi
    if [ -z "$problem" ]; then
        pass=$((pass + 1))
        printf 'ok   %-24s [%d] %s\n' "$name" "$rc" "$first"
    else
        fail=$((fail + 1))
        printf 'FAIL %-24s %s\n' "$name" "$problem"
        sed 's/^/     | /' "$tmp/err" | head -20
    fi
}

# A valid tiny GGUF to break. `synth` reports on stderr; it is setup, not a case.
if ! "$BIN" synth --shape test-tiny --type f32 -o "$tmp/tiny.gguf" 2>"$tmp/synth.err"; then
    echo "FAIL: cannot synthesise test-tiny: $(cat "$tmp/synth.err")"
    echo "0 passed, 1 failed"
    exit 1
fi
{ printf 'GGUX'; tail -c +5 "$tmp/tiny.gguf"; } >"$tmp/bad-magic.gguf"
head -c 5000 "$tmp/tiny.gguf" >"$tmp/truncated.gguf"
# A llama2.c checkpoint: the real one if present, else any non-GGUF bytes (the
# CLI must ask for a tokenizer before it reads the header).
models=${CORTEX_MODELS:-../shared/models}
if [ -f "$models/aidreams260K.bin" ]; then l2c="$models/aidreams260K.bin"
else head -c 4096 /dev/zero >"$tmp/model.bin"; l2c="$tmp/model.bin"; fi

check wrong-magic        "$BIN" generate -m "$tmp/bad-magic.gguf" -p hello -n 4
check wrong-magic-info   "$BIN" info "$tmp/bad-magic.gguf"
check truncated-gguf     "$BIN" generate -m "$tmp/truncated.gguf" -p hello -n 4
check truncated-tokenize "$BIN" tokenize -m "$tmp/truncated.gguf" -p hello
check nonexistent-model  "$BIN" generate -m "$tmp/no-such-model.gguf" -p hello
check directory-model    "$BIN" info "$tmp"
check llama2c-without-z  "$BIN" generate -m "$l2c" -p hello -n 4
check empty-prompt       "$BIN" generate -m "$tmp/tiny.gguf" -p "" -n 4
check bad-n-value        "$BIN" generate -m "$tmp/tiny.gguf" -p hello -n abc
check bad-temp-value     "$BIN" generate -m "$tmp/tiny.gguf" -p hello --temp hot
check unknown-option     "$BIN" generate -m "$tmp/tiny.gguf" -p hello --frobnicate 1
check missing-value      "$BIN" generate -m "$tmp/tiny.gguf" -p
check unknown-shape      "$BIN" synth --shape no-such-shape -o "$tmp/x.gguf"
check unknown-type       "$BIN" synth --shape test-tiny --type q5_K -o "$tmp/x.gguf"
check unwritable-output  "$BIN" synth --shape test-tiny -o /nonexistent/dir/x.gguf

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
