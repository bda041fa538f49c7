#!/usr/bin/env bash
# tests/cli/engine/serve_api.sh - `cortex serve`'s OpenAI surface as clients
# rely on it, and its closed admin routes (issue 25, docs/server.md):
#   - seeds: two unseeded sampled requests differ (the server draws a seed),
#     two with the same `seed` are equal;
#   - every OpenAI field the server does not implement is a 400 naming it,
#     its no-effect value is accepted;
#   - the developer role is the system role; a list of prompts gives one
#     choice per prompt, in order (strings and token-id arrays);
#   - GET /v1/models/{id}; the Bearer scheme in any case;
#   - /metrics: 4xx, 429 and 5xx apart (by status code, and the requests'
#     outcomes invalid and queue_full);
#   - adapters: without --lora-dir the routes answer 403; with it, paths that
#     leave the directory (.., absolute, a symbolic link out), a missing file
#     and a FIFO all get the same answer, byte for byte; --max-adapters caps
#     the registrations (409); a name unloaded while a request uses it
#     answers 409 to a load until that request ends, then loads again, and
#     unloads.
# Needs ../shared/models/stories260K.gguf (skips without it) and curl.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/serve.sh"
M=$MODELS/stories260K.gguf
[ -f "$M" ] || { echo "SKIP: $M is missing: no model to serve"; finish; exit; }
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; finish; exit; }

K=(-H 'Authorization: bearer s3cret') # the scheme in lower case: accepted as "Bearer" (ignored without --api-key)
# err CODE PARAM: the last body is an error with that status (given) and param
err() { test "$1 $(field "$tmp/body" 'd["error"]["param"]')" = "$2 $3"; }

# ---- seeds, refused fields, developer, prompt lists, models, auth, metrics ----
mkdir -p "$tmp/ad/sub" "$tmp/out"
"$CORTEX" synth-lora -m "$M" --rank 4 --seed 1 -o "$tmp/ad/l1.gguf" 2>/dev/null
"$CORTEX" synth-lora -m "$M" --rank 4 --seed 2 -o "$tmp/out/outside.gguf" 2>/dev/null
cp "$tmp/ad/l1.gguf" "$tmp/ad/sub/l2.gguf"
echo "not an adapter" >"$tmp/ad/bad.gguf"
start "$tmp/a.log" -m "$M" --chat-template chatml --api-key s3cret --lora-dir "$tmp/ad" --max-adapters 2 ||
    { finish; exit 1; }

sampled='{"prompt": "Once upon a time", "max_tokens": 48, "temperature": 1, "top_k": 0, "top_p": 1, "min_p": 0'
differ=0
for _ in 1 2 3 4 5; do # two draws of 48 tokens over the whole vocabulary coincide by chance about never; 5 tries
    post /v1/completions "$sampled}" "${K[@]}" >/dev/null; a=$(field "$tmp/body" 'd["choices"][0]["text"].encode().hex()')
    post /v1/completions "$sampled}" "${K[@]}" >/dev/null; b=$(field "$tmp/body" 'd["choices"][0]["text"].encode().hex()')
    [ -n "$a" ] && [ "$a" != "$b" ] && { differ=1; break; }
done
check "two unseeded sampled requests differ (the server draws a seed)" test $differ = 1
post /v1/completions "$sampled, \"seed\": 1234}" "${K[@]}" >/dev/null; a=$(field "$tmp/body" 'd["choices"][0]["text"].encode().hex()')
post /v1/completions "$sampled, \"seed\": 1234}" "${K[@]}" >/dev/null; b=$(field "$tmp/body" 'd["choices"][0]["text"].encode().hex()')
check "two requests with the same seed are equal" test -n "$a" -a "$a" = "$b"

C='{"prompt": "x", "max_tokens": 2, '
CH='{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, '
while IFS='|' read -r route body name; do
    code=$(post "$route" "$body" "${K[@]}")
    check "$route $name: 400 naming it, code unsupported_parameter" test \
        "$code $(field "$tmp/body" 'd["error"]["param"], d["error"]["code"], d["error"]["param"] in d["error"]["message"]')" \
        = "400 ('$name', 'unsupported_parameter', True)"
