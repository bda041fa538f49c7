"""cortex.Scheduler and cortex.Request (engine/python/src/sched.c, cortex/aio.py)
against Model.generate (which equals `cortex generate`), and their edges:
iteration, callbacks and their exceptions, cancellation, deadlines,
priorities, the queue bound, the context, asyncio, close() with live
requests, threads, and references and memory over 10,000 requests.

Timing-sensitive cases are made deterministic with a gate: an on_token
callback that blocks the scheduler's thread (it waits on a threading.Event,
releasing the GIL) until the test has set up what it needs.
"""
import asyncio
import gc
import os
import subprocess
import sys
import threading
import time
import tracemalloc
import weakref

import pytest

from conftest import CORTEX_BIN, rss_kib

PROMPTS = ["Once upon a time", "The little dog", "Lily and Tom went to the park", "One day, a bird", "The sun was"]
N_LEAK = 10000


@pytest.fixture
def sched(cortex, stories):
    s = cortex.Scheduler(stories, max_seqs=4)
    yield s
    s.close()


def expected(model, prompts, n, **kw):
    return [model.generate(p, n, temperature=0, **kw) for p in prompts]


def check_same(model, res, gen):
    """A scheduler result equals generate()'s: the same text; the same tokens, except that the
    scheduler lists the end-of-generation token it stopped at (generate() does not)."""
    assert res["text"] == gen.text
    assert res["finish_reason"] == gen.finish_reason
    assert res["n_prompt"] == gen.n_prompt
    if res["stop_reason"] == "eos":
        assert res["tokens"][:-1] == list(gen.tokens) and model.is_eog(res["tokens"][-1])
    else:
        assert res["tokens"] == list(gen.tokens)
    assert res["n_gen"] == len(res["tokens"])


class Gate:
    """on_token that blocks the scheduler's thread at the `at`-th token of its request until opened."""

    def __init__(self, at=1):
        self.at, self.n = at, 0
        self.reached, self.open_ = threading.Event(), threading.Event()

    def __call__(self, req, tok, piece):
        self.n += 1
        if self.n == self.at:
            self.reached.set()
            assert self.open_.wait(30), "the test never opened the gate"

    def wait(self):
        assert self.reached.wait(30), "the gated request never reached its gate"

    def open(self):
        self.open_.set()


# ---- results ---------------------------------------------------------------------


def test_greedy_equals_generate(cortex, stories, sched):
    gens = expected(stories, PROMPTS, 40)
    reqs = [sched.submit(p, 40, temperature=0) for p in PROMPTS]  # together: batched
    for req, gen in zip(reqs, gens):
        res = req.result(timeout=60)
        assert res["state"] == "finished" and res["error"] is None and res["id"] == req.id
        check_same(stories, res, gen)


def test_greedy_equals_generate_one_at_a_time_and_ids(cortex, stories):
    with cortex.Scheduler(stories, max_seqs=1, max_batch_tokens=8, chunk=4, prefix_cache=False) as s:
        for p, gen in zip(PROMPTS, expected(stories, PROMPTS, 24)):
            check_same(stories, s.submit(stories.tokenize(p), 24, temperature=0).result(timeout=60), gen)


def test_sampled_equals_generate(cortex, stories, sched):
    kw = dict(temperature=0.9, top_k=20, top_p=0.9, min_p=0.02, repeat_penalty=1.1, seed=7)
    gens = [stories.generate(p, 30, **kw) for p in PROMPTS]
    reqs = [sched.submit(p, 30, **kw) for p in PROMPTS]
    for req, gen in zip(reqs, gens):
        check_same(stories, req.result(timeout=60), gen)


