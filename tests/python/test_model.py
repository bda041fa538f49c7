"""cortex.Model: loading, tokenizer, generation (whole and streamed), the
OpenAI-shaped calls, chat templates, LoRA, lifetime. Greedy text must equal
the `cortex generate` command's, token for token."""
import gc
import json
import os

import pytest
from conftest import cortex_cli, model_path

PROMPTS = ["Once upon a time", "The little dog", "Echoes of", "In the sky there was"]


def cli_greedy(path, prompt, n, tok=None, extra=()):
    """Token ids and text `cortex generate --temp 0` prints after the prompt."""
    base = ["generate", "-m", path] + (["-z", tok] if tok else []) + ["-p", prompt, "-n", n, "--temp", 0] + list(extra)
    ids, _ = cortex_cli(*(base + ["--ids"]))
    text, _ = cortex_cli(*(base + ["--no-echo"]))
    return [int(t) for t in ids.split()], text[:-1].decode("utf-8", "replace")  # the command ends with "\n"


def test_info(cortex, stories):
    i = stories.info
    assert i["format"] == "gguf" and i["n_vocab"] == 512 and i["n_layer"] == 5 and i["n_head_kv"] == 4
    assert stories.n_vocab == 512 and stories.n_ctx == i["n_ctx"] > 0
    assert stories.bos == 1 and stories.eos == 2
    assert i["isa"] in ("scalar", "avx2", "avxvnni", "avx512", "avx512vnni")
    assert stories.path.endswith("stories260K.gguf") and not stories.closed


@pytest.mark.parametrize("name,tok", [("aidreams260K.gguf", None), ("stories260K.gguf", None),
                                      ("aidreams260K.bin", "aidreams-tok512.bin")])
def test_greedy_equals_cli(cortex, name, tok):
    path = model_path(name)
    tok_path = model_path(tok) if tok else None
    with cortex.Model(path, tok_path) as m:
        for p in PROMPTS:
            ids, text = cli_greedy(path, p, 60, tok_path)
            prompt_ids = m.tokenize(p)
            assert ids[:len(prompt_ids)] == prompt_ids, "tokenizer differs from the command's"
            g = m.generate(p, max_tokens=60, temperature=0)
            assert g.tokens == ids[len(prompt_ids):], p
            assert g.text == text, p
            assert g.n_prompt == len(prompt_ids)
            assert g.finish_reason in ("stop", "length")


def test_tokenize_detokenize(stories):
    ids = stories.tokenize("Hello world")
    assert ids[0] == stories.bos
    assert stories.tokenize("Hello world", add_bos=False) == ids[1:]
    assert stories.tokenize(b"Hello world") == ids
    assert stories.detokenize(ids) == "Hello world"
    pieces = b"".join(stories.token_piece(t, p) for p, t in zip([-1] + ids[:-1], ids))
    assert pieces == b"Hello world"
    assert stories.is_eog(stories.eos) and not stories.is_eog(ids[1])
    import numpy as np
    assert stories.detokenize(np.array(ids, dtype=np.int32)) == "Hello world"
    assert stories.detokenize(np.array(ids, dtype=np.int64)) == "Hello world"


def test_stream_equals_generate(stories):
    for p in PROMPTS:
        for kw in ({"temperature": 0}, {"temperature": 0.9, "seed": 7}, {"temperature": 0.7, "stop": ["the", "."]}):
            g = stories.generate(p, max_tokens=50, **kw)
            st = stories.generate(p, max_tokens=50, stream=True, **kw)
            pieces = list(st)
            assert "".join(pieces) == g.text
            assert st.result.tokens == g.tokens and st.result.finish_reason == g.finish_reason


def test_stop_strings(aidreams):
    g = aidreams.generate("Echoes of", max_tokens=60, temperature=0)
    assert len(g.text) > 20
    cut = g.text[10:14]
    s = aidreams.generate("Echoes of", max_tokens=60, temperature=0, stop=[cut, "never-in-this-text"])
    assert s.finish_reason == "stop" and s.text == g.text[:g.text.index(cut)]
    st = aidreams.generate("Echoes of", max_tokens=60, temperature=0, stop=cut, stream=True)
    assert "".join(st) == s.text


