#!/usr/bin/env bash
# tests/cli/engine/serve.sh - `cortex serve` end to end with curl, on
# loopback ports the server picks (--port 0, read from its first line):
#   - greedy output: whole = streamed (SSE chunks joined, [DONE] last) =
#     `cortex generate --temp 0`, text and token count; usage right;
#     chat whole = chat streamed; logprobs shapes;
#   - errors: 400 (bad JSON, wrong types, ranges, missing fields) naming the
#     field, 413 past --max-body, 404 unknown model and route, 405, 401
#     without the API key, the chat route without a template;
#   - on a slow synthetic model (stories15m's shape, 2048 context): 429 with
#     Retry-After when --max-queue is full, clients that disconnect (mid-stream
#     and waiting for a whole answer) cancel their requests and the KV blocks
#     return to idle (/metrics), 504 with partial usage past
#     --request-timeout, and SIGTERM drains: the running request completes,
#     the server exits 0;
#   - LoRA adapters: --lora NAME=FILE, the `model` field selecting one (tokens
#     equal `cortex generate --lora`), /v1/load_lora_adapter and
#     /v1/unload_lora_adapter (with --lora-dir; serve_api.sh checks its
#     confinement), /v1/models and the adapter metrics;
#   - cortex-bench run --endpoint against it: the standard prompts, and a
#     trace whose adapter id maps to the adapter's name (--adapter-names);
#   - --prefix-cache: a repeated prompt's usage.prompt_tokens_details.cached_tokens
#     (= timings.cache_n), "cache_prompt": false computing it whole (same
#     text), and cortex-bench's --server-cache off (nothing cached, VALID)
#     and on (the cached tokens recorded).
# Needs ../shared/models/stories260K.gguf (skips without it) and curl.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/serve.sh"
M=$MODELS/stories260K.gguf
[ -f "$M" ] || { echo "SKIP: $M is missing: no model to serve"; finish; exit; }
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; finish; exit; }

# SSE stream in FILE -> the joined text (key: text, or delta.content for chat), checks [DONE] is last.
sse_text() {
    "$PY" - "$1" "$2" <<'EOF'
import json, sys
events = [l[6:] for l in open(sys.argv[1], encoding="utf-8").read().split("\n") if l.startswith("data: ")]
assert events[-1] == "[DONE]", "stream does not end with [DONE]"
out = []
for e in events[:-1]:
    d = json.loads(e)
    for c in d["choices"]:
        out.append(c["text"] if sys.argv[2] == "text" else c["delta"].get("content", ""))
sys.stdout.write("".join(out))
EOF
}

# ---- greedy output, usage, streaming (stories260K) --------------------------
start "$tmp/a.log" -m "$M" --chat-template chatml --max-body 4096 || { finish; exit 1; }
A_PID=$PID
P="Once upon a time"
"$CORTEX" generate -m "$M" -p "$P" -n 40 --temp 0 --no-echo >"$tmp/gen.txt" 2>"$tmp/gen.err"
n_gen=$(sed -n 's/.*generated tokens: \([0-9]*\).*/\1/p' "$tmp/gen.err")
n_prompt=$(sed -n 's/^prompt tokens: \([0-9]*\),.*/\1/p' "$tmp/gen.err")
"$PY" -c 'import sys; t = open(sys.argv[1], encoding="utf-8").read(); open(sys.argv[2], "w", encoding="utf-8").write(t[:-1])' \
    "$tmp/gen.txt" "$tmp/want.txt" # generate ends with a newline of its own

code=$(post /v1/completions "{\"prompt\": \"$P\", \"max_tokens\": 40, \"temperature\": 0}")
check "completions: 200" test "$code" = 200
field "$tmp/body" 'd["choices"][0]["text"]' | head -c -1 >"$tmp/whole.txt"
check "completions: text = cortex generate --temp 0" cmp -s "$tmp/whole.txt" "$tmp/want.txt"
check "completions: usage = generate's counts ($n_prompt + $n_gen)" test \
    "$(field "$tmp/body" '[d["usage"][k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")]')" = \
    "[$n_prompt, $n_gen, $((n_prompt + n_gen))]"
