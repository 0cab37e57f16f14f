# SPDX-License-Identifier: Apache-2.0

"""The committed golden fixtures are self-consistent: checked with numpy alone (no torch, no
native library), so CI keeps them honest.

Each bundle, interpreted layer by layer in float64 by spec_reference.py, must reproduce the
PyTorch outputs stored next to it; seed_mlp's other weight formats must hold the same numbers.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from conftest import GOLDEN, GOLDEN_BATCHES, GOLDEN_MODELS, load_io, relative_error
from spec_reference import read_bundle, run_spec

# PyTorch's float32 result against a float64 evaluation of the same spec.
REFERENCE_TOLERANCE = 1e-5
SIZE_BUDGET_BYTES = 16 * 1024 * 1024  # as in make_golden_fixtures.py


@pytest.mark.parametrize("name", GOLDEN_MODELS)
def test_bundle_reproduces_pytorch(name: str) -> None:
    spec, tensors = read_bundle(str(GOLDEN / name / "model.safetensors"))
    assert spec["fusednn"] == 1 and spec["name"] == name
    assert all(tensor.dtype == np.float32 for tensor in tensors.values())
    io = load_io(name)
    assert sorted(io) == sorted(f"{kind}_b{batch}" for kind in ("input", "output")
                                for batch in GOLDEN_BATCHES)
    for batch in GOLDEN_BATCHES:
        x, expected = io[f"input_b{batch}"], io[f"output_b{batch}"]
        assert x.dtype == np.float32 and expected.dtype == np.float32
        assert x.shape == (batch, *spec["input"]["shape"])
        reference = run_spec(spec, tensors, x)
        assert reference.shape == expected.shape
        error = relative_error(expected, reference)
        assert error <= REFERENCE_TOLERANCE, f"{name} batch {batch}: {error:.2e}"


def test_seed_mlp_formats_hold_the_same_weights() -> None:
    folder = GOLDEN / "seed_mlp"
    spec, tensors = read_bundle(str(folder / "model.safetensors"))
    assert json.loads((folder / "spec.json").read_text()) == spec
    assert sorted(p.stem for p in (folder / "weights_bin").iterdir()) == sorted(tensors)
    assert sorted(p.stem for p in (folder / "weights_txt").iterdir()) == sorted(tensors)
    for name, tensor in tensors.items():
        from_bin = np.fromfile(folder / "weights_bin" / f"{name}.bin", dtype="<f4")
        from_txt = np.loadtxt(folder / "weights_txt" / f"{name}.txt", dtype=np.float64)
        np.testing.assert_array_equal(from_bin, tensor.ravel())
        np.testing.assert_array_equal(from_txt.astype(np.float32), tensor.ravel())


def test_batchnorm_statistics_are_not_the_defaults() -> None:
    """Folding is only tested when mean, variance, weight and bias differ from 0 / 1."""
    tensors = load_file(str(GOLDEN / "batchnorm_cnn" / "model.safetensors"))
    for layer in ("bn1", "bn2", "bn3"):
        assert np.abs(tensors[f"{layer}.running_mean"]).min() > 0
        assert np.abs(tensors[f"{layer}.running_var"] - 1).max() > 0.1
        assert np.abs(tensors[f"{layer}.weight"] - 1).max() > 0.1
        assert np.abs(tensors[f"{layer}.bias"]).max() > 0.1


def test_fixtures_stay_small() -> None:
    total = sum(path.stat().st_size for path in GOLDEN.rglob("*")
                if path.is_file() and path.suffix != ".py" and "__pycache__" not in path.parts)
    assert total < SIZE_BUDGET_BYTES, f"golden fixtures take {total} bytes"