def test_sampling_repeats_with_seed(stories):
    a = stories.generate("The little dog", max_tokens=40, temperature=1.0, seed=123)
    b = stories.generate("The little dog", max_tokens=40, temperature=1.0, seed=123)
    c = stories.generate("The little dog", max_tokens=40, temperature=1.0, seed=124)
    assert a.tokens == b.tokens and a.tokens != c.tokens


def test_sampling_equals_cli(stories_path, cortex):
    """Sampled (not greedy) output equals the command's with the same seed and chain."""
    ids, _ = cortex_cli("generate", "-m", stories_path, "-p", "The little dog", "-n", 40, "--temp", 0.9, "--seed", 5,
                        "--top-k", 20, "--repeat-penalty", 1.1, "--ids")
    with cortex.Model(stories_path) as m:
        n = len(m.tokenize("The little dog"))
        g = m.generate("The little dog", max_tokens=40, temperature=0.9, seed=5, top_k=20, repeat_penalty=1.1)
        assert g.tokens == [int(t) for t in ids.split()][n:]


def test_prefix_reuse(stories):
    a = stories.generate("Once upon a time there was a little girl", max_tokens=20, temperature=0)
    b = stories.generate("Once upon a time there was a little girl", max_tokens=20, temperature=0)
    assert b.n_cached == b.n_prompt - 1 and b.tokens == a.tokens
    c = stories.generate("Once upon a time there was a big dog", max_tokens=20, temperature=0)
    fresh_m = type(stories)(stories.path)
    d = fresh_m.generate("Once upon a time there was a big dog", max_tokens=20, temperature=0)
    fresh_m.close()
    assert 0 < c.n_cached < c.n_prompt and c.tokens == d.tokens


def test_max_tokens_and_context(stories):
    g = stories.generate("Once", max_tokens=3, temperature=0, ignore_eos=True)
    assert g.n_gen == 3 and len(g.tokens) == 3 and g.finish_reason == "length"
    g = stories.generate("Once", max_tokens=1000, temperature=0, ignore_eos=True, n_ctx=32)
    # like `cortex generate`: the last token is sampled from the full context's logits, not evaluated
    assert g.finish_reason == "length" and g.n_prompt + g.n_gen == 33
    assert g.decode_tps > 0 and g.ttft_ms > 0


def test_create_completion_shape(stories):
    r = stories.create_completion("Once upon a time", max_tokens=12, temperature=0)
    assert r["object"] == "text_completion" and r["id"].startswith("cmpl-")
    ch = r["choices"][0]
    assert ch["index"] == 0 and ch["finish_reason"] in ("stop", "length") and ch["logprobs"] is None
    g = stories.generate("Once upon a time", max_tokens=12, temperature=0)
    assert ch["text"] == g.text
    assert r["usage"] == {"prompt_tokens": g.n_prompt, "completion_tokens": g.n_gen,
                          "total_tokens": g.n_prompt + g.n_gen}
    chunks = list(stories.create_completion("Once upon a time", max_tokens=12, temperature=0, stream=True))
    assert "".join(c["choices"][0]["text"] for c in chunks) == g.text
    assert chunks[-1]["choices"][0]["finish_reason"] == ch["finish_reason"]
    assert stories("Once upon a time", max_tokens=12, temperature=0)["choices"][0]["text"] == g.text
    echo = stories.create_completion("Once upon a time", max_tokens=12, temperature=0, echo=True)
    assert echo["choices"][0]["text"] == "Once upon a time" + g.text
    json.dumps(r)
    with pytest.raises(TypeError, match="bogus"):
        stories.create_completion("x", bogus=1)


