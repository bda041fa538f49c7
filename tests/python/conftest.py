"""Shared fixtures of the Python module's tests (tests/python/, pytest).

The module is imported from $PY_LIB (make python builds it into
build/python/lib; `make test` sets PY_LIB), else from an installed `cortex`.
Real models come from $CORTEX_MODELS, else <repo>/../shared/models; without
them the tests that need them skip with a message, except under CI=true,
where a missing directory is a failure (CI always has ../shared).
"""
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY_LIB = os.environ.get("PY_LIB") or os.path.join(REPO, "build", "python", "lib")
if os.path.isdir(PY_LIB):
    sys.path.insert(0, PY_LIB)
sys.path.insert(0, os.path.join(REPO, "tests", "reference"))
sys.dont_write_bytecode = True

MODELS = os.environ.get("CORTEX_MODELS") or os.path.join(REPO, "..", "shared", "models")
CORTEX_BIN = os.environ.get("CORTEX_BIN") or os.path.join(REPO, "build", "cortex")


def model_path(name):
    """The path of a real model file, or a skip (a failure under CI) when it is missing."""
    p = os.path.join(MODELS, name)
    if not os.path.exists(p):
        msg = "SKIP: %s is missing (set CORTEX_MODELS to ../shared/models)" % p
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return p


def rss_kib():
    """This process's resident size in KiB (/proc/self/status VmRSS)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cortex_cli(*args, check=True):
    """Run the `cortex` command; returns (stdout bytes, stderr str)."""
    if not os.path.exists(CORTEX_BIN):
        pytest.skip("SKIP: %s is not built (make)" % CORTEX_BIN)
    r = subprocess.run([CORTEX_BIN] + [str(a) for a in args], capture_output=True, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError("cortex %s failed: %s" % (" ".join(map(str, args)), r.stderr.decode()))
    return r.stdout, r.stderr.decode()


@pytest.fixture(scope="session")
def cortex():
    import cortex as mod
    return mod


@pytest.fixture(scope="session")
def stories_path():
    return model_path("stories260K.gguf")


@pytest.fixture(scope="session")
def aidreams_path():
    return model_path("aidreams260K.gguf")


@pytest.fixture
def stories(cortex, stories_path):
    m = cortex.Model(stories_path)
    yield m
    m.close()


@pytest.fixture
def aidreams(cortex, aidreams_path):
    m = cortex.Model(aidreams_path)
    yield m
    m.close()
