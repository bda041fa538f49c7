"""Reference counts and memory over 10,000 calls of each kind: nothing the
module hands out or takes may leak (a reference, a Python object, or C
memory: the process's resident size must stay flat)."""
import gc
import os
import sys
import tracemalloc

import numpy as np
import pytest
from conftest import rss_kib

N = 10000
ASAN = os.environ.get("CORTEX_ASAN") == "1"  # make python-asan


def run_flat(fn, n=N, warm=200):
    """Call fn n times after a warm-up; returns (traced Python bytes grown, RSS KiB grown)."""
    for _ in range(warm):
        fn()
    gc.collect()
    r0 = rss_kib()
    tracemalloc.start()
    s0 = tracemalloc.take_snapshot()
    for _ in range(n):
        fn()
    gc.collect()
    s1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(d.size_diff for d in s1.compare_to(s0, "filename"))
    return grown, rss_kib() - r0


def test_refcounts_of_arguments(cortex, stories):
    prompt = "Once upon a time"
    ids = stories.tokenize(prompt)
    stop = ["never"]
    arr = np.array(ids, dtype=np.int32)
    before = [sys.getrefcount(o) for o in (prompt, ids, stop, arr, stories)]
    s = stories.session()
    for _ in range(N // 10):
        stories.generate(prompt, max_tokens=1, stop=stop)
        stories.generate(ids, max_tokens=1)
        stories.tokenize(prompt)
        stories.detokenize(arr)
        s.reset()
        s.eval(arr)
        s.logits
    s.close()
    del s
    gc.collect()
    after = [sys.getrefcount(o) for o in (prompt, ids, stop, arr, stories)]
    assert before == after


@pytest.mark.parametrize("kind", ["tokenize", "generate", "stream", "eval_logits", "all_logits", "errors",
                                  "session_new", "completion", "speculative", "drafter_new"])
def test_no_growth(cortex, stories, stories_path, kind):
    s = stories.session(n_ctx=64)
    d = cortex.Drafter(stories, draft=stories_path, draft_max=3)
    ids = stories.tokenize("Once upon a time")

    def tokenize():
        stories.detokenize(stories.tokenize("Once upon a time there was"))

    def generate():
        stories.generate("Once upon a time", max_tokens=1)

    def stream():
        for _ in stories.generate("Once upon a time", max_tokens=1, stream=True):
            pass

    def eval_logits():
        s.reset()
        s.eval(ids)
        s.logits[0]

    def all_logits():
        s.reset()
        s.eval(ids, all_logits=True)

    def errors():
        for call in (lambda: stories.generate("x", max_tokens=0), lambda: s.eval([99999]),
                     lambda: stories.generate(list(range(3, 80)), n_ctx=16)):
            try:
                call()
            except (ValueError, cortex.Error):
                pass

    def session_new():
        with stories.session(n_ctx=32) as t:
            t.eval([1, 2])

    def completion():
        stories.create_completion("Once", max_tokens=1)

    def speculative():
        stories.generate("Once upon a time", max_tokens=4, temperature=0, drafter=d)
        for _ in stories.generate("Once upon a time", max_tokens=3, drafter=d, stream=True):
            pass

    def drafter_new():
        with cortex.Drafter(stories, "ngram"):
            pass

    fn = locals()[kind]
    n = N // 10 if kind in ("session_new", "speculative") else N
    grown, rss = run_flat(fn, n=n)
    s.close()
    d.close()
    assert grown < 64 * 1024, "%s: %d bytes of Python objects kept over %d calls" % (kind, grown, n)
    if not ASAN:  # ASan keeps freed memory in quarantine: its resident size grows by design
        assert rss < 8 * 1024, "%s: resident size grew %d KiB over %d calls" % (kind, rss, n)