def test_result_fields(cortex, stories, sched):
    res = sched.submit(PROMPTS[0], 12, temperature=0, ignore_eos=True, priority=3).result(timeout=60)
    assert set(res) == {"id", "text", "tokens", "state", "finish_reason", "stop_reason", "n_prompt", "n_gen",
                        "n_cached", "n_preempted", "priority", "ttft_ms", "latency_ms", "itl_ms", "error",
                        "speculation"}
    assert res["speculation"] is None  # a scheduler without a drafter
    assert res["state"] == "finished" and res["finish_reason"] == "length" and res["stop_reason"] == "length"
    assert res["n_gen"] == 12 and len(res["tokens"]) == 12 and len(res["itl_ms"]) == 11
    assert res["priority"] == 3 and res["n_preempted"] == 0
    assert 0 < res["ttft_ms"] <= res["latency_ms"]
    assert all(x >= 0 for x in res["itl_ms"])
    # a second identical prompt of a full block or more takes its prefix from the cache
    long = " ".join(PROMPTS) * 2
    a = sched.submit(long, 2, temperature=0).result(timeout=60)
    b = sched.submit(long, 2, temperature=0).result(timeout=60)
    c = sched.submit(long, 2, temperature=0, cache_prompt=False).result(timeout=60)
    assert a["n_prompt"] >= 16 and b["n_cached"] >= 16 and c["n_cached"] == 0
    assert a["text"] == b["text"] == c["text"]


def test_stops(cortex, stories, sched):
    full = sched.submit(PROMPTS[0], 60, temperature=0, ignore_eos=True).result(timeout=60)
    text = full["text"]
    assert len(text) > 12
    stop = text[8:11]
    res = sched.submit(PROMPTS[0], 60, temperature=0, ignore_eos=True, stop=stop).result(timeout=60)
    assert res["stop_reason"] == "string" and res["finish_reason"] == "stop"
    assert res["text"] == text[:text.index(stop)]
    assert res["text"] == stories.generate(PROMPTS[0], 60, temperature=0, ignore_eos=True, stop=stop).text
    tok = full["tokens"][5]
    res = sched.submit(PROMPTS[0], 60, temperature=0, ignore_eos=True, stop_ids=[tok]).result(timeout=60)
    assert res["stop_reason"] == "token" and res["finish_reason"] == "stop"
    assert res["tokens"] == full["tokens"][:full["tokens"].index(tok) + 1]


# ---- iteration and callbacks ----------------------------------------------------------


def test_iteration_pieces_join_to_the_text(cortex, stories, sched):
    for p in PROMPTS:
        req = sched.submit(p, 40, temperature=0)
        pieces = list(req)
        assert all(isinstance(x, str) and x for x in pieces)
        assert "".join(pieces) == req.result()["text"]
        assert list(req) == []  # exhausted
    # random tokens (byte tokens included) at a high temperature: incomplete UTF-8 is held back,
    # invalid bytes are replaced the same way in the pieces and in the text
    for seed in range(12):
        req = sched.submit(PROMPTS[0], 48, temperature=3.0, top_k=0, top_p=1.0, min_p=0.0, seed=seed,
                           ignore_eos=True, stop=["xq", "the"])
        pieces = list(req)
        assert "".join(pieces) == req.result()["text"]


def test_on_token_once_per_token(cortex, stories, sched):
    for p in PROMPTS:
        calls = []
        done = []
        main = threading.get_ident()

        def on_token(req, tok, piece):
            calls.append((req, tok, piece, threading.get_ident()))

        def on_done(req):
            done.append(req.result())  # readable inside its own on_done

        req = sched.submit(p, 30, temperature=0, on_token=on_token, on_done=on_done)
        res = req.result(timeout=60)
        assert [c[1] for c in calls] == res["tokens"]
        assert all(c[0] is req for c in calls) and all(c[3] != main for c in calls)
        # the pieces are the text, but for an incomplete UTF-8 character it ends with (no later token
        # completes it: on_token cannot know a token is the last; iteration flushes it, decoded as U+FFFD)
        joined = "".join(c[2] for c in calls)
        assert res["text"].startswith(joined) and set(res["text"][len(joined):]) <= {"\ufffd"}
        assert "".join(req) == res["text"]
        assert done == [res]


