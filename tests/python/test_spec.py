"""cortex.Drafter: speculative decoding from Python (engine/python/src/spec.c),
in Model.generate(drafter=...) and Scheduler(drafter=...), against the same
calls without it:

- greedy tokens equal plain generation for every drafter (the n-gram lookup,
  a self-draft quantized at load, a draft model file), streamed or not, with
  stop strings, on the real stories260K and on a synthetic f32 model;
- Generation.speculation and the scheduler's per-request and total counters
  add up (accepted <= drafted, tokens = n_gen - 1, the model as its own
  draft accepts everything); the named tuple keeps its 10 fields;
- a sampled run with a drafter is the plain sampled run with its seed,
  token for token (penalties on too), in generate and in the scheduler;
- speculate=False and speculate=N per request; spec_max_batch checked;
- the errors: a bad spec, spec='model' without draft=, draft= with another
  spec, draft_min above draft_max, a draft of another vocabulary, a drafter
  of another model, a closed drafter;
- lifetime: a drafter closed while a scheduler uses it stays alive until the
  scheduler is closed; its model outlives it.
"""
import os

import pytest

PROMPTS = ["Once upon a time", "The little dog", "Lily and Tom went to the park", "One day, a bird"]


@pytest.fixture
def drafters(cortex, stories, stories_path):
    ds = {
        "ngram": cortex.Drafter(stories, "ngram"),
        "self:q8_0": cortex.Drafter(stories, "self:q8_0"),
        "model": cortex.Drafter(stories, draft=stories_path, draft_max=4, adaptive=False),
    }
    yield ds
    for d in ds.values():
        d.close()


def test_drafter_attributes(cortex, stories, drafters):
    assert drafters["ngram"].kind == "ngram" and drafters["ngram"].description == "ngram 2..4"
    assert drafters["ngram"].draft_bytes == 0 and drafters["ngram"].draft_max == 8
    assert drafters["self:q8_0"].kind == "self" and drafters["self:q8_0"].description.startswith("self:q8_0 (")
    assert "KiB, quantized at load" in drafters["self:q8_0"].description  # a 260K model is not "0 MiB"
    assert drafters["model"].kind == "model" and drafters["model"].draft_max == 4
    assert drafters["model"].draft_bytes > 0 and drafters["model"].model is stories
    assert not drafters["model"].closed


@pytest.mark.parametrize("kind", ["ngram", "self:q8_0", "model"])
def test_generate_greedy_equal(stories, drafters, kind):
    for p in PROMPTS:
        plain = stories.generate(p, 80, temperature=0, ignore_eos=True)
        spec = stories.generate(p, 80, temperature=0, ignore_eos=True, drafter=drafters[kind])
        assert spec.tokens == plain.tokens and spec.text == plain.text, (kind, p)
        assert spec.finish_reason == plain.finish_reason and spec.n_gen == plain.n_gen
        s = spec.speculation
        assert plain.speculation is None and len(tuple(spec)) == 10
        assert 0 <= s["accepted"] <= s["drafted"] and s["tokens"] == spec.n_gen - 1
        assert s["steps"] >= 1 and s["tokens_per_pass"] >= 1 and s["draft_ms"] >= 0 and s["verify_ms"] > 0
        if kind == "model":  # the model drafting for itself is always right
            assert s["accepted"] == s["drafted"] > 0 and s["tokens_per_pass"] > 2


