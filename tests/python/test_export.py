# SPDX-License-Identifier: Apache-2.0

"""fusednn.export: PyTorch modules to specs and bundles.

Needs torch; skipped where it is not installed (CI). Each exported spec is checked against
PyTorch by the float64 numpy interpreter in spec_reference.py, and, when the native library is
available, by loading the bundle through the binding as well.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any, Dict, Tuple

import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="fusednn.export tests need PyTorch, which is not installed here (CI has no "
    "torch; the golden fixtures it produces are checked by test_golden_fixtures.py)")
nn = torch.nn
F = torch.nn.functional

import fusednn  # noqa: E402
from fusednn.export import (ExportError, SPEC_METADATA_KEY, export_module,  # noqa: E402
                            save_bundle, spec_from_module)
from conftest import REPO, relative_error  # noqa: E402
from spec_reference import read_bundle, run_spec  # noqa: E402

TOLERANCE = 1e-5


def torch_output(module: nn.Module, x: np.ndarray) -> np.ndarray:
    module.eval()
    with torch.no_grad():
        return module(torch.from_numpy(x)).numpy()


def check_against_torch(module: nn.Module, input_shape: Tuple[int, ...],
                        rng: np.random.Generator, batch: int = 5) -> Dict[str, Any]:
    spec, tensors = export_module(module, input_shape)
    x = rng.standard_normal((batch, *input_shape)).astype(np.float32)
    expected = torch_output(module, x)
    actual = run_spec(spec, {name: t.numpy() for name, t in tensors.items()}, x)
    assert actual.shape == expected.shape
    assert relative_error(expected, actual) <= TOLERANCE
    return spec


def randomize_norms(module: nn.Module) -> nn.Module:
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, (nn.BatchNorm1d, nn.BatchNorm2d)):
                sub.running_mean.normal_(0.0, 0.5)
                sub.running_var.uniform_(0.5, 2.0)
            if isinstance(sub, (nn.BatchNorm1d, nn.BatchNorm2d, nn.LayerNorm)):
                if getattr(sub, "weight", None) is not None:
                    sub.weight.uniform_(0.5, 1.5)
                if getattr(sub, "bias", None) is not None:
                    sub.bias.normal_(0.0, 0.3)
    return module


@pytest.fixture(autouse=True)
def seeded() -> None:
    torch.manual_seed(0)


# ------------------------------------------------------------------------------------------------
# nn.Sequential
# ------------------------------------------------------------------------------------------------


def test_nested_sequential_uses_dotted_names(rng: np.random.Generator) -> None:
    module = nn.Sequential(OrderedDict([
        ("features", nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(inplace=True),
                                   nn.MaxPool2d(2), nn.Dropout(0.5))),
        ("flatten", nn.Flatten()),
        ("head", nn.Sequential(nn.Identity(), nn.Linear(4 * 4 * 4, 6), nn.LeakyReLU(0.2))),
    ]))
    spec = check_against_torch(module, (2, 8, 8), rng)
    assert [layer["name"] for layer in spec["layers"]] == [
        "features.0", "features.1", "features.2", "flatten", "head.1", "head.2"]
    assert spec["output"] == "head.2"
    assert all("inputs" not in layer for layer in spec["layers"])
    _, tensors = export_module(module, (2, 8, 8))
    expected_names = {k for k in module.state_dict() if not k.endswith("num_batches_tracked")}
    assert set(tensors) == expected_names


def test_every_supported_module_type(rng: np.random.Generator) -> None:
    module = randomize_norms(nn.Sequential(
        nn.Conv2d(3, 6, kernel_size=(3, 5), stride=(1, 2), padding="same" if False else (1, 2),
                  dilation=1, groups=3),
        nn.BatchNorm2d(6), nn.SiLU(),
        nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
        nn.Conv2d(6, 4, 3, padding="same", bias=False), nn.BatchNorm2d(4, affine=False),
        nn.Sigmoid(), nn.MaxPool2d(kernel_size=2, stride=1, padding=1),
        nn.Flatten(), nn.Linear(4 * 6 * 4, 16, bias=False), nn.LayerNorm(16), nn.GELU(),
        nn.Linear(16, 12), nn.BatchNorm1d(12), nn.Tanh(), nn.LayerNorm(12, bias=False),
        nn.Linear(12, 5), nn.Softmax(dim=1),
    ))
    spec = check_against_torch(module, (3, 10, 10), rng)
    types = [layer["type"] for layer in spec["layers"]]
    assert types == ["Conv2d", "BatchNorm2d", "SiLU", "AvgPool2d", "Conv2d", "BatchNorm2d",
                     "Sigmoid", "MaxPool2d", "Flatten", "Linear", "LayerNorm", "GELU", "Linear",
                     "BatchNorm1d", "Tanh", "LayerNorm", "Linear", "Softmax"]
    conv = spec["layers"][0]
    assert conv["kernel_size"] == [3, 5] and conv["stride"] == [1, 2] and conv["groups"] == 3
    assert spec["layers"][4]["padding"] == 1  # "same" for a 3x3 kernel
    assert spec["layers"][-1]["dim"] == -1


class NameClash(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.fc_2 = nn.Linear(4, 4)

    def forward(self, x: Any) -> Any:
        return self.fc_2(self.fc(self.fc(x)))


def test_weight_copy_names_never_clash_silently() -> None:
    with pytest.raises(ExportError, match="fc_2.weight"):
        export_module(NameClash(), (4,))


def test_training_mode_is_restored() -> None:
    module = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    module.train()
    module[1].eval()
    spec_from_module(module, (4,))
    assert module.training and module[0].training and not module[1].training


# ------------------------------------------------------------------------------------------------
# General modules through torch.fx
# ------------------------------------------------------------------------------------------------


class Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 16)
        self.head = nn.Linear(32, 4)
        self.drop = nn.Dropout(0.3)

    def forward(self, x: Any) -> Any:
        h = self.drop(F.relu(self.fc1(x)))
        h = torch.add(self.fc2(h), x)
        h = torch.cat((h, x * 0.5), dim=-1)
        return F.softmax(self.head(-h / 4.0), dim=-1)


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 2 * 2, 10)

    def forward(self, x: Any) -> Any:
        x = F.max_pool2d(F.leaky_relu(self.bn(self.conv(x)), 0.1), 2)
        x = F.avg_pool2d(torch.sigmoid(x), kernel_size=2, stride=2)
        x = x.view(x.size(0), -1)
        return torch.tanh(self.fc(x)) + F.silu(self.fc(x))


class SharedLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Linear(8, 8)

    def forward(self, x: Any) -> Any:
        return self.block(F.gelu(self.block(x), approximate="tanh")).flatten(1)


def test_residual_concat_and_functional_ops(rng: np.random.Generator) -> None:
    spec = check_against_torch(Residual(), (16,), rng)
    by_type = {layer["type"]: layer for layer in spec["layers"]}
    assert by_type["Add"]["inputs"] == ["fc2", "input"]
    assert by_type["Concat"]["dim"] == 1
    assert "Dropout" not in by_type
    assert sorted(layer["alpha"] for layer in spec["layers"] if layer["type"] == "Scale") == \
        [-1.0, 0.25, 0.5]


def test_conv_net_with_view_flatten(rng: np.random.Generator) -> None:
    spec = check_against_torch(randomize_norms(ConvNet()), (3, 8, 8), rng)
    flatten = [layer for layer in spec["layers"] if layer["type"] == "Flatten"]
    assert flatten == [{"type": "Flatten", "name": "view", "start_dim": 1, "end_dim": -1}]
    # fc runs twice: the second layer gets its own copy of the weights, under its own name
    fc_layers = [layer for layer in spec["layers"] if layer["type"] == "Linear"]
    assert [layer["name"] for layer in fc_layers] == ["fc", "fc_2"]
    assert all("weights" not in layer for layer in fc_layers)


def test_module_called_twice_gets_a_copy_of_its_weights(rng: np.random.Generator) -> None:
    spec = check_against_torch(SharedLayer(), (8,), rng)
    names = [layer["name"] for layer in spec["layers"]]
    assert names[0] == "block" and names[2] == "block_2"
    _, tensors = export_module(SharedLayer(), (8,))
    assert sorted(tensors) == ["block.bias", "block.weight", "block_2.bias", "block_2.weight"]
    assert spec["layers"][1] == {"type": "GELU", "name": "gelu", "approximate": "tanh"}


# ------------------------------------------------------------------------------------------------
# What cannot be exported
# ------------------------------------------------------------------------------------------------


class Exp(nn.Module):
    def forward(self, x: Any) -> Any:
        return torch.exp(x)


class BatchBakedView(nn.Module):
    def forward(self, x: Any) -> Any:
        return x.view(2, -1)


class ReadsParameter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4))

    def forward(self, x: Any) -> Any:
        return x * self.scale


class AddsConstant(nn.Module):
    def forward(self, x: Any) -> Any:
        return x + 1.0


class TwoInputs(nn.Module):
    def forward(self, x: Any, y: Any) -> Any:
        return x + y


class SoftmaxOverBatch(nn.Module):
    def forward(self, x: Any) -> Any:
        return torch.softmax(x, dim=0)


class Branches(nn.Module):
    def forward(self, x: Any) -> Any:
        return x if x.sum() > 0 else -x


@pytest.mark.parametrize("module, text", [
    (Exp(), "node 'exp'"),
    (BatchBakedView(), "batch"),
    (ReadsParameter(), "'scale'"),
    (AddsConstant(), "constant"),
    (TwoInputs(), "2 inputs"),
    (SoftmaxOverBatch(), "batch dimension"),
    (Branches(), "torch.fx could not trace"),
    (nn.Sequential(nn.Linear(4, 4), nn.Conv1d(1, 1, 1)), "Conv1d"),
    (nn.Sequential(nn.BatchNorm1d(4, track_running_stats=False)), "running statistics"),
    (nn.Sequential(nn.Identity()), "nothing to export"),
])
def test_unsupported_modules_raise_naming_the_culprit(module: nn.Module, text: str) -> None:
    with pytest.raises(ExportError, match=text.replace("(", r"\(")):
        export_module(module, (4,))


def test_input_shape_that_does_not_fit_is_reported() -> None:
    with pytest.raises(ExportError, match="fails on a tensor of shape"):
        export_module(nn.Sequential(nn.Linear(4, 2)), (5,))
    with pytest.raises(ExportError, match="positive"):
        export_module(nn.Sequential(nn.Linear(4, 2)), ())


# ------------------------------------------------------------------------------------------------
# Bundles
# ------------------------------------------------------------------------------------------------


def test_save_bundle_writes_spec_and_float32_tensors(tmp_path: Path,
                                                     rng: np.random.Generator) -> None:
    module = Residual().double()  # exported as float32 all the same
    path = tmp_path / "residual.safetensors"
    returned = save_bundle(module, path, (16,), name="residual")
    spec, tensors = read_bundle(str(path))
    assert spec == returned and spec["name"] == "residual"
    assert all(t.dtype == np.float32 for t in tensors.values())
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as handle:
        assert json.loads(handle.metadata()[SPEC_METADATA_KEY]) == spec


def test_bundle_runs_in_fusednn(tmp_path: Path, rng: np.random.Generator) -> None:
    try:
        fusednn.version()
    except fusednn.LibraryNotFoundError as exc:
        pytest.skip(f"libfusednn is not available: {exc}")
    module = randomize_norms(ConvNet())
    path = tmp_path / "convnet.safetensors"
    save_bundle(module, path, (3, 8, 8))
    x = rng.standard_normal((7, 3, 8, 8)).astype(np.float32)
    with fusednn.Model.from_file(path, cpu_threads=1) as model:
        assert relative_error(model.run(x), torch_output(module, x)) <= TOLERANCE


def test_package_imports_without_torch() -> None:
    """import fusednn and fusednn.export must not need torch; using the exporter says so."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import fusednn, fusednn.export\n"
        "try:\n"
        "    fusednn.export.spec_from_module(object(), (1,))\n"
        "except ImportError as exc:\n"
        "    assert 'pip install torch' in str(exc), exc\n"
        "else:\n"
        "    raise SystemExit('expected ImportError')\n")
    env_path = str(REPO / "bindings" / "python" / "src")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
