#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""fusednn's CUDA backend against PyTorch on the same weights and inputs, in one run.

For each case: fusednn through the C API (device path: caller's device buffers on a torch stream;
host path: numpy in, numpy out), PyTorch eager, PyTorch captured in a CUDA graph, and
torch.compile(mode="reduce-overhead"). Times are medians over repeated runs of back-to-back calls
timed with CUDA events (host path: wall clock, since each call waits), after warm-up, cycling
through several input/output buffer sets so no call reuses the previous call's inputs. Each case
also checks fusednn's output against PyTorch's in exact fp32 (relative error max|a-b|/max|b|).

A case may ask fusednn for a reduced precision (the model option `precision`: tf32, fp16, bf16).
Its PyTorch columns then run the same model in that precision as its users run it: fp16 and bf16
with the weights in that dtype, fed and returning tensors of that dtype (no casts timed); tf32
in float32 with TF32 allowed. fusednn gets the same input and output dtype (float16 / bfloat16
device buffers through fdnn_context_run_device_typed); each fp16 / bf16 row is followed by one
labelled "fusednn fed float32" that times fusednn alone on float32 buffers, as before the typed
runs. Every row states its I/O dtype. The row also gives PyTorch's own error in that precision
and the ratio of the two errors. A case may set overrides of the CUDA backend's kernel selection
(FUSEDNN_CUDA_OVERRIDES, read when it creates a model); they are set only while fusednn creates
and runs that case's model, and the row's label names them.

The card's ceilings (device-to-device copy bandwidth, cuBLAS matmul rates) are measured once at
the start of the run, and every case with a batch of LARGE_BATCH or more is also reported as
achieved TFLOP/s and GB/s against them. A case that fails is reported and the others still run;
the exit status is 1 when any did.

Writes a markdown section (--markdown) and the raw numbers (--json). Needs torch with CUDA and
libfusednn.so built with the CUDA backend (--library or FUSEDNN_LIBRARY).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
DEVICE_CPU, DEVICE_CUDA = 0, 1
ROTATING_SETS = 8
# fdnn_precision (include/fusednn/fusednn.h): the values are pinned by the C API.
PRECISIONS = {"fp32": 0, "tf32": 1, "fp16": 2, "bf16": 3}
PRECISION_NAMES = {value: name for name, value in PRECISIONS.items()}
# The precisions PyTorch runs in a 16-bit dtype, weights and activations (tf32 is a cuBLAS/cuDNN
# mode on float32 tensors); a case in one of them also feeds and returns tensors of that dtype.
TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
# fdnn_dtype (include/fusednn/fusednn.h) of each torch dtype a run's buffers may have.
FDNN_DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
IO_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
LARGE_BATCH = 4096  # cases from this batch on are also reported against the card's ceilings
CEILING_MATMUL_SIZE = 8192
CEILING_COPY_FLOATS = 1 << 28  # 1 GiB

# ------------------------------------------------------------------------------------------------
# A minimal ctypes binding of the calls the benchmark makes (include/fusednn/fusednn.h).


class Options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("max_batch", ctypes.c_int64),
        ("device", ctypes.c_int),
        ("device_id", ctypes.c_int32),
        ("cpu_threads", ctypes.c_int32),
        ("cuda_graphs", ctypes.c_int32),
        ("precision", ctypes.c_int32),
        ("max_workspace_bytes", ctypes.c_uint64),
        ("max_weight_bytes", ctypes.c_uint64),
        ("host_io", ctypes.c_int32),
    ]


HOST_IO = {"auto": 0, "staged": 1, "mapped": 2}  # fdnn_host_io


class Shape(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int32), ("dims", ctypes.c_int64 * 8)]


