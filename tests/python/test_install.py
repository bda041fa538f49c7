"""pip installs the module from the checkout, offline, into a fresh venv
(Debian's setuptools and numpy through --system-site-packages), and the
installed module works on its own: the README's install command, tested."""
import os
import shutil
import subprocess
import sys

import pytest
from conftest import MODELS, REPO


def test_pip_install_offline(tmp_path):
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("SKIP: no /usr/bin/python3")
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True)
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    # a copy of the package folder, so the build leaves nothing in the checkout's engine/python
    src = tmp_path / "src"
    shutil.copytree(os.path.join(REPO, "engine", "python"), src, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    env["CORTEX_PY_LIBDIR"] = os.path.join(REPO, "build", "python", "obj")
    env["CORTEX_PY_NO_MAKE"] = "1"  # make test built the library already (make python-lib)
    # setup.py finds the engine's headers relative to itself: point it at the checkout
    env["CORTEX_ROOT"] = REPO
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-build-isolation", str(src)], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    code = ("import cortex, numpy, sys; assert cortex.__file__.startswith(sys.prefix), cortex.__file__; "
            "print(cortex.isa())")
    model = os.path.join(MODELS, "stories260K.gguf")
    if os.path.exists(model):
        code += "; m = cortex.Model(%r); print(m.generate('Once', max_tokens=4, temperature=0).text)" % model
    r = subprocess.run([str(venv / "bin" / "python"), "-c", code], env=env, capture_output=True, text=True,
                       cwd=str(tmp_path), timeout=120)
    assert r.returncode == 0, r.stderr
    stub = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import cortex, os; print(os.path.exists(os.path.join(os.path.dirname(cortex.__file__), "
                           "'__init__.pyi')))"], env=env, capture_output=True, text=True, cwd=str(tmp_path))
    assert stub.stdout.strip() == "True"
