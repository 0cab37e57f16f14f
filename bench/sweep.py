#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""A shape sweep: fusednn against PyTorch on a fixed family of models, as users run both.

Usage
-----
On the GPU machine (libfusednn built with the CUDA backend)::

    python3 -u bench/sweep.py --library build-gpu/src/api/libfusednn.so --out OUT_DIR \
        [--quick] [--time-budget SECONDS] [--compile-budget SECONDS] [--part K/N]

or, building the library and resuming across calls of at most 600 s each::

    bash bench/run_sweep_on_gpu.sh                              # full: call until "complete"
    TOTAL_BUDGET=225 bash bench/run_sweep_on_gpu.sh --quick     # about 60 points, < 4 minutes

On a machine without a GPU (checks model building, export, loading, correctness and the
outputs, with coarse CPU timings)::

    FUSEDNN_LIBRARY=build/rel/src/api/libfusednn.so python3 bench/sweep.py --device cpu --quick \
        --out /tmp/sweep-cpu

`--list` prints the points and exits. OUT_DIR receives `sweep.json` (every point, read back to
resume: points already there are skipped), `sweep.csv` and `sweep.md` (the summary). Run it
again with the same OUT_DIR to continue a run cut short by `--time-budget` or a crash; exit
status 0 means every selected point is recorded, 2 that some are left, 3 that the CUDA context
broke (run again: the point that broke it is recorded as failed).

What a point is
---------------
A model (one of the families below, built as a PyTorch module from the fixed seed SEED and
exported with `fusednn.export.save_bundle`), a batch and a precision (fp32, tf32, fp16, bf16).
Families: `mlp` (Linear chains of depth 1 to 6, widths 1 to 1024, every activation, LayerNorm
or BatchNorm1d after any layer, Softmax heads), `dag` (residual additions, concatenations,
scaling: traced by torch.fx), `linear` (one Linear, alone or with GELU / ReLU, 64 to 4096
wide) and `cnn` (LeNet-class and small VGG-like stacks). Batches come from BATCHES, kept where a
point's activations and FLOPs stay under ACTIVATION_BYTES_CAP and FLOPS_CAP.

What is measured (GPU)
----------------------
* PyTorch: the module in the precision's dtype (`.half()`, `.bfloat16()`; fp32 with TF32
  allowed in cuBLAS and cuDNN for tf32, and not otherwise), fed and returning tensors of that
  dtype, no casts timed, under `torch.no_grad()`: eager, the module captured in a CUDA graph, and
  on the compile groups (COMPILE_GROUPS, within --compile-budget) `torch.compile` in its default
  mode and in "max-autotune-no-cudagraphs", each captured in a CUDA graph. One compiled module
  serves every batch of its group (the batch marked dynamic; batch 1 compiles once more).
* fusednn: a `Context` with `bind_device` on torch tensors of the same dtype on the same stream,
  and for batch <= 32 the host path (`Context.run` on numpy arrays of that dtype).
* Time: microseconds per call, the median of windows of back-to-back calls timed with CUDA events
  after warm-up, each call on the next of several input / output buffer sets (one method for both
  sides: `per_call_us`).
* Correctness: max|a - ref| / max|ref| against the fp32 module on the same input (TF32 off):
  fusednn must stay within 1e-5 (fp32), 1e-3 (tf32), or max(1e-2, 2 x PyTorch's own error) (fp16,
  bf16). Points that fail export, loading, running or this check are recorded with the reason.
* ratio = PyTorch's best / fusednn's device time; and each side's time over the point's roofline:
  max(bytes at the measured copy rate, FLOPs at cuBLAS's measured peak in that precision), bytes
  being weights + input + output in the point's dtype.
* CPU part (fp32 points, batch <= 1024, under CPU_FLOPS_CAP): fusednn's CPU backend against ONNX
  Runtime's CPU provider on the same module (torch.onnx.export), 1 thread and all cores.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import datetime
import io
import json
import math
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch._dynamo
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bindings" / "python" / "src"))
sys.path.insert(0, str(ROOT / "bench" / "cuda"))
from bench_cuda import torch_precision  # noqa: E402 - TF32 allowed inside tf32 points only

SEED = 29  # every model's widths, layers, weights and inputs follow from it
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
TORCH_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
                "bf16": torch.bfloat16}
IO_DTYPE_NAMES = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}
# The precision contract (docs/precision.md): fusednn's error against the fp32 module.
CONTRACT = {"fp32": 1e-5, "tf32": 1e-3}
HALF_CONTRACT_FLOOR, HALF_CONTRACT_FACTOR = 1e-2, 2.0

BATCHES = (1, 2, 7, 32, 129, 1024, 4096, 65536, 262144, 1 << 21)
BATCH_RANGES = (("1-7", 1, 7), ("32-129", 8, 129), ("1024-4096", 130, 4096),
                ("65536+", 4097, 1 << 62))
ACTIVATION_BYTES_CAP = 1 << 30   # batch x widest per-sample activation x 4 bytes
FLOPS_CAP = 2e11                  # per call
HOST_PATH_MAX_BATCH = 32
CPU_PART_MAX_BATCH = 1024
CPU_FLOPS_CAP = 4e9               # per call, for the ONNX Runtime comparison
# --device cpu runs the same points on this machine's CPU, skipping the large ones.
CPU_MODE_ACTIVATION_BYTES_CAP = 64 << 20
CPU_MODE_FLOPS_CAP = 5e8

ROTATING_SETS_MAX = 8
ROTATING_BYTES = 256 << 20        # enough sets that their inputs and outputs pass the L2 cache
CHECK_SETS = 2                    # sets whose outputs are checked against the reference
WINDOW_TARGET_S = 0.002           # one timing window: back-to-back calls for about this long
COLUMN_BUDGET_S = 0.15            # all windows of one column
WINDOWS_MIN, WINDOWS_MAX = 5, 15
CALLS_MAX = 400
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")

ACTIVATIONS = ("relu", "leaky_relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh")
WIDTH_POOL = (1, 2, 3, 5, 7, 8, 13, 16, 31, 32, 37, 64, 97, 100, 127, 128, 191, 256, 257, 384,
              509, 512, 769, 1000, 1024)

# (model, precision) groups that also run torch.compile: every family, precision and batch range.
COMPILE_GROUPS = (("mlp_seed", "fp32"), ("linear_768x3072_gelu_tanh", "bf16"),
                  ("cnn_lenet5", "fp32"), ("dag_residual_64", "bf16"), ("mlp_field64", "fp16"),
                  ("linear_1024x1024_relu", "tf32"), ("dag_concat_100", "fp16"),
                  ("cnn_vgg16px", "tf32"), ("mlp_d3", "tf32"), ("linear_100x257_relu", "fp16"))
# Points the issue named, always in the sweep.
NAMED_POINTS = (("mlp_seed", "bf16", 262144), ("mlp_field64", "fp16", 1 << 21),
                ("linear_768x3072_gelu_tanh", "bf16", 4096))


def log(message: str) -> None:
    print(message, flush=True)


def stable_seed(*parts: Any) -> int:
    return (SEED * 1_000_003 + zlib.crc32("|".join(str(p) for p in parts).encode())) % (1 << 31)


def batch_range(batch: int) -> str:
    for name, low, high in BATCH_RANGES:
        if low <= batch <= high:
            return name
    raise ValueError(batch)


# ------------------------------------------------------------------------------------------------
# Models


