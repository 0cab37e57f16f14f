# SPDX-License-Identifier: Apache-2.0

"""Shared setup of the Python tests.

* The package is imported from bindings/python/src (the tree under test) unless
  FUSEDNN_TEST_INSTALLED=1, which tests the installed one.
* The native library is whatever FUSEDNN_LIBRARY names; when it is unset, the newest
  libfusednn.so under <repo>/build*/ is used. Tests that need it are skipped when none is found,
  unless FUSEDNN_REQUIRE_LIBRARY=1 (set it in CI), which turns the skip into a failure.
* Tests that need torch skip themselves when it is not importable.
"""

from __future__ import annotations

import os
import zlib
import sys
from pathlib import Path
from typing import Dict, Iterator

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "fixtures" / "golden"
GOLDEN_BATCHES = (1, 3, 32, 257)
GOLDEN_MODELS = ("seed_mlp", "lenet5", "linear_gelu", "mlp_layernorm_softmax", "residual_block",
                 "batchnorm_cnn")

if os.environ.get("FUSEDNN_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(REPO / "bindings" / "python" / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _newest_built_library() -> str:
    candidates = [path for path in REPO.glob("build*/**/libfusednn.so") if path.is_file()]
    if not candidates:
        return ""
    return str(max(candidates, key=lambda path: path.stat().st_mtime))


if not os.environ.get("FUSEDNN_LIBRARY"):
    _found = _newest_built_library()
    if _found:
        os.environ["FUSEDNN_LIBRARY"] = _found


def pytest_report_header(config: pytest.Config) -> str:
    import fusednn

    return (f"fusednn package: {Path(fusednn.__file__).parent}; "
            f"FUSEDNN_LIBRARY={os.environ.get('FUSEDNN_LIBRARY', '(unset)')}")


@pytest.fixture(scope="session")
def native() -> object:
    """The loaded library; skips (or fails, with FUSEDNN_REQUIRE_LIBRARY=1) when there is none."""
    from fusednn import LibraryNotFoundError
    from fusednn._native import library

    try:
        return library()
    except LibraryNotFoundError as exc:
        if os.environ.get("FUSEDNN_REQUIRE_LIBRARY") == "1":
            pytest.fail(f"FUSEDNN_REQUIRE_LIBRARY=1 but the library cannot be loaded: {exc}")
        pytest.skip(f"libfusednn is not available (build it, or set FUSEDNN_LIBRARY): {exc}")


def load_io(model: str) -> Dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(GOLDEN / model / "io.safetensors"))


def relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """Largest absolute difference relative to the largest magnitude of the expected output."""
    scale = float(np.max(np.abs(expected))) or 1.0
    return float(np.max(np.abs(actual.astype(np.float64) - expected.astype(np.float64)))) / scale


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> Iterator[np.random.Generator]:
    """Fresh random data for each test, reproducible from the test's name."""
    yield np.random.default_rng(zlib.crc32(request.node.nodeid.encode("utf-8")))
