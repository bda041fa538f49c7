#!/usr/bin/env bash
# tests/cli/harness/endpoint.sh - `cortex-bench run --endpoint URL` against
# the mock OpenAI server (tests/tools/mock_openai.py) on ephemeral ports:
# the standard prompt set closed loop and a small trace open loop with its
# adapters mapped to model names, every request stored with its tokens (the
# server's usage count and the streamed chunks), 429 stored as rejected and
# 500 / a dropped stream / an error in the stream as failed, a deadline as
# timeout, the /metrics differences stored, Poisson rates and the rate
# sweep, HTTP runs not comparable with in-process ones (unless forced), and
# an unreachable server, a bad URL, a refused API key and bad flags refused
# with one line and nothing written to the database. The server's prompt
# cache: every request asks it off by default (cache_prompt false, a
# cache_salt of its own), --server-cache on records what it served (VALID),
# a server that serves from its cache although asked not to makes the run
# INVALID (exit 4), and cache-on and cache-off runs do not compare. The
# server's build (/props, system_fingerprint) is stored and shown, and no
# output of run, show, compare or report prints "nan".
set -u
. "$(dirname "$0")/../lib/common.sh"
MOCK="$PY $(dirname "$0")/../../tools/mock_openai.py"
db=$tmp/e.db

# start_mock NAME ARGS...: start a mock in the background; its port into $port.
start_mock() {
    local name=$1; shift
    $MOCK "$@" >"$tmp/$name.port" 2>"$tmp/$name.err" &
    for _ in $(seq 100); do grep -q '^PORT' "$tmp/$name.port" 2>/dev/null && break; sleep 0.05; done
    port=$(awk '/^PORT/ {print $2}' "$tmp/$name.port")
}
run() { "$BENCH" run --reps 1 --warmup 0 --db "$db" --no-progress "$@"; }
last() { sql "$db" "select max(id) from runs"; }
metric() { sql "$db" "select median from summary where run_id = $1 and name = '$2'"; }
runs() { sql "$db" "select count(*) from runs"; }

start_mock main --models base-model,lora-a,lora-b --token-delay-ms 0.2 --log-bodies "$tmp/bodies.jsonl"
url=http://127.0.0.1:$port/v1
check "the mock is listening" test -n "$port"

