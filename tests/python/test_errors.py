"""Errors: every engine error code is a cortex.Error subclass carrying the
engine's message; bad arguments are TypeError/ValueError naming the
argument; and no argument, however wrong, crashes the interpreter (the
conversion is fuzzed with seeded random values)."""
import math
import os
import random
import struct

import numpy as np
import pytest

CODES = {"FileError": (-1, OSError), "FormatError": (-2, ValueError), "RangeError": (-3, ValueError),
         "UnsupportedError": (-4, None), "InvalidArgumentError": (-5, ValueError),
         "OutOfMemoryError": (-6, MemoryError), "ContextFullError": (-7, None), "BusyError": (-8, None)}


def test_classes(cortex):
    for name, (code, builtin) in CODES.items():
        cls = getattr(cortex, name)
        assert issubclass(cls, cortex.Error) and cls.code == code, name
        if builtin:
            assert issubclass(cls, builtin), name
        assert cls.__doc__


def test_file_errors(cortex, tmp_path):
    with pytest.raises(cortex.FileError) as e:
        cortex.Model(str(tmp_path / "missing.gguf"))
    assert e.value.code == -1 and "missing.gguf" in str(e.value)
    assert isinstance(e.value, OSError)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(struct.pack("<4sIQQ", b"GGUF", 3, 2 ** 40, 0) + bytes(64))  # 2^40 tensors in 88 bytes
    with pytest.raises((cortex.FormatError, cortex.RangeError)) as e:
        cortex.Model(str(bad))
    assert "bad.gguf" in str(e.value)
    v9 = tmp_path / "v9.gguf"
    v9.write_bytes(struct.pack("<4sIQQ", b"GGUF", 9, 0, 0))
    with pytest.raises(cortex.UnsupportedError, match="version"):
        cortex.Model(str(v9))
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00" * 10)
    with pytest.raises(cortex.InvalidArgumentError, match="tokenizer"):
        cortex.Model(str(junk))  # not GGUF: a llama2.c checkpoint, which needs its tokenizer


def test_truncated_model_is_format_or_range(cortex, stories_path, tmp_path):
    data = open(stories_path, "rb").read()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(cortex.Error) as e:
        cortex.Model(str(cut))
    assert e.value.code in (-2, -3) and "cut.gguf" in str(e.value)


def test_invalid_and_unsupported(cortex, stories, stories_path):
    with pytest.raises(cortex.InvalidArgumentError, match="isa"):
        cortex.Model(stories_path, isa="no-such-isa")
    with pytest.raises(cortex.InvalidArgumentError):
        cortex.isa("no-such-isa")
    assert cortex.isa() in ("avx2", "avxvnni", "avx512", "avx512vnni", "scalar")
    if "avx512f" not in cortex.cpu_features():
        with pytest.raises(cortex.InvalidArgumentError, match="avx512"):
            cortex.Model(stories_path, isa="avx512")
    with pytest.raises(cortex.UnsupportedError):
        stories.apply_chat_template([{"role": "user", "content": "x"}])
    with pytest.raises(cortex.ContextFullError):
        stories.generate(list(range(3, 100)), n_ctx=32)


def test_argument_errors_name_the_argument(cortex, stories):
    cases = [
        (lambda: stories.generate("x", max_tokens=0), ValueError, "max_tokens"),
        (lambda: stories.generate("x", max_tokens="5"), TypeError, "max_tokens"),
        (lambda: stories.generate("x", temperature="hot"), TypeError, "temperature"),
        (lambda: stories.generate("x", temperature=math.nan), ValueError, "temperature"),
        (lambda: stories.generate("x", top_p=1.5), ValueError, "top_p"),
        (lambda: stories.generate("x", top_k=True), TypeError, "top_k"),
        (lambda: stories.generate("x", seed=1.5), TypeError, "seed"),
        (lambda: stories.generate("x", stop=5), TypeError, "stop"),
        (lambda: stories.generate("x", stop=[""]), ValueError, "stop"),
        (lambda: stories.generate("x", stop=["a\x00b"]), ValueError, "stop"),
        (lambda: stories.generate("x", lora="adapter.gguf"), TypeError, "lora"),
        (lambda: stories.generate(""), ValueError, "prompt"),
        (lambda: stories.generate([]), ValueError, "prompt"),
        (lambda: stories.generate([1, 99999]), ValueError, r"prompt\[1\]"),
        (lambda: stories.generate([1, -3]), ValueError, r"prompt\[1\]"),
        (lambda: stories.generate(3.5), TypeError, "prompt"),
        (lambda: stories.generate("x", n_ctx=-1), ValueError, "n_ctx"),
        (lambda: stories.tokenize(5), TypeError, "text"),
        (lambda: stories.detokenize("abc"), TypeError, "ids"),
        (lambda: stories.detokenize([1, 2 ** 70]), ValueError, r"ids\[1\]"),
        (lambda: stories.token_piece(512), ValueError, "token"),
        (lambda: stories.token_piece(5, prev=-2), ValueError, "prev"),
        (lambda: stories.session(threads=0), ValueError, "threads"),
        (lambda: stories.session(batch=300), ValueError, "batch"),
        (lambda: cortex.Model(5), TypeError, ""),
        (lambda: cortex.Model("x", weights="ram"), ValueError, "weights"),
        (lambda: cortex.synth("no-shape", "/tmp/x.gguf"), ValueError, "shape"),
        (lambda: cortex.synth("test-tiny", "/tmp/x.gguf", "q3"), ValueError, "type"),
        (lambda: cortex.Session(stories, kv_type=5), TypeError, ""),
        (lambda: cortex.Session("not a model"), TypeError, ""),
    ]
    for i, (call, exc, word) in enumerate(cases):
        with pytest.raises(exc, match=word):
            call()