def test_chat_template(cortex, stories_path):
    with cortex.Model(stories_path) as m:
        assert m.chat_template is None
        with pytest.raises(cortex.UnsupportedError):
            m.apply_chat_template([{"role": "user", "content": "hi"}])
    with pytest.raises(cortex.InvalidArgumentError):
        cortex.Model(stories_path, chat_template="no-such-format")
    with cortex.Model(stories_path, chat_template="chatml") as m:
        msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
        assert m.apply_chat_template(msgs) == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi"
                                               "<|im_end|>\n<|im_start|>assistant\n")
        assert m.chat_stop == ["<|im_end|>"]
        r = m.create_chat_completion(msgs, max_tokens=10, temperature=0)
        assert r["object"] == "chat.completion" and r["choices"][0]["message"]["role"] == "assistant"
        g = m.generate(m.apply_chat_template(msgs), max_tokens=10, temperature=0, stop=m.chat_stop)
        assert r["choices"][0]["message"]["content"] == g.text
        chunks = list(m.create_chat_completion(msgs, max_tokens=10, temperature=0, stream=True))
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
        assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == g.text
        with pytest.raises(TypeError, match=r"messages\[0\]"):
            m.apply_chat_template([{"role": "user"}])
        with pytest.raises(TypeError, match="content"):
            m.apply_chat_template([{"role": "user", "content": 5}])
    with cortex.Model(stories_path, chat_template="llama2") as m:
        with pytest.raises(cortex.InvalidArgumentError, match="system message"):
            m.apply_chat_template([{"role": "user", "content": "a"}, {"role": "system", "content": "b"}])


def test_gpt_oss_harmony(cortex, tmp_path):
    """The gpt-oss (harmony) format states the date; its answers split into content and reasoning."""
    path = str(tmp_path / "oss.gguf")
    cortex.synth("gpt-oss-tiny", path, "f32")
    with cortex.Model(path, chat_template="gpt-oss") as m:
        assert m.chat_template == "gpt-oss" and m.chat_stop == ["<|return|>", "<|call|>"]
        t = m.apply_chat_template([{"role": "user", "content": "hi"}], date="2026-11-27")
        assert "2026-11-27" in t and "<|start|>user<|message|>hi<|end|>" in t
        with pytest.raises(ValueError, match="YYYY-MM-DD"):
            m.apply_chat_template([{"role": "user", "content": "hi"}], date="27.11.2026")
    out = "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>answer"
    assert cortex._cortex.harmony_split(out) == ("answer", "think")
    assert cortex._cortex.harmony_split("plain") == (None, None)


def test_lora_equals_cli(cortex, stories_path, tmp_path):
    ad = str(tmp_path / "a.gguf")
    cortex_cli("synth-lora", "-m", stories_path, "--rank", 4, "--targets", "all", "--seed", 3, "-o", ad)
    ids, _ = cortex_cli("generate", "-m", stories_path, "-p", "Once upon a time", "-n", 30, "--temp", 0,
                        "--lora", ad + ":0.8", "--ids")
    with cortex.Model(stories_path) as m:
        a = cortex.LoRA(m, ad)
        assert a.info["n_matrices"] > 0 and a.info["rank_max"] == 4
        n = len(m.tokenize("Once upon a time"))
        base = m.generate("Once upon a time", max_tokens=30, temperature=0)
        g = m.generate("Once upon a time", max_tokens=30, temperature=0, lora=a, lora_scale=0.8)
        assert g.tokens == [int(t) for t in ids.split()][n:]
        assert g.tokens != base.tokens
        again = m.generate("Once upon a time", max_tokens=30, temperature=0)
        assert again.tokens == base.tokens  # the adapter applied to that call only
        a.close()
        with pytest.raises(ValueError, match="closed"):
            m.generate("Once", lora=a)
        b = m.load_lora(ad)
        with cortex.Model(stories_path) as other:
            with pytest.raises(ValueError, match="another Model"):
                other.generate("Once", lora=b)
        with pytest.raises(cortex.FileError):
            cortex.LoRA(m, str(tmp_path / "missing.gguf"))


