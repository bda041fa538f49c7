#!/usr/bin/python3
"""bench_python.py - what the Python module costs over the C engine, measured
in one run as ratios (docs/performance.md, "The Python module").

  1. generate() tokens/s against the `cortex generate` command, on the same
     model, prompt, token count and thread count, alternating A B A B ...
     (medians over --reps runs each), each a fresh process (the command's
     conditions: new model, new session, cold KV pages); and generate()
     repeated in one process (a warm session), for contrast. The tokens must
     be equal. Decode rates as each reports them: the command's is
     (tokens - 1) / (first sample -> end, which includes one more eval),
     generate()'s (tokens - 1) / (first sample -> last sample).
  2. The per-token overhead of driving decode from Python: a Stream (one
     next() per token, the GIL taken back each time) and a hand-written loop
     (Session.eval([t]) then numpy.argmax(session.logits)) against
     generate()'s loop in C, in microseconds per token.
  3. Reading the logits of a 201,088-token vocabulary (gpt-oss's) as the
     zero-copy view against a copy (what a binding that copies does: a new
     array per read, or the cheapest kind, into one preallocated array),
     alone and followed by typical pre-processing (top-k 40 + softmax).

Models are synthesized once into models/ (cortex.synth: no download):
stories15m and tinyllama-1.1b in q8_0, and gpt-oss-tiny with 201,088 tokens.

usage: PYTHONPATH=build/python/lib /usr/bin/python3 harness/python/bench_python.py
           [--reps 5] [--tokens 64] [--threads 1] [--cpus 0] [--models stories15m,tinyllama-1.1b] [--json FILE]
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "build", "python", "lib"))
import cortex  # noqa: E402

CLI = os.path.join(REPO, "build", "cortex")
PROMPT = "Once upon a time, in a small village by the sea, there lived an old fisherman who"


def model_file(shape, typ, **kw):
    os.makedirs(os.path.join(REPO, "models"), exist_ok=True)
    tag = "".join("-%s%s" % (k, v) for k, v in sorted(kw.items()))
    path = os.path.join(REPO, "models", "py-%s-%s%s.gguf" % (shape, typ, tag))
    if not os.path.exists(path):
        t0 = time.time()
        cortex.synth(shape, path, typ, **kw)
        print("# synthesized %s in %.1f s" % (path, time.time() - t0), file=sys.stderr)
    return path


def cli_decode_tps(path, n, threads):
    # stdout to a file, not a pipe: the command writes and flushes each token, and a pipe's reader
    # woken per token costs it 7.5% (docs/performance.md, "The Python module")
    with tempfile.TemporaryFile() as out:
        r = subprocess.run([CLI, "generate", "-m", path, "-p", PROMPT, "-n", str(n), "--temp", "0", "-t",
                            str(threads), "--no-echo", "--ids"], stdout=out, stderr=subprocess.PIPE, text=True,
                           check=True)
        out.seek(0)
        ids = [int(t) for t in out.read().split()]
    m = re.search(r"decode: ([0-9.]+) tokens/s \((\d+) tokens", r.stderr)
    return float(m.group(1)), int(m.group(2)) + 1, ids


# generate() in a fresh interpreter: the same conditions as the command (a new
# process, model and session, cold KV pages), printing its decode rate and tokens.
FRESH = """
import json, sys
sys.path.insert(0, sys.argv[1])
import cortex
m = cortex.Model(sys.argv[2], threads=int(sys.argv[5]))
g = m.generate(sys.argv[3], max_tokens=int(sys.argv[4]), temperature=0)
print(json.dumps({"tps": g.decode_tps, "tokens": g.tokens}))
"""


def py_fresh_decode_tps(path, n, threads):
    r = subprocess.run([sys.executable, "-c", FRESH, os.path.join(REPO, "build", "python", "lib"), path, PROMPT,
                        str(n), str(threads)], capture_output=True, text=True, check=True)
    d = json.loads(r.stdout)
    return d["tps"], d["tokens"]


def bench_generate(shape, reps, n, threads):
    path = model_file(shape, "q8_0")
    m = cortex.Model(path, threads=threads)
    m.generate(PROMPT, max_tokens=4, temperature=0)  # warm: page cache, session
    cli_tps, fresh_tps, py_tps, stream_us, loop_us, c_us = [], [], [], [], [], []
    n_gen = None
    for _ in range(reps):
        tps, n_cli, cli_ids = cli_decode_tps(path, n, threads)
        cli_tps.append(tps)
        tps, fresh_ids = py_fresh_decode_tps(path, n, threads)
        assert fresh_ids == cli_ids, "generate() and the command differ"
        fresh_tps.append(tps)
        m.generate("x", max_tokens=1)  # a different prompt: the next call recomputes the whole prompt
        g = m.generate(PROMPT, max_tokens=n, temperature=0)
        assert g.tokens == cli_ids, "generate() and the command differ"
        py_tps.append(g.decode_tps)
        n_gen = g.n_gen
        c_us.append(g.decode_ms * 1e3 / max(1, g.n_gen - 1))
        # a Stream: one next() per piece
        m.generate("x", max_tokens=1)
        st = m.generate(PROMPT, max_tokens=n, temperature=0, stream=True)
        for _ in st:
            pass
        stream_us.append(st.result.decode_ms * 1e3 / max(1, st.result.n_gen - 1))
        # a hand-written loop over a Session: eval one token, argmax in numpy
        with m.session() as s:
            s.eval(m.tokenize(PROMPT))
            t = int(np.argmax(s.logits))
            t0 = time.perf_counter()
            for _ in range(n - 1):
                s.eval([t])
                t = int(np.argmax(s.logits))
            loop_us.append((time.perf_counter() - t0) * 1e6 / (n - 1))
    m.close()
    med = statistics.median
    return {"shape": shape, "type": "q8_0", "threads": threads, "tokens": n_gen, "reps": reps,
            "cli_decode_tps": med(cli_tps), "py_fresh_decode_tps": med(fresh_tps),
            "py_fresh_over_cli": med(fresh_tps) / med(cli_tps),
            "pairs_py_fresh_over_cli": [p / c for p, c in zip(fresh_tps, cli_tps)],
            "py_warm_decode_tps": med(py_tps), "py_warm_over_cli": med(py_tps) / med(cli_tps),
            "c_loop_us_per_token": med(c_us), "stream_us_per_token": med(stream_us),
            "session_loop_us_per_token": med(loop_us),
            "stream_overhead_us": med(stream_us) - med(c_us), "session_loop_overhead_us": med(loop_us) - med(c_us)}


def bench_overhead(reps, n=1000):
    """Per-token cost of the Python layer where the engine's own is small: test-tiny (64 wide, 2 layers),
    1,000 tokens, EOS ignored. C loop (generate), Stream (one next() per token), Session + numpy argmax."""
    path = model_file("test-tiny", "f32", n_ctx=1024)
    m = cortex.Model(path)
    prompt = m.tokenize("hello")
    c_us, st_us, loop_us = [], [], []
    for _ in range(reps):
        m.generate("x", max_tokens=1)
        g = m.generate(prompt, max_tokens=n, temperature=0, ignore_eos=True)
        c_us.append(g.decode_ms * 1e3 / (g.n_gen - 1))
        m.generate("x", max_tokens=1)
        st = m.generate(prompt, max_tokens=n, temperature=0, ignore_eos=True, stream=True)
        for _ in st:
            pass
        assert st.result.tokens == g.tokens
        st_us.append(st.result.decode_ms * 1e3 / (st.result.n_gen - 1))
        with m.session(n_ctx=1024) as s:
            s.eval(prompt)
            t = int(np.argmax(s.logits))
            t0 = time.perf_counter()
            for _ in range(n - 1):
                s.eval([t])
                t = int(np.argmax(s.logits))
            loop_us.append((time.perf_counter() - t0) * 1e6 / (n - 1))
    m.close()
    med = statistics.median
    return {"shape": "test-tiny", "tokens": n, "reps": reps, "c_loop_us": med(c_us), "stream_us": med(st_us),
            "session_loop_us": med(loop_us), "stream_overhead_us": med(st_us) - med(c_us),
            "session_loop_overhead_us": med(loop_us) - med(c_us)}


def timeit(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def bench_logits(reps):
    path = model_file("gpt-oss-tiny", "f32", n_vocab=201088)
    with cortex.Model(path) as m, m.session() as s:
        s.eval([1, 2, 3])
        view = s.logits
        assert view.shape == (201088,)

        def top40_softmax(x):
            idx = np.argpartition(x, -40)[-40:]
            z = x[idx] - x[idx].max()
            p = np.exp(z)
            return idx, p / p.sum()

        buf = np.empty_like(view)

        def copy_into():  # the cheapest copy: into one preallocated array
            np.copyto(buf, s.logits)
            return buf

        inner = 100

        def per_read(fn):  # seconds per call of fn, its result dropped at once (as a decode loop does)
            def loop():
                for _ in range(inner):
                    fn()
            return timeit(loop, reps) / inner

        read_view = per_read(lambda: s.logits)
        read_copy = per_read(lambda: np.array(s.logits))
        read_into = per_read(copy_into)
        argmax_view = per_read(lambda: int(np.argmax(s.logits)))
        argmax_copy = per_read(lambda: int(np.argmax(np.array(s.logits))))
        pre_view = per_read(lambda: top40_softmax(s.logits))
        pre_copy = per_read(lambda: top40_softmax(np.array(s.logits)))
        pre_into = per_read(lambda: top40_softmax(copy_into()))
    return {"n_vocab": 201088, "reps": reps, "read_view_us": read_view * 1e6, "read_copy_us": read_copy * 1e6,
            "read_copy_into_us": read_into * 1e6, "argmax_view_us": argmax_view * 1e6,
            "argmax_copy_us": argmax_copy * 1e6, "argmax_cut": 1 - argmax_view / argmax_copy,
            "preprocess_view_us": pre_view * 1e6,
            "preprocess_copy_us": pre_copy * 1e6, "preprocess_copy_into_us": pre_into * 1e6,
            "preprocess_cut": 1 - pre_view / pre_copy, "preprocess_cut_vs_copy_into": 1 - pre_view / pre_into}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--models", default="stories15m,tinyllama-1.1b")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--cpus", default="0",
                    help="CPUs to pin every process of the run to (comma list; '' leaves them unpinned). The two "
                         "vCPUs of a shared VM can differ in speed by half: an A/B must run on the same ones")
    a = ap.parse_args()
    if a.cpus:
        os.sched_setaffinity(0, {int(c) for c in a.cpus.split(",")})  # inherited by the command and the children
    if a.reps < 3:
        ap.error("--reps must be >= 3: a median of fewer runs decides nothing")
    out = {"machine": platform.processor() or platform.machine(), "cpu": cortex.cpu_features(), "isa": cortex.isa(),
           "cpus": a.cpus,
           "generate": [], "logits": None}
    for shape in a.models.split(","):
        r = bench_generate(shape, a.reps, a.tokens, a.threads)
        out["generate"].append(r)
        print("%-16s t=%d %3d tokens: cortex %7.2f tok/s, Python generate in a fresh process %7.2f tok/s "
              "(%.3fx; pairs %s)" % (shape, a.threads, r["tokens"], r["cli_decode_tps"], r["py_fresh_decode_tps"],
                                     r["py_fresh_over_cli"], " ".join("%.3f" % x for x in r["pairs_py_fresh_over_cli"])))
        print("%-16s Python generate again in one process (warm session): %7.2f tok/s (%.3fx the command)"
              % ("", r["py_warm_decode_tps"], r["py_warm_over_cli"]))
        print("%-16s per token: C loop %.1f us, Stream %.1f us (+%.1f), Session+argmax loop %.1f us (+%.1f)"
              % ("", r["c_loop_us_per_token"], r["stream_us_per_token"], r["stream_overhead_us"],
                 r["session_loop_us_per_token"], r["session_loop_overhead_us"]))
    ov = bench_overhead(a.reps)
    out["overhead"] = ov
    print("per-token overhead on test-tiny (%d tokens): C loop %.1f us/token, Stream %.1f (+%.1f us), "
          "Session.eval + numpy argmax %.1f (+%.1f us)" % (ov["tokens"], ov["c_loop_us"], ov["stream_us"],
                                                           ov["stream_overhead_us"], ov["session_loop_us"],
                                                           ov["session_loop_overhead_us"]))
    lg = bench_logits(a.reps)
    out["logits"] = lg
    print("logits of %d tokens: read as the view %.2f us, as a new copy %.1f us, copied into a preallocated "
          "array %.1f us" % (lg["n_vocab"], lg["read_view_us"], lg["read_copy_us"], lg["read_copy_into_us"]))
    print("  read + argmax: view %.1f us, new copy %.1f us (%.0f%% less with the view)"
          % (lg["argmax_view_us"], lg["argmax_copy_us"], 100 * lg["argmax_cut"]))
    print("  read + top-40 softmax: view %.1f us, new copy %.1f us (%.0f%% less with the view), preallocated copy "
          "%.1f us (%.0f%% less)" % (lg["preprocess_view_us"], lg["preprocess_copy_us"], 100 * lg["preprocess_cut"],
                                     lg["preprocess_copy_into_us"], 100 * lg["preprocess_cut_vs_copy_into"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