def test_callback_exceptions(cortex, stories, sched):
    def bad_token(req, tok, piece):
        if bad_token.n == 2:
            raise ValueError("boom")
        bad_token.n += 1

    bad_token.n = 0
    req = sched.submit(PROMPTS[0], 200, temperature=0, ignore_eos=True, on_token=bad_token)
    with pytest.raises(RuntimeError, match="on_token") as ei:
        req.result(timeout=60)
    assert isinstance(ei.value.__cause__, ValueError) and str(ei.value.__cause__) == "boom"
    with pytest.raises(RuntimeError):  # every time
        req.result()
    assert req.done()

    # iteration yields what was generated, then raises at the end
    bad_token.n = 0
    req = sched.submit(PROMPTS[1], 200, temperature=0, ignore_eos=True, on_token=bad_token)
    pieces = []
    with pytest.raises(RuntimeError) as ei:
        for piece in req:
            pieces.append(piece)
    assert isinstance(ei.value.__cause__, ValueError)
    assert list(req) == []

    # on_done raising: the request had finished, result() still raises
    def bad_done(req):
        raise KeyError("late")

    req = sched.submit(PROMPTS[2], 5, temperature=0, on_done=bad_done)
    with pytest.raises(RuntimeError, match="on_done") as ei:
        req.result(timeout=60)
    assert isinstance(ei.value.__cause__, KeyError)

    # waiting for a live request inside a callback of its own scheduler would deadlock: refused
    def waits(req, tok, piece):
        req.result()

    req = sched.submit(PROMPTS[3], 50, temperature=0, ignore_eos=True, on_token=waits)
    with pytest.raises(RuntimeError) as ei:
        req.result(timeout=60)
    assert isinstance(ei.value.__cause__, RuntimeError) and "own scheduler" in str(ei.value.__cause__)

    def closes(req, tok, piece):
        sched.close()

    req = sched.submit(PROMPTS[3], 50, temperature=0, ignore_eos=True, on_token=closes)
    with pytest.raises(RuntimeError) as ei:
        req.result(timeout=60)
    assert "own callbacks" in str(ei.value.__cause__)

    # the scheduler goes on
    gen = stories.generate(PROMPTS[4], 16, temperature=0)
    check_same(stories, sched.submit(PROMPTS[4], 16, temperature=0).result(timeout=60), gen)
    st = sched.stats()
    assert st["cancelled"] >= 4 and st["failed"] == 0


def test_callbacks_may_submit_and_cancel(cortex, stories, sched):
    got = []

    def chain(req):
        if len(got) < 3:
            got.append(sched.submit(PROMPTS[len(got)], 8, temperature=0, on_done=chain))

    first = sched.submit(PROMPTS[4], 8, temperature=0, on_done=chain)
    first.result(timeout=60)
    deadline = time.monotonic() + 60
    while len(got) < 3 or not got[-1].done():
        assert time.monotonic() < deadline
        time.sleep(0.005)
    gens = expected(stories, PROMPTS[:3], 8)
    for req, gen in zip(got, gens):
        check_same(stories, req.result(), gen)

    def cancel_self(req, tok, piece):
        req.cancel()

    res = sched.submit(PROMPTS[0], 100, temperature=0, ignore_eos=True, on_token=cancel_self).result(timeout=60)
    assert res["state"] == "cancelled" and res["n_gen"] == 1


# ---- ends ------------------------------------------------------------------------------


def test_cancel_mid_stream(cortex, stories, sched):
    gate = Gate(3)
    req = sched.submit(PROMPTS[0], 200, temperature=0, ignore_eos=True, on_token=gate)
    gate.wait()
    req.cancel()
    gate.open()
    res = req.result(timeout=60)
    assert res["state"] == "cancelled" and res["finish_reason"] is None and res["stop_reason"] is None
    assert res["n_gen"] == 3 and res["error"] is None
    full = sched.submit(PROMPTS[0], 3, temperature=0, ignore_eos=True).result(timeout=60)
    assert res["tokens"] == full["tokens"] and res["text"] == full["text"]
    req.cancel()  # a finished request: nothing happens
    done = sched.submit(PROMPTS[1], 2, temperature=0)
    done.result(timeout=60)
    done.cancel()
    assert done.result()["state"] == "finished"

    # while iterating (the gate holds the scheduler at the third token until the cancel is in)
    gate = Gate(3)
    req = sched.submit(PROMPTS[1], 200, temperature=0, ignore_eos=True, on_token=gate)
    pieces = []
    for i, piece in enumerate(req):
        pieces.append(piece)
        if i == 0:
            gate.wait()
            req.cancel()
            gate.open()
    res = req.result()
    assert res["state"] == "cancelled" and "".join(pieces) == res["text"] and res["n_gen"] == 3