check "completions: finish_reason length, object text_completion, model llama" test \
    "$(field "$tmp/body" 'd["choices"][0]["finish_reason"], d["object"], d["model"]')" = "('length', 'text_completion', 'llama')"
check "completions: timings with the counts, and ttft_ms = queue_ms + prompt_ms" test "$(field "$tmp/body" \
    '(lambda t: (t["prompt_n"] + t["cache_n"], t["predicted_n"], abs(t["ttft_ms"] - t["queue_ms"] - t["prompt_ms"]) < 0.01, min(t[k] for k in ("prepare_ms", "queue_ms", "prompt_ms", "predicted_ms")) >= 0))(d["timings"])')" = "($n_prompt, $n_gen, True, True)"

curl -sN -o "$tmp/stream" -H 'Content-Type: application/json' "$URL/v1/completions" \
    -d "{\"prompt\": \"$P\", \"max_tokens\": 40, \"temperature\": 0, \"stream\": true, \"stream_options\": {\"include_usage\": true}}"
sse_text "$tmp/stream" text >"$tmp/streamed.txt"
check "stream: the chunks join to the whole text, [DONE] last" cmp -s "$tmp/streamed.txt" "$tmp/want.txt"
grep '^data: {' "$tmp/stream" | tail -1 | cut -c7- >"$tmp/usage.json"
check "stream: include_usage sends a last chunk with the usage and no choices" test \
    "$(field "$tmp/usage.json" 'd["usage"]["completion_tokens"], d["choices"]')" = "($n_gen, [])"
check "stream: one chunk says finish_reason length" test "$(grep -c '"finish_reason":"length"' "$tmp/stream")" = 1
check "stream: only that chunk carries timings" test "$(grep -c '"timings":' "$tmp/stream")/$(grep '"timings":' "$tmp/stream" | grep -c '"finish_reason":"length"')" = 1/1

# stop strings end the text before them, as the scheduler does
stop=$(head -c 12 "$tmp/want.txt" | tail -c 3)
code=$(post /v1/completions "{\"prompt\": \"$P\", \"max_tokens\": 40, \"temperature\": 0, \"stop\": [$(printf '%s' "$stop" | "$PY" -c 'import json,sys; print(json.dumps(sys.stdin.read()))')]}")
field "$tmp/body" 'd["choices"][0]["text"], d["choices"][0]["finish_reason"]' >"$tmp/stopped"
check "stop: text ends before the stop string, finish_reason stop" \
    "$PY" -c 'import sys, ast; t, f = ast.literal_eval(open(sys.argv[1]).read()); w = open(sys.argv[2]).read(); s = sys.argv[3]; sys.exit(not (f == "stop" and t == w[:w.index(s)]))' \
    "$tmp/stopped" "$tmp/want.txt" "$stop"

# logprobs: completions (integer: alternatives), chat (boolean + top_logprobs)
code=$(post /v1/completions "{\"prompt\": \"$P\", \"max_tokens\": 5, \"temperature\": 0, \"logprobs\": 3}")
check "completions logprobs: 5 tokens, 3 alternatives each, the greedy token the best" test \
    "$(field "$tmp/body" 'len(d["choices"][0]["logprobs"]["tokens"]), [len(t) for t in d["choices"][0]["logprobs"]["top_logprobs"]], all(abs(lp - max(t.values())) < 1e-6 for lp, t in zip(d["choices"][0]["logprobs"]["token_logprobs"], d["choices"][0]["logprobs"]["top_logprobs"]))')" = \
    "(5, [3, 3, 3, 3, 3], True)"
chat='{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell a story"}], "max_tokens": 30, "temperature": 0'
code=$(post /v1/chat/completions "$chat, \"logprobs\": true, \"top_logprobs\": 2}")
check "chat: 200, role assistant, object chat.completion" test \
    "$code $(field "$tmp/body" 'd["choices"][0]["message"]["role"], d["object"]')" = "200 ('assistant', 'chat.completion')"