class Library:
    def __init__(self, path: str) -> None:
        lib = ctypes.CDLL(path)
        vp, i64, sz, st = ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t, ctypes.c_int
        lib.fdnn_last_error_message.restype = ctypes.c_char_p
        lib.fdnn_status_string.restype = ctypes.c_char_p
        lib.fdnn_status_string.argtypes = [st]
        lib.fdnn_cuda_device_count.argtypes = [ctypes.POINTER(ctypes.c_int32)]
        lib.fdnn_model_options_init.argtypes = [ctypes.POINTER(Options), sz]
        lib.fdnn_model_create_from_spec.argtypes = [ctypes.c_char_p, sz, ctypes.POINTER(Options),
                                                    ctypes.POINTER(vp)]
        lib.fdnn_model_create_from_file.argtypes = [ctypes.c_char_p, ctypes.POINTER(Options),
                                                    ctypes.POINTER(vp)]
        lib.fdnn_model_destroy.argtypes = [vp]
        lib.fdnn_model_destroy.restype = None
        lib.fdnn_model_set_weight.argtypes = [vp, ctypes.c_char_p, st, vp,
                                              ctypes.POINTER(i64), ctypes.c_int32]
        lib.fdnn_model_output_shape.argtypes = [vp, ctypes.POINTER(Shape)]
        lib.fdnn_model_run.argtypes = [vp, i64, vp, sz, vp, sz]
        lib.fdnn_context_create.argtypes = [vp, ctypes.POINTER(vp)]
        lib.fdnn_context_destroy.argtypes = [vp]
        lib.fdnn_context_destroy.restype = None
        lib.fdnn_context_run.argtypes = [vp, i64, vp, sz, vp, sz]
        lib.fdnn_context_run_device.argtypes = [vp, i64, vp, sz, vp, sz, vp]
        # The typed runs (16-bit inputs and outputs) came with the 0.3 API.
        self.run_device_typed = getattr(lib, "fdnn_context_run_device_typed", None)
        if self.run_device_typed is not None:
            self.run_device_typed.argtypes = [vp, i64, vp, st, sz, vp, st, sz, vp]
        self.run_typed = getattr(lib, "fdnn_context_run_typed", None)
        if self.run_typed is not None:
            self.run_typed.argtypes = [vp, i64, vp, st, sz, vp, st, sz]
        # fdnn_model_precision came with the precision option; a library built before has neither.
        self.model_precision_call = getattr(lib, "fdnn_model_precision", None)
        if self.model_precision_call is not None:
            self.model_precision_call.argtypes = [vp, ctypes.POINTER(ctypes.c_int)]
        self.lib = lib
        # options_init sets struct_size to the smaller of ours and the library's own: whether the
        # library reads the precision field at all.
        probe = Options()
        self.check(lib.fdnn_model_options_init(ctypes.byref(probe), ctypes.sizeof(probe)),
                   "options_init")
        self.has_precision_option = (probe.struct_size >=
                                     Options.precision.offset + Options.precision.size)

    def check(self, status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what}: {self.lib.fdnn_status_string(status).decode()}: "
                               f"{self.lib.fdnn_last_error_message().decode()}")

    def options(self, max_batch: int, device: int = DEVICE_CUDA, graphs: int = 1,
                precision: str = "fp32", host_io: str = "auto") -> Options:
        options = Options()
        self.check(self.lib.fdnn_model_options_init(ctypes.byref(options), ctypes.sizeof(options)),
                   "options_init")
        options.max_batch, options.device, options.cuda_graphs = max_batch, device, graphs
        # Past struct_size, and so never read, where the library predates the field.
        options.precision = PRECISIONS[precision]
        options.host_io = HOST_IO[host_io]
        return options

    def model_from_spec(self, spec: str, weights: dict, max_batch: int, device: int = DEVICE_CUDA,
                        graphs: int = 1, precision: str = "fp32",
                        host_io: str = "auto") -> ctypes.c_void_p:
        model = ctypes.c_void_p()
        text = spec.encode()
        options = self.options(max_batch, device, graphs, precision, host_io)
        self.check(self.lib.fdnn_model_create_from_spec(text, len(text), ctypes.byref(options),
                                                        ctypes.byref(model)), "create_from_spec")
        try:
            for name, array in weights.items():
                array = np.ascontiguousarray(array, dtype=np.float32)
                shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
                self.check(self.lib.fdnn_model_set_weight(model, name.encode(), 0,
                                                          array.ctypes.data_as(ctypes.c_void_p),
                                                          shape, array.ndim), f"set_weight {name}")
        except Exception:
            self.lib.fdnn_model_destroy(model)
            raise
        return model

    def model_precision(self, model: ctypes.c_void_p) -> str:
        """The precision the model runs in (fdnn_model_precision), "?" where the library cannot
        say (built before the call existed, or the call failed)."""
        if self.model_precision_call is None:
            return "?"
        value = ctypes.c_int(-1)
        if self.model_precision_call(model, ctypes.byref(value)) != 0:
            return "?"
        return PRECISION_NAMES.get(value.value, f"?{value.value}")

    def output_shape(self, model: ctypes.c_void_p) -> tuple:
        shape = Shape()
        self.check(self.lib.fdnn_model_output_shape(model, ctypes.byref(shape)), "output_shape")
        return tuple(shape.dims[:shape.rank])

    def run_host(self, model: ctypes.c_void_p, x: np.ndarray) -> np.ndarray:
        """fdnn_model_run on host buffers: x is [batch, *input shape] float32; the output buffer
        is filled with NaN first, so that anything the run leaves unwritten shows."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        y = np.full((x.shape[0], *self.output_shape(model)), np.nan, np.float32)
        self.check(self.lib.fdnn_model_run(model, x.shape[0], x.ctypes.data_as(ctypes.c_void_p),
                                           x.size, y.ctypes.data_as(ctypes.c_void_p), y.size),
                   "run")
        return y

    def context(self, model: ctypes.c_void_p) -> ctypes.c_void_p:
        context = ctypes.c_void_p()
        self.check(self.lib.fdnn_context_create(model, ctypes.byref(context)), "context_create")
        return context


# ------------------------------------------------------------------------------------------------
# Timing, errors and the settings a case runs under.


def median_us_per_call(enqueue, calls: int, stream: torch.cuda.Stream, repeats: int = 15) -> float:
    """enqueue(i) queues call i on `stream`; CUDA events around `calls` back-to-back calls."""
    with torch.cuda.stream(stream):
        for i in range(max(calls // 4, 3)):
            enqueue(i)
    stream.synchronize()
    samples = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            start.record(stream)
            for i in range(calls):
                enqueue(i)
            stop.record(stream)
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1000.0 / calls)
    return statistics.median(samples)


def median_wall_us(call, calls: int, repeats: int = 9) -> float:
    for i in range(max(calls // 4, 3)):
        call(i)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for i in range(calls):
            call(i)
        samples.append((time.perf_counter() - t0) * 1e6 / calls)
    return statistics.median(samples)


def relative_error(got: torch.Tensor, expected: torch.Tensor) -> float:
    got, expected = got.double(), expected.double()
    if not torch.isfinite(got).all():
        return float("inf")
    return float((got - expected).abs().max() / expected.abs().max().clamp_min(1e-30))


def calls_for(batch_elements: int) -> int:
    if batch_elements <= 1 << 14:
        return 400
    if batch_elements <= 1 << 20:
        return 100
    if batch_elements <= 1 << 24:
        return 30
    return 10


def describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:300]


@contextlib.contextmanager
def torch_precision(precision: str):
    """TF32 allowed in cuBLAS and cuDNN inside a tf32 case only, restored after (the run keeps
    them off otherwise: exact fp32). Other precisions change nothing here: fp16 and bf16 are the
    tensors' types (torch_forward)."""
    if precision != "tf32":
        yield
        return
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


OVERRIDES = "FUSEDNN_CUDA_OVERRIDES"


@contextlib.contextmanager
def environment_knobs(knobs: dict):
    """Sets the CUDA backend's selection overrides (FUSEDNN_CUDA_OVERRIDES, key=value pairs that
    the backend reads when it creates a model) and puts the environment back as it was after."""
    saved = os.environ.get(OVERRIDES)
    if knobs:
        os.environ[OVERRIDES] = ",".join(f"{key}={value}" for key, value in knobs.items())
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(OVERRIDES, None)
        else:
            os.environ[OVERRIDES] = saved


def knob_label(knobs: dict) -> str:
    return " ".join(f"{key}={value}" for key, value in knobs.items())


def release_cached_memory() -> None:
    try:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    except Exception as error:  # noqa: BLE001 - a broken context shows in the next case too
        print(f"release_cached_memory: {describe(error)}", flush=True)


# ------------------------------------------------------------------------------------------------
# Cases: a spec, its weights, and the same function in PyTorch as functional(params, x) over the
# weights by name, so that it can run in any precision (torch_forward).


def linear_spec(name: str, input_width: int, layers: list) -> str:
    parts = []
    for index, (i, o, act) in enumerate(layers):
        parts.append({"type": "Linear", "name": f"fc{index}", "in_features": i, "out_features": o})
        if act:
            parts.append(act)
    return json.dumps({"fusednn": 1, "name": name, "input": {"shape": [input_width]},
                       "layers": parts})


def mlp_case(name: str, layers: list, torch_act: list, seed: int = 0) -> tuple:
    """An MLP with PyTorch's default initialisation (uniform, bound 1/sqrt(fan_in)) from `seed`."""
    generator = torch.Generator().manual_seed(seed)
    weights = {}
    for index, (i, o, _) in enumerate(layers):
        bound = 1.0 / i ** 0.5
        w = (torch.rand(o, i, generator=generator) * 2 - 1) * bound
        b = (torch.rand(o, generator=generator) * 2 - 1) * bound
        weights[f"fc{index}.weight"], weights[f"fc{index}.bias"] = w.numpy(), b.numpy()

    def functional(params, x):
        for index, act in enumerate(torch_act):
            x = F.linear(x, params[f"fc{index}.weight"], params[f"fc{index}.bias"])
            if act is not None:
                x = act(x)
        return x

    return linear_spec(name, layers[0][0], layers), weights, functional


