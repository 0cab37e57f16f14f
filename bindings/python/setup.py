"""Build hook: bundle libfusednn into the package when FUSEDNN_BUNDLE_LIBRARY names it.

    FUSEDNN_BUNDLE_LIBRARY=build/src/api/libfusednn.so pip install ./bindings/python

copies the library to fusednn/lib/ inside the wheel (which is then tagged for this platform).
Without the variable the package is pure Python and finds the library at run time through
FUSEDNN_LIBRARY or the system loader. Everything else is in pyproject.toml.
"""

import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

BUNDLE_VARIABLE = "FUSEDNN_BUNDLE_LIBRARY"


def bundled_library():
    value = os.environ.get(BUNDLE_VARIABLE)
    if not value:
        return None
    path = Path(value)
    if not path.is_file():
        raise SystemExit(f"{BUNDLE_VARIABLE}={value} is not a file")
    return path


class BuildPyWithLibrary(build_py):
    """build_py that also copies the library named by FUSEDNN_BUNDLE_LIBRARY into fusednn/lib."""

    def run(self):
        super().run()
        source = bundled_library()
        if source is None:
            return
        target = Path(self.build_lib) / "fusednn" / "lib"
        target.mkdir(parents=True, exist_ok=True)
        # Follow the symlink chain (libfusednn.so -> .so.0 -> .so.0.1.0) but keep the given name.
        shutil.copyfile(source.resolve(), target / source.name)


class MaybeBinaryDistribution(Distribution):
    """A wheel carrying a shared library is platform-specific; a plain one is not."""

    def has_ext_modules(self):
        return bundled_library() is not None


setup(cmdclass={"build_py": BuildPyWithLibrary}, distclass=MaybeBinaryDistribution)
