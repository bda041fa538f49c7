#!/usr/bin/env bash
# ci/peers.sh - Cortex against llama.cpp and ik_llama.cpp on the same files,
# the same threads, interleaved (issue 16's comparison; docs/performance.md).
#
# The files are written by llama.cpp's own tools: gguf-py's gguf_new_metadata
# rewrites Cortex's synthetic TinyLlama-1.1B f16 (`cortex synth`), and the
# peer's llama-quantize makes q8_0, q4_0 and q4_k_m from that f16. Each round
# runs every engine once per type (pp512 and tg128: llama-bench -r 1 for the
# peers; cortex-bench run --reps 1 --warmup 1 for Cortex), so a busy minute
# of a shared machine falls on all of them; the table is the median over
# rounds, in tokens/s, with Cortex's ratio to the faster peer.
#
# The peers are built outside this repository (none of their code enters it):
#   cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF
#   ninja -C build llama-bench llama-quantize llama-server
#
#   LLAMA=DIR/build/bin IK=DIR/build/bin GGUF_PY=DIR/gguf-py \
#     [THREADS=2] [TYPES="q8_0 q4_0 q4_k_m f16"] ci/peers.sh [OUT.tsv] [ROUNDS]
# A peer that is not given is left out (its columns say so).
set -eu
cd "$(dirname "$0")/.."
OUT=${1:-reports/peers.tsv}
ROUNDS=${2:-3}
THREADS=${THREADS:-2}
TYPES=${TYPES:-q8_0 q4_0 q4_k_m f16}
BENCH=build/cortex-bench CORTEX=build/cortex
LLAMA=${LLAMA:-} IK=${IK:-} GGUF_PY=${GGUF_PY:-}
[ -n "${NO_BUILD:-}" ] || make -s "$BENCH" "$CORTEX"
[ -n "$LLAMA" ] && [ -x "$LLAMA/llama-quantize" ] && [ -n "$GGUF_PY" ] ||
    { echo "ci/peers.sh: LLAMA (llama.cpp's build/bin with llama-quantize) and GGUF_PY (its gguf-py) are needed to write the files" >&2; exit 2; }
mkdir -p models/peer "$(dirname "$OUT")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 1. the files, by the peer's tools
src=models/tinyllama-1.1b-f16.gguf
[ -f "$src" ] || "$CORTEX" synth --shape tinyllama-1.1b --type f16 -o "$src"
f16=models/peer/tinyllama-1.1b-f16.gguf
[ -f "$f16" ] || PYTHONPATH="$GGUF_PY" /usr/bin/python3 -m gguf.scripts.gguf_new_metadata --force "$src" "$f16" \
    --general-name "TinyLlama-1.1B shape (cortex synth, rewritten by gguf-py)" >/dev/null
for type in $TYPES; do
    [ "$type" = f16 ] && continue
    m=models/peer/tinyllama-1.1b-$type.gguf
    [ -f "$m" ] || "$LLAMA/llama-quantize" "$f16" "$m" "$(echo "$type" | tr a-z A-Z)" 2 >"$tmp/q.log" 2>&1 ||
        { cat "$tmp/q.log" >&2; exit 1; }
done

# 2. the rounds: one line per measurement, "engine type test round tok/s"
peer() { # name dir file test: llama-bench's tokens/s (its JSON's avg_ts), or "-" when it failed
    local args
    [ "$4" = pp512 ] && args="-p 512 -n 0" || args="-p 0 -n 128"
    "$2/llama-bench" -m "$3" $args -t "$THREADS" -r 1 -o json 2>"$tmp/$1.err" |
        /usr/bin/python3 -c 'import json, sys; print("%.2f" % json.load(sys.stdin)[0]["avg_ts"])' 2>/dev/null || echo -
}
: >"$OUT.raw"
for round in $(seq "$ROUNDS"); do
    for type in $TYPES; do
        m=models/peer/tinyllama-1.1b-$type.gguf
        for test in pp512 tg128; do
            "$BENCH" run --model "$m" --workload "$test" --reps 1 --warmup 1 -t "$THREADS" --db "$tmp/c.db" \
                --no-progress >/dev/null
            echo "cortex $type $test $round $(sqlite3 "$tmp/c.db" "select printf('%.2f', median) from summary where \
                run_id = (select max(id) from runs) and name = 'tps'")" >>"$OUT.raw"
            [ -n "$IK" ] && echo "ik_llama.cpp $type $test $round $(peer ik "$IK" "$m" "$test")" >>"$OUT.raw"
            echo "llama.cpp $type $test $round $(peer llama "$LLAMA" "$m" "$test")" >>"$OUT.raw"
        done
        echo "round $round $type done" >&2
    done
done

# 3. medians over rounds, and Cortex against the faster peer
/usr/bin/python3 - "$OUT.raw" "$OUT" "$THREADS" <<'EOF'
import collections, statistics, sys
raw, out, threads = sys.argv[1:]
v = collections.defaultdict(list)
for line in open(raw):
    eng, typ, test, rnd, tps = line.split()
    if tps != "-":
        v[eng, typ, test].append(float(tps))
med = {k: statistics.median(x) for k, x in v.items()}
types = list(dict.fromkeys(k[1] for k in v))
rows = ["type\ttest\tik_llama.cpp\tllama.cpp\tcortex\tcortex/best"]
print("| type | test | ik_llama.cpp | llama.cpp | Cortex | Cortex / best peer |")
print("| --- | --- | ---: | ---: | ---: | ---: |")
for typ in types:
    for test in ("pp512", "tg128"):
        ik, ll, cx = (med.get((e, typ, test)) for e in ("ik_llama.cpp", "llama.cpp", "cortex"))
        best = max([x for x in (ik, ll) if x is not None], default=None)
        f = lambda x: "-" if x is None else "%.1f" % x
        ratio = "-" if best is None or cx is None else "%.2fx" % (cx / best)
        print("| %s | %s | %s | %s | %s | %s |" % (typ, test, f(ik), f(ll), f(cx), ratio))
        rows.append("\t".join([typ, test, f(ik), f(ll), f(cx), ratio]))
open(out, "w").write("\n".join(rows) + "\n")
print("(%s threads; medians over rounds; raw values in %s)" % (threads, raw))
EOF
