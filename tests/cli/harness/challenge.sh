#!/usr/bin/env bash
# tests/cli/harness/challenge.sh - the challenge run end to end on a tiny real
# model (stories260K, 512-token context: 7 of the 10 challenge prompts fit,
# 3 fail and are shown as failed): `cortex-bench run --workload challenge -t 1,2`
# stores per-prompt rows and the set's spreads; `cortex-bench report --challenge
# RUN` writes challenge.md with its sections, charts (the 30 tokens/s line),
# figures equal to medians recomputed here from the database, the projection
# (scaling with --challenge-gbs; absent, with the reason, without a hw row or
# over HTTP: the mock OpenAI server) and
# the reproduction record (model SHA-256, fingerprint, commit, command lines,
# canaries); VALID (with the tolerated failures and the prompts served) or
# INVALID first; the projection from the thread count that decoded fastest
# (warning when more threads were slower) with the compute peak of the
# run's kernels (AVX-512 FMA or VNNI from the hw row); an INVALID run's
# report: its outcomes only, exit 4; bad input is one line and exit 2 (1 for
# a run that is not a prompt set). Skips without ../shared/models (CORTEX_MODELS), fails so under
# CI=true. Run from the repository root (tests/run.sh).
set -u
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
. tests/cli/lib/common.sh
BENCH=$(cd "$(dirname "$BENCH")" && pwd)/$(basename "$BENCH")
model=$MODELS/stories260K.bin tok=$MODELS/tinystories-tok512.bin
if [ ! -f "$model" ] || [ ! -f "$tok" ]; then
    if [ "${CI:-}" = true ]; then
        check "models present in CI ($MODELS)" false
        finish
        exit
    fi
    echo "SKIP: $model not found (set CORTEX_MODELS); challenge checks skipped"
    exit 0