done <<EOF
/v1/completions|$C"echo": true}|echo
/v1/completions|$C"best_of": 2}|best_of
/v1/completions|$C"suffix": "the end"}|suffix
/v1/completions|$C"logit_bias": {"5": 10}}|logit_bias
/v1/completions|$C"n": 2}|n
/v1/completions|$C"response_format": {"type": "json_object"}}|response_format
/v1/chat/completions|$CH"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}}|response_format
/v1/chat/completions|$CH"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}|tools
/v1/chat/completions|$CH"tool_choice": "required"}|tool_choice
/v1/chat/completions|$CH"logit_bias": {"5": 10}}|logit_bias
/v1/chat/completions|$CH"n": 3}|n
/v1/chat/completions|$CH"reasoning_effort": "high"}|reasoning_effort
EOF
check "the no-effect values are accepted" test "$(post /v1/completions "$C\"echo\": false, \"best_of\": 1, \"n\": 1, \
\"logit_bias\": {}, \"suffix\": \"\", \"response_format\": {\"type\": \"text\"}}" "${K[@]}") $(post /v1/chat/completions \
    "$CH\"tools\": [], \"tool_choice\": \"none\", \"response_format\": {\"type\": \"text\"}}" "${K[@]}")" = "200 200"
check "a field OpenAI does not define is ignored" test "$(post /v1/completions "$C\"some_extension\": {\"a\": 1}}" "${K[@]}")" = 200

dev='{"messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "max_tokens": 12, "temperature": 0}'
code=$(post /v1/chat/completions "$dev" "${K[@]}")
got=$(field "$tmp/body" 'd["choices"][0]["message"]["content"], d["usage"]["prompt_tokens"]')
post /v1/chat/completions "${dev/developer/system}" "${K[@]}" >/dev/null
check "the developer role: 200, the same prompt and answer as the system role" test \
    "$code $got" = "200 $(field "$tmp/body" 'd["choices"][0]["message"]["content"], d["usage"]["prompt_tokens"]')"

one() { post /v1/completions "{\"prompt\": $1, \"max_tokens\": 10, \"temperature\": 0}" "${K[@]}" >/dev/null
        field "$tmp/body" 'd["choices"][0]["text"]'; }
t0=$(one '"Once upon a time"') t1=$(one '"The dog"') t2=$(one '[1, 400, 30]')
code=$(post /v1/completions '{"prompt": ["Once upon a time", "The dog", [1, 400, 30]], "max_tokens": 10, "temperature": 0}' "${K[@]}")
check "a list of three prompts: 200, three choices, indices in order" test \
    "$code $(field "$tmp/body" '[c["index"] for c in d["choices"]]')" = "200 [0, 1, 2]"
check "... each choice = its prompt alone (greedy)" test \
    "$(field "$tmp/body" '[c["text"] for c in d["choices"]]')" = "$("$PY" -c 'import sys; print(sys.argv[1:])' "$t0" "$t1" "$t2")"
check "... usage summed over the choices" test "$(field "$tmp/body" 'd["usage"]["completion_tokens"]')" = 30
code=$(post /v1/completions '{"prompt": ["a", "b"], "stream": true}' "${K[@]}")
check "several prompts streamed: 400 naming stream" err "$code" 400 stream

code=$(curl -s -o "$tmp/body" -w '%{http_code}' "${K[@]}" "$URL/v1/models/llama")
check "GET /v1/models/llama: 200, the model object" test "$code $(field "$tmp/body" 'd["id"], d["object"]')" = \
    "200 ('llama', 'model')"
code=$(curl -s -o "$tmp/body" -w '%{http_code}' "${K[@]}" "$URL/v1/models/gpt-4")
check "GET /v1/models/gpt-4: 404 model_not_found (OpenAI's error object)" test \
    "$code $(field "$tmp/body" 'd["error"]["code"], d["error"]["type"]')" = "404 ('model_not_found', 'invalid_request_error')"

for h in 'Authorization: bearer s3cret' 'Authorization: BEARER s3cret' 'Authorization: Bearer   s3cret'; do
    check "'$h': 200" test "$(post /v1/completions "$C\"temperature\": 0}" -H "$h")" = 200
