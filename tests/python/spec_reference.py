# SPDX-License-Identifier: Apache-2.0

"""A plain numpy interpreter of fusednn model specs, in float64.

It follows docs/model-format.md as PyTorch defines each layer, one layer at a time with no
fusion, so that the golden fixtures and the exporter can be checked without torch and without the
native library. It is a test oracle: clarity over speed.
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np

_erf = np.frompyfunc(math.erf, 1, 1)


def read_bundle(path: str) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    """The spec (from the metadata) and the tensors of a bundle."""
    from safetensors import safe_open

    with safe_open(path, framework="numpy") as handle:
        metadata = handle.metadata() or {}
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    return json.loads(metadata["fusednn.spec"]), tensors


def _pair(value: Any) -> Tuple[int, int]:
    return (int(value), int(value)) if isinstance(value, int) else (int(value[0]), int(value[1]))


def _windows(x: np.ndarray, kernel: Tuple[int, int], stride: Tuple[int, int],
             dilation: Tuple[int, int]) -> np.ndarray:
    """(N, C, OH, OW, KH, KW) view of the (already padded) NCHW input."""
    n, c, h, w = x.shape
    out_h = (h - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    out_w = (w - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    s = x.strides
    return np.lib.stride_tricks.as_strided(
        x, shape=(n, c, out_h, out_w, kernel[0], kernel[1]),
        strides=(s[0], s[1], s[2] * stride[0], s[3] * stride[1], s[2] * dilation[0],
                 s[3] * dilation[1]), writeable=False)


def _pad(x: np.ndarray, padding: Tuple[int, int], value: float) -> np.ndarray:
    return np.pad(x, ((0, 0), (0, 0), (padding[0], padding[0]), (padding[1], padding[1])),
                  constant_values=value)


def _conv2d(x: np.ndarray, layer: Mapping[str, Any], w: np.ndarray, b: Any) -> np.ndarray:
    groups = int(layer.get("groups", 1))
    kernel = _pair(layer["kernel_size"])
    win = _windows(_pad(x, _pair(layer.get("padding", 0)), 0.0), kernel,
                   _pair(layer.get("stride", 1)), _pair(layer.get("dilation", 1)))
    in_per_group = x.shape[1] // groups
    out_per_group = w.shape[0] // groups
    outputs = []
    for g in range(groups):
        part = win[:, g * in_per_group:(g + 1) * in_per_group]
        weights = w[g * out_per_group:(g + 1) * out_per_group]
        outputs.append(np.einsum("nchwij,ocij->nohw", part, weights))
    y = np.concatenate(outputs, axis=1)
    return y if b is None else y + b[None, :, None, None]


def _pool(x: np.ndarray, layer: Mapping[str, Any], kind: str) -> np.ndarray:
    kernel = _pair(layer["kernel_size"])
    stride = _pair(layer.get("stride", layer["kernel_size"]))
    padding = _pair(layer.get("padding", 0))
    if kind == "max":
        return _windows(_pad(x, padding, -np.inf), kernel, stride, (1, 1)).max(axis=(4, 5))
    sums = _windows(_pad(x, padding, 0.0), kernel, stride, (1, 1)).sum(axis=(4, 5))
    if layer.get("count_include_pad", True):
        return sums / (kernel[0] * kernel[1])
    ones = np.ones((1, 1) + x.shape[2:])
    counts = _windows(_pad(ones, padding, 0.0), kernel, stride, (1, 1)).sum(axis=(4, 5))
    return sums / counts


def _gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))


def _softmax(x: np.ndarray, dim: int) -> np.ndarray:
    shifted = x - x.max(axis=dim, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=dim, keepdims=True)


def run_spec(spec: Mapping[str, Any], tensors: Mapping[str, np.ndarray],
             x: np.ndarray) -> np.ndarray:
    """Run the spec on a batch x (batch first) in float64 and return the output in float64."""
    values: Dict[str, np.ndarray] = {"input": np.asarray(x, dtype=np.float64)}
    previous = "input"
    for layer in spec["layers"]:
        kind = layer["type"]
        name = layer.get("name", kind)
        inputs: List[np.ndarray] = [values[n] for n in layer.get("inputs", [previous])]
        overrides = layer.get("weights", {})

        def weight(role: str, required: bool = True) -> Any:
            key = overrides.get(role, f"{name}.{role}")
            if key not in tensors:
                if required:
                    raise KeyError(f"layer {name}: missing tensor {key}")
                return None
            return np.asarray(tensors[key], dtype=np.float64)

        h = inputs[0]
        if kind == "Linear":
            has_bias = layer.get("bias", True)
            y = h @ weight("weight").T + (weight("bias") if has_bias else 0.0)
        elif kind == "Conv2d":
            y = _conv2d(h, layer, weight("weight"),
                        weight("bias") if layer.get("bias", True) else None)
        elif kind == "MaxPool2d":
            y = _pool(h, layer, "max")
        elif kind == "AvgPool2d":
            y = _pool(h, layer, "avg")
        elif kind == "Flatten":
            start = layer.get("start_dim", 1) % h.ndim
            end = layer.get("end_dim", -1) % h.ndim
            y = h.reshape(h.shape[:start] + (-1,) + h.shape[end + 1:])
        elif kind == "ReLU":
            y = np.maximum(h, 0.0)
        elif kind == "LeakyReLU":
            y = np.where(h >= 0, h, h * layer.get("negative_slope", 0.01))
        elif kind == "GELU":
            y = _gelu(h, layer.get("approximate", "none"))
        elif kind == "SiLU":
            y = h / (1.0 + np.exp(-h))
        elif kind == "Sigmoid":
            y = 1.0 / (1.0 + np.exp(-h))
        elif kind == "Tanh":
            y = np.tanh(h)
        elif kind == "Scale":
            y = h * layer["alpha"]
        elif kind == "LayerNorm":
            axes = tuple(range(h.ndim - len(layer["normalized_shape"]), h.ndim))
            mean = h.mean(axis=axes, keepdims=True)
            var = ((h - mean) ** 2).mean(axis=axes, keepdims=True)
            y = (h - mean) / np.sqrt(var + layer.get("eps", 1e-5))
            if layer.get("elementwise_affine", True):
                y = y * weight("weight")
                if layer.get("bias", True):
                    y = y + weight("bias")
        elif kind in ("BatchNorm1d", "BatchNorm2d"):
            shape = (1, -1) + (1,) * (h.ndim - 2)
            y = (h - weight("running_mean").reshape(shape)) / np.sqrt(
                weight("running_var").reshape(shape) + layer.get("eps", 1e-5))
            if layer.get("affine", True):
                y = y * weight("weight").reshape(shape) + weight("bias").reshape(shape)
        elif kind == "Softmax":
            y = _softmax(h, layer.get("dim", -1))
        elif kind == "Add":
            y = sum(inputs[1:], inputs[0])
        elif kind == "Concat":
            y = np.concatenate(inputs, axis=layer["dim"])
        else:
            raise ValueError(f"layer {name}: unknown type {kind}")
        values[name] = y
        previous = name
    return values[spec["output"]]


def max_relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """Largest absolute difference, relative to the largest magnitude of expected."""
    scale = float(np.max(np.abs(expected))) or 1.0
    return float(np.max(np.abs(np.asarray(actual, np.float64) - expected))) / scale


def shapes_of(tensors: Mapping[str, np.ndarray]) -> Dict[str, Sequence[int]]:
    return {name: tuple(t.shape) for name, t in tensors.items()}
