# SPDX-License-Identifier: Apache-2.0

"""The binding checks the version of the libfusednn it loads.

The ABI rule of fusednn.h: a library runs a program built against the header when it has the
same major version and a minor version at least the header's. The binding must refuse any other
library with a message naming both versions, whether the library was named by FUSEDNN_LIBRARY or
bundled in the package, and never fall back to another copy.

The libraries refused here are stubs compiled by the test: every function of the header is
defined (the binding declares them all when it loads a library) and fdnn_version() returns the
version under test. The tests skip when no C compiler is found.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import List, Tuple

import pytest

from conftest import REPO
from fusednn import LibraryNotFoundError, _native

HEADER = REPO / "include" / "fusednn" / "fusednn.h"


def header_functions() -> List[str]:
    """Names of every function the header exports (FDNN_API ... fdnn_x(...))."""
    names = re.findall(r"FDNN_API\s+[^;()]*?\b(fdnn_\w+)\s*\(", HEADER.read_text())
    assert "fdnn_version" in names and "fdnn_model_run" in names, "header parsing failed"
    return sorted(set(names))


def header_version() -> Tuple[int, int, int]:
    text = HEADER.read_text()
    found = [re.search(rf"#define FDNN_VERSION_{part}\s+(\d+)", text)
             for part in ("MAJOR", "MINOR", "PATCH")]
    assert all(found), "FDNN_VERSION_MAJOR / MINOR / PATCH not found in the header"
    major, minor, patch = (int(match.group(1)) for match in found if match)
    return major, minor, patch


def build_stub(folder: Path, major: int, minor: int, patch: int,
               omit: Tuple[str, ...] = ()) -> Path:
    """A shared library with every header function but `omit`, reporting major.minor.patch."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler (cc, gcc or clang) to build the stub libraries")
    lines = []
    for name in header_functions():
        if name in omit:
            continue
        if name == "fdnn_version":
            lines.append(f"unsigned int fdnn_version(void) "
                         f"{{ return {major * 10000 + minor * 100 + patch}u; }}")
        elif name == "fdnn_version_string":
            lines.append(f'const char* fdnn_version_string(void) '
                         f'{{ return "{major}.{minor}.{patch}"; }}')
        else:
            # Never called: the binding checks the version first, then only declares them.
            lines.append(f"int {name}(void) {{ return 12; }}")
    source = folder / f"stub_{major}_{minor}_{patch}.c"
    source.write_text("\n".join(lines) + "\n")
    library = folder / f"libfusednn_stub_{major}_{minor}_{patch}.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return library


def test_binding_targets_the_header_major() -> None:
    major, minor, _ = header_version()
    assert _native.API_VERSION_MAJOR == major
    assert _native.API_VERSION_MINOR <= minor


def incompatible_versions() -> List[Tuple[int, int, int]]:
    """Versions the binding must refuse: another major, or an older minor of its own major."""
    major, minor = _native.API_VERSION_MAJOR, _native.API_VERSION_MINOR
    versions = [(major + 1, minor, 0), (major + 1, 0, 0)]
    if major > 0:
        versions.append((major - 1, 99, 0))
    if minor > 0:
        versions.append((major, minor - 1, 7))
    return versions


@pytest.mark.parametrize("version", incompatible_versions(),
                         ids=lambda version: "%d.%d.%d" % version)
def test_explicit_library_of_another_abi_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    version: Tuple[int, int, int]) -> None:
    major, minor, patch = version
    stub = build_stub(tmp_path, major, minor, patch)
    monkeypatch.setenv(_native.ENV_LIBRARY, str(stub))

    with pytest.raises(LibraryNotFoundError) as caught:
        _native._load()
    message = str(caught.value)
    assert f"{major}.{minor}.{patch}" in message
    assert f"{_native.API_VERSION_MAJOR}.{_native.API_VERSION_MINOR}" in message
    assert _native.ENV_LIBRARY in message  # says what to change


def test_older_minor_lacking_newer_functions_is_refused_by_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A 0.2 library has no typed runs: the version check must come before the binding
    # declares it, or the user would see an AttributeError instead of what to do.
    major, minor = _native.API_VERSION_MAJOR, _native.API_VERSION_MINOR
    if minor == 0:
        pytest.skip("no older minor version of this ABI")
    stub = build_stub(tmp_path, major, minor - 1, 0, omit=(
        "fdnn_model_run_typed", "fdnn_context_run_typed", "fdnn_context_run_device_typed"))
    monkeypatch.setenv(_native.ENV_LIBRARY, str(stub))
    with pytest.raises(LibraryNotFoundError) as caught:
        _native._load()
    assert f"{major}.{minor - 1}.0" in str(caught.value)


def test_newer_minor_of_the_same_abi_is_accepted(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    major, minor = _native.API_VERSION_MAJOR, _native.API_VERSION_MINOR
    stub = build_stub(tmp_path, major, minor + 1, 5)
    monkeypatch.setenv(_native.ENV_LIBRARY, str(stub))
    library = _native._load()
    assert library.version == f"{major}.{minor + 1}.5"
    assert library.version_number == major * 10000 + (minor + 1) * 100 + 5
    assert library.path == str(stub)


def test_bundled_library_of_another_abi_is_refused_without_fallback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A wheel carrying a library of another ABI must fail loudly, not load the system's copy.
    stub = build_stub(tmp_path, _native.API_VERSION_MAJOR + 1, 0, 0)
    monkeypatch.delenv(_native.ENV_LIBRARY, raising=False)
    monkeypatch.setattr(_native, "_bundled_candidates", lambda: [stub])

    with pytest.raises(LibraryNotFoundError) as caught:
        _native._load()
    assert str(stub) in str(caught.value)