# The standard prompt set, closed loop, 4 clients.
run --endpoint "$url" --workload standard --concurrency 4 >"$tmp/std.out" 2>"$tmp/std.err"
check "standard workload over HTTP: exit 0" test $? -eq 0
std=$(last)
n_std=$(grep -c '"id"' prompts/standard.jsonl)
check "every standard prompt is stored ($n_std)" test "$(sql "$db" "select count(*) from requests where run_id = $std")" = "$n_std"
check "every one finished" test "$(metric "$std" requests_finished)" = "$n_std.0"
check "generated tokens are the prompts' max_tokens (ignore_eos sent)" test \
    "$(sql "$db" "select sum(gen_tokens) from requests where run_id = $std")" = \
    "$("$PY" -c 'import json,sys; print(sum(json.loads(l)["max_tokens"] for l in open(sys.argv[1]) if l.startswith("{")))' prompts/standard.jsonl)"
check "one token a chunk: chunks = tokens, ITL gaps = chunks - 1" test \
    "$(sql "$db" "select sum(stream_chunks = gen_tokens and json_array_length(itl_ms) = gen_tokens - 1) from requests where run_id = $std")" = "$n_std"
check "prompt tokens from the server's usage" test "$(sql "$db" "select min(prompt_tokens) > 0 from requests where run_id = $std")" = 1
check "TTFT, TPOT, ITL and E2E measured" test "$(sql "$db" "select count(*) from summary where run_id = $std and name in ('ttft_ms_p50', 'tpot_ms_p50', 'itl_ms_p50', 'e2e_ms_p50') and median > 0")" = 4
check "llama-server's timings: prefill_ms from prompt_ms, no queue, no HTTP-overhead metric" test \
    "$(sql "$db" "select count(*) from requests where run_id = $std and prefill_ms = 1.25 and queue_ms is null")/$(sql "$db" \
    "select count(*) from summary where run_id = $std and name in ('server_ttft_ms', 'http_ttft_overhead_ms')")" = "$n_std/0"
check "closed loop with 4 clients is stored" test "$(sql "$db" "select mode || concurrency from runs where id = $std")" = closed4
check "the endpoint and the server's identity are stored" test \
    "$(sql "$db" "select endpoint || ' | ' || server from runs where id = $std")" = "$url | mock-openai/1.0; models=base-model,lora-a,lora-b"
check "the /v1/models answer is stored as JSON" test \
    "$(sql "$db" "select json_extract(server_info, '\$.models.data[1].id') from runs where id = $std")" = lora-a
check "the metrics difference is stored: generated tokens" test \
    "$(sql "$db" "select delta from server_metrics where run_id = $std and series = 'mock_generation_tokens_total'")" = \
    "$(sql "$db" "select sum(gen_tokens) from requests where run_id = $std").0"
check "the metrics difference is stored: 200s" test \
    "$(sql "$db" "select delta from server_metrics where run_id = $std and series = 'mock_requests_total{code=\"200\"}'")" = "$n_std.0"
check "run prints the server section" grep -q '^### Server' "$tmp/std.out"
check "every request asked the server cache off: cache_prompt false and a cache_salt of its own" test "$("$PY" -c '
import json, sys
b = [json.loads(l) for l in open(sys.argv[1])]
print(sum(x.get("cache_prompt") is False for x in b), len({x.get("cache_salt") for x in b if x.get("cache_salt")}))' \
    "$tmp/bodies.jsonl")" = "$n_std $n_std"
check "... stored as server_cache off; no cached prompt token; VALID" test \
    "$(sql "$db" "select server_cache || ' ' || validity || ' ' || (select sum(cached_tokens) from requests where run_id = $std) from runs where id = $std")" = "off valid 0"
check "... no build where the server names none" test "$(sql "$db" "select coalesce(server_build, 'NULL') from runs where id = $std")" = NULL
"$BENCH" show "$std" --db "$db" >"$tmp/show_std.out" 2>&1
check "show: the build unknown, the prompt cache off" grep -q "^- server build unknown .*, prompt cache off" "$tmp/show_std.out"

# Outcomes: 429 rejected; 500, a dropped connection and an error in the stream failed.
"$PY" - "$tmp/mixed.jsonl" <<'PYEOF'
import json, sys
rows = [("ok1", "plain words here"), ("rej", "please REJECT me"), ("f500", "please FAIL500 me"),
        ("drop", "please DROP me"), ("serr", "please STREAMERR me"), ("ok2", "more plain words")]
with open(sys.argv[1], "w") as f:
    for i, t in rows:
        f.write(json.dumps({"id": i, "text": t, "max_tokens": 6}) + "\n")
PYEOF
run --endpoint "$url" --workload "prompts:$tmp/mixed.jsonl" --concurrency 2 >/dev/null 2>&1
check "a run with failed requests is INVALID: exit 4" test $? -eq 4
check "... stored INVALID, naming the failures (a 429 is counted, not a failure)" \
    test "$(sql "$db" "select validity || ': ' || validity_reasons from runs order by id desc limit 1")" = \
    "invalid: 3 of 6 requests failed (f500: HTTP 500: internal error (asked for))"
mix=$(last)
st() { sql "$db" "select state || ':' || coalesce(error, '') from requests where run_id = $mix and item = '$1'"; }
check "429 is stored as rejected" test "$(st rej)" = "rejected:rejected: HTTP 429: too many requests"
check "500 is stored as failed with the server's message" test "$(st f500)" = "failed:HTTP 500: internal error (asked for)"
check "a dropped stream is failed" bash -c "[[ '$(st drop)' == failed:* ]]"
check "an error in the stream is failed" test "$(st serr)" = "failed:error from the server: out of KV cache (asked for)"
check "counts: 2 finished, 1 rejected, 3 failed" test \
    "$(metric "$mix" requests_finished)/$(metric "$mix" requests_rejected)/$(metric "$mix" requests_failed)" = "2.0/1.0/3.0"

# A trace: open loop at its arrival times, adapters 1 and 2 sent as lora-a and lora-b, a deadline.
"$PY" - "$tmp/t.jsonl" <<'PYEOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(8):
        f.write(json.dumps({"id": "r%d" % i, "arrival_s": 0.05 * i, "adapter": i % 3, "prompt_len": 4,
                            "max_tokens": 5 + i, "text": "trace request number %d" % i}) + "\n")
    f.write(json.dumps({"id": "late", "arrival_s": 0.4, "adapter": 0, "prompt_len": 4, "max_tokens": 400,
                        "deadline_ms": 30, "text": "this one cannot finish in time"}) + "\n")
PYEOF
before=$(runs)
run --endpoint "$url" --model base-model --workload "trace:$tmp/t.jsonl" >/dev/null 2>"$tmp/noad.err"
check "a trace adapter without a name: exit 2" test $? -eq 2
check "... naming the request and the flag" grep -q "r1 asks for adapter 1, but --adapter-names names 0 adapters" "$tmp/noad.err"
check "... before anything is stored" test "$(runs)" = "$before"
run --endpoint "$url" --model base-model --adapter-names lora-a,lora-b --workload "trace:$tmp/t.jsonl" >/dev/null 2>&1
check "trace over HTTP: exit 0" test $? -eq 0
tr=$(last)
check "open loop" test "$(sql "$db" "select mode from runs where id = $tr")" = open
check "every request to its adapter's model finished (8), the late one timed out" \
    test "$(metric "$tr" requests_finished)/$(metric "$tr" requests_timed_out)" = "8.0/1.0"
check "requests issued at their arrival times" test "$(sql "$db" "select min(arrival_ms >= 50 * idx - 1) from requests where run_id = $tr and idx < 8")" = 1
check "adapter ids stored per request" test "$(sql "$db" "select count(distinct adapter) from requests where run_id = $tr")" = 3

run --endpoint "$url" --workload "prompts:$tmp/mixed.jsonl" --respect-eos >/dev/null 2>&1
check "--respect-eos: ignore_eos not sent (the mock then stops after 5 tokens)" \
    test "$(sql "$db" "select gen_tokens from requests where run_id = $(last) and item = 'ok1'")" = 5

# Poisson rates and the rate sweep over HTTP.
run --endpoint "$url" --workload "prompts:$tmp/t.jsonl" --rate 200 --adapter-names lora-a,lora-b >/dev/null 2>&1
check "--rate 200: open loop at that rate" test "$(sql "$db" "select mode || ' ' || rate from runs where id = $(last)")" = "open 200.0"
first=$(( $(last) + 1 ))
grep -E '"(ok1|ok2|rej)"' "$tmp/mixed.jsonl" >"$tmp/served.jsonl" # no failure: a saturation run that is VALID
run --endpoint "$url" --workload "prompts:$tmp/served.jsonl" --rate sweep --concurrency 3 >"$tmp/sweep.out" 2>&1
check "the sweep names its saturation rate (3 clients)" grep -q "^rate sweep: saturation [0-9.]* requests/s (run $first, closed loop, 3 clients)" "$tmp/sweep.out"
check "the sweep stores 7 runs" test "$(sql "$db" "select count(*) from runs where sweep = $first")" = 7

# Tokens counted from usage when chunks carry several.
start_mock two --chunk-tokens 2 --token-delay-ms 0.1
run --endpoint "http://127.0.0.1:$port/v1/" --workload "prompts:$tmp/mixed.jsonl" >/dev/null 2>&1
two=$(last)
check "2 tokens a chunk: tokens from usage, chunks stored apart" test \
    "$(sql "$db" "select gen_tokens || '/' || stream_chunks from requests where run_id = $two and item = 'ok1'")" = "6/3"
check "a trailing / of the URL is dropped" test "$(sql "$db" "select endpoint from runs where id = $two")" = "http://127.0.0.1:$port/v1"

# A server that answers whole (application/json) though asked to stream, and has no /metrics.
start_mock whole --ignore-stream --no-metrics --models base-model
whole_port=$port
run --endpoint "http://127.0.0.1:$port/v1" --workload "prompts:$tmp/mixed.jsonl" >/dev/null 2>&1
whole=$(last)
check "a whole answer: one chunk, tokens from usage, TTFT = E2E" test \
    "$(sql "$db" "select gen_tokens || '/' || stream_chunks || '/' || (ttft_ms = e2e_ms) from requests where run_id = $whole and item = 'ok1'")" = "6/1/1"
check "no /metrics: no server metrics rows" test "$(sql "$db" "select count(*) from server_metrics where run_id = $whole")" = 0

# Comparability: two HTTP runs of the same configuration compare; HTTP and in-process do not, unless forced.
run --endpoint "$url" --workload standard --concurrency 4 >/dev/null 2>&1
"$BENCH" compare "$std" "$(last)" --db "$db" >"$tmp/same.out" 2>&1
check "two runs against the same server compare (not refused; exit 1 would be a timing regression)" \
    test $? -ne 2 -a "$(grep -c 'not comparable' "$tmp/same.out")" = 0
"$CORTEX" synth --shape test-tiny --type f32 -o "$tmp/tiny.gguf" 2>/dev/null
run --model "$tmp/tiny.gguf" -t 1 --workload "prompts:$tmp/mixed.jsonl" >/dev/null 2>&1
local_run=$(last)
"$BENCH" compare "$mix" "$local_run" --db "$db" >/dev/null 2>"$tmp/cmp.err"
check "HTTP and in-process runs are not comparable" test $? -eq 2
check "... the endpoint named as a difference" grep -q "endpoint (HTTP server or in-process)" "$tmp/cmp.err"
"$BENCH" compare "$std" "$local_run" --db "$db" --force >"$tmp/force.out" 2>&1
check "... unless --force (compared, flagged)" grep -q "FLAGGED: not comparable (.*endpoint (HTTP server or in-process)" "$tmp/force.out"
"$BENCH" compare "$mix" "$local_run" --db "$db" --force >/dev/null 2>"$tmp/force.err"
check "... but an INVALID run is never compared, even with --force (exit 4)" \
    sh -c "test $? -eq 4 && grep -q 'run $mix is INVALID: 3 of 6 requests failed' '$tmp/force.err'"

# The server's prompt cache (the mock's, as llama-server's): the same prompt three times in a run, twice over.
printf '{"id": "r%d", "text": "the same long prompt is sent three times in one run", "max_tokens": 4}\n' 1 2 3 >"$tmp/same.jsonl"
start_mock cache --fingerprint fp_mock1 --build-info b100-probe --log-bodies "$tmp/cache_bodies.jsonl"
curl_metrics=$(curl -s "http://127.0.0.1:$port/metrics" | grep -c 'mock_prompt_cache_hit_ratio NaN')
check "the fresh mock's hit ratio is NaN (a value /metrics may give)" test "$curl_metrics" = 1
run --endpoint "http://127.0.0.1:$port/v1" --workload "prompts:$tmp/same.jsonl" --server-cache on >"$tmp/on.out" 2>&1
check "--server-cache on, a repeated prompt: exit 0 (VALID)" test $? -eq 0
on=$(last)
check "... the cached prompt tokens recorded per request (0, then all 11 words but the last)" test \
    "$(sql "$db" "select group_concat(cached_tokens, ',') from (select cached_tokens from requests where run_id = $on order by idx)")" = "0,10,10"
check "... stored as server_cache on, VALID" test "$(sql "$db" "select server_cache || ' ' || validity from runs where id = $on")" = "on valid"
check "... nothing asked of the server's cache" test "$(grep -c cache_prompt "$tmp/cache_bodies.jsonl")" = 0
check "the answers' system_fingerprint is the build (over the probe's /props build_info)" test \
    "$(sql "$db" "select server_build from runs where id = $on")" = fp_mock1
run --endpoint "http://127.0.0.1:$port/v1" --workload "prompts:$tmp/same.jsonl" >/dev/null 2>&1; rc=$?
check "--server-cache off (the default) against a server that honours cache_prompt: VALID, nothing cached" test \
    "$rc/$(sql "$db" "select sum(cached_tokens) from requests where run_id = $(last)")" = "0/0"
off=$(last)
"$BENCH" compare "$on" "$off" --db "$db" >"$tmp/cache_cmp.out" 2>"$tmp/cache_cmp.err"; rc=$?
check "cache-on and cache-off runs do not compare, the difference named" test \
    "$rc/$(grep -c 'server prompt cache (--server-cache)' "$tmp/cache_cmp.err")" = "2/1"
check "... nor share a compare key" test "$(sql "$db" "select count(distinct compare_key) from runs where id in ($on, $off)")" = 2
"$BENCH" show "$on" --db "$db" >"$tmp/show_on.out" 2>&1
check "show: the build and the prompt cache on" grep -q "^- server build fp_mock1, prompt cache on" "$tmp/show_on.out"
check "run: what the server's cache served (2 x 10 of 3 x 11 prompt tokens)" \
    grep -q "^  the server's prompt cache (--server-cache on) served 20 of 33 prompt tokens" "$tmp/on.out"
check "show: a server metric that was NaN shows no figure ('-')" grep -q '^| mock_prompt_cache_hit_ratio | - | 1 | ' "$tmp/show_on.out"
start_mock probe --build-info b100-probe --no-metrics
run --endpoint "http://127.0.0.1:$port/v1" --workload "prompts:$tmp/same.jsonl" >/dev/null 2>&1
check "no system_fingerprint: the probe's /props build_info is the build" test \
    "$(sql "$db" "select server_build from runs where id = $(last)")" = b100-probe
start_mock liar --ignore-cache-prompt --cache-report usage
run --endpoint "http://127.0.0.1:$port/v1" --workload "prompts:$tmp/same.jsonl" >"$tmp/liar.out" 2>"$tmp/liar.err"
check "a server that serves from its cache although asked not to: INVALID, exit 4" test $? -eq 4
check "... stored INVALID with the reason, its cached tokens (usage.prompt_tokens_details) recorded" test \
    "$(sql "$db" "select validity || ': ' || validity_reasons || ' / ' || (select sum(cached_tokens) from requests where run_id = runs.id) from runs where id = $(last)")" = \
    "invalid: the server served 20 prompt tokens from its cache although asked not to (cache_prompt false): its figures are inflated by it (--server-cache on measures with the cache) / 20"
check "... and says so" grep -q "run $(last) is INVALID: the server served 20 prompt tokens from its cache" "$tmp/liar.err"
# A trace answered whole (no ITL, no queue): the per-adapter and per-request tables show "-", not nan.
run --endpoint "http://127.0.0.1:$whole_port/v1" --workload "trace:$tmp/t.jsonl" --adapter-names base-model,base-model \
    --model base-model >"$tmp/whole_trace.out" 2>&1
"$BENCH" show "$(last)" --db "$db" >"$tmp/show_whole.out" 2>&1
check "a trace answered whole: the per-adapter ITL shows '-'" grep -q '^| 1 | 3 | [0-9.]* | [0-9.]* | [0-9.]* | - | - | - |' "$tmp/show_whole.out"
"$BENCH" report "$on" --db "$db" --out "$tmp/rep" >/dev/null 2>&1
check "report: the server's build" grep -q "^- server build fp_mock1" "$tmp/rep/report.md"
for f in std.out show_std.out on.out show_on.out liar.out whole_trace.out show_whole.out rep/report.md cache_cmp.out \
    cache_cmp.err; do
    [ -f "$tmp/$f" ] && cat "$tmp/$f"
done >"$tmp/all.out"
"$BENCH" show "$std" --db "$db" -o json >>"$tmp/all.out" 2>&1
"$BENCH" show "$std" --db "$db" -o csv >>"$tmp/all.out" 2>&1
"$BENCH" list --db "$db" >>"$tmp/all.out" 2>&1
check "no 'nan' anywhere in run, show (md, json, csv), compare, list or report output" test \
    "$(grep -ciw -e nan -e -nan "$tmp/all.out")" = 0

# Errors: one line naming the URL, non-zero, nothing in the database.
before=$(runs)
"$BENCH" run --endpoint http://127.0.0.1:1/v1 --db "$tmp/none.db" >/dev/null 2>"$tmp/down.err"
check "unreachable server: exit 1" test $? -eq 1
check "... one line naming the URL" test "$(wc -l <"$tmp/down.err")" = 1
check "... the URL in it" grep -q "http://127.0.0.1:1/v1/models: cannot reach the server" "$tmp/down.err"
check "... no database made" test ! -e "$tmp/none.db"
run --endpoint "ftp://example/v1" >/dev/null 2>"$tmp/url.err"
check "not an http URL: exit 2, one line" test $? -eq 2 -a "$(wc -l <"$tmp/url.err")" = 1
start_mock key --api-key s3cret
run --endpoint "http://127.0.0.1:$port/v1" >/dev/null 2>"$tmp/401.err"
check "a refused API key: exit 1" test $? -eq 1
check "... one line naming the URL and the status" grep -q "^cortex-bench: http://127.0.0.1:$port/v1/models: HTTP 401 (the server refused the API key" "$tmp/401.err"
check "... nothing stored" test "$(runs)" = "$before"
run --endpoint "http://127.0.0.1:$port/v1" --api-key s3cret --workload "prompts:$tmp/mixed.jsonl" >/dev/null 2>&1
check "the right --api-key is sent" test "$(metric "$(last)" requests_finished)" = 2.0
run --endpoint "$url" --model no-such-model --workload "prompts:$tmp/mixed.jsonl" >/dev/null 2>"$tmp/nm.err"
check "a model the server does not list: a note, the requests fail (the mock 404s)" \
    test "$(grep -c "does not list model 'no-such-model'" "$tmp/nm.err")/$(metric "$(last)" requests_failed)" = "1/6.0"
run --endpoint "$url" -t 2 >/dev/null 2>"$tmp/t.err"
check "-t with --endpoint: exit 2" test $? -eq 2
run --endpoint "$url" --workload pp16 >/dev/null 2>"$tmp/pp.err"
check "a synthetic test with --endpoint: exit 2" grep -q "not the synthetic test 'pp16'" "$tmp/pp.err"
run --model "$tmp/tiny.gguf" --api-key x >/dev/null 2>"$tmp/k.err"
check "--api-key without --endpoint: exit 2" test $? -eq 2
"$BENCH" run --model "$tmp/tiny.gguf" --server-cache off --db "$tmp/sc.db" >/dev/null 2>"$tmp/sc.err"; rc=$?
check "--server-cache without --endpoint: exit 2, one line, no database" test \
    "$rc/$(wc -l <"$tmp/sc.err")/$(test -e "$tmp/sc.db" && echo db)" = "2/1/"
check "... naming the flag" grep -q "^cortex-bench: --server-cache applies to runs over HTTP: give --endpoint URL" "$tmp/sc.err"
run --endpoint "$url" --server-cache maybe >/dev/null 2>"$tmp/sc2.err"; rc=$?
check "--server-cache maybe: exit 2 naming on or off" test "$rc/$(grep -c "'maybe' is not one of off|on" "$tmp/sc2.err")" = "2/1"

finish endpoint