def test_dropped_request_is_cancelled(cortex, stories, sched):
    gate = Gate(1)
    blocker = sched.submit(PROMPTS[0], 4, temperature=0, on_token=gate)
    gate.wait()
    req = sched.submit(PROMPTS[1], 200, temperature=0, ignore_eos=True)
    ref = weakref.ref(req)
    del req
    gc.collect()
    assert ref() is None
    gate.open()
    blocker.result(timeout=60)
    deadline = time.monotonic() + 60
    while sched.stats()["cancelled"] < 1:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    assert sched.stats()["running"] + sched.stats()["waiting"] == 0


def test_fire_and_forget(cortex, stories):
    """A request with callbacks keeps itself (and its scheduler) alive until it ends, even
    when Python drops both: the scheduler is then freed from its own thread."""
    s = cortex.Scheduler(stories, max_seqs=2)
    ended = threading.Event()
    out = []
    s.submit(PROMPTS[0], 20, temperature=0, on_done=lambda r: (out.append(r.result()), ended.set()))
    ref = weakref.ref(s)
    del s
    assert ended.wait(60)
    check_same(stories, out[0], stories.generate(PROMPTS[0], 20, temperature=0))
    out.clear()
    deadline = time.monotonic() + 30
    while ref() is not None:
        gc.collect()
        assert time.monotonic() < deadline, "the scheduler was never freed"
        time.sleep(0.01)
    time.sleep(0.2)  # the reaper thread stops and frees the C scheduler, then releases the model
    assert stories.generate(PROMPTS[0], 4, temperature=0).text


def test_deadline(cortex, stories):
    with cortex.Scheduler(stories, max_seqs=1) as s:
        gate = Gate(2)
        running = s.submit(PROMPTS[0], 200, temperature=0, ignore_eos=True, deadline_ms=50, on_token=gate)
        gate.wait()
        queued = s.submit(PROMPTS[1], 10, temperature=0, deadline_ms=50)
        time.sleep(0.2)
        gate.open()
        r1, r2 = running.result(timeout=60), queued.result(timeout=60)
        assert r1["state"] == "timeout" and r1["n_gen"] == 2 and r1["finish_reason"] is None
        assert r2["state"] == "timeout" and r2["n_gen"] == 0 and r2["tokens"] == [] and r2["ttft_ms"] is None
        assert s.stats()["timed_out"] == 2


def test_result_timeout(cortex, stories, sched):
    gate = Gate(1)
    req = sched.submit(PROMPTS[0], 5, temperature=0, on_token=gate)
    gate.wait()
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        req.result(timeout=0.05)
    assert time.monotonic() - t0 < 5
    with pytest.raises(TimeoutError):
        req.result(timeout=0)
    assert not req.done()
    gate.open()
    assert req.result(timeout=60)["state"] == "finished" and req.done()


@pytest.fixture
def sigint_raises():
    """SIGINT raising KeyboardInterrupt: a process started in the background by a shell (a CI job)
    inherits SIGINT ignored, and then Python installs no handler and interrupt_main does nothing."""
    import signal
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def test_waiting_sees_ctrl_c(cortex, stories, sched, sigint_raises):
    import _thread
    gate = Gate(1)
    req = sched.submit(PROMPTS[0], 5, temperature=0, on_token=gate)
    gate.wait()
    pieces = []
    for wait in (req.result, lambda: pieces.extend(req)):
        threading.Timer(0.1, _thread.interrupt_main).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            wait()
        assert time.monotonic() - t0 < 10
    gate.open()
    res = req.result(timeout=60)
    pieces.extend(req)  # iteration goes on where the interrupt left it
    assert res["state"] == "finished" and "".join(pieces) == res["text"]


