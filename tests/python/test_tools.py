"""The tools: synth writes the same bytes as `cortex synth`, quantize the
same file as `cortex quantize`, and the results load and run."""
import hashlib

import pytest
from conftest import cortex_cli


def digest(p):
    return hashlib.sha256(open(p, "rb").read()).hexdigest()


def test_synth_equals_cli(cortex, tmp_path):
    assert "stories15m" in cortex.shapes() and "gpt-oss-20b" in cortex.shapes()
    a, b = str(tmp_path / "a.gguf"), str(tmp_path / "b.gguf")
    cortex.synth("test-tiny", a, "q8_0", seed=9, n_ctx=256)
    cortex_cli("synth", "--shape", "test-tiny", "--type", "q8_0", "--seed", 9, "-c", 256, "-o", b)
    assert digest(a) == digest(b)
    with cortex.Model(a) as m:
        assert m.info["type"] == "q8_0" and m.n_ctx == 256
        assert m.generate("hello", max_tokens=4, ignore_eos=True).n_gen == 4


def test_quantize_equals_cli(cortex, stories_path, tmp_path):
    a, b = str(tmp_path / "a.gguf"), str(tmp_path / "b.gguf")
    st = cortex.quantize(stories_path, a, "q8_0")
    assert st["input_format"] == "gguf" and st["out_file_bytes"] < st["in_file_bytes"]
    assert "q8_0" in st["types"]
    cortex_cli("quantize", stories_path, b, "--type", "q8_0")
    assert digest(a) == digest(b)
    with cortex.Model(a) as m:
        assert m.info["type"] == "q8_0"
    with pytest.raises(cortex.Error):
        cortex.quantize(a, str(tmp_path / "c.gguf"), "q4_0")  # already quantized
    assert not (tmp_path / "c.gguf").exists()
    with pytest.raises(cortex.FileError):
        cortex.quantize(str(tmp_path / "missing.gguf"), str(tmp_path / "d.gguf"), "q8_0")
