#!/usr/bin/python3
"""mock_openai.py - a small OpenAI-compatible server for testing
`cortex-bench run --endpoint` (tests/cli/harness/endpoint.sh). Standard
library only.

Routes:
  GET  /v1/models            {"object": "list", "data": [{"id": NAME}, ...]} (--models)
  POST /v1/completions       {"prompt", "max_tokens", "stream", "stream_options", "ignore_eos", "model",
                              "cache_prompt"}
  POST /v1/chat/completions  the same with "messages" (the prompt is their contents joined)
  GET  /metrics              Prometheus text: requests by status, prompt and generated tokens, the prompt
                             cache's hit ratio (NaN until a prompt came, as Prometheus allows) (--no-metrics: 404)
  GET  /props                {"build_info": B} with --build-info B (llama-server's), else 404

Generation: token i (0-based) is the text " t<i>"; max_tokens of them with
"ignore_eos": true, else min(max_tokens, 5) (the "end of text" comes early);
each after --token-delay-ms; streamed --chunk-tokens tokens to an SSE chunk,
then a usage chunk when stream_options.include_usage, then "data: [DONE]".
Prompt tokens are the prompt's whitespace-separated words.

Prompt cache, as llama-server's: a prompt that begins with the words of an
earlier one has those words (all but its last) served from the cache,
reported as timings.cache_n on the last text chunk and as
usage.prompt_tokens_details.cached_tokens (--cache-report picks either or
both); "cache_prompt": false turns it off for that request unless
--ignore-cache-prompt (a server that caches although asked not to). Answers
carry "system_fingerprint": FP with --fingerprint FP. --draft-report adds
llama-server's speculative decoding counts to the timings: draft_n = 2 x
(tokens - 1) drafted, draft_n_accepted = tokens - 1 of them accepted (an
acceptance of exactly 0.5). --log-bodies FILE
appends every completion request's body to FILE, one JSON object a line.

Knobs: --api-key K (401 without "Authorization: Bearer K"); --max-concurrent C
(429 past C completions in flight); --ignore-stream (answer every completion
whole, as application/json, whatever "stream" says); an unknown "model" is a 404. Words in the
prompt: REJECT (429), FAIL500 (500), DROP (the connection closes after two
chunks, no [DONE]), STREAMERR (an error payload in the stream).

Prints "PORT N" on stdout once listening (--port 0: an ephemeral port).
"""
import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    """Counters behind /metrics, the in-flight gauge and the prompt cache, under one lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.by_code = {}
        self.prompt_tokens = 0
        self.gen_tokens = 0
        self.running = 0
        self.prompts = []  # the prompt cache: word lists of earlier prompts
        self.cached_tokens = 0

    def cached(self, words, use):
        """Words of `words` the cache serves (the longest prefix shared with an earlier prompt, less the
        last word, which is always computed), 0 when `use` is false; the prompt is remembered either way."""
        n = 0
        with self.lock:
            for old in self.prompts if use else []:
                k = 0
                while k < min(len(old), len(words)) and old[k] == words[k]:
                    k += 1
                n = max(n, k)
            self.prompts.append(words)
            n = min(n, max(len(words) - 1, 0))
            self.cached_tokens += n
        return n

    def count(self, code, prompt=0, gen=0):
        with self.lock:
            self.by_code[code] = self.by_code.get(code, 0) + 1
            self.prompt_tokens += prompt
            self.gen_tokens += gen


def make_handler(opts, state):
    """The request handler class, closed over the options and the counters."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "mock-openai/1.0"
        sys_version = ""

        def log_message(self, *args):  # quiet: the test reads stdout
            pass

        def send_json(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def error(self, code, msg):
            self.send_json(code, {"error": {"message": msg, "type": "mock", "code": code}})

        def authorized(self):
            if not opts.api_key:
                return True
            if self.headers.get("Authorization") == "Bearer " + opts.api_key:
                return True
            self.error(401, "invalid API key")
            return False

        def do_GET(self):
            if self.path == "/v1/models":
                if self.authorized():
                    self.send_json(200, {"object": "list", "data": [
                        {"id": m, "object": "model", "owned_by": "mock"} for m in opts.models]})
            elif self.path == "/props" and opts.build_info:
                self.send_json(200, {"build_info": opts.build_info, "default_generation_settings": {}})
            elif self.path == "/metrics" and not opts.no_metrics:
                with state.lock:
                    lines = ["# HELP mock_requests_total completions by status", "# TYPE mock_requests_total counter"]
                    lines += ['mock_requests_total{code="%d"} %d' % (c, n) for c, n in sorted(state.by_code.items())]
                    lines += ["# TYPE mock_prompt_tokens_total counter", "mock_prompt_tokens_total %d" % state.prompt_tokens,
                              "# TYPE mock_generation_tokens_total counter",
                              "mock_generation_tokens_total %d" % state.gen_tokens,
                              "# TYPE mock_requests_running gauge", "mock_requests_running %d" % state.running,
                              "# TYPE mock_prompt_cache_hit_ratio gauge", "mock_prompt_cache_hit_ratio %s" %
                              ("%.6f" % (state.cached_tokens / state.prompt_tokens) if state.prompt_tokens else "NaN")]
                body = ("\n".join(lines) + "\n").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self.error(404, "no route " + self.path)

        def chunk(self, data):
            """One HTTP chunk holding one SSE event."""
            raw = ("data: " + data + "\n\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(raw), raw))
            self.wfile.flush()

        def do_POST(self):
            chat = self.path == "/v1/chat/completions"
            if self.path not in ("/v1/completions", "/v1/chat/completions"):
                return self.error(404, "no route " + self.path)
            n = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(n)
            try:
                req = json.loads(raw)
            except ValueError:
                return self.error(400, "body is not JSON")
            if opts.log_bodies:
                with state.lock, open(opts.log_bodies, "a") as f:
                    f.write(json.dumps(req) + "\n")
            if not self.authorized():
                return
            if req.get("model") not in opts.models:
                state.count(404)
                return self.error(404, "model %r does not exist" % req.get("model"))
            prompt = " ".join(m.get("content", "") for m in req.get("messages", [])) if chat else req.get("prompt", "")
            with state.lock:
                busy = opts.max_concurrent and state.running >= opts.max_concurrent
                if not busy:
                    state.running += 1
            if busy or "REJECT" in prompt:
                state.count(429)
                return self.error(429, "too many requests")
            self.dropped = False
            try:
                self.complete(req, prompt, chat)
            finally:
                if not self.dropped:
                    with state.lock:
                        state.running -= 1

        def complete(self, req, prompt, chat):
            if "FAIL500" in prompt:
                state.count(500)
                return self.error(500, "internal error (asked for)")
            max_tokens = int(req.get("max_tokens", 16))
            n_gen = max_tokens if req.get("ignore_eos") else min(max_tokens, 5)
            words = prompt.split()
            n_prompt = len(words)
            n_cached = state.cached(words, req.get("cache_prompt", True) is not False or opts.ignore_cache_prompt)
            usage = {"prompt_tokens": n_prompt, "completion_tokens": n_gen, "total_tokens": n_prompt + n_gen}
            if opts.cache_report in ("usage", "both"):
                usage["prompt_tokens_details"] = {"cached_tokens": n_cached}
            timings = {"prompt_n": n_prompt - n_cached, "prompt_ms": 1.25, "predicted_n": n_gen, "predicted_ms": 2.5}
            if opts.cache_report in ("timings", "both"):
                timings["cache_n"] = n_cached
            if opts.draft_report:
                timings.update({"draft_n": 2 * max(n_gen - 1, 0), "draft_n_accepted": max(n_gen - 1, 0)})
            fp = {"system_fingerprint": opts.fingerprint} if opts.fingerprint else {}
            obj = "chat.completion" if chat else "text_completion"
            if not req.get("stream") or opts.ignore_stream:
                time.sleep(opts.token_delay_ms * n_gen / 1e3)
                text = "".join(" t%d" % i for i in range(n_gen))
                choice = {"index": 0, "finish_reason": "length" if n_gen == max_tokens else "stop"}
                choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
                state.count(200, n_prompt, n_gen)
                return self.send_json(200, dict({"id": "cmpl-mock", "object": obj, "model": req["model"],
                                                 "choices": [choice], "usage": usage, "timings": timings}, **fp))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            sent = 0
            for start in range(0, n_gen, opts.chunk_tokens):
                time.sleep(opts.token_delay_ms * min(opts.chunk_tokens, n_gen - start) / 1e3)
                text = "".join(" t%d" % i for i in range(start, min(start + opts.chunk_tokens, n_gen)))
                last = start + opts.chunk_tokens >= n_gen
                choice = {"index": 0, "finish_reason": ("length" if n_gen == max_tokens else "stop") if last else None}
                choice.update({"delta": {"content": text}} if chat else {"text": text})
                body = dict({"id": "cmpl-mock", "object": obj + ".chunk" if chat else obj, "model": req["model"],
                             "choices": [choice]}, **fp)
                if last:  # llama-server's timings on the last chunk (no queue_ms/ttft_ms: those are Cortex's)
                    body["timings"] = timings
                self.chunk(json.dumps(body))
                sent += 1
                if "DROP" in prompt and sent == 2:
                    state.count(200, n_prompt, 0)
                    with state.lock:  # before the client can see the drop and scrape
                        state.running -= 1
                    self.dropped = True
                    self.close_connection = True
                    self.wfile.flush()
                    self.connection.shutdown(2)  # mid-stream, without the closing chunk
                    return
                if "STREAMERR" in prompt and sent == 1:
                    self.chunk(json.dumps({"error": {"message": "out of KV cache (asked for)", "code": 500}}))
                    self.wfile.write(b"0\r\n\r\n")
                    state.count(500)
                    return
            if (req.get("stream_options") or {}).get("include_usage"):
                self.chunk(json.dumps(dict({"id": "cmpl-mock", "object": obj, "model": req["model"], "choices": [],
                                            "usage": usage}, **fp)))
            self.chunk("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            state.count(200, n_prompt, n_gen)

    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--models", default="mock-model")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--token-delay-ms", type=float, default=1.0)
    ap.add_argument("--chunk-tokens", type=int, default=1)
    ap.add_argument("--max-concurrent", type=int, default=0)
    ap.add_argument("--no-metrics", action="store_true")
    ap.add_argument("--ignore-stream", action="store_true")
    ap.add_argument("--ignore-cache-prompt", action="store_true")
    ap.add_argument("--cache-report", choices=("timings", "usage", "both"), default="both")
    ap.add_argument("--fingerprint", default="")
    ap.add_argument("--draft-report", action="store_true")
    ap.add_argument("--build-info", default="")
    ap.add_argument("--log-bodies", default="")
    opts = ap.parse_args()
    opts.models = opts.models.split(",")
    srv = ThreadingHTTPServer(("127.0.0.1", opts.port), make_handler(opts, State()))
    srv.daemon_threads = True
    print("PORT %d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