def test_session_argument_errors(cortex, stories):
    with stories.session() as s:
        for bad, exc in ((5, TypeError), ("abc", TypeError), ([1, "a"], TypeError), ([1, 512], ValueError),
                         ([], ValueError), ([None], TypeError), (np.array([[1]]), ValueError),
                         (np.array([1.0]), TypeError), (b"\x01\x02", TypeError)):
            with pytest.raises(exc):
                s.eval(bad)
        assert s.pos == 0  # nothing was evaluated
        with pytest.raises(TypeError):
            s.truncate("1")


# ---- fuzzing the conversion --------------------------------------------------

WEIRD = [None, True, False, 0, 1, -1, 7, 511, 512, 2 ** 31, -2 ** 31, 2 ** 64, -2 ** 70, 0.0, -0.0, 0.5, 1.5, -1.0,
         math.nan, math.inf, -math.inf, 1e308, "", "x", "Once upon", "\udcff", "\x00", b"", b"\xff\xfe", bytearray(b"a"),
         [], [1], [1, 2, 3], [-1], [2 ** 40], ["a"], [None], (1, 2), {}, {"role": "user"}, set(), object(),
         np.int32(3), np.float32(0.5), np.array([1, 2], dtype=np.int32), np.array([], dtype=np.int64),
         np.array([[1, 2]]), np.array([1.5]), np.array([70000], dtype=np.uint32), memoryview(b"abc"), range(5),
         iter([1, 2]), lambda: 0, type, Ellipsis, NotImplemented]

GEN_KW = ["max_tokens", "temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n",
          "presence_penalty", "frequency_penalty", "seed", "stop", "ignore_eos", "lora", "lora_scale", "n_ctx",
          "stream", "special"]
OK = (TypeError, ValueError, OverflowError, RuntimeError, UnicodeError)


def expect_clean(call):
    try:
        r = call()
        if hasattr(r, "__next__"):
            for _ in r:
                pass
    except OK:
        pass
    except Exception as e:  # a cortex.Error is clean too; anything else is not
        import cortex
        assert isinstance(e, cortex.Error), repr(e)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_fuzz_arguments(cortex, stories):
    rng = random.Random(20261127)
    s = stories.session(n_ctx=64)
    for i in range(3000):
        kw = {k: rng.choice(WEIRD) for k in rng.sample(GEN_KW, rng.randint(0, 4))}
        if isinstance(kw.get("max_tokens"), int) and not isinstance(kw["max_tokens"], bool):
            kw["max_tokens"] = max(1, min(kw["max_tokens"], 4))
        kw.setdefault("max_tokens", 2)
        kw["n_ctx"] = 64 if not isinstance(kw.get("n_ctx"), int) or kw["n_ctx"] > 64 else kw["n_ctx"]
        prompt = rng.choice(WEIRD + ["Once upon a time"] * 10)
        expect_clean(lambda: stories.generate(prompt, **kw))
        expect_clean(lambda: stories.tokenize(rng.choice(WEIRD), add_bos=rng.choice(WEIRD)))
        expect_clean(lambda: stories.detokenize(rng.choice(WEIRD)))
        expect_clean(lambda: stories.token_piece(rng.choice(WEIRD), rng.choice(WEIRD)))
        expect_clean(lambda: stories.apply_chat_template(rng.choice(WEIRD)))
        if s.pos > 48:
            s.reset()
        expect_clean(lambda: s.eval(rng.choice(WEIRD), all_logits=rng.choice([False, True])))
        expect_clean(lambda: s.truncate(rng.choice(WEIRD)))
        expect_clean(lambda: stories.create_completion(rng.choice(WEIRD), max_tokens=2, temperature=rng.choice(WEIRD)))
    s.close()
    # the model still works and gives what a fresh one gives
    g = stories.generate("Once upon a time", max_tokens=20, temperature=0)
    with cortex.Model(stories.path) as fresh:
        assert fresh.generate("Once upon a time", max_tokens=20, temperature=0).tokens == g.tokens