def lenet_case(seed: int = 1) -> tuple:
    generator = torch.Generator().manual_seed(seed)
    shapes = {"c1.weight": (6, 1, 5, 5), "c1.bias": (6,), "c2.weight": (16, 6, 5, 5),
              "c2.bias": (16,), "f1.weight": (120, 400), "f1.bias": (120,),
              "f2.weight": (84, 120), "f2.bias": (84,), "f3.weight": (10, 84), "f3.bias": (10,)}
    weights = {k: (torch.randn(*s, generator=generator) * 0.2).numpy() for k, s in shapes.items()}
    spec = json.dumps({"fusednn": 1, "name": "lenet5", "input": {"shape": [1, 28, 28]}, "layers": [
        {"type": "Conv2d", "name": "c1", "in_channels": 1, "out_channels": 6, "kernel_size": 5,
         "padding": 2}, {"type": "Tanh"},
        {"type": "AvgPool2d", "name": "p1", "kernel_size": 2, "stride": 2},
        {"type": "Conv2d", "name": "c2", "in_channels": 6, "out_channels": 16, "kernel_size": 5},
        {"type": "Tanh"}, {"type": "AvgPool2d", "name": "p2", "kernel_size": 2, "stride": 2},
        {"type": "Flatten"},
        {"type": "Linear", "name": "f1", "in_features": 400, "out_features": 120}, {"type": "Tanh"},
        {"type": "Linear", "name": "f2", "in_features": 120, "out_features": 84}, {"type": "Tanh"},
        {"type": "Linear", "name": "f3", "in_features": 84, "out_features": 10}]})

    def functional(t, x):
        x = F.avg_pool2d(torch.tanh(F.conv2d(x, t["c1.weight"], t["c1.bias"], padding=2)), 2)
        x = F.avg_pool2d(torch.tanh(F.conv2d(x, t["c2.weight"], t["c2.bias"])), 2).flatten(1)
        x = torch.tanh(F.linear(x, t["f1.weight"], t["f1.bias"]))
        x = torch.tanh(F.linear(x, t["f2.weight"], t["f2.bias"]))
        return F.linear(x, t["f3.weight"], t["f3.bias"])

    return spec, weights, functional


def conv_case(name: str, in_channels: int, out_channels: int, kernel: int, stride: int,
              padding: int, size: int, seed: int = 2) -> tuple:
    """One Conv2d + bias + ReLU on size x size inputs with PyTorch's default initialisation (a
    ResNet-style layer)."""
    generator = torch.Generator().manual_seed(seed)
    bound = 1.0 / (in_channels * kernel * kernel) ** 0.5
    weights = {
        "conv.weight": ((torch.rand(out_channels, in_channels, kernel, kernel,
                                    generator=generator) * 2 - 1) * bound).numpy(),
        "conv.bias": ((torch.rand(out_channels, generator=generator) * 2 - 1) * bound).numpy()}
    spec = json.dumps({"fusednn": 1, "name": name, "input": {"shape": [in_channels, size, size]},
                       "layers": [{"type": "Conv2d", "name": "conv", "in_channels": in_channels,
                                   "out_channels": out_channels, "kernel_size": kernel,
                                   "stride": stride, "padding": padding}, {"type": "ReLU"}]})

    def functional(t, x):
        return torch.relu(F.conv2d(x, t["conv.weight"], t["conv.bias"], stride=stride,
                                   padding=padding))

    return spec, weights, functional


def torch_forward(weights: dict, functional, precision: str):
    """The case's PyTorch function on the GPU in `precision`, as a PyTorch user runs it: fp32
    and tf32 keep fp32 weights (run tf32 under torch_precision); fp16 and bf16 hold the weights in
    that dtype, and the function takes and returns tensors of that dtype (nothing cast inside)."""
    dtype = TORCH_DTYPES.get(precision, torch.float32)
    params = {name: torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to("cuda",
                                                                                        dtype)
              for name, array in weights.items()}
    return lambda x: functional(params, x)


SEED_LAYERS = [(100, 128, {"type": "ReLU"}), (128, 64, {"type": "ReLU"}), (64, 10, None)]
# The shape neural-field models use: 32 -> 64 -> 64 -> 64 -> 64 -> 16, ReLU.
WIDE64_LAYERS = ([(32, 64, {"type": "ReLU"})] + [(64, 64, {"type": "ReLU"})] * 3 +
                 [(64, 16, None)])


def pair(value) -> tuple:
    return (value, value) if isinstance(value, int) else tuple(value)


