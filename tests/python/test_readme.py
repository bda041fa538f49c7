"""The README's Python example runs as written (from the repository root,
where its ../shared/models path points)."""
import os
import re
import subprocess

from conftest import PY_LIB, REPO, model_path


def test_readme_example():
    model_path("aidreams260K.gguf")
    text = open(os.path.join(REPO, "README.md")).read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "the README has no python example"
    code = blocks[0]
    assert len(code.strip().splitlines()) <= 10, "the README promises ten lines"
    env = dict(os.environ, PYTHONPATH=PY_LIB)
    r = subprocess.run(["/usr/bin/python3", "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "next token:" in r.stdout and "tok/s" in r.stdout