done
for h in 'Authorization: Bearers3cret' 'Authorization: Basic s3cret' 'Authorization: bearer S3CRET'; do
    check "'$h': 401" test "$(post /v1/completions "$C\"temperature\": 0}" -H "$h")" = 401
done

b400=$(metric 'cortex_http_responses_total{code="400"}') b404=$(metric 'cortex_http_responses_total{code="404"}')
inv=$(metric 'cortex_requests_total{outcome="invalid"}')
post /v1/completions '{"prompt": "x", "max_tokens": "lots"}' "${K[@]}" >/dev/null
post /v1/completions '{"prompt": [1, 2, 3], "model": "nope"}' "${K[@]}" >/dev/null
check "/metrics: a 400 and a 404 counted by code, both requests as invalid" test \
    "$(metric 'cortex_http_responses_total{code="400"}') $(metric 'cortex_http_responses_total{code="404"}') $(metric 'cortex_requests_total{outcome="invalid"}')" \
    = "$((b400 + 1)) $((b404 + 1)) $((inv + 2))"
check "/metrics: no 429 nor 5xx so far" test "$(metric 'cortex_http_responses_total{code="429"}') \
$(metric 'cortex_requests_total{outcome="queue_full"}') $(metric 'cortex_http_responses_total{code="500"}')" = "0 0 0"

# ---- adapters: confined to --lora-dir, capped, one answer for every refused path ----
load() { post /v1/load_lora_adapter "{\"lora_name\": \"$1\", \"lora_path\": \"$2\"}" "${K[@]}"; }
unload() { post /v1/unload_lora_adapter "{\"lora_name\": \"$1\"}" "${K[@]}"; }
ln -s "$tmp/out/outside.gguf" "$tmp/ad/link.gguf"  # a symbolic link out of the directory
ln -s "$tmp/out" "$tmp/ad/outdir"                  # a directory link out
mkfifo "$tmp/ad/fifo.gguf"                         # inside, but no file to read (opening it would block)
code=$(load x ../out/outside.gguf); cp "$tmp/body" "$tmp/ref"
check "lora_path ../out/outside.gguf (a valid adapter outside): 400 naming lora_path" err "$code" 400 lora_path
same=1
for p in "$tmp/out/outside.gguf" link.gguf outdir/outside.gguf sub/../../out/outside.gguf missing.gguf /etc/hostname \
    /nonexistent fifo.gguf outdir ../ad/../out/outside.gguf; do
    code=$(load x "$p")
    if [ "$code" != 400 ] || ! cmp -s "$tmp/body" "$tmp/ref"; then same=0; echo "  '$p': $code $(cat "$tmp/body")"; fi
done
check "absolute, symbolic links out (file and directory), .., missing, a FIFO: the same 400, byte for byte" \
    test $same = 1
code=$(load bad bad.gguf)
check "a malformed file inside: 400 saying so under the client's name for it" test \
    "$code $(field "$tmp/body" '"bad.gguf" in d["error"]["message"] and "'"$tmp"'" not in d["error"]["message"]')" = "400 True"
check "load 'a' from l1.gguf (relative): 200" test "$(load a l1.gguf)" = 200
check "load 'b' from its absolute path inside: 200" test "$(load b "$tmp/ad/sub/l2.gguf")" = 200
code=$(load c l1.gguf)
check "a third adapter past --max-adapters 2: 409 adapter_limit" test \
    "$code $(field "$tmp/body" 'd["error"]["code"]')" = "409 adapter_limit"
check "/metrics: the 409 counted" test "$(metric 'cortex_http_responses_total{code="409"}')" = 1
check "unload 'a': 200" test "$(unload a)" = 200
check "then 'c' fits: 200" test "$(load c l1.gguf)" = 200
check "GET /v1/models/c: 200, parent llama" test \
    "$(curl -s "${K[@]}" "$URL/v1/models/c" >"$tmp/body"; field "$tmp/body" 'd["parent"]')" = llama
kill -TERM $PID; wait $PID
check "SIGTERM: the server exits 0 (under ASan: nothing leaked)" test $? = 0

start "$tmp/b.log" -m "$M" || { finish; exit 1; }
code=$(post /v1/load_lora_adapter "{\"lora_name\": \"a\", \"lora_path\": \"$tmp/ad/l1.gguf\"}")
check "without --lora-dir: load 403 naming the flag" test \
    "$code $(field "$tmp/body" '"--lora-dir" in d["error"]["message"]')" = "403 True"