check "chat logprobs: one entry per token, 2 alternatives" test \
    "$(field "$tmp/body" 'len(d["choices"][0]["logprobs"]["content"]) == d["usage"]["completion_tokens"], len(d["choices"][0]["logprobs"]["content"][0]["top_logprobs"])')" = "(True, 2)"
field "$tmp/body" 'd["choices"][0]["message"]["content"]' | head -c -1 >"$tmp/chat_whole.txt"
curl -sN -o "$tmp/chat_stream" "$URL/v1/chat/completions" -d "$chat, \"stream\": true}"
sse_text "$tmp/chat_stream" content >"$tmp/chat_streamed.txt"
check "chat: streamed deltas join to the whole answer" cmp -s "$tmp/chat_whole.txt" "$tmp/chat_streamed.txt"
check "chat stream: first delta carries the role" sh -c "grep -m1 '^data: {' '$tmp/chat_stream' | grep -q '\"role\":\"assistant\"'"

# ---- errors ------------------------------------------------------------------
err_is() { # description, want status, want param ('' for none), code
    check "$1: $2, param '$3'" test "$4 $(field "$tmp/body" '(d["error"]["param"] or "") + " " + d["error"]["type"]')" = \
        "$2 $3 ${5:-invalid_request_error}"
}
err_is "malformed JSON" 400 "" "$(post /v1/completions '{"prompt": "x",')"
err_is "not an object" 400 "" "$(post /v1/completions '[1, 2]')"
err_is "max_tokens a string" 400 max_tokens "$(post /v1/completions '{"prompt": "x", "max_tokens": "ten"}')"
err_is "temperature out of range" 400 temperature "$(post /v1/completions '{"prompt": "x", "temperature": 5000}')"
err_is "stream not a boolean" 400 stream "$(post /v1/completions '{"prompt": "x", "stream": 1}')"
err_is "prompt missing" 400 prompt "$(post /v1/completions '{"max_tokens": 3}')"
err_is "messages missing" 400 messages "$(post /v1/chat/completions '{"prompt": "x"}')"
err_is "a message without content" 400 "messages[0].content" "$(post /v1/chat/completions '{"messages": [{"role": "user"}]}')"
err_is "a bad role" 400 "messages[0].role" "$(post /v1/chat/completions '{"messages": [{"role": "robot", "content": "x"}]}')"
err_is "n = 2" 400 n "$(post /v1/completions '{"prompt": "x", "n": 2}')"
big=$("$PY" -c 'print("{\"prompt\": \"" + "a" * 5000 + "\"}")')
err_is "a body over --max-body" 413 "" "$(post /v1/completions "$big")"
err_is "an unknown model" 404 model "$(post /v1/completions '{"prompt": "x", "model": "gpt-4"}')"
check "an unknown model: code model_not_found" test "$(field "$tmp/body" 'd["error"]["code"]')" = model_not_found
check "the model's own name: 200" test "$(post /v1/completions '{"prompt": "x", "model": "llama", "max_tokens": 2}')" = 200
check "a context overflow: 400 context_length_exceeded" test \
    "$(post /v1/completions "{\"prompt\": [$(seq -s, 1 600)]}") $(field "$tmp/body" 'd["error"]["code"]')" = "400 context_length_exceeded"
err_is "an unknown route" 404 "" "$(curl -s -o "$tmp/body" -w '%{http_code}' "$URL/v1/nothing")"
err_is "GET on a POST route" 405 "" "$(curl -s -o "$tmp/body" -w '%{http_code}' "$URL/v1/completions")"
check "GET /v1/models lists the model" test "$(curl -s "$URL/v1/models" >"$tmp/body"; field "$tmp/body" 'd["data"][0]["id"]')" = llama
check "GET /health: ok" test "$(curl -s "$URL/health")" = '{"status":"ok"}'
check "/metrics: the requests so far, in Prometheus text" sh -c \
    "curl -s '$URL/metrics' | grep -qE '^cortex_time_to_first_token_seconds_count [1-9]'"
