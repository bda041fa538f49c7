#!/usr/bin/env bash
# ci/contention.sh - decode speed when other processes want the cores
# (issue 31; docs/performance.md, "Sharing the machine").
#
# For each BUSY count, starts that many competing busy loops
# (`while :; do :; done`), then runs tg64 at -t 1 and -t 2 with Cortex
# (cortex-bench run --reps 3 --warmup 1), and with the optional others: an
# older Cortex build (BASE, its cortex-bench) and llama.cpp (LLAMA, its
# build/bin with llama-bench -r 3). Rounds are interleaved, so a noisy minute
# falls on all of them; the table is the median over rounds, tokens/s, with
# -t 2's ratio to -t 1 for each engine.
#
#   MODEL=FILE [BUSY="1 2 0"] [BASE=DIR/build/cortex-bench] [LLAMA=DIR/build/bin] \
#     ci/contention.sh [OUT.tsv] [ROUNDS]
#
# The figures of docs/performance.md used llama.cpp's own file: its
# gguf_new_metadata and llama-quantize made the TinyLlama-1.1B-shape q4_0
# from `cortex synth --shape tinyllama-1.1b --type f16` (see ci/peers.sh).
set -eu
cd "$(dirname "$0")/.."
OUT=${1:-reports/contention.tsv}
ROUNDS=${2:-3}
BUSY=${BUSY:-1 2 0}
MODEL=${MODEL:?MODEL=FILE: the GGUF to decode}
BENCH=build/cortex-bench BASE=${BASE:-} LLAMA=${LLAMA:-}
[ -n "${NO_BUILD:-}" ] || make -s "$BENCH"
[ -f "$MODEL" ] || { echo "ci/contention.sh: $MODEL: no such file" >&2; exit 2; }
[ -z "$BASE" ] || [ -x "$BASE" ] || { echo "ci/contention.sh: BASE=$BASE is not an executable cortex-bench" >&2; exit 2; }
[ -z "$LLAMA" ] || [ -x "$LLAMA/llama-bench" ] || { echo "ci/contention.sh: LLAMA=$LLAMA has no llama-bench" >&2; exit 2; }
mkdir -p "$(dirname "$OUT")"
tmp=$(mktemp -d)
busy=()
stop_busy() { [ ${#busy[@]} -eq 0 ] || kill "${busy[@]}" 2>/dev/null || true; wait 2>/dev/null || true; busy=(); }
trap 'stop_busy; rm -rf "$tmp"' EXIT

cortex() { # bench threads: tg64 tokens/s (the median of its repetitions), or "-" when the run failed
    "$1" run --model "$MODEL" --workload tg64 --reps 3 --warmup 1 -t "$2" --db "$tmp/c.db" --no-progress \
        >"$tmp/run.log" 2>&1 || { echo -; return; }
    sqlite3 "$tmp/c.db" "select printf('%.2f', median) from summary where run_id = (select max(id) from runs) and name = 'tps'"
}
llama() { # threads
    "$LLAMA/llama-bench" -m "$MODEL" -p 0 -n 64 -r 3 -t "$1" -o json 2>"$tmp/llama.err" |
        /usr/bin/python3 -c 'import json, sys; print("%.2f" % json.load(sys.stdin)[0]["avg_ts"])' 2>/dev/null || echo -
}

# one line per measurement: "engine busy threads round tok/s"
: >"$OUT.raw"
for b in $BUSY; do
    for _ in $(seq "$b"); do (while :; do :; done) & busy+=($!); done
    sleep 1
    for round in $(seq "$ROUNDS"); do
        for t in 1 2; do
            echo "cortex $b $t $round $(cortex "$BENCH" "$t")" >>"$OUT.raw"
            [ -z "$BASE" ] || echo "cortex-base $b $t $round $(cortex "$BASE" "$t")" >>"$OUT.raw"
            [ -z "$LLAMA" ] || echo "llama.cpp $b $t $round $(llama "$t")" >>"$OUT.raw"
        done
        echo "busy $b: round $round done" >&2
    done
    stop_busy
done

/usr/bin/python3 - "$OUT.raw" "$OUT" <<'EOF'
import collections, statistics, sys
raw, out = sys.argv[1:]
v = collections.defaultdict(list)
for line in open(raw):
    eng, busy, t, rnd, tps = line.split()
    if tps != "-":
        v[eng, int(busy), int(t)].append(float(tps))
med = {k: statistics.median(x) for k, x in v.items()}
engines = sorted({k[0] for k in v}, key=lambda e: ("cortex", "cortex-base", "llama.cpp").index(e))
with open(out, "w") as f:
    f.write("engine\tbusy\tt1\tt2\tt2_over_t1\trounds\n")
    print("| engine | busy processes | -t 1 | -t 2 | -t 2 / -t 1 |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for b in sorted({k[1] for k in v}):
        for e in engines:
            t1, t2 = med.get((e, b, 1)), med.get((e, b, 2))
            r = "%.2f" % (t2 / t1) if t1 and t2 else "-"
            f.write("%s\t%d\t%s\t%s\t%s\t%d\n" % (e, b, t1 or "-", t2 or "-", r, len(v.get((e, b, 2), []))))
            print("| %s | %d | %s | %s | %sx |" % (e, b, "%.2f" % t1 if t1 else "-", "%.2f" % t2 if t2 else "-", r))
EOF
