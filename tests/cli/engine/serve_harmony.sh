#!/usr/bin/env bash
# tests/cli/engine/serve_harmony.sh - `cortex serve` with OpenAI's harmony
# chat format on a synthetic gpt-oss model (gpt-oss-tiny: o200k-shaped
# vocabulary, harmony's control tokens, a harmony chat template):
#   - the template is recognized from the model's tokenizer.chat_template
#     (the start line names gpt-oss); --chat-template gpt-oss and harmony are
#     accepted (on a model without a template too), an unknown name is exit 2;
#   - the chat route submits exactly the ids `cortex tokenize` gives for the
#     expected harmony text (default system message dated today, the system
#     message as developer instructions, the user turn, the assistant's turn
#     opened): usage.prompt_tokens equal, and the greedy answer's token
#     log-probabilities equal those of /v1/completions on that text;
#   - streamed chat deltas join to the whole answer.
# The final-channel extraction is tests/unit/engine/test_srv_parse.c's.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/serve.sh"
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; finish; exit; }
M=$tmp/gpt-oss-tiny.gguf
"$CORTEX" synth --shape gpt-oss-tiny --seed 3 -o "$M" >/dev/null 2>&1
check "synth gpt-oss-tiny" test -f "$M"

start "$tmp/a.log" -m "$M" || { finish; exit 1; }
check "the model's template is recognized: chat template gpt-oss" grep -q "chat template gpt-oss)" "$tmp/a.log"
day=$(date -u +%Y-%m-%d)
want="<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
Knowledge cutoff: 2024-06
Current date: $day

Reasoning: medium

# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|><|start|>developer<|message|># Instructions

Answer briefly.

<|end|><|start|>user<|message|>hello there world<|end|><|start|>assistant"
n_want=$("$CORTEX" tokenize -m "$M" -p "$want" | wc -w)
chat='{"messages": [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "hello there world"}], "max_tokens": 12, "temperature": 0, "ignore_eos": true'
code=$(post /v1/chat/completions "$chat, \"logprobs\": true}")
check "chat: 200" test "$code" = 200
check "chat: usage.prompt_tokens = cortex tokenize of the harmony text ($n_want)" test \
    "$(field "$tmp/body" 'd["usage"]["prompt_tokens"]')" = "$n_want"
field "$tmp/body" '[round(t["logprob"], 5) for t in d["choices"][0]["logprobs"]["content"]]' >"$tmp/chat_lp"
field "$tmp/body" 'd["choices"][0]["message"]["content"]' >"$tmp/chat_whole"
wjson=$(printf '%s' "$want" | "$PY" -c 'import json, sys; print(json.dumps(sys.stdin.read()))')
code=$(post /v1/completions "{\"prompt\": $wjson, \"max_tokens\": 12, \"temperature\": 0, \"ignore_eos\": true, \"logprobs\": 1}")
field "$tmp/body" '[round(x, 5) for x in d["choices"][0]["logprobs"]["token_logprobs"]]' >"$tmp/cmpl_lp"
check "chat: the same prompt ids as the harmony text (greedy logprobs equal /v1/completions')" \
    sh -c "test -s '$tmp/chat_lp' && cmp -s '$tmp/chat_lp' '$tmp/cmpl_lp'"
curl -sN -o "$tmp/stream" "$URL/v1/chat/completions" -d "$chat, \"stream\": true}"
"$PY" - "$tmp/stream" >"$tmp/chat_streamed" <<'EOF'
import json, sys
ev = [l[6:] for l in open(sys.argv[1], encoding="utf-8").read().split("\n") if l.startswith("data: ")]
assert ev[-1] == "[DONE]"
print("".join(c["delta"].get("content", "") for e in ev[:-1] for c in json.loads(e)["choices"]))
EOF
check "chat stream: the deltas join to the whole answer" cmp -s "$tmp/chat_whole" "$tmp/chat_streamed"
code=$(post /v1/chat/completions '{"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "late"}]}')
check "a late system message: 400 naming messages" test "$code $(field "$tmp/body" 'd["error"]["param"]')" = "400 messages"
kill -TERM $PID; wait $PID

for name in gpt-oss harmony HARMONY; do
    start "$tmp/$name.log" -m "$MODELS/stories260K.gguf" --chat-template $name || { finish; exit 1; }
    check "--chat-template $name: accepted, the template gpt-oss" grep -q "chat template gpt-oss)" "$tmp/$name.log"
    kill -TERM $PID; wait $PID
done
"$CORTEX" serve -m "$M" --port 0 --chat-template harmonica 2>"$tmp/err"
check "--chat-template harmonica: exit 2" test $? -eq 2
finish serve_harmony