check "/metrics: adapters resident 0" test "$(metric cortex_adapters_resident)" = 0
kill -TERM $A_PID; wait $A_PID
check "SIGTERM on an idle server: exit 0" test $? -eq 0

# no chat template: the chat route says so; an API key is required
start "$tmp/b.log" -m "$M" --api-key s3cret || { finish; exit 1; }
err_is "no API key" 401 "" "$(post /v1/completions '{"prompt": "x"}')" authentication_error
err_is "a wrong API key" 401 "" "$(post /v1/completions '{"prompt": "x"}' -H 'Authorization: Bearer nope')" authentication_error
K=(-H 'Authorization: Bearer s3cret')
check "the right API key: 200" test "$(post /v1/completions '{"prompt": "x", "max_tokens": 2}' "${K[@]}")" = 200
check "/health needs no key" test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200
err_is "chat without a chat template" 400 messages "$(post /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}]}' "${K[@]}")"
check "chat without a template: the error names --chat-template" sh -c "grep -q -- '--chat-template NAME' '$tmp/body'"
kill -TERM $PID; wait $PID

"$CORTEX" serve -m "$M" --chat-template nope >/dev/null 2>"$tmp/err"
check "--chat-template nope: exit 2, one line naming the templates" test $? -eq 2 -a "$(wc -l <"$tmp/err")" = 1 -a \
    -n "$(grep "'nope' is not one of chatml|llama2|llama3|zephyr|phi3|gemma" "$tmp/err")"
"$CORTEX" serve -m "$M" --max-seqs 8 --max-batch-tokens 4 >/dev/null 2>"$tmp/err"
check "--max-batch-tokens below --max-seqs: exit 2" test $? -eq 2

# ---- a slow model: queue full, disconnects, deadlines, drain ----------------
S=$tmp/slow.gguf
"$CORTEX" synth --shape stories15m --type q8_0 -c 2048 -o "$S" 2>/dev/null
long='{"prompt": "hello", "max_tokens": 2000, "ignore_eos": true, "temperature": 0'
start "$tmp/s.log" -m "$S" --max-seqs 1 --max-queue 1 || { finish; exit 1; }
curl -sN "$URL/v1/completions" -d "$long, \"stream\": true}" >"$tmp/r1" 2>/dev/null &
R1=$!
check "a long streamed request runs" wait_metric cortex_requests_running 1
curl -s "$URL/v1/completions" -d "$long}" >"$tmp/r2" 2>/dev/null &
R2=$!
check "a second one waits (--max-seqs 1)" wait_metric cortex_requests_waiting 1
code=$(post /v1/completions "$long}" -D "$tmp/headers")
check "a third one: 429 (--max-queue 1), type rate_limit_error" test \
    "$code $(field "$tmp/body" 'd["error"]["type"]')" = "429 rate_limit_error"
check "429 carries Retry-After" grep -qi '^retry-after: [0-9]' "$tmp/headers"
check "the stream is flowing" sh -c "grep -q '^data: {' '$tmp/r1'"
kill $R1; wait $R1 2>/dev/null
check "the streaming client disconnects: its request is cancelled" \
    wait_metric 'cortex_requests_total{outcome="cancelled"}' 1
check "... and the waiting one is admitted" wait_metric cortex_requests_running 1
kill $R2; wait $R2 2>/dev/null
check "the waiting-for-a-whole-answer client disconnects: cancelled too" \
    wait_metric 'cortex_requests_total{outcome="cancelled"}' 2