def multiply_adds_per_sample(spec: str):
    """Multiply-adds of one sample of a layer chain (Linear: in x out per row; Conv2d: out_c x
    out_h x out_w x in_c / groups x kh x kw); activations, bias, pooling and normalisation do
    not count. None for a spec this walk cannot follow (branches, an unknown layer type)."""
    document = json.loads(spec)
    shape = list(document["input"]["shape"])
    shape_preserving = {"ReLU", "SiLU", "Sigmoid", "Tanh", "LeakyReLU", "GELU", "Scale",
                        "LayerNorm", "BatchNorm1d", "BatchNorm2d", "Softmax"}
    total = 0
    for layer in document["layers"]:
        kind = layer["type"]
        if "inputs" in layer:
            return None
        if kind == "Linear":
            total += math.prod(shape[:-1]) * layer["in_features"] * layer["out_features"]
            shape = shape[:-1] + [layer["out_features"]]
        elif kind == "Conv2d":
            channels, height, width = shape
            kh, kw = pair(layer["kernel_size"])
            sh, sw = pair(layer.get("stride", 1))
            dh, dw = pair(layer.get("dilation", 1))
            padding = layer.get("padding", 0)
            if padding == "valid":
                ph = pw = 0
            elif padding == "same":
                ph, pw = dh * (kh - 1) // 2, dw * (kw - 1) // 2
            else:
                ph, pw = pair(padding)
            out_h = (height + 2 * ph - dh * (kh - 1) - 1) // sh + 1
            out_w = (width + 2 * pw - dw * (kw - 1) - 1) // sw + 1
            groups = layer.get("groups", 1)
            total += (layer["out_channels"] * out_h * out_w * (channels // groups) * kh * kw)
            shape = [layer["out_channels"], out_h, out_w]
        elif kind in ("MaxPool2d", "AvgPool2d"):
            channels, height, width = shape
            kh, kw = pair(layer["kernel_size"])
            sh, sw = pair(layer.get("stride") or layer["kernel_size"])
            ph, pw = pair(layer.get("padding", 0))
            shape = [channels, (height + 2 * ph - kh) // sh + 1, (width + 2 * pw - kw) // sw + 1]
        elif kind == "Flatten":
            rank = len(shape)  # PyTorch numbering: dim 0 is the batch
            start, end = layer.get("start_dim", 1), layer.get("end_dim", -1)
            start, end = (start + rank + 1 if start < 0 else start,
                          end + rank + 1 if end < 0 else end)
            shape = shape[:start - 1] + [math.prod(shape[start - 1:end])] + shape[end:]
        elif kind not in shape_preserving:
            return None
    return total


class Bench:
    def __init__(self, lib: Library, compile_budget_s: float, only: str | None = None) -> None:
        self.lib = lib
        self.stream = torch.cuda.Stream()
        self.rows = []
        self.ceilings = {}
        self.compile_budget_s = compile_budget_s
        self.only = re.compile(only) if only else None
        self.compile_spent_s = 0.0

    def guarded(self, label: str, step, *args) -> None:
        """Runs step(*args); a failure becomes a row, and the benchmark goes on."""
        if self.only is not None and not self.only.search(label):
            return
        try:
            step(*args)
        except Exception as error:  # noqa: BLE001 - report, keep going
            row = {"kind": "failed", "case": label, "failure": describe(error)}
            print(json.dumps(row), flush=True)
            self.rows.append(row)
            release_cached_memory()

    def measure_ceilings(self) -> None:
        """The card's limits, measured in this run: a device-to-device copy of 1 GiB (GB/s
        counting bytes read and written) and 8192^3 torch.matmul in each precision (TFLOP/s)."""
        print("--- ceilings", flush=True)
        try:
            source = torch.randn(CEILING_COPY_FLOATS, device="cuda")
            target = torch.empty_like(source)
            us = median_us_per_call(lambda i: target.copy_(source), 10, self.stream, repeats=9)
            self.ceilings["copy_gb_per_s"] = 2 * 4 * CEILING_COPY_FLOATS / us / 1e3
            del source, target
        except Exception as error:  # noqa: BLE001
            self.ceilings["copy_failure"] = describe(error)
        n = CEILING_MATMUL_SIZE
        for precision in ("fp32", "tf32", "fp16", "bf16"):
            try:
                dtype = TORCH_DTYPES.get(precision, torch.float32)
                a = torch.randn(n, n, device="cuda").to(dtype)
                b = torch.randn(n, n, device="cuda").to(dtype)
                c = torch.empty(n, n, device="cuda", dtype=dtype)
                with torch_precision(precision):
                    us = median_us_per_call(lambda i: torch.matmul(a, b, out=c), 3, self.stream,
                                            repeats=7)
                self.ceilings[f"matmul_{precision}_tflops"] = 2 * n ** 3 / us / 1e6
                del a, b, c
            except Exception as error:  # noqa: BLE001
                self.ceilings[f"matmul_{precision}_failure"] = describe(error)
        release_cached_memory()
        print(json.dumps(self.ceilings), flush=True)

    def run_case(self, label: str, case: tuple, batch: int, in_shape: tuple,
                 precision: str = "fp32", knobs: dict | None = None, host_path: bool = False,
                 use_compile: bool = True, host_io: str = "auto") -> dict:
        knobs = dict(knobs or {})
        if knobs:
            label = f"{label} [{knob_label(knobs)}]"
        if host_io != "auto":
            label = f"{label} [host_io {host_io}]"
        if self.only is not None and not self.only.search(f"{label}, batch {batch}, {precision}"):
            return {}
        print(f"--- {label}, batch {batch}, {precision}", flush=True)
        row = {"kind": "model", "case": label, "batch": batch, "precision": precision}
        if knobs:
            row["knobs"] = knobs
        if host_io != "auto":
            row["host_io"] = host_io
        spec, weights, functional = case
        try:
            row["multiply_adds_per_sample"] = multiply_adds_per_sample(spec)
            self.measure(row, spec, weights, functional, in_shape, knobs, host_path, use_compile)
        except Exception as error:  # noqa: BLE001 - report the case, run the others
            row["failure"] = describe(error)
        release_cached_memory()
        print(json.dumps(row), flush=True)
        self.rows.append(row)
        return row

    def measure(self, row: dict, spec: str, weights: dict, functional, in_shape: tuple,
                knobs: dict, host_path: bool, use_compile: bool) -> None:
        batch, precision = row["batch"], row["precision"]
        io_dtype = TORCH_DTYPES.get(precision, torch.float32)
        row["io_dtype"] = IO_NAMES[io_dtype]
        sets = ROTATING_SETS if batch * int(np.prod(in_shape)) <= (1 << 24) else 2
        generator = torch.Generator(device="cuda").manual_seed(batch)
        # Inputs in the row's I/O dtype, made before any timing; the fp32 reference reads the
        # same values (a 16-bit input widened exactly).
        inputs = [torch.randn(batch, *in_shape, device="cuda", generator=generator).to(io_dtype)
                  for _ in range(sets)]
        exact = torch_forward(weights, functional, "fp32")
        forward = exact if precision == "fp32" else torch_forward(weights, functional, precision)
        with torch.no_grad():
            expected = [exact(x.float()) for x in inputs]
            if forward is not exact:
                with torch_precision(precision):
                    row["torch_same_precision_error"] = max(
                        relative_error(forward(x), e) for x, e in zip(inputs, expected))
        row["input_floats"], row["output_floats"] = inputs[0].numel(), expected[0].numel()
        calls = calls_for(row["input_floats"] + row["output_floats"])

        try:
            with environment_knobs(knobs):
                self.time_fusednn(row, spec, weights, inputs, expected, calls, host_path)
        except Exception as error:  # noqa: BLE001 - the PyTorch columns still run
            row["fusednn_failure"] = describe(error)
        if row.get("error_vs_torch") is not None and row.get("torch_same_precision_error"):
            row["error_ratio"] = row["error_vs_torch"] / row["torch_same_precision_error"]
        del expected

        with torch.no_grad(), torch_precision(precision):
            self.time_torch(row, forward, inputs, calls, use_compile)

    def device_runner(self, context, batch: int, inputs: list, outputs: list):
        """A function queuing run i on buffer set i % len(inputs): fdnn_context_run_device for
        float32 buffers, fdnn_context_run_device_typed for 16-bit ones."""
        sets = len(inputs)
        stream_handle = ctypes.c_void_p(self.stream.cuda_stream)
        in_ptrs = [x.data_ptr() for x in inputs]
        out_ptrs = [y.data_ptr() for y in outputs]
        in_count, out_count = inputs[0].numel(), outputs[0].numel()
        in_dtype, out_dtype = FDNN_DTYPES[inputs[0].dtype], FDNN_DTYPES[outputs[0].dtype]
        if inputs[0].dtype == outputs[0].dtype == torch.float32:
            run_device = self.lib.lib.fdnn_context_run_device

            def run(i):
                status = run_device(context, batch, in_ptrs[i % sets], in_count,
                                    out_ptrs[i % sets], out_count, stream_handle)
                if status:
                    self.lib.check(status, "run_device")
            return run
        run_typed = self.lib.run_device_typed
        if run_typed is None:
            raise RuntimeError("this libfusednn has no fdnn_context_run_device_typed (16-bit "
                               "device buffers)")

        def run_16bit(i):
            status = run_typed(context, batch, in_ptrs[i % sets], in_dtype, in_count,
                               out_ptrs[i % sets], out_dtype, out_count, stream_handle)
            if status:
                self.lib.check(status, "run_device_typed")
        return run_16bit

    def time_fusednn(self, row: dict, spec: str, weights: dict, inputs: list, expected: list,
                     calls: int, host_path: bool) -> None:
        """fusednn's device path with buffers of the row's I/O dtype; for a 16-bit row, also the
        same inputs widened to float32 (fusednn_device_fp32_io_us); and the host path."""
        batch, sets = row["batch"], len(inputs)
        outputs = [torch.full(e.shape, float("nan"), device="cuda", dtype=inputs[0].dtype)
                   for e in expected]

        model = self.lib.model_from_spec(spec, weights, batch, precision=row["precision"],
                                         host_io=row.get("host_io", "auto"))
        try:
            row["precision_reported"] = self.lib.model_precision(model)
            context = self.lib.context(model)
        except Exception:
            self.lib.lib.fdnn_model_destroy(model)
            raise

        try:
            fusednn_device = self.device_runner(context, batch, inputs, outputs)
            torch.cuda.synchronize()  # inputs and the NaN fill are done before self.stream runs
            with torch.cuda.stream(self.stream):
                for i in range(sets):
                    fusednn_device(i)
            self.stream.synchronize()
            row["error_vs_torch"] = max(relative_error(outputs[i], expected[i])
                                        for i in range(sets))
            row["fusednn_device_us"] = median_us_per_call(fusednn_device, calls, self.stream)
            del outputs
            if inputs[0].dtype != torch.float32:
                wide_inputs = [x.float() for x in inputs]
                wide_outputs = [torch.full_like(e, float("nan")) for e in expected]
                wide_run = self.device_runner(context, batch, wide_inputs, wide_outputs)
                torch.cuda.synchronize()
                with torch.cuda.stream(self.stream):
                    for i in range(sets):
                        wide_run(i)
                self.stream.synchronize()
                row["error_fp32_io_vs_torch"] = max(relative_error(wide_outputs[i], expected[i])
                                                    for i in range(sets))
                row["fusednn_device_fp32_io_us"] = median_us_per_call(wide_run, calls,
                                                                      self.stream)
                del wide_inputs, wide_outputs
            if host_path:
                self.time_host_path(row, context, inputs[0], expected[0], calls)
        finally:
            self.lib.lib.fdnn_context_destroy(context)
            self.lib.lib.fdnn_model_destroy(model)

    def time_host_path(self, row: dict, context, x: torch.Tensor, expected: torch.Tensor,
                       calls: int) -> None:
        """fdnn_context_run (float32) or fdnn_context_run_typed (16-bit) on numpy arrays of the
        row's I/O dtype (bfloat16 as its bits in uint16)."""
        batch = row["batch"]
        bits = {torch.float32: np.float32, torch.float16: np.float16, torch.bfloat16: np.uint16}
        host_dtype = bits[x.dtype]
        source = x.cpu()
        host_in = (source.view(torch.int16).numpy().view(np.uint16) if x.dtype == torch.bfloat16
                   else source.numpy())
        host_out = np.empty(tuple(expected.shape), host_dtype)
        in_ptr = host_in.ctypes.data_as(ctypes.c_void_p)
        out_ptr = host_out.ctypes.data_as(ctypes.c_void_p)
        if x.dtype == torch.float32:
            run_host = self.lib.lib.fdnn_context_run

            def fusednn_host(_):
                status = run_host(context, batch, in_ptr, host_in.size, out_ptr, host_out.size)
                if status:
                    self.lib.check(status, "run")
        else:
            run_typed, code = self.lib.run_typed, FDNN_DTYPES[x.dtype]

            def fusednn_host(_):
                status = run_typed(context, batch, in_ptr, code, host_in.size, out_ptr, code,
                                   host_out.size)
                if status:
                    self.lib.check(status, "run_typed")

        row["fusednn_host_us"] = median_wall_us(fusednn_host, calls)
        result = torch.from_numpy(host_out.view(np.int16)).view(torch.bfloat16) \
            if x.dtype == torch.bfloat16 else torch.from_numpy(host_out)
        row["error_host_vs_torch"] = relative_error(result.cuda(), expected)

    def time_torch(self, row: dict, forward, inputs: list, calls: int, use_compile: bool) -> None:
        """Eager, CUDA graph and torch.compile columns; the caller sets no_grad and precision."""
        sets = len(inputs)
        try:
            row["torch_eager_us"] = median_us_per_call(lambda i: forward(inputs[i % sets]), calls,
                                                       self.stream)
        except Exception as error:  # noqa: BLE001
            row["torch_eager_error"] = describe(error)
        try:
            graphs, pool = [], torch.cuda.graph_pool_handle()
            for x in inputs:
                with torch.cuda.stream(self.stream):
                    forward(x)  # warm-up outside the capture
                self.stream.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool):
                    forward(x)
                graphs.append(graph)
            row["torch_graph_us"] = median_us_per_call(lambda i: graphs[i % sets].replay(),
                                                       calls, self.stream)
            del graphs
        except Exception as error:  # noqa: BLE001 - report, keep going
            row["torch_graph_error"] = describe(error)
        if use_compile and self.compile_spent_s < self.compile_budget_s:
            t0 = time.perf_counter()
            try:
                compiled = torch.compile(forward, mode="reduce-overhead", dynamic=False)
                with torch.cuda.stream(self.stream):
                    for i in range(6):
                        compiled(inputs[i % sets])
                self.stream.synchronize()
                row["torch_compile_us"] = median_us_per_call(
                    lambda i: compiled(inputs[i % sets]), calls, self.stream)
            except Exception as error:  # noqa: BLE001
                row["torch_compile_error"] = describe(error)
            self.compile_spent_s += time.perf_counter() - t0
        elif use_compile:
            row["torch_compile_error"] = "skipped: compile time budget spent"

    def copy_case(self, label: str, count: int) -> None:
        """ReLU + Scale over `count` floats against a device-to-device copy of the same bytes."""
        print(f"--- {label}", flush=True)
        width = 1 << 16
        batch = count // width
        spec = json.dumps({"fusednn": 1, "name": "relu_scale", "input": {"shape": [width]},
                           "layers": [{"type": "ReLU"}, {"type": "Scale", "alpha": 0.5}]})
        row = {"kind": "copy", "case": label, "batch": batch}
        inputs = [torch.randn(batch, width, device="cuda") for _ in range(2)]
        outputs = [torch.full_like(x, float("nan")) for x in inputs]
        model = self.lib.model_from_spec(spec, {}, batch)
        try:
            context = self.lib.context(model)
        except Exception:
            self.lib.lib.fdnn_model_destroy(model)
            raise
        handle = ctypes.c_void_p(self.stream.cuda_stream)
        run_device = self.lib.lib.fdnn_context_run_device

        def fusednn_device(i):
            self.lib.check(run_device(context, batch, inputs[i % 2].data_ptr(), count,
                                      outputs[i % 2].data_ptr(), count, handle), "run_device")

        try:
            with torch.cuda.stream(self.stream):
                fusednn_device(0)
            self.stream.synchronize()
            row["error_vs_torch"] = relative_error(outputs[0], torch.relu(inputs[0]) * 0.5)
            row["fusednn_device_us"] = median_us_per_call(fusednn_device, 20, self.stream)
        finally:
            self.lib.lib.fdnn_context_destroy(context)
            self.lib.lib.fdnn_model_destroy(model)
        row["copy_us"] = median_us_per_call(lambda i: outputs[i % 2].copy_(inputs[i % 2]), 20,
                                            self.stream)
        row["copy_gb_per_s"] = 2 * 4 * count / row["copy_us"] / 1e3
        row["fusednn_gb_per_s"] = 2 * 4 * count / row["fusednn_device_us"] / 1e3
        with torch.no_grad():
            row["torch_eager_us"] = median_us_per_call(
                lambda i: torch.mul(torch.relu(inputs[i % 2]), 0.5, out=outputs[i % 2]), 20,
                self.stream)
            if self.compile_spent_s < self.compile_budget_s:
                t0 = time.perf_counter()
                try:
                    compiled = torch.compile(lambda x: torch.relu(x) * 0.5, mode="reduce-overhead",
                                             dynamic=False)
                    with torch.cuda.stream(self.stream):
                        for i in range(6):
                            compiled(inputs[i % 2])
                    self.stream.synchronize()
                    row["torch_compile_us"] = median_us_per_call(lambda i: compiled(inputs[i % 2]),
                                                                 20, self.stream)
                except Exception as error:  # noqa: BLE001
                    row["torch_compile_error"] = describe(error)
                self.compile_spent_s += time.perf_counter() - t0
        del inputs, outputs
        release_cached_memory()
        print(json.dumps(row), flush=True)
        self.rows.append(row)

    def cold_start(self, name: str) -> None:
        """Create + load + first run, after the CUDA context exists (torch made it)."""
        path = str(ROOT / "tests" / "fixtures" / "golden" / name / "model.safetensors")
        in_shape = (100,) if name == "seed_mlp" else (1, 28, 28)
        out_count = 10
        x = np.random.default_rng(0).standard_normal(in_shape).astype(np.float32)
        y = np.empty(out_count, np.float32)
        samples = []
        for attempt in range(11):
            t0 = time.perf_counter()
            model = ctypes.c_void_p()
            options = self.lib.options(1)
            self.lib.check(self.lib.lib.fdnn_model_create_from_file(
                path.encode(), ctypes.byref(options), ctypes.byref(model)), "create_from_file")
            try:
                self.lib.check(self.lib.lib.fdnn_model_run(
                    model, 1, x.ctypes.data_as(ctypes.c_void_p), x.size,
                    y.ctypes.data_as(ctypes.c_void_p), out_count), "run")
                samples.append((time.perf_counter() - t0) * 1e3)
            finally:
                self.lib.lib.fdnn_model_destroy(model)
        row = {"kind": "cold start", "case": f"cold start {name}", "first_ms": samples[0],
               "repeat_median_ms": statistics.median(samples[1:])}
        print(json.dumps(row), flush=True)
        self.rows.append(row)


# ------------------------------------------------------------------------------------------------
# Report.


def fmt(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def fmt_error(value) -> str:
    return "-" if value is None else f"{value:.1e}"


def fmt_ratio(value) -> str:
    return "-" if value is None else f"{value:.2g}"


def fmt_share(value) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def torch_best_us(row: dict):
    times = [row[k] for k in ("torch_eager_us", "torch_graph_us", "torch_compile_us")
             if row.get(k) is not None]
    return min(times) if times else None


def ratio_or_none(numerator, denominator):
    return numerator / denominator if numerator is not None and denominator else None


def precision_cell(row: dict) -> str:
    return f"{row.get('precision', 'fp32')} / {row.get('precision_reported', '-')}"


def failures_of(row: dict) -> list:
    keys = ("failure", "fusednn_failure", "torch_eager_error", "torch_graph_error",
            "torch_compile_error")
    return [f"{key}: {row[key]}" for key in keys
            if row.get(key) and not str(row[key]).startswith("skipped")]


def ceilings_sentence(ceilings: dict) -> str:
    copy = ceilings.get("copy_gb_per_s")
    rates = ", ".join(f"{p} {fmt(ceilings.get(f'matmul_{p}_tflops'))}"
                      for p in ("fp32", "tf32", "fp16", "bf16"))
    return (f"Ceilings of this card, measured at the start of the same run: a device-to-device "
            f"copy of 1 GiB at {'-' if copy is None else f'{copy:.0f}'} GB/s (bytes read and "
            f"written), and cuBLAS through "
            f"torch.matmul on {CEILING_MATMUL_SIZE}^3 (median of 7 runs of 3 calls) at {rates} "
            f"TFLOP/s.")


def model_table(rows: list) -> list:
    lines = [
        "| case | batch | precision (asked / ran) | I/O | fusednn device | fusednn host | "
        "torch eager | torch CUDA graph | torch.compile | speed-up | error vs torch fp32 | "
        "torch error | ratio |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        device_cell = fmt(row.get("fusednn_device_us"))
        if row.get("fusednn_device_us") is None and (row.get("failure") or
                                                     row.get("fusednn_failure")):
            device_cell = "failed"
        compile_cell = fmt(row.get("torch_compile_us"))
        if row.get("torch_compile_error"):
            compile_cell = "n/a"
        speed_up = ratio_or_none(torch_best_us(row), row.get("fusednn_device_us"))
        lines.append(
            f"| {row['case']} | {row['batch']} | {precision_cell(row)} | "
            f"{row.get('io_dtype', 'float32')} | {device_cell} | "
            f"{fmt(row.get('fusednn_host_us'))} | {fmt(row.get('torch_eager_us'))} | "
            f"{fmt(row.get('torch_graph_us'))} | {compile_cell} | "
            f"{'-' if speed_up is None else f'{speed_up:.2f}x'} | "
            f"{fmt_error(row.get('error_vs_torch'))} | "
            f"{fmt_error(row.get('torch_same_precision_error'))} | "
            f"{fmt_ratio(row.get('error_ratio'))} |")
        if row.get("fusednn_device_fp32_io_us") is not None:
            lines.append(
                f"| {row['case']}, fusednn fed float32 (no PyTorch counterpart) | {row['batch']} "
                f"| {precision_cell(row)} | float32 | {fmt(row['fusednn_device_fp32_io_us'])} | "
                f"- | - | - | - | - | {fmt_error(row.get('error_fp32_io_vs_torch'))} | - | - |")
    return lines


def throughput_table(rows: list, ceilings: dict) -> list:
    lines = [
        "| case | batch | precision (asked / ran) | fusednn us | TFLOP/s | compute ceiling | "
        "share | GB/s | share of copy | torch best us | torch TFLOP/s |",
        "|---|---:|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    copy = ceilings.get("copy_gb_per_s")
    for row in rows:
        us = row.get("fusednn_device_us")
        if row["batch"] < LARGE_BATCH or us is None:
            continue
        macs = row.get("multiply_adds_per_sample")
        flops = 2 * macs * row["batch"] if macs else None
        tflops = flops / us / 1e6 if flops else None
        item = {"float32": 4}.get(row.get("io_dtype", "float32"), 2)
        gb_per_s = item * (row["input_floats"] + row["output_floats"]) / us / 1e3
        ran = row.get("precision_reported")
        compute = ran if ran in PRECISIONS else row["precision"]
        ceiling = ceilings.get(f"matmul_{compute}_tflops")
        best = torch_best_us(row)
        torch_tflops = flops / best / 1e6 if flops and best else None
        lines.append(
            f"| {row['case']} | {row['batch']} | {precision_cell(row)} | {fmt(us)} | "
            f"{fmt(tflops)} | cuBLAS {compute} {fmt(ceiling)} | "
            f"{fmt_share(ratio_or_none(tflops, ceiling))} | {gb_per_s:.0f} | "
            f"{fmt_share(ratio_or_none(gb_per_s, copy))} | {fmt(best)} | {fmt(torch_tflops)} |")
    return lines


def markdown(rows: list, environment: dict) -> str:
    model_rows = [row for row in rows if row.get("kind") == "model"]
    lines = [
        "## CUDA",
        "",
        f"Measured {environment['date']} on {environment['device']} (driver "
        f"{environment['driver']}, CUDA runtime of torch {environment['torch_cuda']}, torch "
        f"{environment['torch']}), by `bench/cuda/bench_cuda.py` (run through "
        "`bench/run_on_gpu.sh`). Microseconds per call, medians of 15 runs of back-to-back calls "
        "timed with CUDA events after warm-up, inputs rotating over several buffer sets; the "
        "host path is wall-clock time of synchronous calls (numpy in, numpy out). A name in "
        "brackets after a case is a knob of the CUDA backend, set in the environment only while "
        "fusednn created and ran that model. `precision` is what fusednn was asked for and what "
        "it reports running in (`fdnn_model_precision`; `?` where the library cannot say). fp32 "
        "rows: fusednn and PyTorch compute in exact fp32 (TF32 off). Reduced-precision rows: the "
        "PyTorch columns run the same model in the same precision as a PyTorch user does: tf32 "
        "with TF32 allowed in cuBLAS and cuDNN for that case only; fp16 and bf16 with the "
        "weights in that dtype, fed and returning tensors of that dtype (nothing cast in the "
        "timed region). `I/O` is the dtype of both sides' input and output buffers: fusednn "
        "takes the same 16-bit buffers (`fdnn_context_run_device_typed`, host path "
        "`fdnn_context_run_typed`). The row after each fp16 / bf16 row, marked `fusednn fed "
        "float32`, times fusednn alone on the same inputs widened to float32 with a float32 "
        "output (the form the figures before the typed runs used); it has no PyTorch "
        "counterpart. `speed-up` is the fastest PyTorch column over fusednn's device path with "
        "the same I/O dtype. Errors are max|a-b|/max|b| against PyTorch in exact fp32 on the "
        "same input values: `error vs torch fp32` is fusednn's, `torch error` PyTorch's own in "
        "the row's precision, `ratio` the first over the second (the accuracy contract allows 2; "
        "`bench/cuda/check_precision.py` checks it against the CPU backend).",
        "",
    ]
    lines += model_table(model_rows)
    lines += [
        "",
        f"Batches of {LARGE_BATCH} and more, as throughput: TFLOP/s = 2 x multiply-adds of the "
        "model (Linear: in x out per row; Conv2d: out_c x out_h x out_w x in_c/groups x kh x kw "
        "per sample; activations, bias and pooling not counted) x batch / time; GB/s = input and "
        "output bytes in the row's I/O dtype / time (weights not counted). The compute ceiling is cuBLAS's "
        "rate in the precision fusednn reports running in (an fp32 chain on tensor cores with "
        "3xTF32 can pass the fp32 figure, which cuBLAS reaches on the FMA pipes). "
        + ceilings_sentence(environment.get("ceilings", {})),
        "",
    ]
    lines += throughput_table(model_rows, environment.get("ceilings", {}))
    for row in rows:
        if row.get("kind") == "copy":
            lines += [
                "",
                f"{row['case']}: fusednn {fmt(row['fusednn_device_us'])} us "
                f"({row['fusednn_gb_per_s']:.0f} GB/s counting bytes read and written), "
                f"device-to-device copy of the same bytes {fmt(row['copy_us'])} us "
                f"({row['copy_gb_per_s']:.0f} GB/s), torch eager {fmt(row['torch_eager_us'])} us, "
                f"torch.compile {fmt(row.get('torch_compile_us'))} us; fusednn / copy = "
                f"{row['fusednn_device_us'] / row['copy_us']:.2f}.",
            ]
    for row in rows:
        if row.get("kind") == "cold start":
            lines.append("")
            lines.append(f"{row['case']} (create from file + load + first run at batch 1, host "
                         f"path, CUDA context already made): first in the process "
                         f"{row['first_ms']:.2f} ms, repeated {row['repeat_median_ms']:.2f} ms "
                         f"(median of 10).")
    for note in environment.get("notes", []):
        lines += ["", note]
    failures = [(row["case"], text) for row in rows for text in failures_of(row)]
    failures += [("ceilings", f"{key}: {value}")
                 for key, value in environment.get("ceilings", {}).items() if "failure" in key]
    if failures:
        lines += ["", "Failures in this run:", ""]
        lines += [f"- {case}: {text}" for case, text in failures]
    return "\n".join(lines) + "\n"


def run_cases(bench: Bench) -> None:
    """Every case, in table order. The rows before the `issue #4` comment are the part-1 table."""
    bench.guarded("cold start seed_mlp", bench.cold_start, "seed_mlp")
    bench.guarded("cold start lenet5", bench.cold_start, "lenet5")
    seed = mlp_case("seed_mlp", SEED_LAYERS, [torch.relu, torch.relu, None])
    seed_name = "seed MLP 100-128-64-10"
    bench.run_case(seed_name, seed, 1, (100,), host_path=True)
    # The host path with its staging copies, as before the small-batch zero-copy runs, and the
    # mapped path (an integrated GPU's default) on this discrete GPU.
    bench.run_case(seed_name, seed, 1, (100,), host_path=True, use_compile=False,
                   host_io="staged")
    bench.run_case(seed_name, seed, 1, (100,), host_path=True, use_compile=False,
                   host_io="mapped")
    bench.run_case(seed_name, seed, 1024, (100,), host_path=True, use_compile=False)
    # No compile here: it ran slower than the CUDA graph (docs/performance.md), and the budget
    # goes to LeNet-5 at batch 1, whose issue #4 target is set against torch.compile.
    bench.run_case(seed_name, seed, 16384, (100,), use_compile=False)
    bench.run_case(seed_name, seed, 262144, (100,), use_compile=False)
    gelu = mlp_case("linear_gelu", [(768, 3072, {"type": "GELU", "approximate": "tanh"})],
                    [lambda x: F.gelu(x, approximate="tanh")])
    gelu_name = "Linear 768->3072 + GELU(tanh)"
    bench.run_case(gelu_name, gelu, 32, (768,))
    lenet = lenet_case()
    bench.run_case("LeNet-5", lenet, 1, (1, 28, 28))
    bench.run_case("LeNet-5", lenet, 1024, (1, 28, 28), use_compile=False)
    bench.guarded("ReLU + Scale over 2^26 floats", bench.copy_case,
                  "ReLU + Scale over 2^26 floats", 1 << 26)

    # issue #4: larger batches, reduced precisions, and the forms behind knobs (each knob row
    # runs the form the default replaced, or one not yet the default, for comparing).
    separate_conv = {"fused_conv": "0"}
    bench.run_case("LeNet-5", lenet, 1, (1, 28, 28), knobs=separate_conv, use_compile=False)
    bench.run_case("LeNet-5", lenet, 16384, (1, 28, 28), use_compile=False)
    bench.run_case("LeNet-5", lenet, 16384, (1, 28, 28), knobs=separate_conv, use_compile=False)
    # The head whole on the fused FMA kernel, as before the split chain (fused_mlp_split.hpp).
    whole_head = {"split_mlp": "0"}
    bench.run_case("LeNet-5", lenet, 16384, (1, 28, 28), knobs=whole_head, use_compile=False)
    bench.run_case("LeNet-5", lenet, 4096, (1, 28, 28), use_compile=False)
    bench.run_case("LeNet-5", lenet, 4096, (1, 28, 28), knobs=whole_head, use_compile=False)
    bench.run_case(seed_name, seed, 1, (100,), knobs={"small_batch_mlp": "block"},
                   use_compile=False)
    fp32_tensor_cores = {"fp32_tensor_cores": "1"}
    bench.run_case(seed_name, seed, 1024, (100,), knobs=fp32_tensor_cores, use_compile=False)
    bench.run_case(seed_name, seed, 262144, (100,), knobs=fp32_tensor_cores, use_compile=False)
    for precision in ("tf32", "bf16", "fp16"):
        bench.run_case(seed_name, seed, 262144, (100,), precision=precision, use_compile=False)
    wide = mlp_case("mlp64", WIDE64_LAYERS, [torch.relu] * 4 + [None])
    wide_name = "MLP 32-64-64-64-64-16"
    bench.run_case(wide_name, wide, 1 << 21, (32,), precision="fp16", use_compile=False)
    bench.run_case(wide_name, wide, 1 << 21, (32,), use_compile=False)
    # The WarpRegisters form the Warpgroup form (wgmma, compute capability 9.0) replaced there.
    wgmma_off = {"wgmma": "0"}
    bench.run_case(seed_name, seed, 262144, (100,), precision="bf16", knobs=wgmma_off,
                   use_compile=False)
    bench.run_case(wide_name, wide, 1 << 21, (32,), precision="fp16", knobs=wgmma_off,
                   use_compile=False)
    bench.run_case(gelu_name, gelu, 4096, (768,), precision="bf16", use_compile=False)
    # cuBLASLt on fp32 operands with a bf16 compute type, as before 16-bit weights.
    bench.run_case(gelu_name, gelu, 4096, (768,), precision="bf16", use_compile=False,
                   knobs={"cublaslt_half_operands": "0"})
    bench.run_case(gelu_name, gelu, 32, (768,), knobs={"cublaslt": "0"},
                   use_compile=False)
    bench.run_case(seed_name, seed, 16384, (100,), knobs=fp32_tensor_cores, use_compile=False)
    # The tensor-core MLP's older SharedTiles form, against the WarpRegisters form above.
    shared_tiles = {"tensor_core_form": "shared"}
    bench.run_case(seed_name, seed, 262144, (100,), precision="bf16", knobs=shared_tiles,
                   use_compile=False)
    # A Softmax head after the chain: folded into the chain's kernel (the default), and the
    # separate row kernel the override fold_row_ops=0 keeps.
    softmax_head = mlp_case("seed_softmax", SEED_LAYERS[:-1] + [(64, 10, {"type": "Softmax",
                                                                          "dim": -1})],
                            [torch.relu, torch.relu, lambda x: torch.softmax(x, -1)])
    head_name = "seed MLP + Softmax"
    bench.run_case(head_name, softmax_head, 262144, (100,), precision="bf16", use_compile=False)
    bench.run_case(head_name, softmax_head, 262144, (100,), precision="bf16",
                   knobs={"fold_row_ops": "0"}, use_compile=False)
    # A convolution too large for the fused conv + pool kernel (ResNet-18's 64-channel 3x3 on
    # 56 x 56): the implicit GEMM in each precision, and fp32 on the direct kernel it replaced.
    resnet_conv = conv_case("conv64", 64, 64, 3, 1, 1, 56)
    conv_name = "Conv2d 64->64 3x3 + ReLU, 56x56"
    for precision in ("fp32", "tf32", "bf16", "fp16"):
        bench.run_case(conv_name, resnet_conv, 32, (64, 56, 56), precision=precision,
                       use_compile=False)
    bench.run_case(conv_name, resnet_conv, 32, (64, 56, 56), use_compile=False,
                   knobs={"implicit_gemm": "0"})
    bench.run_case(conv_name, resnet_conv, 1, (64, 56, 56), use_compile=False)
    # One the fused conv + pool kernel holds (14 x 14): that kernel (the default) against the
    # implicit GEMM, in fp32 and bf16.
    small_conv = conv_case("conv64s", 64, 64, 3, 1, 1, 14)
    small_name = "Conv2d 64->64 3x3 + ReLU, 14x14"
    as_gemm = {"fused_conv": "0", "implicit_gemm": "1"}
    for precision in ("fp32", "bf16"):
        bench.run_case(small_name, small_conv, 256, (64, 14, 14), precision=precision,
                       use_compile=False)
        bench.run_case(small_name, small_conv, 256, (64, 14, 14), precision=precision,
                       use_compile=False, knobs=as_gemm)


def latency_notes(path: str) -> list:
    notes = []
    for line in Path(path).read_text().splitlines():
        if not line.strip().startswith("{"):
            continue
        item = json.loads(line)
        if "floor" in item:
            notes.append(
                f"Floor of this machine (bench/cuda/launch_floor.cu), {item['floor']}: "
                f"{item['per_call_us']:.2f} us per call, host submits in "
                f"{item['submit_us']:.2f} us.")
        elif "model" in item:
            notes.append(
                f"C++ loop, no Python (bench/cuda/device_latency.cpp), "
                f"{Path(item['model']).parent.name} batch {item['batch']}, "
                f"cuda_graphs={item['cuda_graphs']}, {item.get('buffer_sets', 8)} buffer "
                f"set(s): device path {item['device_path_us']:.2f} us per call (host submits "
                f"in {item['device_path_submit_us']:.2f} us), host path "
                f"{item['host_path_us']:.2f} us.")
    return notes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", default=os.environ.get("FUSEDNN_LIBRARY",
                                                            str(ROOT / "build-gpu/src/api/libfusednn.so")))
    parser.add_argument("--markdown", default="performance_cuda.md")
    parser.add_argument("--json", default="bench_cuda.json")
    parser.add_argument("--compile-budget", type=float, default=150.0,
                        help="seconds torch.compile may spend compiling, all cases together")
    parser.add_argument("--latency-json", default=None,
                        help="results of bench/cuda/device_latency.cpp to include")
    parser.add_argument("--only", default=None,
                        help="a regular expression: run only the cases whose "
                             "'LABEL, batch N, PRECISION' it matches")
    args = parser.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # the CUDA context exists from here on

    lib = Library(args.library)
    count = ctypes.c_int32()
    lib.check(lib.lib.fdnn_cuda_device_count(ctypes.byref(count)), "cuda_device_count")
    if count.value == 0:
        print("libfusednn sees no CUDA device", file=sys.stderr)
        return 1
    if not lib.has_precision_option:
        print("note: this libfusednn has no precision option; reduced-precision rows run fp32 "
              "and report '?'", flush=True)

    bench = Bench(lib, args.compile_budget, args.only)
    bench.measure_ceilings()
    run_cases(bench)

    driver = "unknown"
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, check=True).stdout.strip()
    except Exception:  # noqa: BLE001
        pass
    environment = {
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(),
        "driver": driver,
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "precision_option": lib.has_precision_option,
        "ceilings": bench.ceilings,
        "notes": [],
    }
    if args.latency_json and Path(args.latency_json).exists():
        environment["notes"] += latency_notes(args.latency_json)
    text = markdown(bench.rows, environment)
    Path(args.markdown).write_text(text)
    Path(args.json).write_text(json.dumps({"environment": environment, "rows": bench.rows},
                                          indent=1))
    print(text)
    failed = any(row.get("failure") or row.get("fusednn_failure") for row in bench.rows)
    return 1 if failed or any("failure" in key for key in bench.ceilings) else 0


if __name__ == "__main__":
    sys.exit(main())