fi
is_png() { [ -s "$1" ] && [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
is_svg() { [ -s "$1" ] && "$PY" -c 'import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); sys.exit(d.documentElement.tagName.split(":")[-1] != "svg")' "$1" 2>/dev/null; }
has() { grep -qF -- "$2" "$1"; }
fails_with() { # rc want file pattern: exit status `want`, one stderr line matching
    [ "$1" -eq "$2" ] && [ "$(wc -l <"$3")" -eq 1 ] && grep -q -- "$4" "$3"
}
db=$tmp/c.db

# The machine's roofs (small and quick), then the challenge at 1 and 2 threads.
"$BENCH" hw --size 64 --reps 2 --db "$db" >/dev/null 2>&1
check "hw row measured" test "$(sql "$db" "select count(*) from hw")" = 1
# 3 of the 10 prompts cannot fit and 1 is cut short by the full context: tolerated by --allow-failures 0.4, so the runs are VALID with that noted.
"$BENCH" run --model "$model" -z "$tok" --workload challenge -t 1,2 --reps 2 --warmup 0 --no-progress --allow-failures 0.4 \
    --db "$db" >"$tmp/run.out" 2>"$tmp/run.err"
check "run --workload challenge -t 1,2 --allow-failures 0.4 exits 0" test $? -eq 0
check "both runs VALID, noting the tolerated failures" \
    test "$(sql "$db" "select count(*) from runs where workload = 'challenge' and validity = 'valid' and validity_reasons = '8 of 20 requests failed or were truncated, within --allow-failures 0.4'")" = 2
check "two complete runs, 1 and 2 threads" \
    test "$(sql "$db" "select group_concat(threads) from (select threads from runs where status = 'complete' and workload = 'challenge' order by threads)")" = "1,2"
r1=$(sql "$db" "select id from runs where workload = 'challenge' and threads = 1")
r2=$(sql "$db" "select id from runs where workload = 'challenge' and threads = 2")
check "the workload is prompts/challenge.jsonl, by hash" \
    test "$(sql "$db" "select workload_hash from runs where id = $r1")" = "$(sha256sum prompts/challenge.jsonl | cut -d' ' -f1)"
check "10 prompts x 2 repetitions stored per run" test "$(sql "$db" "select count(*) from requests where run_id = $r2")" = 20
check "prompt tokens counted for every prompt" \
    test "$(sql "$db" "select count(*) from requests where run_id = $r1 and prompt_tokens > 0")" = 20
check "3 prompts past the 512-token context fail, 7 served (per repetition)" \
    test "$(sql "$db" "select sum(error is not null) || ',' || sum(error is null and gen_tokens > 1 and decode_ms > 0) from requests where run_id = $r1 and rep = 0")" = "3,7"
for m in req_decode_tps req_tps; do
    check "$m min <= median <= max, every repetition" \
        test "$(sql "$db" "select count(*) from rep_metrics a join rep_metrics b using (run_id, rep) join rep_metrics c using (run_id, rep) where run_id = $r1 and a.name = '${m}_min' and b.name = '${m}_median' and c.name = '${m}_max' and a.value > 0 and a.value <= b.value and b.value <= c.value")" = 2
done
check "peak RSS, bytes and flops per token stored" \
    test "$(sql "$db" "select count(distinct name) from rep_metrics where run_id = $r2 and name in ('peak_rss_mib', 'bytes_per_token', 'flops_per_token') and value > 0")" = 3

# The report (default place: reports/challenge-RUN under the working directory).
(cd "$tmp" && "$BENCH" report --challenge "$r1" --db "$db" >"$tmp/rep.out" 2>"$tmp/rep.err")
check "report --challenge exits 0" test $? -eq 0
d=$tmp/reports/challenge-$r1
md=$d/challenge.md
check "challenge.md written where it says" sh -c "test -s '$md' && grep -q 'challenge-$r1/challenge.md' '$tmp/rep.out'"
for s in "## Measured here, against the 30 tokens/s baseline" "## Charts" "## Per prompt (medians over repetitions)" \
    "## Projection to the challenge machine (a projection, not a measurement)" "## Reproduction record"; do
    check "section: $s" has "$md" "$s"
done
check "VALID with the tolerated failures and the prompts served, first" test "$(sed -n 3p "$md")" = \
    "> **VALID** with tolerated failures (8 of 20 requests failed or were truncated, within --allow-failures 0.4): 7 of 10 prompts served at 1 thread and 7 of 10 prompts served at 2 threads. Every figure below is over the served prompts only: a prompt that failed counts in none."
check "both thread counts in the results" sh -c "grep -q '^| 1 thread | $r1 | 7 of 10 |' '$md' && grep -q '^| 2 threads | $r2 | 7 of 10 |' '$md'"
check "the prompts are said to stand in for the challenge's" has "$md" "stand in for the challenge's own set"
check "failed prompts shown with their reason" grep -q '^| c10 | .*failed: prompt of [0-9]* tokens does not fit the context of 512' "$md"
check "record: model SHA-256 in full" has "$md" "model SHA-256 \`$(sha256sum "$model" | cut -d' ' -f1)\`"
check "record: environment fingerprint in full" \
    has "$md" "environment fingerprint \`$(sql "$db" "select e.fingerprint from runs r join environments e on e.id = r.env_id where r.id = $r1")\`"
check "record: commit" has "$md" "commit \`$(sql "$db" "select git_commit from runs where id = $r1")\`"
check "record: build flags" has "$md" "flags \`$(sql "$db" "select build_flags from runs where id = $r1")\`"
check "record: the run's command line" has "$md" "--workload challenge -t 1,2 --reps 2"
check "record: the report's command line" has "$md" "report --challenge $r1 --db"
check "record: canaries identical across repetitions and thread counts" \
    has "$md" "token canary: 7 served prompts, greedy tokens identical across repetitions and identical across thread counts"
check "per-prompt canary is the stored hash" has "$md" "\`$(sql "$db" "select token_hash from requests where run_id = $r1 and rep = 0 and item = 'c01'")\`"
for c in challenge_tps challenge_ttft; do
    check "chart $c linked, PNG and SVG valid" sh -c "grep -qF '](${c}.png)' '$md' && $(declare -f is_png is_svg); PY='$PY'; is_png '$d/$c.png' && is_svg '$d/$c.svg'"
done
check "TPS chart draws the 30 tokens/s baseline" has "$d/challenge_tps.gp" "challenge baseline 30 tok/s"

# The figures: per prompt the median over repetitions of (gen - 1) / decode time,
# then the median over prompts, recomputed from the database.
median_decode() { # run id -> "%.2f" median over prompts
    "$PY" - "$db" "$1" <<'EOF'
import sqlite3, statistics, sys
c = sqlite3.connect(sys.argv[1])
per = {}
for idx, g, ms in c.execute("select idx, gen_tokens, decode_ms from requests where run_id = ? and error is null"
                            " and gen_tokens > 1 and decode_ms > 0", (int(sys.argv[2]),)):
    per.setdefault(idx, []).append((g - 1) / (ms / 1000))
print("%.2f" % statistics.median(statistics.median(v) for v in per.values()))
EOF
}
check "1-thread median decode TPS = the database's" grep -q "^| 1 thread | $r1 | 7 of 10 | [0-9.]* / \*\*$(median_decode "$r1")\*\* /" "$md"
check "2-thread median decode TPS = the database's" grep -q "^| 2 threads | $r2 | 7 of 10 | [0-9.]* / \*\*$(median_decode "$r2")\*\* /" "$md"

# The projection scales with the challenge machine's bandwidth (this model is bandwidth-bound there).
projected() { grep -oE '^\| \*\*projected decode\*\* \| \*\*[0-9.]+' "$1" | grep -oE '[0-9.]+$'; }
"$BENCH" report --challenge "$r2" --db "$db" --out "$tmp/p80" --challenge-gbs 80 >/dev/null 2>&1
check "report --challenge-gbs 80 exits 0" test $? -eq 0
p40=$(projected "$md") p80=$(projected "$tmp/p80/challenge.md")
check "projection at 80 GB/s is twice that at 40 ($p40, $p80)" \
    "$PY" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not (a > 0 and abs(b / a - 2) < 0.01))" "$p40" "$p80"
check "the given bandwidth is named as given" has "$tmp/p80/challenge.md" "| 80.00 GB/s | \`--challenge-gbs\`, given |"
check "the default bandwidth is labelled an estimate" has "$md" "This default is an estimate, not a measurement"
if [ -n "$(sql "$db" "select llc_bytes from hw where llc_bytes > 0")" ]; then
    check "a model smaller than the cache is flagged" has "$md" "Not meaningful for this model"
else # a VM without /sys/devices/system/cpu/cpu0/cache: the cache's size is unknown, nothing to flag against
    check "no last-level cache size known: no fits-in-cache claim" sh -c "! grep -q 'Not meaningful for this model' '$md'"
fi

# The projection starts from the thread count that decoded fastest (decode_tps), not the most threads,
# and says when more threads were slower.
set_decode() { # db factor: run r2's decode_tps median = r1's x factor
    sql "$1" "update summary set median = $2 * (select median from summary where run_id = $r1 and name = 'decode_tps') where run_id = $r2 and name = 'decode_tps'" >/dev/null
}
cp "$db" "$tmp/slow2.db"
set_decode "$tmp/slow2.db" 0.25
"$BENCH" report --challenge "$r2" --db "$tmp/slow2.db" --out "$tmp/slow2" >/dev/null 2>&1
check "2 threads 4x slower: the projection starts from 1 thread" \
    has "$tmp/slow2/challenge.md" "reached here at 1 thread (run $r1), the thread count that decoded fastest here"
check "... and warns that more threads were slower" \
    grep -q "Warning: more threads were slower.\*\* At 2 threads (run $r2) decode ran at [0-9.]* tokens/s, 75.0 % below" "$tmp/slow2/challenge.md"
cp "$db" "$tmp/fast2.db"
set_decode "$tmp/fast2.db" 4
"$BENCH" report --challenge "$r1" --db "$tmp/fast2.db" --out "$tmp/fast2" >/dev/null 2>&1
check "2 threads 4x faster: from 2 threads, no warning" sh -c "grep -qF 'reached here at 2 threads (run $r2), the thread count that decoded fastest' '$tmp/fast2/challenge.md' && ! grep -q 'more threads were slower' '$tmp/fast2/challenge.md'"

# One core's peak is the hw row's for the instruction set the run's kernels used (runs.isa).
hw=$(sql "$db" "select id from hw")
cp "$db" "$tmp/isa.db"
sql "$tmp/isa.db" "update hw set avx512 = 'measured: FMA 321.5 GFLOP/s (1 thread), 600.0 (2 threads)', vnni = 'measured: AVX-512 VNNI 987.6 GOP/s (1 thread), 1900.0 (2 threads)'" >/dev/null
isa_peak() { # isa type -> the report's "one core's peak" row
    sql "$tmp/isa.db" "update runs set isa = '$1', model_type = '$2' where workload = 'challenge'" >/dev/null
    "$BENCH" report --challenge "$r1" --db "$tmp/isa.db" --out "$tmp/isa" >/dev/null 2>&1
    grep "^| one core's peak arithmetic here |" "$tmp/isa/challenge.md"
}
check "AVX-512 kernels, float weights: the AVX-512 FMA peak" \
    test "$(isa_peak avx512vnni+hpx16 f32)" = "| one core's peak arithmetic here | 321.50 G op/s | hw row $hw: fp32 AVX-512 FMA (the run's avx512vnni kernels), 1 thread |"
check "AVX-512 VNNI kernels, quantized weights: the VNNI peak" \
    test "$(isa_peak avx512vnni q8_0)" = "| one core's peak arithmetic here | 987.60 G op/s | hw row $hw: int8 AVX-512 VNNI dot (vpdpbusd; the run's avx512vnni kernels), 1 thread |"
check "AVX2 kernels, quantized weights: the AVX2 int8 peak" \
    test "$(isa_peak avx2 q8_0)" = "| one core's peak arithmetic here | $(sql "$db" "select printf('%.2f', int8_gops_avx2_1t) from hw") G op/s | hw row $hw: int8 AVX2 dot (maddubs+madd) (the run's avx2 kernels), 1 thread |"

# Without a hw row: no projection, and why; one thread count only: said so.
cp "$db" "$tmp/nohw.db"
sql "$tmp/nohw.db" "update runs set hw_id = null" >/dev/null
sql "$tmp/nohw.db" "delete from hw" >/dev/null
"$BENCH" report --challenge "$r1" --db "$tmp/nohw.db" --out "$tmp/nohw" >/dev/null 2>&1
check "no hw row: no projection, with the reason" has "$tmp/nohw/challenge.md" "_No projection: this machine has no \`cortex-bench hw\` row"
"$BENCH" run --model "$model" -z "$tok" --workload challenge -t 1 --reps 1 --warmup 0 --no-progress --db "$tmp/one.db" >/dev/null 2>&1
check "without --allow-failures the 3 failed prompts make the run INVALID (exit 4)" test $? -eq 4
"$BENCH" run --model "$model" -z "$tok" --workload challenge -t 1 --reps 1 --warmup 0 --no-progress --allow-failures 0.4 \
    --db "$tmp/one.db" >/dev/null 2>&1
"$BENCH" report --challenge 2 --db "$tmp/one.db" --out "$tmp/one" >/dev/null 2>&1
check "one thread count: the report says 1 and 2 are wanted" has "$tmp/one/challenge.md" "Only one thread count of this configuration"

# An INVALID run: INVALID and its reasons first, its per-prompt outcomes, no figure read against the baseline,
# no projection, no chart; exit 4.
"$BENCH" report --challenge 1 --db "$tmp/one.db" --out "$tmp/inv" >/dev/null 2>"$tmp/inv.err"
check "report of an INVALID run: exit 4, one line saying so" fails_with $? 4 "$tmp/inv.err" "run 1 is INVALID"
inv=$tmp/inv/challenge.md
check "INVALID and the reasons are its first statement" grep -q "^> \*\*INVALID\*\*: 3 of 10 requests failed" <(sed -n 3p "$inv")
check "no comparison with the baseline, no projection, no chart" sh -c "! grep -qE '(above|below) the baseline|×|## Measured here|## Projection|[Pp]rojected|## Charts|tok/s' '$inv' && ! ls '$tmp/inv/'*.gp >/dev/null 2>&1"
check "its outcomes per prompt, failures with the reason" grep -q '^| c10 |  | failed | [0-9]* | 0 / [0-9]* | | | | | error: prompt of' "$inv"
check "and the reproduction record" has "$inv" "## Reproduction record"

# Over HTTP (the mock OpenAI server): the same prompts and report, no projection (the server's machine is not this one).
"$PY" tests/tools/mock_openai.py >"$tmp/mock.port" 2>"$tmp/mock.err" &
for _ in $(seq 100); do grep -q '^PORT' "$tmp/mock.port" 2>/dev/null && break; sleep 0.05; done
port=$(awk '/^PORT/ {print $2}' "$tmp/mock.port")
"$BENCH" run --endpoint "http://127.0.0.1:$port/v1" --workload challenge --reps 1 --warmup 0 --no-progress \
    --db "$tmp/http.db" >/dev/null 2>&1
check "run --endpoint --workload challenge exits 0" test $? -eq 0
"$BENCH" report --challenge 1 --db "$tmp/http.db" --out "$tmp/http" >/dev/null 2>&1
check "report of an HTTP run exits 0, every prompt served" grep -q '^| over HTTP | 1 | 10 of 10 |' "$tmp/http/challenge.md"
check "HTTP run: no projection, with the reason" has "$tmp/http/challenge.md" "_No projection: run 1 was measured over HTTP"

# Bad input: one line, exit 2 (the database untouched); a run that is not a prompt set: exit 1.
runs=$(sql "$db" "select count(*) from runs")
"$BENCH" run --model "$model" -z "$tok" --workload nosuchset --db "$db" >/dev/null 2>"$tmp/e1"
check "unknown prompt set: exit 2, one line naming it" fails_with $? 2 "$tmp/e1" "unknown workload 'nosuchset'"
"$BENCH" run --model "$model" -z "$tok" --workload challenge --reps 0 --db "$db" >/dev/null 2>"$tmp/e2"
check "--reps 0: exit 2, one line" fails_with $? 2 "$tmp/e2" "reps"
"$BENCH" run --model "$model" -z "$tok" --workload challenge --reps x --db "$db" >/dev/null 2>"$tmp/e3"
check "--reps x: exit 2, one line" fails_with $? 2 "$tmp/e3" "reps"
check "bad input stored no run" test "$(sql "$db" "select count(*) from runs")" = "$runs"
"$BENCH" report --challenge "$r1" --challenge-gbs -5 --db "$db" --out "$tmp/bad" >/dev/null 2>"$tmp/e4"
check "--challenge-gbs -5: exit 2, one line" fails_with $? 2 "$tmp/e4" "challenge-gbs"
"$BENCH" report "$r1" --challenge-cores 4 --db "$db" --out "$tmp/bad" >/dev/null 2>"$tmp/e5"
check "--challenge-cores without --challenge: exit 2" fails_with $? 2 "$tmp/e5" "applies to --challenge"
"$BENCH" report "$r1" --challenge "$r1" --db "$db" --out "$tmp/bad" >/dev/null 2>"$tmp/e6"
check "a run given twice: exit 2" fails_with $? 2 "$tmp/e6" "not also as RUN"
"$BENCH" run --model "$model" -z "$tok" --workload tg4 -t 1 --reps 1 --warmup 0 --no-progress --db "$db" >/dev/null 2>&1
tg=$(sql "$db" "select id from runs where workload = 'tg4'")
"$BENCH" report --challenge "$tg" --db "$db" --out "$tmp/bad" >/dev/null 2>"$tmp/e7"
check "a synthetic run: exit 1, one line saying it is not a prompt set" fails_with $? 1 "$tmp/e7" "not a prompt set"
"$BENCH" report --challenge 999 --db "$db" --out "$tmp/bad" >/dev/null 2>"$tmp/e8"
check "a missing run: exit 1, one line" fails_with $? 1 "$tmp/e8" "999"
check "nothing written for bad reports" test ! -e "$tmp/bad/challenge.md"

# The challenge on a gpt-oss model (harmony chat template): each prompt goes
# in as a harmony user turn, recorded as runs.chat_format; other models plain.
check "stories260K: prompts as plain text (chat_format NULL)" test "$(sql "$db" "select count(*) from runs where workload = 'challenge' and chat_format is null")" = 2
g=$tmp/gpt-oss-tiny.gguf
"$CORTEX" synth --shape gpt-oss-tiny -c 4096 -o "$g" >/dev/null 2>&1
"$BENCH" run --model "$g" --workload challenge -t 1 --reps 1 --warmup 0 --no-progress --db "$tmp/g.db" >/dev/null 2>"$tmp/g.err"
check "gpt-oss-tiny challenge: exit 0, chat_format harmony" test $? -eq 0 -a "$(sql "$tmp/g.db" "select chat_format from runs")" = harmony
c01=$("$PY" -c 'import json, sys; print(json.loads(open(sys.argv[1]).read().split("\n")[1])["text"])' prompts/challenge.jsonl)
turn="<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
Knowledge cutoff: 2024-06
Current date: 2025-08-05

Reasoning: medium

# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|><|start|>user<|message|>$c01<|end|><|start|>assistant"
n_turn=$("$CORTEX" tokenize -m "$g" -p "$turn" | wc -w)
check "gpt-oss-tiny challenge: c01's prompt tokens are its harmony user turn's ($n_turn)" \
    test "$(sql "$tmp/g.db" "select prompt_tokens from requests where item = 'c01'")" = "$n_turn"
g_run=$(sql "$tmp/g.db" "select id from runs")
(cd "$tmp" && "$BENCH" report --challenge "$g_run" --db "$tmp/g.db" --out "$tmp/g_rep" >/dev/null 2>&1)
check "its report says the prompts went in as harmony user turns" grep -q "prompts submitted as harmony user turns" "$tmp/g_rep/challenge.md"

finish challenge