check "idle again: nothing running" wait_metric cortex_requests_running 0
check "idle again: every KV block back (cortex_kv_blocks_used 0)" wait_metric cortex_kv_blocks_used 0
# SIGTERM while a request runs: it completes, its response is written, exit 0
curl -s "$URL/v1/completions" -d '{"prompt": "hello", "max_tokens": 1000, "ignore_eos": true}' >"$tmp/r4" &
R4=$!
check "a request runs when SIGTERM comes" wait_metric cortex_requests_running 1
kill -TERM $PID
sleep 0.3
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")
check "draining: new connections are refused, or answered 503 (got $code)" test "$code" = 000 -o "$code" = 503
wait $PID
check "SIGTERM drains: exit 0" test $? -eq 0
wait $R4
check "the in-flight request completed: 1000 tokens, finish_reason length" test \
    "$(field "$tmp/r4" 'd["usage"]["completion_tokens"], d["choices"][0]["finish_reason"]')" = "(1000, 'length')"
check "the server said it drained" grep -q 'SIGTERM: draining 1 running' "$tmp/s.log"

# --request-timeout: 504 with the partial usage
start "$tmp/t.log" -m "$S" --request-timeout 0.3 || { finish; exit 1; }
code=$(post /v1/completions "$long}")
check "past --request-timeout: 504, code request_timeout" test "$code $(field "$tmp/body" 'd["error"]["code"]')" = \
    "504 request_timeout"
check "504 carries the partial usage (some tokens, fewer than asked)" test \
    "$(field "$tmp/body" '0 < d["usage"]["completion_tokens"] < 2000 and d["usage"]["prompt_tokens"] > 0')" = True
curl -sN -o "$tmp/t_stream" "$URL/v1/completions" -d "$long, \"stream\": true}"
grep '^data: {' "$tmp/t_stream" | tail -1 | cut -c7- >"$tmp/t_last.json"
check "a streamed request past its deadline ends with an error event (partial usage), then [DONE]" test \
    "$(field "$tmp/t_last.json" 'd["error"]["code"], d["usage"]["completion_tokens"] > 0')/$(tail -2 "$tmp/t_stream" | head -1)" \
    = "('request_timeout', True)/data: [DONE]"
check "/metrics counts the timeouts" test "$(metric 'cortex_requests_total{outcome="timeout"}')" = 2
kill -TERM $PID; wait $PID

# LoRA adapters: --lora NAME=FILE at start, the `model` field picks one (tokens equal
# `cortex generate --lora`), load and unload at run time (vLLM's routes), /v1/models, /metrics
"$CORTEX" synth-lora -m "$M" --rank 8 --alpha 16 --seed 1 -o "$tmp/l1.gguf" 2>/dev/null
"$CORTEX" synth-lora -m "$M" --rank 4 --targets q,v,down --seed 2 -o "$tmp/l2.gguf" 2>/dev/null
start "$tmp/l.log" -m "$M" --lora "one=$tmp/l1.gguf" --lora-dir "$tmp" || { finish; exit 1; }
# (the server's JSON carries invalid UTF-8 bytes as U+FFFD, as Python's "replace" decodes them)
gen_lora() { "$CORTEX" generate -m "$M" "$@" -p "Once upon a time" -n 24 --temp 0 --no-echo 2>/dev/null | head -c -1 |
    "$PY" -c 'import sys; sys.stdout.write(sys.stdin.buffer.read().decode("utf-8", "replace"))'; }
q='{"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0, "ignore_eos": true'
code=$(post /v1/completions "$q, \"model\": \"one\"}")
check "model 'one' answers 200, echoing the name" test "$code $(field "$tmp/body" 'd["model"]')" = "200 one"
check "model 'one' = cortex generate --lora (greedy)" test "$(field "$tmp/body" 'd["choices"][0]["text"]')" = \
    "$(gen_lora --lora "$tmp/l1.gguf")"
