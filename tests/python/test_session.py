"""cortex.Session: eval, logits as a zero-copy view of the engine's buffer,
every position's logits, truncate; numerics against the independent numpy
reference (tests/reference/llama_ref.py)."""
import gc
import threading
import tracemalloc

import numpy as np
import pytest

TEXT = "Once upon a time there was a little girl named Lily. She loved to play outside."


def test_logits_equal_numpy_reference(cortex, stories_path):
    import llama_ref
    ref = llama_ref.Transformer(llama_ref.load_model(stories_path))
    with cortex.Model(stories_path) as m, m.session() as s:
        ids = m.tokenize(TEXT)
        worst = 0.0
        for pos, t in enumerate(ids):
            s.eval([t])
            want = ref.forward(t, pos)
            worst = max(worst, float(np.max(np.abs(s.logits - want))))
        assert worst <= 1e-4, worst
        # the prefill of the whole text (one pass) gives the last position's logits too
        s.reset()
        s.eval(ids)
        assert float(np.max(np.abs(s.logits - want))) <= 1e-4


def test_zero_copy(cortex, stories):
    s = stories.session()
    assert s.logits is None
    s.eval(stories.tokenize("Once"))
    a = s.logits
    assert a.dtype == np.float32 and a.shape == (stories.n_vocab,)
    assert a.__array_interface__["data"][0] == s._logits_address  # the engine's own buffer
    b = s.logits
    assert b is a and np.shares_memory(a, b)
    assert not a.flags.writeable and not a.flags.owndata
    with pytest.raises(ValueError):
        a[0] = 1.0
    with pytest.raises(ValueError):
        a.flags.writeable = True
    before = a.copy()
    s.eval([42])
    assert not np.array_equal(before, a)  # the view shows the new logits
    assert np.shares_memory(a, s.logits)
    mv = memoryview(a)
    assert mv.readonly
    s.close()


def test_no_allocation_per_read(cortex, stories):
    s = stories.session()
    s.eval(stories.tokenize("Once upon"))
    keep = s.logits
    tracemalloc.start()
    snap0 = tracemalloc.take_snapshot()
    total = 0.0
    for _ in range(10000):
        total += s.logits[7]
    snap1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(st.size_diff for st in snap1.compare_to(snap0, "filename"))
    assert grown < 4096, grown  # not one n_vocab copy (2 KiB each) per read
    del keep
    s.close()


def test_view_after_drop_recreated(cortex, stories):
    s = stories.session()
    s.eval([1, 2, 3])
    addr = s.logits.__array_interface__["data"][0]  # the array is dropped at once
    gc.collect()
    assert s.logits.__array_interface__["data"][0] == addr
    s.close()


def test_view_keeps_session_alive(cortex, stories):
    s = stories.session()
    s.eval(stories.tokenize("Once upon a time"))
    a = s.logits
    want = a.copy()
    s.close()  # deferred: the array still reads the engine's buffer
    assert s.closed
    with pytest.raises(ValueError, match="closed"):
        s.eval([3])
    assert np.array_equal(a, want)
    del s
    gc.collect()
    assert np.array_equal(a, want)
    del a
    gc.collect()


def test_all_logits_equal_one_at_a_time(cortex, stories):
    ids = stories.tokenize(TEXT)
    with stories.session() as s1, stories.session() as s2:
        rows = s1.eval(ids, all_logits=True)
        assert rows.shape == (len(ids), stories.n_vocab) and rows.flags.writeable and rows.flags.owndata
        assert s1.logits is None and s1.pos == len(ids)
        for i, t in enumerate(ids):
            s2.eval([t])
            assert np.array_equal(rows[i], s2.logits), i  # f32 weights: bit for bit


def test_truncate(cortex, stories):
    ids = stories.tokenize(TEXT)
    with stories.session() as s, stories.session() as fresh:
        s.eval(ids)
        s.truncate(10)
        assert s.pos == 10 and s.logits is None
        s.eval(ids[10:15])
        fresh.eval(ids[:15])
        assert np.array_equal(s.logits, fresh.logits)
        with pytest.raises(ValueError, match="n_pos"):
            s.truncate(16)
        with pytest.raises(ValueError):
            s.truncate(-1)
        s.reset()
        assert s.pos == 0


def test_context_full(cortex, stories):
    with stories.session(n_ctx=16) as s:
        assert s.n_ctx == 16
        s.eval(list(range(3, 13)))
        with pytest.raises(cortex.ContextFullError) as e:
            s.eval(list(range(3, 10)))
        assert e.value.code == -7 and "16" in str(e.value)
        assert s.pos == 10
        s.eval(list(range(3, 9)))
        assert s.pos == 16


def test_kv_stats_and_types(cortex, stories):
    ids = stories.tokenize(TEXT)
    with stories.session(kv_type="q8", prefix_cache=True) as s:
        s.eval(ids)
        st = s.kv_stats()
        assert st["type"] == "q8" and st["pos"] == len(ids) and st["blocks_used"] >= len(ids) // 16
    with pytest.raises(ValueError, match="kv_type"):
        stories.session(kv_type="q5")


def test_ids_as_numpy(cortex, stories):
    ids = stories.tokenize(TEXT)
    with stories.session() as a, stories.session() as b, stories.session() as c:
        a.eval(ids)
        b.eval(np.array(ids, dtype=np.int32))
        c.eval(np.array(ids, dtype=np.uint16))
        assert np.array_equal(a.logits, b.logits) and np.array_equal(a.logits, c.logits)
        with pytest.raises(TypeError):
            a.eval(np.array([1.5, 2.0]))
        with pytest.raises(ValueError, match="one-dimensional"):
            a.eval(np.ones((2, 2), dtype=np.int32))


def test_gil_released_and_one_thread_at_a_time(cortex, stories_path):
    """Two sessions evaluate on two threads at once (the GIL is released);
    one session entered by two threads refuses the second."""
    with cortex.Model(stories_path) as m:
        ids = m.tokenize(TEXT) * 4
        results, errors = {}, []

        def run(k):
            try:
                with m.session() as s:
                    for _ in range(3):
                        s.reset()
                        s.eval(ids)
                    results[k] = s.logits.copy()
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        ts = [threading.Thread(target=run, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors and all(np.array_equal(results[0], results[k]) for k in range(4))

        s = m.session()
        busy = []

        def hammer():
            for _ in range(200):
                try:
                    s.reset()
                    s.eval(ids[:64])
                except RuntimeError as e:
                    busy.append(e)

        ts = [threading.Thread(target=hammer) for _ in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for e in busy:
            assert "in use" in str(e)
        s.close()


def test_session_lora(cortex, stories_path, tmp_path):
    from conftest import cortex_cli
    ad = str(tmp_path / "a.gguf")
    cortex_cli("synth-lora", "-m", stories_path, "--rank", 4, "--targets", "all", "--seed", 3, "-o", ad)
    with cortex.Model(stories_path) as m:
        a = cortex.LoRA(m, ad)
        ids = m.tokenize("Once upon a time")
        with m.session(lora=a) as s1, m.session() as s2:
            s1.eval(ids)
            s2.eval(ids)
            assert not np.array_equal(s1.logits, s2.logits)
            with pytest.raises(cortex.InvalidArgumentError, match="empty session"):
                s2.set_lora(a)
            s2.reset()
            s2.set_lora(a)
            s2.eval(ids)
            assert np.array_equal(s1.logits, s2.logits)
            a.close()  # deferred while sessions use it
            s2.eval([5])
            s2.reset()
            s2.set_lora(None)