check "without --lora-dir: unload 403" test "$(post /v1/unload_lora_adapter '{"lora_name": "a"}')" = 403
kill -TERM $PID; wait $PID
check "SIGTERM: the server exits 0 (under ASan: nothing leaked)" test $? = 0
"$CORTEX" serve --port 0 -m "$M" --lora-dir "$tmp/ad/l1.gguf" 2>"$tmp/err"
check "--lora-dir naming a file: exit 1, said" sh -c "[ $? -eq 1 ] && grep -q 'not a directory' '$tmp/err'"
"$CORTEX" serve --port 0 -m "$M" --max-adapters 1 --lora "a=$tmp/ad/l1.gguf" --lora "b=$tmp/ad/l1.gguf" 2>"$tmp/err"
check "more --lora than --max-adapters: exit 1, said" sh -c "[ $? -eq 1 ] && grep -q 'max-adapters' '$tmp/err'"

# ---- a slow model: a name reused after a deferred unload; 429 in the metrics ----
S=$tmp/slow.gguf
"$CORTEX" synth --shape stories15m --type q8_0 -c 2048 -o "$S" 2>/dev/null
"$CORTEX" synth-lora -m "$S" --rank 4 --seed 3 -o "$tmp/ad/slow.gguf" 2>/dev/null
long='{"prompt": "hello", "max_tokens": 2000, "ignore_eos": true, "temperature": 0'
start "$tmp/s.log" -m "$S" --lora-dir "$tmp/ad" --max-seqs 1 --max-queue 1 || { finish; exit 1; }
check "load 'x': 200" test "$(load x slow.gguf)" = 200
curl -sN "$URL/v1/completions" -d "$long, \"model\": \"x\", \"stream\": true}" >"$tmp/r1" 2>/dev/null &
R1=$!
check "a long request on 'x' runs" wait_metric cortex_requests_running 1
code=$(unload x)
check "unload 'x' while it runs: 200, deferred" test "$code $(grep -c 'will be removed' "$tmp/body")" = "200 1"
code=$(post /v1/completions "$long, \"model\": \"x\"}")
check "a new request naming 'x': 404 model_not_found" test "$code $(field "$tmp/body" 'd["error"]["code"]')" = \
    "404 model_not_found"
check "GET /v1/models/x: 404" test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/models/x")" = 404
code=$(load x slow.gguf)
check "loading 'x' again while its requests run: 409 adapter_unloading" test \
    "$code $(field "$tmp/body" 'd["error"]["code"]')" = "409 adapter_unloading"
check "unloading 'x' again meanwhile: 200 (it is going)" test "$(unload x)" = 200
curl -s "$URL/v1/completions" -d "$long}" >"$tmp/r2" 2>/dev/null &
R2=$!
check "a second request waits (--max-seqs 1)" wait_metric cortex_requests_waiting 1
code=$(post /v1/completions "$long}")
check "a third: 429" test "$code" = 429
check "/metrics: the 429 apart from 4xx: queue_full 1, code 429 1, invalid 1 (the 404)" test \
    "$(metric 'cortex_requests_total{outcome="queue_full"}') $(metric 'cortex_http_responses_total{code="429"}') $(metric 'cortex_requests_total{outcome="invalid"}')" \
    = "1 1 1"
kill $R1 $R2; wait $R1 $R2 2>/dev/null
check "the clients leave: nothing running" wait_metric cortex_requests_running 0
ok=0
for _ in $(seq 100); do [ "$(load x slow.gguf)" = 200 ] && { ok=1; break; }; sleep 0.1; done
check "once its request ended, 'x' loads again: 200" test $ok = 1
check "... and runs" test "$(post /v1/completions '{"prompt": "hello", "max_tokens": 4, "model": "x"}')" = 200
code=$(unload x)
check "... and unloads at once: 200" test "$code $(grep -c 'removed successfully' "$tmp/body")" = "200 1"
check "/metrics: no adapter left" test "$(metric cortex_adapters_registered)" = 0
kill -TERM $PID; wait $PID
check "SIGTERM: the server exits 0 (under ASan: nothing leaked)" test $? = 0
finish