def test_close_and_lifetime(cortex, stories_path):
    m = cortex.Model(stories_path)
    s = m.session()
    s.eval(m.tokenize("Once"))
    m.close()
    assert m.closed
    with pytest.raises(ValueError, match="closed"):
        m.generate("x")
    with pytest.raises(ValueError, match="closed"):
        m.session()
    s.eval([5])  # the session keeps the C model alive
    lg = s.logits
    del m
    gc.collect()
    s.close()
    assert float(lg.sum()) == float(lg.sum())  # the view still reads valid memory
    del lg, s
    gc.collect()


def test_stream_holds_the_model(stories):
    st = stories.generate("Once upon a time", max_tokens=20, stream=True)
    next(st)
    with pytest.raises(RuntimeError, match="in use"):
        stories.generate("x")
    with pytest.raises(RuntimeError):
        stories.close()
    st.close()
    stories.generate("x", max_tokens=2)
    st = stories.generate("Once upon a time", max_tokens=20, stream=True)
    next(st)
    del st  # dropping a stream frees the model
    stories.generate("x", max_tokens=2)


def test_threads(cortex, stories_path):
    with cortex.Model(stories_path, threads=2) as m:
        a = m.generate("Once upon a time", max_tokens=30, temperature=0)
        m.threads = 1
        b = m.generate("Once upon a time there", max_tokens=30, temperature=0)
        c = cortex.Model(stories_path).generate("Once upon a time there", max_tokens=30, temperature=0)
        assert b.tokens == c.tokens and len(a.tokens) > 0


def test_help_is_a_manual(cortex):
    for obj in (cortex.Model, cortex.Session, cortex.LoRA, cortex.Model.generate, cortex.Session.logits,
                cortex.Model.create_chat_completion, cortex.synth, cortex.quantize):
        assert obj.__doc__ and len(obj.__doc__) > 40, obj
    stub = os.path.join(os.path.dirname(cortex.__file__), "__init__.pyi")
    assert os.path.exists(stub)


def test_stub_matches_module(cortex):
    """Every class, function, method and attribute the .pyi declares exists, and every public name exists in it."""
    import ast
    stub = ast.parse(open(os.path.join(os.path.dirname(cortex.__file__), "__init__.pyi")).read())
    declared = set()
    for node in stub.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            declared.add(node.name)
            assert hasattr(cortex, node.name), node.name
        if isinstance(node, ast.ClassDef):
            cls = getattr(cortex, node.name)
            for item in node.body:
                name = (item.name if isinstance(item, ast.FunctionDef) else
                        item.target.id if isinstance(item, ast.AnnAssign) else None)
                if name and name not in ("__init__",) and not isinstance(item, ast.AnnAssign):
                    assert hasattr(cls, name), "%s.%s" % (node.name, name)
                elif isinstance(item, ast.AnnAssign) and node.name not in ("Error",) and \
                        not issubclass(cls, BaseException) and node.name != "Generation":
                    assert hasattr(cls, name), "%s.%s" % (node.name, name)
    for name in cortex.__all__:
        assert name in declared, "%s is public but not in the stub" % name


def test_ctrl_c_stops_generate(cortex, tmp_path):
    """A long generate() sees Ctrl-C (KeyboardInterrupt) and the model stays usable."""
    import _thread
    import signal
    import threading
    import time
    path = str(tmp_path / "tiny.gguf")
    cortex.synth("test-tiny", path, "f32", n_ctx=100000)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)  # a CI job may inherit SIGINT ignored
    try:
        with cortex.Model(path) as m:
            want = m.generate("hello", max_tokens=20, temperature=0, ignore_eos=True)
            threading.Timer(0.2, _thread.interrupt_main).start()
            t0 = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                m.generate("hello", max_tokens=90000, temperature=0, ignore_eos=True, n_ctx=100000)
            assert time.monotonic() - t0 < 30
            assert m.generate("hello", max_tokens=20, temperature=0, ignore_eos=True).tokens == want.tokens
    finally:
        signal.signal(signal.SIGINT, old)