def activation(name: Optional[str]) -> Optional[nn.Module]:
    if name is None:
        return None
    return {"relu": nn.ReLU, "leaky_relu": lambda: nn.LeakyReLU(0.1), "gelu": nn.GELU,
            "gelu_tanh": lambda: nn.GELU(approximate="tanh"), "silu": nn.SiLU,
            "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}[name]()


def norm(kind: Optional[str], width: int) -> Optional[nn.Module]:
    if kind == "ln":
        return nn.LayerNorm(width)
    if kind == "bn":
        return nn.BatchNorm1d(width)
    return None


def sequential(parts: Sequence[Optional[nn.Module]]) -> nn.Sequential:
    return nn.Sequential(*[p for p in parts if p is not None])


class ResidualMLP(nn.Module):
    """in -> width, then blocks of x + scale * fc2(act(fc1(norm?(x)))), then -> out (+ Softmax)."""

    def __init__(self, layout: Dict[str, Any]) -> None:
        super().__init__()
        width, hidden = layout["width"], layout["hidden"]
        self.entry = nn.Linear(layout["in"], width)
        self.norms = nn.ModuleList([nn.LayerNorm(width) if layout["prenorm"] else nn.Identity()
                                    for _ in range(layout["blocks"])])
        self.fc1 = nn.ModuleList([nn.Linear(width, hidden) for _ in range(layout["blocks"])])
        self.acts = nn.ModuleList([activation(layout["act"]) for _ in range(layout["blocks"])])
        self.fc2 = nn.ModuleList([nn.Linear(hidden, width) for _ in range(layout["blocks"])])
        self.scale = layout.get("scale")
        self.exit = nn.Linear(width, layout["out"])
        self.head = nn.Softmax(dim=-1) if layout.get("head") == "softmax" else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.entry(x)
        for norm_layer, fc1, act, fc2 in zip(self.norms, self.fc1, self.acts, self.fc2):
            branch = fc2(act(fc1(norm_layer(x))))
            if self.scale is not None:
                branch = branch * self.scale
            x = x + branch
        return self.head(self.exit(x))


class ConcatMLP(nn.Module):
    """Two or more branches from the input (Linear + activation), concatenated, then -> out."""

    def __init__(self, layout: Dict[str, Any]) -> None:
        super().__init__()
        self.branches = nn.ModuleList([nn.Linear(layout["in"], w) for w in layout["branches"]])
        self.acts = nn.ModuleList([activation(layout["act"]) for _ in layout["branches"]])
        self.exit = nn.Linear(sum(layout["branches"]), layout["out"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.exit(torch.cat([act(fc(x)) for fc, act in zip(self.branches, self.acts)],
                                   dim=1))


class DenseMLP(nn.Module):
    """h = act(fc1(x)); out = fc2(cat([x, h])): the input carried forward next to a layer."""

    def __init__(self, layout: Dict[str, Any]) -> None:
        super().__init__()
        self.fc1 = nn.Linear(layout["in"], layout["hidden"])
        self.act = activation(layout["act"])
        self.fc2 = nn.Linear(layout["in"] + layout["hidden"], layout["out"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.cat([x, self.act(self.fc1(x))], dim=1))


@dataclass
class ModelSpec:
    name: str
    family: str
    input_shape: Tuple[int, ...]
    layout: Dict[str, Any]
    summary: str
    # filled by probe(): per sample
    macs: int = 0
    widest_activation: int = 0
    output_shape: Tuple[int, ...] = ()
    parameters: int = 0

    def build(self) -> nn.Module:
        """The module with deterministic weights, on the CPU, in eval mode."""
        torch.manual_seed(stable_seed("weights", self.name))
        module = build_module(self.layout)
        with torch.no_grad():
            for sub in module.modules():
                if isinstance(sub, nn.LayerNorm) and sub.elementwise_affine:
                    sub.weight.copy_(1 + 0.2 * torch.randn_like(sub.weight))
                    sub.bias.copy_(0.2 * torch.randn_like(sub.bias))
                elif isinstance(sub, (nn.BatchNorm1d, nn.BatchNorm2d)):
                    sub.weight.copy_(1 + 0.2 * torch.randn_like(sub.weight))
                    sub.bias.copy_(0.2 * torch.randn_like(sub.bias))
                    sub.running_mean.copy_(0.2 * torch.randn_like(sub.running_mean))
                    sub.running_var.copy_(0.5 + torch.rand_like(sub.running_var))
        return module.eval()

    def flops(self, batch: int) -> float:
        return 2.0 * self.macs * batch

    def activation_bytes(self, batch: int) -> int:
        return batch * self.widest_activation * 4

    def fits(self, batch: int, activation_cap: float = ACTIVATION_BYTES_CAP,
             flops_cap: float = FLOPS_CAP) -> bool:
        return self.activation_bytes(batch) <= activation_cap and self.flops(batch) <= flops_cap


def build_module(layout: Dict[str, Any]) -> nn.Module:
    kind = layout["kind"]
    if kind == "chain":
        parts: List[Optional[nn.Module]] = []
        widths = layout["widths"]
        for index in range(len(widths) - 1):
            parts.append(nn.Linear(widths[index], widths[index + 1]))
            parts.append(norm(layout["norms"][index], widths[index + 1]))
            parts.append(activation(layout["acts"][index]))
        if layout.get("head") == "softmax":
            parts.append(nn.Softmax(dim=-1))
        return sequential(parts)
    if kind == "linear":
        return sequential([nn.Linear(layout["in"], layout["out"]), activation(layout["act"])])
    if kind == "residual":
        return ResidualMLP(layout)
    if kind == "concat":
        return ConcatMLP(layout)
    if kind == "dense":
        return DenseMLP(layout)
    if kind == "cnn":
        parts = []
        channels = layout["in"][0]
        for conv in layout["convs"]:
            parts.append(nn.Conv2d(channels, conv["out"], conv["k"], stride=conv.get("stride", 1),
                                   padding=conv.get("pad", 0)))
            channels = conv["out"]
            if conv.get("bn"):
                parts.append(nn.BatchNorm2d(channels))
            parts.append(activation(conv.get("act")))
            pool = conv.get("pool")
            if pool:
                pool_kind, size, stride = pool[:3]
                padding = pool[3] if len(pool) > 3 else 0
                parts.append(nn.MaxPool2d(size, stride, padding) if pool_kind == "max"
                             else nn.AvgPool2d(size, stride, padding))
        parts.append(nn.Flatten())
        features = sequential(parts)
        # The head's input width: one sample through the convolutions (on the meta device when
        # probe() builds under it, else on the CPU).
        flat = features(torch.zeros((1,) + tuple(layout["in"]))).shape[1]
        head: List[Optional[nn.Module]] = []
        widths = [flat] + list(layout["head"])
        for index in range(len(widths) - 1):
            head.append(nn.Linear(widths[index], widths[index + 1]))
            if index < len(widths) - 2:
                head.append(activation(layout.get("head_act", "relu")))
        if layout.get("softmax"):
            head.append(nn.Softmax(dim=-1))
        return sequential(list(features) + head)
    raise ValueError(f"unknown layout kind {kind}")


def probe(spec: ModelSpec) -> None:
    """MACs, the widest activation and the output shape per sample, on the meta device."""
    with torch.device("meta"):
        torch.manual_seed(0)
        module = build_module(spec.layout).eval()
    macs = [0]
    widest = [math.prod(spec.input_shape)]

    def hook(layer: nn.Module, inputs: Tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        per_sample = output.numel() // output.shape[0]
        widest[0] = max(widest[0], per_sample)
        if isinstance(layer, nn.Linear):
            macs[0] += per_sample * layer.in_features
        elif isinstance(layer, nn.Conv2d):
            kh, kw = layer.kernel_size
            macs[0] += per_sample * (layer.in_channels // layer.groups) * kh * kw

    handles = [m.register_forward_hook(hook) for m in module.modules()
               if not list(m.children())]
    with torch.no_grad():
        out = module(torch.zeros((2,) + spec.input_shape, device="meta"))
    for handle in handles:
        handle.remove()
    spec.macs, spec.widest_activation = macs[0], widest[0]
    spec.output_shape = tuple(out.shape[1:])
    spec.parameters = sum(p.numel() for p in module.parameters()) + sum(
        b.numel() for b in module.buffers() if b.dtype.is_floating_point)


def chain_summary(layout: Dict[str, Any]) -> str:
    text = str(layout["widths"][0])
    for index, width in enumerate(layout["widths"][1:]):
        extras = [e for e in (layout["norms"][index], layout["acts"][index]) if e]
        text += f"-{width}" + (f"({','.join(extras)})" if extras else "")
    return text + ("-softmax" if layout.get("head") == "softmax" else "")


def model_family() -> List[ModelSpec]:
    """Every model of the sweep, from SEED."""
    rng = random.Random(SEED)
    models: List[ModelSpec] = []

    def chain(name: str, widths: List[int], acts: List[Optional[str]],
              norms: Optional[List[Optional[str]]] = None, head: Optional[str] = None) -> None:
        layout = {"kind": "chain", "widths": widths, "acts": acts,
                  "norms": norms or [None] * len(acts), "head": head}
        models.append(ModelSpec(name, "mlp", (widths[0],), layout, chain_summary(layout)))

    chain("mlp_seed", [100, 128, 64, 10], ["relu", "relu", None])
    chain("mlp_field64", [32, 64, 64, 64, 64, 16], ["relu"] * 4 + [None])
    chain("mlp_ln_softmax", [100, 128, 64, 10], ["gelu", "gelu", None], ["ln", "ln", None],
          "softmax")
    for index in range(21):
        depth = index % 6 + 1
        widths = [rng.choice(WIDTH_POOL) for _ in range(depth + 1)]
        main = ACTIVATIONS[index % len(ACTIVATIONS)]
        acts: List[Optional[str]] = []
        norms: List[Optional[str]] = []
        for layer in range(depth):
            last = layer == depth - 1
            act = None if last else (main if rng.random() < 0.7 else rng.choice(ACTIVATIONS))
            acts.append(act)
            width = widths[layer + 1]
            draw = rng.random()
            kind = None
            if width >= 2 and draw < (0.15 if last else 0.3):
                kind = "ln"
            elif width >= 2 and not last and draw < 0.38:
                kind = "bn"
            norms.append(kind)
        head = "softmax" if widths[-1] >= 2 and rng.random() < 0.3 else None
        name = "mlp_d3" if index == 2 else f"mlp_{index:02d}"
        chain(name, widths, acts, norms, head)

    def dag(name: str, layout: Dict[str, Any], summary: str) -> None:
        models.append(ModelSpec(name, "dag", (layout["in"],), layout, summary))

    dag("dag_residual_64", {"kind": "residual", "in": 64, "width": 64, "hidden": 64, "blocks": 2,
                            "act": "relu", "prenorm": False, "out": 10},
        "64 -> 2 x [x + fc(relu(fc(x)))] -> 10")
    dag("dag_residual_pre_ln_256", {"kind": "residual", "in": 256, "width": 256, "hidden": 1024,
                                    "blocks": 2, "act": "gelu_tanh", "prenorm": True, "out": 256},
        "256 -> 2 x [x + fc(gelu(fc(ln(x))))] (hidden 1024) -> 256")
    dag("dag_residual_97_softmax", {"kind": "residual", "in": 31, "width": 97, "hidden": 97,
                                    "blocks": 1, "act": "silu", "prenorm": False, "out": 13,
                                    "head": "softmax"},
        "31 -> 97 -> [x + fc(silu(fc(x)))] -> 13 -> softmax")
    dag("dag_residual_scaled_512", {"kind": "residual", "in": 512, "width": 512, "hidden": 512,
                                    "blocks": 1, "act": "tanh", "prenorm": False, "out": 128,
                                    "scale": 0.5},
        "512 -> [x + 0.5 * fc(tanh(fc(x)))] -> 128")
    dag("dag_residual_pre_ln_1024", {"kind": "residual", "in": 1000, "width": 1024,
                                     "hidden": 1024, "blocks": 1, "act": "leaky_relu",
                                     "prenorm": True, "out": 1000},
        "1000 -> 1024 -> [x + fc(leaky(fc(ln(x))))] -> 1000")
    dag("dag_concat_100", {"kind": "concat", "in": 100, "branches": [64, 37], "act": "relu",
                           "out": 10}, "100 -> cat[relu(fc 64), relu(fc 37)] -> 10")
    dag("dag_concat_31", {"kind": "concat", "in": 31, "branches": [128, 128, 5], "act": "gelu",
                          "out": 1}, "31 -> cat[gelu(fc 128), gelu(fc 128), gelu(fc 5)] -> 1")
    dag("dag_dense_64", {"kind": "dense", "in": 64, "hidden": 191, "act": "sigmoid", "out": 16},
        "64 -> cat[x, sigmoid(fc 191)] -> 16")

    def linear(i: int, o: int, act: Optional[str]) -> None:
        name = f"linear_{i}x{o}" + (f"_{act}" if act else "")
        models.append(ModelSpec(name, "linear", (i,), {"kind": "linear", "in": i, "out": o,
                                                       "act": act},
                                f"Linear {i}->{o}" + (f" + {act}" if act else "")))

    for i, o, act in ((64, 64, None), (768, 3072, "gelu_tanh"), (3072, 768, None),
                      (1024, 1024, "relu"), (4096, 4096, None), (4096, 1024, "gelu"),
                      (100, 257, "relu"), (257, 100, None), (511, 2047, "gelu"),
                      (1000, 1000, "relu"), (4093, 4093, None), (129, 4096, "relu"),
                      (2048, 512, "gelu_tanh"), (333, 777, None), (64, 4096, "gelu"),
                      (4096, 64, "relu"), (96, 96, "relu"), (1536, 1536, "gelu_tanh")):
        linear(i, o, act)

    def cnn(name: str, layout: Dict[str, Any], summary: str) -> None:
        models.append(ModelSpec(name, "cnn", tuple(layout["in"]), dict(layout, kind="cnn"),
                                summary))

    cnn("cnn_lenet5", {"in": [1, 28, 28], "convs": [
        {"out": 6, "k": 5, "pad": 2, "act": "tanh", "pool": ["avg", 2, 2]},
        {"out": 16, "k": 5, "act": "tanh", "pool": ["avg", 2, 2]}],
        "head": [120, 84, 10], "head_act": "tanh"}, "LeNet-5 (tanh, avg pool) 1x28x28")
    cnn("cnn_lenet_rgb_max", {"in": [3, 32, 32], "convs": [
        {"out": 6, "k": 5, "act": "relu", "pool": ["max", 2, 2]},
        {"out": 16, "k": 5, "act": "relu", "pool": ["max", 2, 2]}],
        "head": [120, 84, 10]}, "LeNet (relu, max pool) 3x32x32")
    cnn("cnn_lenet_bn", {"in": [1, 28, 28], "convs": [
        {"out": 8, "k": 3, "pad": 1, "bn": True, "act": "relu", "pool": ["max", 2, 2]},
        {"out": 16, "k": 3, "pad": 1, "bn": True, "act": "relu", "pool": ["max", 2, 2]}],
        "head": [64, 10]}, "LeNet-class 3x3 + BatchNorm 1x28x28")
    cnn("cnn_vgg16px", {"in": [3, 16, 16], "convs": [
        {"out": 16, "k": 3, "pad": 1, "bn": True, "act": "relu"},
        {"out": 16, "k": 3, "pad": 1, "bn": True, "act": "relu", "pool": ["max", 2, 2]},
        {"out": 32, "k": 3, "pad": 1, "act": "relu", "pool": ["max", 2, 2]}],
        "head": [64, 10]}, "VGG-like 16-16-32, BatchNorm, 3x16x16")
    cnn("cnn_vgg32px", {"in": [3, 32, 32], "convs": [
        {"out": 8, "k": 3, "pad": 1, "act": "relu"},
        {"out": 8, "k": 3, "pad": 1, "act": "relu", "pool": ["max", 2, 2]},
        {"out": 16, "k": 3, "pad": 1, "act": "relu"},
        {"out": 16, "k": 3, "pad": 1, "act": "relu", "pool": ["max", 2, 2]},
        {"out": 32, "k": 3, "pad": 1, "act": "relu", "pool": ["max", 2, 2]}],
        "head": [128, 10]}, "VGG-like 8-8-16-16-32, 3x32x32")
    cnn("cnn_vgg64ch", {"in": [3, 32, 32], "convs": [
        {"out": 32, "k": 3, "pad": 1, "bn": True, "act": "relu", "pool": ["max", 2, 2]},
        {"out": 64, "k": 3, "pad": 1, "bn": True, "act": "relu", "pool": ["max", 2, 2]},
        {"out": 64, "k": 3, "pad": 1, "act": "relu", "pool": ["avg", 2, 2]}],
        "head": [256, 10]}, "VGG-like 32-64-64, BatchNorm, avg pool, 3x32x32")
    cnn("cnn_strided64px", {"in": [1, 64, 64], "convs": [
        {"out": 16, "k": 3, "stride": 2, "pad": 1, "act": "relu"},
        {"out": 32, "k": 3, "stride": 2, "pad": 1, "bn": True, "act": "relu"},
        {"out": 64, "k": 3, "stride": 2, "pad": 1, "act": "relu", "pool": ["avg", 2, 2]}],
        "head": [10]}, "stride-2 convs 16-32-64, 1x64x64")
    cnn("cnn_odd24px", {"in": [3, 24, 24], "convs": [
        {"out": 7, "k": 3, "act": "silu", "pool": ["max", 3, 2, 1]},
        {"out": 13, "k": 5, "pad": 2, "act": "gelu", "pool": ["avg", 2, 2]}],
        "head": [37, 5], "head_act": "tanh"}, "odd 7-13 channels, silu/gelu, 3x24x24")
    cnn("cnn_gray48px_softmax", {"in": [1, 48, 48], "convs": [
        {"out": 4, "k": 5, "pad": 2, "act": "relu", "pool": ["max", 2, 2]},
        {"out": 8, "k": 3, "pad": 1, "act": "relu", "pool": ["max", 2, 2]},
        {"out": 16, "k": 3, "pad": 1, "act": "relu", "pool": ["max", 2, 2]}],
        "head": [32, 2], "softmax": True}, "4-8-16 channels, softmax head, 1x48x48")
    cnn("cnn_64ch16px", {"in": [64, 16, 16], "convs": [
        {"out": 64, "k": 3, "pad": 1, "bn": True, "act": "relu"},
        {"out": 64, "k": 3, "pad": 1, "bn": True, "act": "relu", "pool": ["max", 2, 2]}],
        "head": [10]}, "64-64 channels, BatchNorm, 64x16x16")
    for spec in models:
        probe(spec)
    return models


# ------------------------------------------------------------------------------------------------
# Points


@dataclass(frozen=True)
class Point:
    model: str
    family: str
    precision: str
    batch: int

    @property
    def id(self) -> str:
        return f"{self.model}/{self.precision}/b{self.batch}"

    @property
    def batch_range(self) -> str:
        return batch_range(self.batch)


def point_list(models: List[ModelSpec]) -> List[Point]:
    """Each model: two precisions (more for compile-group models), a batch from each batch range
    that fits (from two of them for the second precision; two tiny batches for compile groups),
    plus NAMED_POINTS."""
    rng = random.Random(SEED + 1)
    compile_precisions: Dict[str, List[str]] = {}
    for name, precision in COMPILE_GROUPS:
        compile_precisions.setdefault(name, []).append(precision)
    points: List[Point] = []
    for index, spec in enumerate(models):
        fitting = [b for b in BATCHES if spec.fits(b)]
        ranges = {name: [b for b in fitting if batch_range(b) == name] for name, _, _ in BATCH_RANGES}
        pair = [PRECISIONS[index % 4], PRECISIONS[(index + 1 + index // 4) % 4]]
        if pair[0] == pair[1]:
            pair[1] = PRECISIONS[(index + 2) % 4]
        precisions = list(dict.fromkeys(compile_precisions.get(spec.name, []) + pair))
        for rank, precision in enumerate(precisions):
            chosen: List[int] = []
            # The first precision (and a compile group) gets every batch range that fits, the
            # others two of them.
            names = [name for name, _, _ in BATCH_RANGES if ranges[name]]
            if rank > 0 and precision not in compile_precisions.get(spec.name, []):
                names = sorted(rng.sample(names, min(2, len(names))))
            for name in names:
                options = ranges[name]
                if name == "65536+":
                    chosen.append(max(options) if rng.random() < 0.6 else options[0])
                else:
                    chosen.append(rng.choice(options))
            if precision in compile_precisions.get(spec.name, []):
                for tiny in (1, 7):
                    if tiny in fitting and tiny not in chosen:
                        chosen.append(tiny)
            for batch in sorted(set(chosen)):
                points.append(Point(spec.name, spec.family, precision, batch))
    known = {p.id for p in points}
    by_name = {spec.name: spec for spec in models}
    for name, precision, batch in NAMED_POINTS:
        point = Point(name, by_name[name].family, precision, batch)
        if point.id not in known:
            points.append(point)
    return points


def group_order(points: List[Point]) -> List[Tuple[str, str]]:
    """(model, precision) groups: the compile groups first, then the rest shuffled from SEED, so
    that a run cut short still covers every family, batch range and precision."""
    groups = list(dict.fromkeys((p.model, p.precision) for p in points))
    first = [g for g in COMPILE_GROUPS if g in groups]
    rest = [g for g in groups if g not in first]
    random.Random(SEED + 2).shuffle(rest)
    return first + rest


def quick_subset(points: List[Point], order: List[Tuple[str, str]]) -> List[Point]:
    """About 60 points: in group order, each point that adds a new (family, batch range,
    precision), plus the named points."""
    rank = {group: index for index, group in enumerate(order)}
    seen = set()
    chosen = []
    named = {(m, p, b) for m, p, b in NAMED_POINTS}
    for point in sorted(points, key=lambda p: (rank[(p.model, p.precision)], p.batch)):
        key = (point.family, point.batch_range, point.precision)
        if key not in seen or (point.model, point.precision, point.batch) in named:
            seen.add(key)
            chosen.append(point)
    return chosen


# ------------------------------------------------------------------------------------------------
# Timing, errors, ceilings


class Clock:
    """Times `calls` back-to-back calls: CUDA events on a stream, or the wall clock (each call
    then waits for its result, as a host call does)."""

    def __init__(self, stream: Optional["torch.cuda.Stream"]) -> None:
        self.stream = stream

    def context(self) -> Any:
        return torch.cuda.stream(self.stream) if self.stream is not None else \
            contextlib.nullcontext()

    def sync(self) -> None:
        if self.stream is not None:
            self.stream.synchronize()

    def window_us(self, enqueue: Callable[[int], Any], first: int, calls: int) -> float:
        if self.stream is None:
            t0 = time.perf_counter()
            for i in range(first, first + calls):
                enqueue(i)
            return (time.perf_counter() - t0) * 1e6 / calls
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(self.stream):
            start.record(self.stream)
            for i in range(first, first + calls):
                enqueue(i)
            stop.record(self.stream)
        stop.synchronize()
        return start.elapsed_time(stop) * 1000.0 / calls


def per_call_us(clock: Clock, enqueue: Callable[[int], Any], sets: int,
                budget_s: float = COLUMN_BUDGET_S) -> float:
    """Microseconds per call: warm-up, one calibration window, then WINDOWS_MIN..WINDOWS_MAX
    windows of back-to-back calls (about WINDOW_TARGET_S each, within budget_s); the median.
    Call i uses buffer set i % sets, so consecutive calls never read the same input."""
    with clock.context():
        for i in range(max(3, sets)):
            enqueue(i)
    clock.sync()
    estimate = clock.window_us(enqueue, 0, max(sets, 2))
    calls = int(min(CALLS_MAX, max(2, WINDOW_TARGET_S * 1e6 / max(estimate, 1e-3))))
    windows = int(budget_s * 1e6 / max(estimate * calls, 1e-3))
    windows = min(WINDOWS_MAX, max(WINDOWS_MIN, windows))
    samples = [clock.window_us(enqueue, w * calls, calls) for w in range(windows)]
    return statistics.median(samples)


def relative_error(got: torch.Tensor, reference: torch.Tensor) -> float:
    """max|got - reference| / max|reference|, in float64 on the reference's device."""
    reference = reference.detach().double()
    got = got.detach().to(reference.device).double()
    if got.shape != reference.shape:
        raise ValueError(f"output shape {tuple(got.shape)} differs from PyTorch's "
                         f"{tuple(reference.shape)}")
    if not torch.isfinite(got).all():
        return float("inf")
    return float((got - reference).abs().max() / reference.abs().max().clamp_min(1e-30))


def tolerance(precision: str, torch_error: Optional[float]) -> float:
    if precision in CONTRACT:
        return CONTRACT[precision]
    own = torch_error if torch_error is not None and math.isfinite(torch_error) else 0.0
    return max(HALF_CONTRACT_FLOOR, HALF_CONTRACT_FACTOR * own)


def describe(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".replace("\n", " ")
    return text[:400]


def measure_ceilings(device: str) -> Dict[str, Any]:
    """The copy rate (bytes read + written per second) and cuBLAS's matmul rate per precision,
    on this device, once."""
    ceilings: Dict[str, Any] = {}
    stream = torch.cuda.Stream() if device == "cuda" else None
    clock = Clock(stream)
    floats = (1 << 28) if device == "cuda" else (1 << 24)
    try:
        source = torch.randn(floats, device=device)
        target = torch.empty_like(source)
        us = per_call_us(clock, lambda i: target.copy_(source), 2, budget_s=0.3)
        ceilings["copy_bytes_per_s"] = 2 * 4 * floats / us * 1e6
        del source, target
    except Exception as error:  # noqa: BLE001 - a missing ceiling leaves the roofline blank
        ceilings["copy_failure"] = describe(error)
    n = 8192 if device == "cuda" else 512
    for precision in PRECISIONS:
        try:
            dtype = TORCH_DTYPES[precision]
            a = torch.randn(n, n, device=device).to(dtype)
            b = torch.randn(n, n, device=device).to(dtype)
            c = torch.empty(n, n, device=device, dtype=dtype)
            with torch_precision(precision):
                us = per_call_us(clock, lambda i: torch.matmul(a, b, out=c), 2, budget_s=0.3)
            ceilings[f"matmul_{precision}_flops_per_s"] = 2 * n ** 3 / us * 1e6
            del a, b, c
        except Exception as error:  # noqa: BLE001
            ceilings[f"matmul_{precision}_failure"] = describe(error)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    return ceilings


# ------------------------------------------------------------------------------------------------
# Results


CSV_COLUMNS = (
    "id", "family", "model", "summary", "batch", "batch_range", "precision", "io_dtype",
    "status", "reason", "precision_ran", "fusednn_us", "fusednn_host_us", "torch_eager_us",
    "torch_graph_us", "torch_compile_default_us", "torch_compile_max_autotune_us",
    "torch_best_us", "torch_best_mode", "ratio", "fusednn_error", "torch_error",
    "tolerance", "fusednn_host_error", "flops", "bytes", "roofline_us", "roofline_bound",
    "fusednn_roofline_x", "torch_roofline_x", "compile_note", "cpu_status", "cpu_fusednn_1t_us",
    "cpu_ort_1t_us", "cpu_ratio_1t", "cpu_fusednn_all_us", "cpu_ort_all_us", "cpu_ratio_all",
    "cpu_threads", "cpu_fusednn_error", "cpu_ort_error", "seconds")


class Results:
    """sweep.json (read back to resume), sweep.csv, sweep.md, and a marker naming the point in
    progress, so that a point that ends the process is recorded as failed on the next run."""

    def __init__(self, out: Path) -> None:
        self.out = out
        out.mkdir(parents=True, exist_ok=True)
        self.json_path = out / "sweep.json"
        self.marker = out / "in_progress.json"
        self.document: Dict[str, Any] = {"format": 1, "seed": SEED, "runs": [], "ceilings": {},
                                         "environment": {}, "points": []}
        if self.json_path.exists():
            self.document = json.loads(self.json_path.read_text())
        self.rows: Dict[str, Dict[str, Any]] = {row["id"]: row for row in self.document["points"]}

    def fail_in_progress(self, reason: str) -> None:
        """Records the point in progress (if any) as failed with `reason`."""
        if not self.marker.exists():
            return
        try:
            pending = json.loads(self.marker.read_text())
        except ValueError:
            pending = None
        self.marker.unlink()
        if pending and pending.get("id") not in self.rows:
            row = dict(pending)
            row.update(status="failed", reason=reason)
            self.add(row)
            log(f"recorded {row['id']} as failed: {reason}")

    def start(self, row: Dict[str, Any]) -> None:
        self.marker.write_text(json.dumps(row))

    def add(self, row: Dict[str, Any]) -> None:
        self.rows[row["id"]] = row
        if self.marker.exists():
            self.marker.unlink()
        self.save()

    def save(self) -> None:
        self.document["points"] = list(self.rows.values())
        temporary = self.json_path.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(self.document, indent=1, default=str))
        temporary.replace(self.json_path)

    def write_csv(self) -> None:
        with open(self.out / "sweep.csv", "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS, extrasaction="ignore")
            writer.writeheader()
            for row in self.rows.values():
                writer.writerow({k: fmt_csv(row.get(k)) for k in CSV_COLUMNS})


def fmt_csv(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else value


# ------------------------------------------------------------------------------------------------
# Measuring


class Interrupted(BaseException):
    """SIGTERM (a timeout): stop after recording what is done. A BaseException, so that the
    handlers that record a point's failure let it through."""


class ContextBroken(BaseException):
    """The CUDA context is unusable (a sticky error): the process must restart."""


@dataclass
class Group:
    """What the points of one (model, precision) share: modules, the bundle, compiled modules."""
    spec: ModelSpec
    precision: str
    bundle: Path
    cpu_module: nn.Module
    reference: nn.Module               # fp32, on the device
    module: nn.Module                  # in the precision's dtype, on the device
    compile: bool = False
    compiled: Dict[str, Any] = field(default_factory=dict)   # by mode
    compile_seconds: float = 0.0
    compile_failures: Dict[str, str] = field(default_factory=dict)
    onnx: Optional[Path] = None
    onnx_failure: Optional[str] = None
    ort_sessions: Dict[int, Any] = field(default_factory=dict)


class Sweep:
    def __init__(self, args: argparse.Namespace, models: List[ModelSpec],
                 results: Results) -> None:
        self.args = args
        self.device = args.device
        self.models = {spec.name: spec for spec in models}
        self.results = results
        self.stream = torch.cuda.Stream() if self.device == "cuda" else None
        self.clock = Clock(self.stream)
        self.wall = Clock(None)
        self.ceilings = results.document.get("ceilings", {})
        self.work = Path(tempfile.mkdtemp(prefix="fusednn_sweep_"))
        self.compile_spent_s = 0.0
        self.cpu_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else (os.cpu_count() or 1)
        self.bundles: Dict[str, Any] = {}

    # --- groups --------------------------------------------------------------------------------

    def bundle(self, spec: ModelSpec, module: nn.Module) -> Path:
        """The model exported once with fusednn.export.save_bundle (an ExportError is kept and
        raised again for each of its points)."""
        cached = self.bundles.get(spec.name)
        if cached is None:
            import fusednn.export

            path = self.work / f"{spec.name}.safetensors"
            try:
                fusednn.export.save_bundle(module, path, spec.input_shape, name=spec.name)
                cached = path
            except Exception as error:  # noqa: BLE001 - recorded per point
                cached = error
            self.bundles[spec.name] = cached
        if isinstance(cached, Exception):
            raise cached
        return cached

    def open_group(self, spec: ModelSpec, precision: str, compile_group: bool) -> Group:
        cpu_module = spec.build()
        bundle = self.bundle(spec, cpu_module)
        reference = copy.deepcopy(cpu_module).to(self.device)
        module = reference if TORCH_DTYPES[precision] == torch.float32 else \
            copy.deepcopy(cpu_module).to(self.device, TORCH_DTYPES[precision])
        return Group(spec, precision, bundle, cpu_module, reference, module, compile_group)

    def close_group(self, group: Group) -> None:
        group.compiled.clear()
        group.ort_sessions.clear()
        if group.compile:
            torch._dynamo.reset()  # each group's compiled code goes; no cache limit is reached
        if self.device == "cuda":
            self.check_context()
            torch.cuda.empty_cache()

    # --- one point -----------------------------------------------------------------------------

    def measure(self, group: Group, point: Point) -> Dict[str, Any]:
        spec, precision, batch = group.spec, point.precision, point.batch
        dtype = TORCH_DTYPES[precision]
        item = torch.finfo(dtype).bits // 8
        row: Dict[str, Any] = {
            "id": point.id, "family": spec.family, "model": spec.name, "summary": spec.summary,
            "batch": batch, "batch_range": point.batch_range, "precision": precision,
            "io_dtype": IO_DTYPE_NAMES[precision], "flops": spec.flops(batch),
            "bytes": (spec.parameters + batch * (math.prod(spec.input_shape) +
                                                 math.prod(spec.output_shape))) * item}
        row.update(self.roofline(row))
        if self.device == "cpu" and not spec.fits(batch, CPU_MODE_ACTIVATION_BYTES_CAP,
                                                  CPU_MODE_FLOPS_CAP):
            row.update(status="skipped", reason="over --device cpu's size caps")
            return row
        self.results.start(row)
        started = time.perf_counter()
        try:
            self.measure_device(group, point, row)
        except Exception as error:  # noqa: BLE001 - the point fails, the sweep goes on
            row.setdefault("status", "failed")
            row["reason"] = row.get("reason") or describe(error)
        if point.precision == "fp32" and batch <= CPU_PART_MAX_BATCH and not self.args.no_cpu_part:
            try:
                self.measure_cpu_part(group, point, row)
            except Exception as error:  # noqa: BLE001
                row["cpu_status"] = f"failed: {describe(error)}"
        row["seconds"] = time.perf_counter() - started
        return row

    def roofline(self, row: Dict[str, Any]) -> Dict[str, Any]:
        copy_rate = self.ceilings.get("copy_bytes_per_s")
        peak = self.ceilings.get(f"matmul_{row['precision']}_flops_per_s")
        if not copy_rate or not peak:
            return {}
        memory_us, compute_us = row["bytes"] / copy_rate * 1e6, row["flops"] / peak * 1e6
        return {"roofline_us": max(memory_us, compute_us),
                "roofline_bound": "memory" if memory_us >= compute_us else "compute"}

    def inputs(self, point: Point, sets: int) -> List[torch.Tensor]:
        spec = self.models[point.model]
        generator = torch.Generator(device=self.device).manual_seed(stable_seed("input", point.id))
        dtype = TORCH_DTYPES[point.precision]
        return [torch.randn((point.batch,) + spec.input_shape, device=self.device,
                            generator=generator).to(dtype) for _ in range(sets)]

    def set_count(self, spec: ModelSpec, batch: int, item: int) -> int:
        per_set = batch * (math.prod(spec.input_shape) + math.prod(spec.output_shape)) * item
        return int(min(ROTATING_SETS_MAX, max(2, math.ceil(ROTATING_BYTES / max(per_set, 1)))))

    def measure_device(self, group: Group, point: Point, row: Dict[str, Any]) -> None:
        import fusednn

        spec, precision, batch = group.spec, point.precision, point.batch
        dtype = TORCH_DTYPES[precision]
        sets = self.set_count(spec, batch, torch.finfo(dtype).bits // 8)
        xs = self.inputs(point, sets)
        checked = min(CHECK_SETS, sets)
        with torch.no_grad():
            references = [group.reference(x.float()) for x in xs[:checked]]
            try:
                with torch_precision(precision):
                    torch_outputs = [group.module(x) for x in xs[:checked]]
            except Exception as error:  # noqa: BLE001
                row.update(status="failed", reason=f"torch: {describe(error)}")
                return
        if self.device == "cuda":
            torch.cuda.synchronize()  # the inputs exist before another stream reads them
        row["torch_error"] = max(relative_error(o, r) for o, r in zip(torch_outputs, references))
        row["tolerance"] = tolerance(precision, row["torch_error"])
        del torch_outputs

        bundle = group.bundle
        try:
            # --device cpu compares one thread with one thread (torch.set_num_threads(1)).
            model = fusednn.Model.from_file(bundle, max_batch=batch, device=self.device,
                                            precision=precision,
                                            cpu_threads=1 if self.device == "cpu" else None)
        except Exception as error:  # noqa: BLE001
            row.update(status="failed", reason=f"load: {describe(error)}")
            return
        try:
            row["precision_ran"] = model.precision
            context = model.create_context()
        except Exception as error:  # noqa: BLE001
            model.close()
            row.update(status="failed", reason=f"load: {describe(error)}")
            return
        try:
            if self.device == "cuda":
                self.fusednn_on_device(context, xs, references, row)
            else:
                self.fusednn_on_host(context, xs, references, row, primary=True)
        finally:
            context.close()
            model.close()
        self.check_context()
        if row.get("status") == "failed":
            return
        row["status"] = "ok" if row["fusednn_error"] <= row["tolerance"] else "mismatch"
        if row["status"] == "mismatch":
            row["reason"] = (f"mismatch: fusednn error {row['fusednn_error']:.3g} over the "
                             f"{precision} contract {row['tolerance']:.3g}")
        del references
        with torch.no_grad(), torch_precision(precision):
            self.time_torch(group, point, xs, row)
        timings = {mode: row.get(f"torch_{mode}_us") for mode in
                   ("eager", "graph", "compile_default", "compile_max_autotune")}
        timings = {mode: us for mode, us in timings.items() if us is not None}
        if timings:
            best_mode = min(timings, key=timings.get)
            row["torch_best_us"], row["torch_best_mode"] = timings[best_mode], best_mode
        if row.get("torch_best_us") and row.get("fusednn_us"):
            row["ratio"] = row["torch_best_us"] / row["fusednn_us"]
        if row.get("roofline_us"):
            for side, key in (("fusednn", "fusednn_us"), ("torch", "torch_best_us")):
                if row.get(key):
                    row[f"{side}_roofline_x"] = row[key] / row["roofline_us"]

    def check_context(self) -> None:
        if self.device != "cuda":
            return
        try:
            torch.cuda.synchronize()
        except Exception as error:  # noqa: BLE001
            raise ContextBroken(describe(error)) from error

    def fusednn_on_device(self, context: Any, xs: List[torch.Tensor],
                          references: List[torch.Tensor], row: Dict[str, Any]) -> None:
        spec = self.models[row["model"]]
        sets, batch = len(xs), row["batch"]
        outputs = [torch.full((batch,) + spec.output_shape, float("nan"), device="cuda",
                              dtype=xs[0].dtype) for _ in range(sets)]
        torch.cuda.synchronize()  # the NaN fill is done before fusednn's stream writes
        runs = [context.bind_device(x, y, stream=self.stream) for x, y in zip(xs, outputs)]
        try:
            with torch.cuda.stream(self.stream):
                for run in runs:
                    run()
            self.stream.synchronize()
            row["fusednn_error"] = max(relative_error(outputs[i], references[i])
                                       for i in range(len(references)))
            row["fusednn_us"] = per_call_us(self.clock, lambda i: runs[i % sets](), sets)
        except Exception as error:  # noqa: BLE001
            row.update(status="failed", reason=f"run: {describe(error)}")
            self.check_context()
            return
        finally:
            for run in runs:
                run.close()
        if batch <= HOST_PATH_MAX_BATCH:
            try:
                self.fusednn_on_host(context, xs, references, row, primary=False)
            except Exception as error:  # noqa: BLE001 - the device columns stand
                row["fusednn_host_error"] = f"failed: {describe(error)}"

    def fusednn_on_host(self, context: Any, xs: List[torch.Tensor],
                        references: List[torch.Tensor], row: Dict[str, Any],
                        primary: bool) -> None:
        """Context.run on numpy arrays of the point's dtype (bfloat16 as uint16 bits)."""
        name = IO_DTYPE_NAMES[row["precision"]]
        host = [to_numpy(x) for x in xs]
        try:
            outputs = [context.run(host[i], dtype=name) for i in range(len(references))]
            error = max(relative_error(from_numpy(o, xs[0].dtype), r)
                        for o, r in zip(outputs, references))
            us = per_call_us(self.wall, lambda i: context.run(host[i % len(host)], dtype=name),
                             len(host))
        except Exception as failure:  # noqa: BLE001
            if primary:
                row.update(status="failed", reason=f"run: {describe(failure)}")
                return
            raise
        if primary:
            row["fusednn_error"], row["fusednn_us"] = error, us
        else:
            row["fusednn_host_error"], row["fusednn_host_us"] = error, us

    # --- PyTorch -------------------------------------------------------------------------------

    def time_torch(self, group: Group, point: Point, xs: List[torch.Tensor],
                   row: Dict[str, Any]) -> None:
        """Eager, CUDA graph, and (compile groups) torch.compile captured in a CUDA graph. The
        caller holds no_grad and the precision's TF32 setting."""
        sets = len(xs)
        module = group.module
        try:
            row["torch_eager_us"] = per_call_us(self.clock, lambda i: module(xs[i % sets]), sets)
        except Exception as error:  # noqa: BLE001
            row.update(status="failed", reason=f"torch eager: {describe(error)}")
            return
        if self.device == "cuda":
            try:
                row["torch_graph_us"] = self.graph_us(module, xs)
            except Exception as error:  # noqa: BLE001
                row["torch_graph_failure"] = describe(error)
                self.check_context()
        if group.compile:
            notes = []
            for mode in COMPILE_MODES:
                key = "torch_compile_default_us" if mode == "default" else \
                    "torch_compile_max_autotune_us"
                try:
                    compiled = self.compiled(group, mode, xs[0])
                    row[key] = self.graph_us(compiled, xs) if self.device == "cuda" else \
                        per_call_us(self.clock, lambda i: compiled(xs[i % sets]), sets)
                except Exception as error:  # noqa: BLE001
                    notes.append(f"{mode}: {describe(error)}")
                    group.compile_failures.setdefault(mode, describe(error))
                    self.check_context()
            row["compile_note"] = "; ".join(notes) or \
                f"compiled for the group in {group.compile_seconds:.0f} s so far"
        elif (point.model, point.precision) in COMPILE_GROUPS:
            row["compile_note"] = "skipped: compile budget spent" if self.device == "cuda" or \
                self.args.cpu_compile else "not run: --device cpu without --cpu-compile"

    def compiled(self, group: Group, mode: str, example: torch.Tensor) -> Callable:
        """The group's module compiled in `mode`, once: its batch dimension marked dynamic (for
        a batch of 2 or more), so one compilation serves the group's batches; batch 1 recompiles
        once, as PyTorch specialises sizes 0 and 1. Compiling (autotuning included) runs on the
        default stream, outside any timing."""
        if mode in group.compile_failures:
            raise RuntimeError(f"compile failed earlier in this group: "
                               f"{group.compile_failures[mode]}")
        compiled = group.compiled.get(mode)
        started = time.perf_counter()
        if compiled is None:
            compiled = torch.compile(group.module, mode=None if mode == "default" else mode)
            group.compiled[mode] = compiled
        if example.shape[0] >= 2:
            torch._dynamo.maybe_mark_dynamic(example, 0)
        compiled(example)  # compiles, or recompiles for a new specialisation; else quick
        if self.device == "cuda":
            torch.cuda.synchronize()
        spent = time.perf_counter() - started
        self.compile_spent_s += spent
        group.compile_seconds += spent
        return compiled

    def graph_us(self, function: Callable, xs: List[torch.Tensor]) -> float:
        """`function` on each input set captured in its own CUDA graph (one memory pool), the
        replays timed; warm-up runs first, outside capture, on the capture's side stream."""
        graphs = []
        pool = torch.cuda.graph_pool_handle()
        for x in xs:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    function(x)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                function(x)
            graphs.append(graph)
        try:
            return per_call_us(self.clock, lambda i: graphs[i % len(graphs)].replay(), len(xs))
        finally:
            torch.cuda.synchronize()

    # --- CPU part: fusednn's CPU backend against ONNX Runtime ----------------------------------

    def onnx_model(self, group: Group) -> Path:
        if group.onnx is None and group.onnx_failure is None:
            path = self.work / f"{group.spec.name}.onnx"
            example = torch.zeros((2,) + group.spec.input_shape)
            try:
                export_onnx(group.cpu_module, example, path)
                group.onnx = path
            except Exception as error:  # noqa: BLE001
                group.onnx_failure = describe(error)
        if group.onnx is None:
            raise RuntimeError(f"torch.onnx.export: {group.onnx_failure}")
        return group.onnx

    def measure_cpu_part(self, group: Group, point: Point, row: Dict[str, Any]) -> None:
        import fusednn
        import onnxruntime as ort

        spec, batch = group.spec, point.batch
        if spec.flops(batch) > CPU_FLOPS_CAP:
            row["cpu_status"] = f"skipped: {spec.flops(batch) / 1e9:.1f} GFLOP a call is over " \
                                f"the CPU part's cap"
            return
        path = self.onnx_model(group)
        rng = np.random.default_rng(stable_seed("cpu input", point.id))
        host = [rng.standard_normal((batch,) + spec.input_shape, dtype=np.float32)
                for _ in range(4)]
        with torch.no_grad():
            reference = group.cpu_module(torch.from_numpy(host[0]))
        row["cpu_threads"] = self.cpu_threads
        errors = {}
        for threads, label in ((1, "1t"), (self.cpu_threads, "all")):
            session = group.ort_sessions.get(threads)
            if session is None:
                options = ort.SessionOptions()
                options.intra_op_num_threads = threads
                options.inter_op_num_threads = 1
                session = ort.InferenceSession(str(path), options,
                                               providers=["CPUExecutionProvider"])
                group.ort_sessions[threads] = session
            input_name = session.get_inputs()[0].name
            errors["ort"] = relative_error(
                torch.from_numpy(session.run(None, {input_name: host[0]})[0]), reference)
            row[f"cpu_ort_{label}_us"] = per_call_us(
                self.wall, lambda i: session.run(None, {input_name: host[i % 4]}), 4)
            with fusednn.Model.from_file(group.bundle, max_batch=batch, device="cpu",
                                         cpu_threads=threads) as model:
                context = model.create_context()
                try:
                    errors["fusednn"] = relative_error(torch.from_numpy(context.run(host[0])),
                                                       reference)
                    row[f"cpu_fusednn_{label}_us"] = per_call_us(
                        self.wall, lambda i: context.run(host[i % 4]), 4)
                finally:
                    context.close()
            row[f"cpu_ratio_{label}"] = row[f"cpu_ort_{label}_us"] / row[f"cpu_fusednn_{label}_us"]
        row["cpu_fusednn_error"], row["cpu_ort_error"] = errors["fusednn"], errors["ort"]
        row["cpu_status"] = "ok" if errors["fusednn"] <= CONTRACT["fp32"] else \
            f"mismatch: fusednn CPU error {errors['fusednn']:.3g} over 1e-05"


def to_numpy(x: torch.Tensor) -> np.ndarray:
    x = x.detach().cpu().contiguous()
    if x.dtype == torch.bfloat16:
        return x.view(torch.int16).numpy().view(np.uint16)
    return x.numpy()


def from_numpy(array: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.bfloat16:
        return torch.from_numpy(np.ascontiguousarray(array).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(array))


def export_onnx(module: nn.Module, example: torch.Tensor, path: Path) -> None:
    """torch.onnx.export with a dynamic batch: the TorchScript exporter where this torch still
    has it, else the dynamo one."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(module, (example,), str(path), input_names=["input"],
                              output_names=["output"], dynamo=False,
                              dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
            return
        except Exception:  # noqa: BLE001 - try the other exporter
            pass
        torch.onnx.export(module, (example,), str(path), input_names=["input"],
                          output_names=["output"], dynamo=True,
                          dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))


# ------------------------------------------------------------------------------------------------
# Summary


def geomean(values: Sequence[float]) -> Optional[float]:
    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def ratio_line(label: str, rows: List[Dict[str, Any]], key: str) -> str:
    ratios = [r[key] for r in rows if r.get(key)]
    if not ratios:
        return f"| {label} | 0 | - | - | - | - |"
    at_least = sum(1 for v in ratios if v >= 1.0)
    worst = min(rows, key=lambda r: r.get(key) or math.inf)
    return (f"| {label} | {len(ratios)} | {at_least} ({100 * at_least / len(ratios):.0f}%) | "
            f"{geomean(ratios):.2f} | {min(ratios):.2f} | {worst['id']} |")


def split_tables(rows: List[Dict[str, Any]], key: str) -> List[str]:
    lines = ["| points | measured | >= 1.0x | geomean | min | worst point |",
             "|---|---:|---:|---:|---:|---|", ratio_line("all", rows, key)]
    for title, attribute, values in (
            ("family", "family", ("mlp", "dag", "linear", "cnn")),
            ("batch", "batch_range", tuple(name for name, _, _ in BATCH_RANGES)),
            ("precision", "precision", PRECISIONS)):
        for value in values:
            subset = [r for r in rows if r.get(attribute) == value]
            if subset:
                lines.append(ratio_line(f"{title} {value}", subset, key))
    return lines


def summary_markdown(document: Dict[str, Any], selected: List[Point]) -> str:
    rows_by_id = {row["id"]: row for row in document["points"]}
    rows = [rows_by_id[p.id] for p in selected if p.id in rows_by_id]
    environment = document.get("environment", {})
    ceilings = document.get("ceilings", {})
    ok = [r for r in rows if r.get("status") == "ok"]
    failed = [r for r in rows if r.get("status") in ("failed", "mismatch")]
    skipped = [r for r in rows if r.get("status") == "skipped"]
    device = environment.get("device", "?")
    lines = [f"# fusednn shape sweep on {device}", ""]
    lines.append(
        f"{len(rows)} of {len(selected)} points recorded ({len(ok)} measured and correct, "
        f"{len(failed)} failed or over the precision contract, {len(skipped)} skipped); seed "
        f"{SEED}; torch {environment.get('torch', '?')}, fusednn {environment.get('fusednn', '?')}"
        f", onnxruntime {environment.get('onnxruntime', '?')}, {environment.get('cpu_threads')} "
        f"CPU threads; runs: {', '.join(run.get('started', '?') for run in document['runs'])}.")
    if ceilings:
        rates = ", ".join(f"{p} {ceilings[f'matmul_{p}_flops_per_s'] / 1e12:.3g}"
                          for p in PRECISIONS if f"matmul_{p}_flops_per_s" in ceilings)
        copy_rate = ceilings.get("copy_bytes_per_s")
        copy_text = f"{copy_rate / 1e9:.0f} GB/s" if copy_rate else "not measured"
        lines += ["", f"Ceilings measured at the start of the first run: copy {copy_text} "
                      f"(bytes read + written), matmul TFLOP/s: {rates}."]
    if environment.get("device_kind") == "cpu":
        method = (
            "Method (--device cpu, a check of the sweep itself, not a GPU figure): PyTorch "
            "eager on the CPU in the point's dtype against fusednn's CPU backend "
            "(Context.run on numpy arrays of that dtype), one thread each, wall clock.")
    else:
        method = (
            "Method: PyTorch runs the module in the point's dtype (tf32: fp32 with TF32 "
            "allowed), tensors of that dtype in and out; its best of eager, the module captured "
            "in a CUDA graph and, on the compile groups, torch.compile (default and "
            "max-autotune-no-cudagraphs) captured in a CUDA graph. fusednn: Context.bind_device "
            "on tensors of the same dtype, same stream. Both timed by CUDA events over "
            "back-to-back calls on rotating buffer sets (median of windows).")
    lines += [
        "", method + " ratio = PyTorch best / fusednn (above 1: fusednn faster). Only points "
        "within the precision contract count; roofline = max(bytes at the copy rate, FLOPs at "
        "the matmul rate of the point's precision).", "",
        "## fusednn against PyTorch's best", ""]
    lines += split_tables(ok, "ratio")
    lines += ["", "### Worst 10 points", "",
              "| point | model | fusednn us | torch best us (mode) | ratio | fusednn / roofline | "
              "torch / roofline |", "|---|---|---:|---:|---:|---:|---:|"]
    for row in sorted((r for r in ok if r.get("ratio")), key=lambda r: r["ratio"])[:10]:
        lines.append(f"| {row['id']} | {row['summary']} | {fmt(row.get('fusednn_us'))} | "
                     f"{fmt(row.get('torch_best_us'))} ({row.get('torch_best_mode')}) | "
                     f"{fmt(row.get('ratio'))} | {fmt(row.get('fusednn_roofline_x'), 1)} | "
                     f"{fmt(row.get('torch_roofline_x'), 1)} |")
    compiled = [r for r in ok if r.get("torch_compile_default_us") or
                r.get("torch_compile_max_autotune_us")]
    compile_best = [r for r in compiled if str(r.get("torch_best_mode", "")).startswith("compile")]
    lines += ["", f"torch.compile ran on {len(compiled)} points (families "
                  f"{sorted({r['family'] for r in compiled})}, batch ranges "
                  f"{sorted({r['batch_range'] for r in compiled})}, precisions "
                  f"{sorted({r['precision'] for r in compiled})}); it was PyTorch's best mode on "
                  f"{len(compile_best)} of them."]
    lines += ["", "### Distance from the roofline (median time / roofline time)", "",
              "| precision | points | fusednn | PyTorch best |", "|---|---:|---:|---:|"]
    for precision in PRECISIONS:
        subset = [r for r in ok if r["precision"] == precision and r.get("fusednn_roofline_x")
                  and r.get("torch_roofline_x")]
        if subset:
            lines.append(f"| {precision} | {len(subset)} | "
                         f"{statistics.median(r['fusednn_roofline_x'] for r in subset):.1f} | "
                         f"{statistics.median(r['torch_roofline_x'] for r in subset):.1f} |")
    hosts = [r for r in ok if r.get("fusednn_host_us")]
    if hosts:
        lines += ["", f"Host path (Context.run on numpy arrays, batch <= {HOST_PATH_MAX_BATCH}): "
                      f"median {statistics.median(r['fusednn_host_us'] for r in hosts):.1f} us "
                      f"over {len(hosts)} points (device path median "
                      f"{statistics.median(r['fusednn_us'] for r in hosts):.1f} us)."]
    cpu_rows = [r for r in rows if r.get("cpu_ratio_1t")]
    lines += ["", "## CPU: fusednn's CPU backend against ONNX Runtime (fp32, batch <= "
                  f"{CPU_PART_MAX_BATCH})", "",
              "ratio = ONNX Runtime / fusednn (above 1: fusednn faster).", ""]
    for label, key in (("1 thread", "cpu_ratio_1t"),
                       (f"all cores ({environment.get('cpu_threads')} threads)", "cpu_ratio_all")):
        lines += [f"{label}:", ""] + split_tables(cpu_rows, key) + [""]
    lines += ["Worst 10 (1 thread):", "", "| point | model | fusednn us | ORT us | ratio | "
              "all cores: fusednn us | ORT us | ratio |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for row in sorted(cpu_rows, key=lambda r: r["cpu_ratio_1t"])[:10]:
        lines.append(f"| {row['id']} | {row['summary']} | {fmt(row.get('cpu_fusednn_1t_us'))} | "
                     f"{fmt(row.get('cpu_ort_1t_us'))} | {fmt(row.get('cpu_ratio_1t'))} | "
                     f"{fmt(row.get('cpu_fusednn_all_us'))} | {fmt(row.get('cpu_ort_all_us'))} | "
                     f"{fmt(row.get('cpu_ratio_all'))} |")
    cpu_other = [r for r in rows if r.get("cpu_status") and r.get("cpu_status") != "ok"]
    if cpu_other:
        lines += ["", "CPU part not measured or failed:", ""]
        lines += [f"- {r['id']}: {r['cpu_status']}" for r in cpu_other]
    lines += ["", "## Failures", ""]
    kinds: Dict[str, int] = {}
    for row in failed:
        kind = str(row.get("reason", "?")).split(":")[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    lines.append("By kind: " + (", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
                                or "none") + ".")
    lines += [""] + [f"- {r['id']} ({r.get('summary')}): {r.get('reason')}" for r in failed]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# Main


def environment_info(device: str) -> Dict[str, Any]:
    import fusednn

    info: Dict[str, Any] = {"torch": torch.__version__, "device_kind": device,
                            "fusednn": fusednn.version(), "library": fusednn.library_path(),
                            "cpu_threads": len(os.sched_getaffinity(0))
                            if hasattr(os, "sched_getaffinity") else os.cpu_count()}
    try:
        import onnxruntime

        info["onnxruntime"] = onnxruntime.__version__
    except ImportError:
        info["onnxruntime"] = None
    if device == "cuda":
        info["device"] = torch.cuda.get_device_name()
        info["torch_cuda"] = torch.version.cuda
        try:
            info["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, check=True, timeout=20).stdout.strip()
        except Exception:  # noqa: BLE001
            info["driver"] = None
    else:
        info["device"] = f"CPU ({info['cpu_threads']} threads)"
    try:
        info["commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                        capture_output=True, text=True, check=True,
                                        timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001
        info["commit"] = None
    return info


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", default=os.environ.get("FUSEDNN_LIBRARY"),
                        help="libfusednn.so (default: $FUSEDNN_LIBRARY)")
    parser.add_argument("--out", default="sweep-out", help="folder for sweep.json/.csv/.md")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--quick", action="store_true", help="about 60 points")
    parser.add_argument("--part", default=None, help="K/N: the K-th of N slices of the groups")
    parser.add_argument("--time-budget", type=float, default=None,
                        help="seconds: start no point past this (the rest is left for a resume)")
    parser.add_argument("--compile-budget", type=float, default=None,
                        help="seconds of torch.compile in this run (default 420, --quick 75)")
    parser.add_argument("--only", default=None,
                        help="a regular expression searched in the point ids to run")
    parser.add_argument("--retry-failed", action="store_true",
                        help="measure again the points recorded as failed")
    parser.add_argument("--no-cpu-part", action="store_true",
                        help="leave out the fusednn CPU / ONNX Runtime comparison")
    parser.add_argument("--cpu-compile", action="store_true",
                        help="--device cpu: run torch.compile on the compile groups too")
    parser.add_argument("--list", action="store_true", help="print the points and exit")
    args = parser.parse_args()
    if args.compile_budget is None:
        args.compile_budget = 75.0 if args.quick else 420.0
    return args


def selected_points(args: argparse.Namespace, models: List[ModelSpec]
                    ) -> Tuple[List[Point], List[Tuple[str, str]]]:
    points = point_list(models)
    order = group_order(points)
    if args.quick:
        points = quick_subset(points, order)
    if args.part:
        index, count = (int(v) for v in args.part.split("/"))
        if not 1 <= index <= count:
            raise SystemExit(f"--part {args.part}: K must be between 1 and N")
        kept = set(order[index - 1::count])
        order = [g for g in order if g in kept]
        points = [p for p in points if (p.model, p.precision) in kept]
    if args.only:
        only = re.compile(args.only)
        points = [p for p in points if only.search(p.id)]
    groups = set((p.model, p.precision) for p in points)
    return points, [g for g in order if g in groups]


def main() -> int:
    args = parse_args()
    started = time.perf_counter()
    models = model_family()
    points, order = selected_points(args, models)
    if args.list:
        for point in points:
            spec = next(m for m in models if m.name == point.model)
            print(f"{point.id:48s} {point.family:6s} {spec.summary}")
        counts = {f: sum(1 for p in points if p.family == f) for f in ("mlp", "dag", "linear", "cnn")}
        print(f"{len(points)} points, {len(order)} groups, {len(models)} models; {counts}")
        return 0
    if args.library:
        os.environ["FUSEDNN_LIBRARY"] = str(Path(args.library).resolve())
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("torch sees no CUDA device: use --device cpu on a machine without one")
    if args.device == "cpu":
        torch.set_num_threads(1)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    for name in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 64)

    results = Results(Path(args.out))
    environment = environment_info(args.device)
    previous = results.document.get("environment", {})
    if previous and previous.get("device_kind") != args.device:
        raise SystemExit(f"{results.json_path} holds a --device {previous.get('device_kind')} run;"
                         " use another --out")
    results.document["environment"] = environment
    results.document["runs"].append({"started": datetime.datetime.now(datetime.timezone.utc)
                                     .strftime("%Y-%m-%dT%H:%M:%SZ"), "args": vars(args)})
    results.fail_in_progress("crash: the process ended during this point (a crash, a hang "
                             "killed by a timeout, or running out of memory)")
    if args.retry_failed:
        for point_id in [k for k, r in results.rows.items() if r.get("status") == "failed"]:
            del results.rows[point_id]

    def stop(signum: int, frame: Any) -> None:
        raise Interrupted(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    sweep = Sweep(args, models, results)
    todo = [p for p in points if p.id not in results.rows]
    log(f"sweep: {len(points)} points selected, {len(points) - len(todo)} already recorded, "
        f"{len(todo)} to measure; {environment['device']}; torch {torch.__version__}; "
        f"fusednn {environment['fusednn']} ({environment['library']})")
    status = 0
    try:
        if not sweep.ceilings:
            sweep.ceilings = measure_ceilings(args.device)
            results.document["ceilings"] = sweep.ceilings
            results.save()
            log(f"ceilings: {json.dumps(sweep.ceilings)}")
        status = run_points(args, sweep, results, points, order, started)
    except Interrupted as reason:
        log(f"stopped: {reason}")
        status = 2
    except ContextBroken as reason:
        log(f"the CUDA context broke ({reason}); run again to continue")
        results.fail_in_progress(f"context: the CUDA context broke during this point ({reason})")
        status = 3
    finally:
        if results.marker.exists():
            results.marker.unlink()  # the point was cut short, not at fault: measure it again
        results.save()
        results.write_csv()
        (results.out / "sweep.md").write_text(summary_markdown(results.document, points))
        shutil.rmtree(sweep.work, ignore_errors=True)
    left = sum(1 for p in points if p.id not in results.rows)
    log(f"sweep: {len(points) - left} of {len(points)} points recorded, {left} left, "
        f"{time.perf_counter() - started:.0f} s; torch.compile {sweep.compile_spent_s:.0f} s")
    if status == 0 and left:
        status = 2
    return status


def run_points(args: argparse.Namespace, sweep: Sweep, results: Results, points: List[Point],
               order: List[Tuple[str, str]], started: float) -> int:
    by_group: Dict[Tuple[str, str], List[Point]] = {}
    for point in points:
        by_group.setdefault((point.model, point.precision), []).append(point)
    longest_point_s, longest_compile_s = 5.0, 60.0
    done = sum(1 for p in points if p.id in results.rows)
    for group_key in order:
        todo = [p for p in by_group[group_key] if p.id not in results.rows]
        if not todo:
            continue
        compile_group = group_key in COMPILE_GROUPS and \
            (args.device == "cuda" or args.cpu_compile) and \
            sweep.compile_spent_s < args.compile_budget
        elapsed = time.perf_counter() - started
        if args.time_budget is not None:
            if elapsed + longest_point_s > args.time_budget:
                log(f"time budget: {elapsed:.0f} s of {args.time_budget:.0f} s spent; stopping")
                return 2
            if compile_group and elapsed + longest_point_s + longest_compile_s > args.time_budget:
                log(f"time budget: no time left to compile {group_key}; left for the next run")
                continue
        spec = sweep.models[group_key[0]]
        try:
            group = sweep.open_group(spec, group_key[1], compile_group)
        except Exception as error:  # noqa: BLE001 - export or build failed: each point says so
            kind = "export" if type(error).__name__ == "ExportError" else "build"
            for point in todo:
                results.add({"id": point.id, "family": point.family, "model": point.model,
                             "summary": spec.summary, "batch": point.batch,
                             "batch_range": point.batch_range, "precision": point.precision,
                             "io_dtype": IO_DTYPE_NAMES[point.precision], "status": "failed",
                             "reason": f"{kind}: {describe(error)}"})
                done += 1
            log(f"[{done}/{len(points)}] {group_key}: {kind} failed: {describe(error)}")
            continue
        compile_before = sweep.compile_spent_s
        try:
            # Largest batch first: a compiled module is tuned at the batch it first sees.
            for point in sorted(todo, key=lambda p: -p.batch):
                elapsed = time.perf_counter() - started
                if args.time_budget is not None and elapsed + longest_point_s > args.time_budget:
                    log(f"time budget: {elapsed:.0f} s of {args.time_budget:.0f} s spent; "
                        "stopping")
                    return 2
                t0 = time.perf_counter()
                compile_t0 = sweep.compile_spent_s
                row = sweep.measure(group, point)
                results.add(row)
                done += 1
                longest_point_s = max(longest_point_s,
                                      time.perf_counter() - t0 - (sweep.compile_spent_s - compile_t0))
                log(progress_line(done, len(points), row, time.perf_counter() - started))
        finally:
            sweep.close_group(group)
        if compile_group:
            longest_compile_s = max(longest_compile_s, sweep.compile_spent_s - compile_before)
    return 0


def progress_line(done: int, total: int, row: Dict[str, Any], elapsed: float) -> str:
    parts = [f"[{done}/{total} {elapsed:.0f}s] {row['id']}: {row.get('status')}"]
    if row.get("ratio"):
        parts.append(f"ratio {row['ratio']:.2f} (fusednn {row['fusednn_us']:.1f} us, torch "
                     f"{row['torch_best_us']:.1f} us {row.get('torch_best_mode')})")
    elif row.get("fusednn_us"):
        parts.append(f"fusednn {row['fusednn_us']:.1f} us")
    if row.get("cpu_ratio_1t"):
        parts.append(f"cpu vs ort {row['cpu_ratio_1t']:.2f} / {row['cpu_ratio_all']:.2f}")
    elif row.get("cpu_status") and row["cpu_status"] != "ok":
        parts.append(f"cpu: {row['cpu_status'][:80]}")
    if row.get("reason"):
        parts.append(str(row["reason"])[:160])
    return "; ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