curl -sN -o "$tmp/l_stream" "$URL/v1/completions" -d "$q, \"model\": \"one\", \"stream\": true}"
check "model 'one' streamed = whole" test "$(sse_text "$tmp/l_stream" text)" = "$(field "$tmp/body" 'd["choices"][0]["text"]')"
post /v1/completions "$q}" >/dev/null
check "the base model is unchanged beside it" test "$(field "$tmp/body" 'd["choices"][0]["text"]')" = "$(gen_lora)"
code=$(post /v1/load_lora_adapter "{\"lora_name\": \"two\", \"lora_path\": \"$tmp/l2.gguf\"}")
check "load_lora_adapter: 200" test "$code" = 200
code=$(post /v1/completions "$q, \"model\": \"two\"}")
check "model 'two' = cortex generate --lora l2" test "$code $(field "$tmp/body" 'd["choices"][0]["text"]')" = \
    "200 $(gen_lora --lora "$tmp/l2.gguf")"
curl -s "$URL/v1/models" >"$tmp/models"
check "/v1/models lists the base model and both adapters" test \
    "$(field "$tmp/models" '[m["id"] for m in d["data"]][1:], d["data"][1]["parent"] == d["data"][0]["id"]')" = \
    "(['one', 'two'], True)"
check "/metrics: 2 adapters resident, 2 loads" test "$(metric cortex_adapters_resident) $(metric cortex_adapter_loads_total)" \
    = "2 2"
code=$(post /v1/load_lora_adapter "{\"lora_name\": \"two\", \"lora_path\": \"$tmp/l2.gguf\"}")
check "loading a taken name: 400 naming lora_name" test "$code $(field "$tmp/body" 'd["error"]["param"]')" = "400 lora_name"
code=$(post /v1/load_lora_adapter "{\"lora_name\": \"bad\", \"lora_path\": \"$tmp/none.gguf\"}")
check "loading a missing file: 400 naming lora_path" test "$code $(field "$tmp/body" 'd["error"]["param"]')" = "400 lora_path"
code=$(post /v1/unload_lora_adapter '{"lora_name": "two"}')
check "unload_lora_adapter: 200" test "$code" = 200
code=$(post /v1/completions "$q, \"model\": \"two\"}")
check "an unloaded adapter: 404 model_not_found" test "$code $(field "$tmp/body" 'd["error"]["code"]')" = "404 model_not_found"
code=$(post /v1/unload_lora_adapter '{"lora_name": "two"}')
check "unloading an unknown adapter: 404" test "$code" = 404
# cortex-bench measures this server over HTTP: the standard prompts and a trace naming the adapter
"$BENCH" run --endpoint "$URL/v1" --workload standard --concurrency 4 --reps 1 --warmup 0 --db "$tmp/b.db" \
    --no-progress >/dev/null 2>"$tmp/bench.err"
# stories260K's context is 128 tokens: the longer standard prompts are answered 400 and recorded as failed,
# so the run is INVALID (exit 4), its outcomes stored
check "cortex-bench --endpoint: prompts past the context make the run INVALID (exit 4)" test $? -eq 4
check "cortex-bench --endpoint: all 10 standard prompts recorded, the ones past the context as 400s" test \
    "$(sql "$tmp/b.db" "select count(*) from requests")/$(sql "$tmp/b.db" "select count(*) from requests where \
    state in ('stop', 'length') or (state = 'failed' and error like 'HTTP 400:%leaves no room%')")" = "10/10"
check "cortex-bench --endpoint: the prompts that fit finished" test \
    "$(sql "$tmp/b.db" "select count(*) from requests where state in ('stop', 'length')")" -ge 3
check "cortex-bench --endpoint: the server's timings stored (queue, prefill; its TTFT and what HTTP adds)" test \
    "$(sql "$tmp/b.db" "select count(*) from requests where state in ('stop', 'length') and queue_ms >= 0 and prefill_ms >= 0 and \
    prefill_ms <= ttft_ms")/$(sql "$tmp/b.db" "select count(*) from summary where name in ('server_ttft_ms', \
    'http_ttft_overhead_ms') and median >= 0")" = "$(sql "$tmp/b.db" "select count(*) from requests where state in ('stop', 'length')")/2"