def test_generate_stream_and_stops(stories, drafters):
    d = drafters["model"]
    plain = stories.generate(PROMPTS[2], 60, temperature=0)
    pieces = list(stories.generate(PROMPTS[2], 60, temperature=0, drafter=d, stream=True))
    assert "".join(pieces) == plain.text
    stop = plain.text[len(plain.text) // 2:][:6]
    a = stories.generate(PROMPTS[2], 60, temperature=0, stop=stop)
    b = stories.generate(PROMPTS[2], 60, temperature=0, stop=stop, drafter=d)
    assert a.text == b.text and a.finish_reason == b.finish_reason == "stop"
    # a context that fills mid-step: the tokens up to the full context, as without
    for ctx in (32, 33, 40):
        a = stories.generate(PROMPTS[2], 200, temperature=0, ignore_eos=True, n_ctx=ctx)
        b = stories.generate(PROMPTS[2], 200, temperature=0, ignore_eos=True, n_ctx=ctx, drafter=d)
        assert b.tokens == a.tokens and b.finish_reason == a.finish_reason == "length", ctx
    # the model's session after a speculative generation serves the next prompt's prefix
    c = stories.generate(PROMPTS[2] + " and", 20, temperature=0, drafter=d)
    assert c.n_cached > 0 and c.tokens == stories.generate(PROMPTS[2] + " and", 20, temperature=0).tokens


def test_generate_sampled_is_plain(stories, drafters):
    for kind in ("ngram", "self:q8_0", "model"):
        for seed, penalty in ((7, 1.0), (8, 1.3)):
            kw = dict(temperature=0.9, seed=seed, repeat_penalty=penalty)
            plain = stories.generate(PROMPTS[0], 60, **kw)
            spec = stories.generate(PROMPTS[0], 60, drafter=drafters[kind], **kw)
            assert spec.tokens == plain.tokens and spec.text == plain.text, (kind, seed)


def test_generate_synthetic_f32(cortex, tmp_path):
    path = str(tmp_path / "tiny.gguf")
    cortex.synth("test-tiny", path, type="f32")
    with cortex.Model(path) as m, cortex.Drafter(m, "self:q4_0", draft_max=3) as d:
        ids = [5, 9, 13, 5, 9, 13, 5, 9]
        assert m.generate(ids, 40, temperature=0, ignore_eos=True, drafter=d).tokens == \
            m.generate(ids, 40, temperature=0, ignore_eos=True).tokens


def test_scheduler_greedy_equal(cortex, stories, drafters):
    ref = [stories.generate(p, 40, temperature=0, ignore_eos=True).tokens for p in PROMPTS]
    for kind in ("ngram", "model"):
        with cortex.Scheduler(stories, max_seqs=4, drafter=drafters[kind]) as s:
            out = [r.result() for r in [s.submit(p, 40, temperature=0, ignore_eos=True) for p in PROMPTS]]
            assert [o["tokens"] for o in out] == ref, kind
            tot = {"drafted": 0, "accepted": 0}
            for o in out:
                sp = o["speculation"]
                assert 0 <= sp["accepted"] <= sp["drafted"] and sp["tokens"] == o["n_gen"] - 1
                tot["drafted"] += sp["drafted"]
                tot["accepted"] += sp["accepted"]
            st = s.stats()
            assert st["spec_drafted"] == tot["drafted"] and st["spec_accepted"] == tot["accepted"]
            if kind == "model":
                assert 0 < st["spec_draft_passes"] < st["spec_drafted"]  # the sequences drafted together
                assert tot["accepted"] == tot["drafted"] > 0
            else:
                assert st["spec_draft_passes"] == 0
            off = s.submit(PROMPTS[0], 20, temperature=0, ignore_eos=True, speculate=False).result()
            assert off["speculation"]["drafted"] == 0 and off["tokens"] == ref[0][:20]
            two = s.submit(PROMPTS[1], 20, temperature=0, ignore_eos=True, speculate=2).result()
            assert two["tokens"] == ref[1][:20] and two["speculation"]["drafted"] <= 2 * two["speculation"]["steps"]
            sampled = s.submit(PROMPTS[2], 30, temperature=0.9, seed=3, ignore_eos=True).result()
            assert sampled["tokens"] == stories.generate(PROMPTS[2], 30, temperature=0.9, seed=3,
                                                         ignore_eos=True).tokens
    with cortex.Scheduler(stories, max_seqs=2) as s:
        assert s.submit(PROMPTS[0], 8, temperature=0).result()["speculation"] is None


def test_errors(cortex, stories, aidreams, stories_path, aidreams_path):
    with pytest.raises(cortex.InvalidArgumentError, match="not one of none, ngram"):
        cortex.Drafter(stories, "bogus")
    with pytest.raises(ValueError, match="makes no drafter"):
        cortex.Drafter(stories, "none")
    with pytest.raises(ValueError, match="needs draft="):
        cortex.Drafter(stories, "model")
    with pytest.raises(ValueError, match="applies to spec='model'"):
        cortex.Drafter(stories, "ngram", draft=stories_path)
    with pytest.raises(ValueError, match="draft_min"):
        cortex.Drafter(stories, draft_min=5, draft_max=3)
    with pytest.raises(ValueError, match="draft_max"):
        cortex.Drafter(stories, draft_max=0)
    with pytest.raises(cortex.InvalidArgumentError, match="vocabulary"):
        cortex.Drafter(stories, draft=aidreams_path)
    with pytest.raises(cortex.FileError):
        cortex.Drafter(stories, draft=os.path.join(os.path.dirname(stories_path), "no-such-model.gguf"))
    other = cortex.Drafter(aidreams, "ngram")
    with pytest.raises(ValueError, match="another Model"):
        stories.generate("x", 4, drafter=other)
    with pytest.raises(ValueError, match="another Model"):
        cortex.Scheduler(stories, drafter=other)
    with pytest.raises(TypeError, match="cortex.Drafter"):
        stories.generate("x", 4, drafter="ngram")
    d = cortex.Drafter(stories)
    d.close()
    assert d.closed
    with pytest.raises(ValueError, match="closed"):
        stories.generate("x", 4, drafter=d)
    with pytest.raises(ValueError, match="spec_max_batch"):
        cortex.Scheduler(stories, drafter=cortex.Drafter(stories), spec_max_batch=0)
    with cortex.Scheduler(stories, drafter=cortex.Drafter(stories)) as s:
        with pytest.raises(ValueError, match="speculate"):
            s.submit("x", 4, speculate=-3)


def test_lifetime(cortex, stories_path):
    m = cortex.Model(stories_path)
    d = cortex.Drafter(m, draft=stories_path)
    s = cortex.Scheduler(m, drafter=d, max_seqs=2)
    d.close()  # the scheduler still uses it: freed when the scheduler is
    assert d.closed
    ref = m.generate(PROMPTS[0], 24, temperature=0, ignore_eos=True).tokens
    assert s.submit(PROMPTS[0], 24, temperature=0, ignore_eos=True).result()["tokens"] == ref
    m.close()  # the model too: both outlive it while the scheduler runs
    assert s.submit(PROMPTS[1], 8, temperature=0).result()["state"] == "finished"
    s.close()
    del s, d, m