def test_exit_with_open_schedulers(cortex, stories_path):
    """Leaving the interpreter with live requests (callbacks included) and a scheduler being freed
    from its own thread: the exit hook closes what is open, and the process exits cleanly."""
    script = """
import sys, threading
import cortex
m = cortex.Model(sys.argv[1])
s = cortex.Scheduler(m, max_seqs=2)
seen = threading.Event()
reqs = [s.submit("Once upon a time", 400, ignore_eos=True, on_token=lambda r, t, p: seen.set()) for _ in range(4)]
s2 = cortex.Scheduler(m)
s2.submit("The dog", 400, ignore_eos=True, on_done=lambda r: None)
del s2
seen.wait(30)
print("bye", flush=True)
"""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(cortex.__file__)))
    r = subprocess.run([sys.executable, "-c", script, stories_path], capture_output=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == b"bye\n" and r.stderr == b""


def test_priorities_with_one_slot(cortex, stories):
    with cortex.Scheduler(stories, max_seqs=1, aging_ms=0) as s:
        order = []
        gate = Gate(1)
        first = s.submit(PROMPTS[0], 3, temperature=0, on_token=gate, on_done=lambda r: order.append("first"))
        gate.wait()
        reqs = []
        for name, prio in [("low1", 0), ("high1", 5), ("mid", 2), ("low2", 0), ("high2", 5), ("neg", -3)]:
            reqs.append(s.submit(PROMPTS[1], 3, temperature=0, priority=prio,
                                 on_done=lambda r, name=name: order.append(name)))
        gate.open()
        for r in [first] + reqs:
            r.result(timeout=60)
        assert order == ["first", "high1", "high2", "mid", "low1", "low2", "neg"]


def test_queue_bound(cortex, stories):
    with cortex.Scheduler(stories, max_seqs=1, max_queue=2) as s:
        gate = Gate(1)
        blocker = s.submit(PROMPTS[0], 3, temperature=0, on_token=gate)
        gate.wait()
        queued = [s.submit(p, 3, temperature=0) for p in PROMPTS[1:3]]
        with pytest.raises(cortex.BusyError) as ei:
            s.submit(PROMPTS[3], 3, temperature=0)
        assert ei.value.code == -8 and isinstance(ei.value, cortex.Error)
        st = s.stats()
        assert st["waiting"] == 2 and st["running"] == 1 and st["rejected"] == 1
        gate.open()
        for r in [blocker] + queued:
            assert r.result(timeout=60)["state"] == "finished"
        assert s.submit(PROMPTS[3], 3, temperature=0).result(timeout=60)["state"] == "finished"


def test_context_full_and_bad_arguments(cortex, stories):
    with cortex.Scheduler(stories, n_ctx=32) as s:
        with pytest.raises(cortex.ContextFullError):
            s.submit(list(range(1, 40)), 4)
        with pytest.raises(cortex.ContextFullError):
            s.submit(" ".join(PROMPTS) * 3, 4)
        r = s.submit(list(range(1, 20)), 100, temperature=0, ignore_eos=True).result(timeout=60)  # capped
        assert r["n_gen"] == 32 - 19 and r["finish_reason"] == "length"
        with pytest.raises(ValueError, match="max_tokens must be >= 1"):
            s.submit("x", 0)
        with pytest.raises(TypeError, match="max_tokens"):
            s.submit("x", "3")
        with pytest.raises(ValueError, match="temperature"):
            s.submit("x", temperature=float("nan"))
        with pytest.raises(ValueError, match="deadline_ms"):
            s.submit("x", deadline_ms=-1)
        with pytest.raises(ValueError, match="prompt"):
            s.submit("")
        with pytest.raises(ValueError, match="prompt"):
            s.submit([])
        with pytest.raises(ValueError, match=r"prompt\[1\]"):
            s.submit([1, 10**6])
        with pytest.raises(ValueError, match="stop_ids"):
            s.submit("x", stop_ids=[-1])
        with pytest.raises(TypeError, match="on_token"):
            s.submit("x", on_token=3)
        with pytest.raises(TypeError, match="on_done"):
            s.submit("x", on_done="f")
        with pytest.raises(ValueError, match="adapter 'nope'"):
            s.submit("x", adapter="nope")
        with pytest.raises(TypeError, match="adapter"):
            s.submit("x", adapter=1)
        with pytest.raises(ValueError, match="timeout"):
            s.submit("x", 1).result(timeout=-1)
        with pytest.raises(ValueError, match="not registered"):
            s.remove_adapter("nope")
        assert s.stats()["rejected"] == 2  # only the engine's refusals count
    for kw, match in [(dict(max_seqs=0), "max_seqs"), (dict(max_seqs=300), "max_seqs"),
                      (dict(max_batch_tokens=4, max_seqs=8), "max_batch_tokens"), (dict(max_queue=0), "max_queue"),
                      (dict(kv_type="q4"), "kv_type"), (dict(kv_type="bf8"), "kv_type"),
                      (dict(threads=0), "threads"), (dict(aging_ms=-1), "aging_ms"), (dict(n_ctx=-1), "n_ctx"),
                      (dict(lora_budget=-1), "lora_budget")]:
        with pytest.raises(ValueError, match=match):
            cortex.Scheduler(stories, **kw)
    with pytest.raises(TypeError):
        cortex.Scheduler("not a model")
    with pytest.raises(TypeError):
        cortex.Request()
    for kv in ("f16", "q8"):
        with cortex.Scheduler(stories, kv_type=kv, max_seqs=2) as s:
            assert s.submit(PROMPTS[0], 8, temperature=0).result(timeout=60)["n_gen"] >= 1


# ---- close -----------------------------------------------------------------------------


def test_close_with_live_requests(cortex, stories):
    s = cortex.Scheduler(stories, max_seqs=2)
    gate = Gate(2)
    reqs = [s.submit(PROMPTS[0], 400, temperature=0, ignore_eos=True, on_token=gate)]
    gate.wait()
    reqs += [s.submit(p, 400, temperature=0, ignore_eos=True) for p in PROMPTS[1:]]
    threading.Timer(0.2, gate.open).start()  # close() waits for the gated step to end
    s.close()
    assert s.closed
    for r in reqs:
        assert r.done()
        res = r.result(timeout=0)
        assert res["state"] == "cancelled"
        assert "".join(r) == res["text"]  # still readable after the scheduler is gone
        r.cancel()  # nothing to cancel
    assert reqs[0].result()["n_gen"] == 2
    with pytest.raises(ValueError, match="scheduler is closed"):
        s.submit("x")
    with pytest.raises(ValueError, match="scheduler is closed"):
        s.stats()
    with pytest.raises(ValueError, match="scheduler is closed"):
        s.add_adapter("a", "/nonexistent")
    s.close()  # again: nothing
    assert s.model is stories


def test_close_drain(cortex, stories):
    s = cortex.Scheduler(stories, max_seqs=2)
    gens = expected(stories, PROMPTS, 30)
    reqs = [s.submit(p, 30, temperature=0) for p in PROMPTS]
    s.close(drain=True)
    for req, gen in zip(reqs, gens):
        check_same(stories, req.result(timeout=0), gen)


def test_with_and_model_close(cortex, stories_path):
    m = cortex.Model(stories_path)
    with cortex.Scheduler(m) as s:
        req = s.submit(PROMPTS[0], 8, temperature=0)
        m.close()  # the scheduler keeps the C model until it closes
        assert req.result(timeout=60)["state"] == "finished"
        assert s.submit(PROMPTS[1], 4, temperature=0).result(timeout=60)["state"] == "finished"
    assert s.closed
    with pytest.raises(ValueError, match="closed"):
        cortex.Scheduler(m)


# ---- asyncio ---------------------------------------------------------------------------


def test_asyncio(cortex, stories, sched):
    gens = expected(stories, PROMPTS, 30)

    async def collect(req):
        return "".join([piece async for piece in req])

    async def main():
        streamed = [sched.submit(p, 30, temperature=0) for p in PROMPTS]
        awaited = [sched.submit(p, 30, temperature=0) for p in PROMPTS]
        texts = await asyncio.gather(*(collect(r) for r in streamed))
        results = await asyncio.gather(*awaited)
        results2 = [await r for r in streamed]  # after the end: at once
        return texts, results, results2

    texts, results, results2 = asyncio.run(main())
    for text, res, res2, gen in zip(texts, results, results2, gens):
        assert text == gen.text
        check_same(stories, res, gen)
        check_same(stories, res2, gen)


def test_asyncio_cancel_and_errors(cortex, stories, sched):
    def bad(req, tok, piece):
        raise ValueError("async boom")

    async def main():
        # a cancelled task cancels its request (held at its first token, so it
        # is still running when the task is cancelled: 400 tokens of this
        # model can take under the 10 ms a sleep would give)
        gate0 = Gate(1)
        req = sched.submit(PROMPTS[0], 400, temperature=0, ignore_eos=True, on_token=gate0)
        task = asyncio.ensure_future(req)
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gate0.open()
        res = await req
        assert res["state"] == "cancelled"
        # wait_for's timeout cancels the awaiting coroutine, and so the request
        gate = Gate(1)
        req2 = sched.submit(PROMPTS[1], 400, temperature=0, ignore_eos=True, on_token=gate)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(_wait(req2), 0.05)
        gate.open()
        assert (await req2)["state"] == "cancelled"
        # async for after the end yields the whole text at once
        assert "".join([p async for p in req2]) == req2.result()["text"]
        # a callback's exception comes out of await and of async for
        with pytest.raises(RuntimeError) as ei:
            await sched.submit(PROMPTS[2], 10, temperature=0, on_token=bad)
        assert isinstance(ei.value.__cause__, ValueError)
        with pytest.raises(RuntimeError):
            async for _ in sched.submit(PROMPTS[2], 10, temperature=0, on_token=bad):
                pass

    asyncio.run(main())


async def _wait(req):
    return await req


# ---- threads, references, memory ---------------------------------------------------------


def test_threads_submitting_at_once(cortex, stories, sched):
    gens = expected(stories, PROMPTS, 20)
    errors = []
    barrier = threading.Barrier(4)

    def worker(k):
        try:
            barrier.wait()
            for rnd in range(3):
                order = PROMPTS[k:] + PROMPTS[:k]
                reqs = [sched.submit(p, 20, temperature=0) for p in order]
                for p, req in zip(order, reqs):
                    text = "".join(req) if rnd == 1 else None  # iterate, then read
                    res = req.result(timeout=120)
                    assert text is None or text == res["text"]
                    check_same(stories, res, gens[PROMPTS.index(p)])
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert sched.stats()["finished"] == 4 * 3 * len(PROMPTS)


def test_references_and_memory_over_10000_requests(cortex, stories):
    ids = stories.tokenize(PROMPTS[0])
    stop = ["never"]

    def on_token(req, tok, piece):
        pass

    def on_done(req):
        pass

    with cortex.Scheduler(stories, max_seqs=4) as s:
        def cycle(i):
            if i % 2:
                r = s.submit(ids, 1, temperature=0, stop=stop, on_token=on_token, on_done=on_done)
            else:
                r = s.submit(ids, 1, temperature=0)
            res = r.result()
            assert res["n_gen"] == 1
            return r

        for i in range(200):  # warm up
            cycle(i)
        gc.collect()
        before = [sys.getrefcount(o) for o in (ids, stop, on_token, on_done, s, stories)]
        r0 = rss_kib()
        tracemalloc.start()
        s0 = tracemalloc.take_snapshot()
        last = None
        for i in range(N_LEAK):
            last = cycle(i)
        ref = weakref.ref(last)
        del last
        gc.collect()
        s1 = tracemalloc.take_snapshot()
        tracemalloc.stop()
        grown = sum(d.size_diff for d in s1.compare_to(s0, "filename"))
        rss = rss_kib() - r0
        assert ref() is None
        after = [sys.getrefcount(o) for o in (ids, stop, on_token, on_done, s, stories)]
        assert after == before
        assert grown < 64 * 1024, grown
        if os.environ.get("CORTEX_ASAN") != "1":  # ASan's quarantine keeps freed memory resident
            assert rss < 8 * 1024, rss
        st = s.stats()
        assert st["finished"] == N_LEAK + 200 and st["running"] == 0 and st["waiting"] == 0


# ---- adapters, stats, documentation -----------------------------------------------------


def test_adapters(cortex, stories, stories_path, tmp_path):
    if not os.path.exists(CORTEX_BIN):
        pytest.skip("SKIP: %s is not built (make): it writes the test adapter" % CORTEX_BIN)
    paths = []
    for seed in (1, 2):
        path = str(tmp_path / ("a%d.gguf" % seed))
        subprocess.run([CORTEX_BIN, "synth-lora", "-m", stories_path, "-o", path, "--seed", str(seed)],
                       check=True, capture_output=True, timeout=120)
        paths.append(path)
    with cortex.Scheduler(stories, max_seqs=2) as s:
        assert s.add_adapter("one", paths[0]) == 1
        assert s.add_adapter("two", paths[1], preload=False) == 2
        with pytest.raises(cortex.InvalidArgumentError):
            s.add_adapter("one", paths[1])
        with pytest.raises(cortex.FileError):
            s.add_adapter("three", str(tmp_path / "missing.gguf"))
        assert s.stats()["lora_registered"] == 2
        lora = stories.load_lora(paths[0])
        try:
            gen = stories.generate(PROMPTS[0], 20, temperature=0, lora=lora, lora_scale=0.5)
        finally:
            lora.close()
        res = s.submit(PROMPTS[0], 20, temperature=0, adapter="one", adapter_scale=0.5).result(timeout=60)
        check_same(stories, res, gen)
        res2 = s.submit(PROMPTS[0], 20, temperature=0, adapter="two").result(timeout=60)
        assert res2["state"] == "finished"
        gate = Gate(1)
        live = s.submit(PROMPTS[1], 5, temperature=0, adapter="two", on_token=gate)
        gate.wait()
        assert s.remove_adapter("two") is False  # in use: goes when the request ends
        gate.open()
        live.result(timeout=60)
        assert s.remove_adapter("one") is True
        with pytest.raises(ValueError, match="adapter 'one'"):
            s.submit(PROMPTS[0], 4, adapter="one")
        # a request that cannot run fails: returned with state "failed" and the engine's reason, not raised
        gone = str(tmp_path / "gone.gguf")
        os.rename(paths[1], gone)  # "two" is unloaded: it is idle and removed; register the file anew, lazily
        assert s.add_adapter("lazy", gone, preload=False) == 3  # the failed adds took no id
        os.remove(gone)
        res = s.submit(PROMPTS[0], 4, temperature=0, adapter="lazy").result(timeout=60)
        assert res["state"] == "failed" and res["finish_reason"] is None and res["n_gen"] == 0
        assert "gone.gguf" in res["error"]
        assert s.stats()["failed"] == 1


def test_stats(cortex, stories, sched):
    for p in PROMPTS:
        sched.submit(p, 8, temperature=0).result(timeout=60)
    st = sched.stats()
    assert set(st) == {"running", "waiting", "submitted", "rejected", "finished", "cancelled", "timed_out", "failed",
                       "preemptions", "steps", "prefill_tokens", "decode_tokens", "step_ns", "eval_ns",
                       "kv_blocks_used", "kv_blocks_max", "kv_blocks_capacity", "lora_registered", "lora_resident",
                       "lora_bytes", "lora_loads", "lora_evictions", "lora_load_ns", "lora_load_ns_max",
                       "spec_steps", "spec_verified", "spec_passes", "spec_drafted", "spec_accepted",
                       "spec_draft_passes", "spec_tokens", "spec_draft_ns", "spec_verify_ns"}
    assert all(isinstance(v, int) for v in st.values())
    assert st["submitted"] == st["finished"] == len(PROMPTS)
    assert st["steps"] > 0 and st["decode_tokens"] > 0 and st["prefill_tokens"] > 0
    assert 0 < st["eval_ns"] <= st["step_ns"] and st["kv_blocks_capacity"] > 0


def test_docstrings(cortex):
    for cls in (cortex.Scheduler, cortex.Request):
        assert cls.__doc__ and len(cls.__doc__) > 200
        for name in dir(cls):
            if name.startswith("__") or name in ("id", "model", "closed"):
                continue
            assert getattr(cls, name).__doc__, "%s.%s has no docstring" % (cls.__name__, name)
    import inspect
    sig = inspect.signature(cortex.Scheduler.submit)
    assert sig.parameters["max_tokens"].default == 16 and sig.parameters["priority"].default == 0
    assert str(inspect.signature(cortex.Scheduler)).startswith("(model, *, max_seqs=8, max_batch_tokens=256")
    import cortex.aio
    assert cortex.aio.__doc__ and cortex.aio.stream.__doc__ and cortex.aio.result.__doc__