printf '{"id": "a", "arrival_s": 0, "adapter": 1, "prompt_len": 4, "max_tokens": 8, "text": "Once upon a time"}\n{"id": "b", "arrival_s": 0, "adapter": 0, "prompt_len": 4, "max_tokens": 8, "text": "Once upon a time"}\n' >"$tmp/ad.jsonl"
"$BENCH" run --endpoint "$URL/v1" --workload "trace:$tmp/ad.jsonl" --adapter-names one --reps 1 --warmup 0 \
    --db "$tmp/b.db" --no-progress >/dev/null 2>"$tmp/bench2.err"
check "cortex-bench --endpoint --adapter-names: both requests finished" test \
    "$(sql "$tmp/b.db" "select count(*) from requests where state in ('stop', 'length') and run_id = (select max(id) from runs)")" = 2
kill -TERM $PID; wait $PID

# ---- the prefix cache: usage.prompt_tokens_details.cached_tokens, "cache_prompt": false -------------
start "$tmp/p.log" -m "$M" --prefix-cache || { finish; exit 1; }
L="Once upon a time there was a little girl named Lily who loved to play in the park with her friends every day"
q="{\"prompt\": \"$L\", \"max_tokens\": 8, \"temperature\": 0"
post /v1/completions "$q}" >/dev/null
cp "$tmp/body" "$tmp/first.json"
post /v1/completions "$q}" >/dev/null
check "a repeated prompt: usage.prompt_tokens_details.cached_tokens > 0, = timings.cache_n, same text" test "$(field \
    "$tmp/body" '(d["usage"]["prompt_tokens_details"]["cached_tokens"] > 0, d["usage"]["prompt_tokens_details"]["cached_tokens"] == d["timings"]["cache_n"], d["choices"][0]["text"])')" = \
    "$(field "$tmp/first.json" '(True, True, d["choices"][0]["text"])')"
post /v1/completions "$q, \"cache_prompt\": false}" >/dev/null
check "cache_prompt false: nothing from the cache (cached_tokens 0, cache_n 0), same text" test "$(field "$tmp/body" \
    '(d["usage"]["prompt_tokens_details"]["cached_tokens"], d["timings"]["cache_n"], d["choices"][0]["text"])')" = \
    "$(field "$tmp/first.json" '(0, 0, d["choices"][0]["text"])')"
check "cache_prompt not a boolean: 400 naming it" test "$(post /v1/completions "$q, \"cache_prompt\": 1}") $(field \
    "$tmp/body" 'd["error"]["param"]')" = "400 cache_prompt"
printf '{"id": "r%d", "text": "%s", "max_tokens": 4}\n' 1 "$L" 2 "$L" 3 "$L" >"$tmp/rep.jsonl"
"$BENCH" run --endpoint "$URL/v1" --workload "prompts:$tmp/rep.jsonl" --reps 1 --warmup 0 --db "$tmp/c.db" --no-progress \
    >/dev/null 2>"$tmp/c.err"; rc=$?
check "cortex-bench --endpoint (server cache off, the default): VALID, no prompt token from the cache" test \
    "$rc/$(sql "$tmp/c.db" "select validity || ' ' || sum(cached_tokens) from runs join requests on run_id = runs.id")" = "0/valid 0"
"$BENCH" run --endpoint "$URL/v1" --workload "prompts:$tmp/rep.jsonl" --reps 1 --warmup 0 --db "$tmp/c.db" --no-progress \
    --server-cache on >/dev/null 2>>"$tmp/c.err"; rc=$?
check "cortex-bench --endpoint --server-cache on: VALID, the repeated prompts' cached tokens recorded" test \
    "$rc/$(sql "$tmp/c.db" "select validity || ' ' || (sum(cached_tokens) > 0) from runs join requests on run_id = runs.id \
    where runs.id = 2")" = "0/valid 1"
kill -TERM $PID; wait $PID
"$CORTEX" serve --port 0 -m "$M" --lora "x=$tmp/none.gguf" 2>"$tmp/lbad"; rc=$?
check "--lora with a missing file: exit 1 naming it" sh -c "[ $rc -eq 1 ] && grep -q none.gguf '$tmp/lbad'"
finish
