"""Build and install the `cortex` Python module from a checkout, offline.

    /usr/bin/python3 -m venv --system-site-packages .venv     # Debian's setuptools and numpy
    .venv/bin/pip install --no-build-isolation ./engine/python

The extension (cortex._cortex) is C against the Python C API; it links the
engine library built position-independent by `make python-lib` (build/python/obj),
which this script runs first unless CORTEX_PY_NO_MAKE=1 (the Makefile's
`make python` builds it itself). CORTEX_WERROR=1 turns warnings into errors.
"""
import glob
import os
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
# the checkout's root (CORTEX_ROOT: when building from a copy of engine/python)
ROOT = os.environ.get("CORTEX_ROOT") or os.path.normpath(os.path.join(HERE, "..", ".."))
LIBDIR = os.environ.get("CORTEX_PY_LIBDIR", os.path.join(ROOT, "build", "python", "obj"))
LIB = os.path.join(LIBDIR, "libcortex.a")


class BuildExt(build_ext):
    """Build the engine library (make python-lib) before the extension."""

    def run(self):
        if os.environ.get("CORTEX_PY_NO_MAKE") != "1":
            subprocess.check_call(["make", "-C", ROOT, "--no-print-directory", "python-lib"])
        super().run()


def pkg_libs(pkg):
    out = subprocess.run(["pkg-config", "--libs-only-l", pkg], capture_output=True, text=True)
    return [f[2:] for f in out.stdout.split()] if out.returncode == 0 else [pkg]


warn = ["-std=c11", "-Wall", "-Wextra", "-Wshadow", "-Wstrict-prototypes", "-Wno-unused-parameter",
        "-Wno-missing-field-initializers", "-fvisibility=hidden"]
if os.environ.get("CORTEX_WERROR") == "1":
    warn.append("-Werror")

ext = Extension(
    "cortex._cortex",
    sources=sorted(glob.glob(os.path.join("src", "*.c"))),
    depends=[os.path.join("src", "pycx.h"), os.path.join(ROOT, "engine", "include", "cortex.h"),
             os.path.join(ROOT, "engine", "include", "cortex_tools.h"), LIB],
    include_dirs=[os.path.join(ROOT, "engine", "include")],
    define_macros=[("_GNU_SOURCE", "1")],
    extra_compile_args=warn,
    extra_objects=[LIB],
    libraries=["m", "z", "pthread"] + pkg_libs("libpcre2-8") + pkg_libs("jansson"),
)

setup(
    name="cortex",
    version="0.1.0",
    description="Python bindings of the Cortex CPU inference engine",
    packages=["cortex"],
    package_data={"cortex": ["*.pyi", "py.typed"]},
    ext_modules=[ext],
    cmdclass={"build_ext": BuildExt},
    python_requires=">=3.9",
    zip_safe=False,
)
