#!/usr/bin/env python3
"""fusednn's CUDA backend against PyTorch on the same weights and inputs, in one run.

For each case: fusednn through the C API (device path: caller's device buffers on a torch stream;
host path: numpy in, numpy out), PyTorch eager, PyTorch captured in a CUDA graph, and
torch.compile(mode="reduce-overhead"). Times are medians over repeated runs of back-to-back calls
timed with CUDA events (host path: wall clock, since each call waits), after warm-up, cycling
through several input/output buffer sets so no call reuses the previous call's inputs. Each case
also checks fusednn's output against PyTorch's (relative error max|a-b|/max|b|).

Writes a markdown section (--markdown) and the raw numbers (--json). Needs torch with CUDA and
libfusednn.so built with the CUDA backend (--library or FUSEDNN_LIBRARY).
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
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
    ]


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
        lib.fdnn_model_run.argtypes = [vp, i64, vp, sz, vp, sz]
        lib.fdnn_context_create.argtypes = [vp, ctypes.POINTER(vp)]
        lib.fdnn_context_destroy.argtypes = [vp]
        lib.fdnn_context_destroy.restype = None
        lib.fdnn_context_run.argtypes = [vp, i64, vp, sz, vp, sz]
        lib.fdnn_context_run_device.argtypes = [vp, i64, vp, sz, vp, sz, vp]
        self.lib = lib

    def check(self, status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what}: {self.lib.fdnn_status_string(status).decode()}: "
                               f"{self.lib.fdnn_last_error_message().decode()}")

    def options(self, max_batch: int, device: int = DEVICE_CUDA, graphs: int = 1) -> Options:
        options = Options()
        self.check(self.lib.fdnn_model_options_init(ctypes.byref(options), ctypes.sizeof(options)),
                   "options_init")
        options.max_batch, options.device, options.cuda_graphs = max_batch, device, graphs
        return options

    def model_from_spec(self, spec: str, weights: dict, max_batch: int, device: int = DEVICE_CUDA,
                        graphs: int = 1) -> ctypes.c_void_p:
        model = ctypes.c_void_p()
        text = spec.encode()
        options = self.options(max_batch, device, graphs)
        self.check(self.lib.fdnn_model_create_from_spec(text, len(text), ctypes.byref(options),
                                                        ctypes.byref(model)), "create_from_spec")
        for name, array in weights.items():
            array = np.ascontiguousarray(array, dtype=np.float32)
            shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
            self.check(self.lib.fdnn_model_set_weight(model, name.encode(), 0,
                                                      array.ctypes.data_as(ctypes.c_void_p),
                                                      shape, array.ndim), f"set_weight {name}")
        return model

    def context(self, model: ctypes.c_void_p) -> ctypes.c_void_p:
        context = ctypes.c_void_p()
        self.check(self.lib.fdnn_context_create(model, ctypes.byref(context)), "context_create")
        return context


# ------------------------------------------------------------------------------------------------
# Timing.


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


# ------------------------------------------------------------------------------------------------
# Cases: a spec, its weights, and the same function in PyTorch.


def linear_spec(name: str, input_width: int, layers: list) -> str:
    parts = []
    for index, (i, o, act) in enumerate(layers):
        parts.append({"type": "Linear", "name": f"fc{index}", "in_features": i, "out_features": o})
        if act:
            parts.append(act)
    return json.dumps({"fusednn": 1, "name": name, "input": {"shape": [input_width]},
                       "layers": parts})


def mlp_case(name: str, layers: list, torch_act) -> tuple:
    generator = torch.Generator().manual_seed(0)
    weights, params = {}, []
    for index, (i, o, _) in enumerate(layers):
        bound = 1.0 / i ** 0.5
        w = (torch.rand(o, i, generator=generator) * 2 - 1) * bound
        b = (torch.rand(o, generator=generator) * 2 - 1) * bound
        weights[f"fc{index}.weight"], weights[f"fc{index}.bias"] = w.numpy(), b.numpy()
        params.append((w.cuda(), b.cuda(), torch_act[index]))

    def forward(x):
        for w, b, act in params:
            x = F.linear(x, w, b)
            if act is not None:
                x = act(x)
        return x

    return linear_spec(name, layers[0][0], layers), weights, forward


def lenet_case() -> tuple:
    generator = torch.Generator().manual_seed(1)
    shapes = {"c1.weight": (6, 1, 5, 5), "c1.bias": (6,), "c2.weight": (16, 6, 5, 5),
              "c2.bias": (16,), "f1.weight": (120, 400), "f1.bias": (120,),
              "f2.weight": (84, 120), "f2.bias": (84,), "f3.weight": (10, 84), "f3.bias": (10,)}
    weights = {k: (torch.randn(*s, generator=generator) * 0.2) for k, s in shapes.items()}
    t = {k: v.cuda() for k, v in weights.items()}
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

    def forward(x):
        x = F.avg_pool2d(torch.tanh(F.conv2d(x, t["c1.weight"], t["c1.bias"], padding=2)), 2)
        x = F.avg_pool2d(torch.tanh(F.conv2d(x, t["c2.weight"], t["c2.bias"])), 2).flatten(1)
        x = torch.tanh(F.linear(x, t["f1.weight"], t["f1.bias"]))
        x = torch.tanh(F.linear(x, t["f2.weight"], t["f2.bias"]))
        return F.linear(x, t["f3.weight"], t["f3.bias"])

    return spec, {k: v.numpy() for k, v in weights.items()}, forward


SEED_LAYERS = [(100, 128, {"type": "ReLU"}), (128, 64, {"type": "ReLU"}), (64, 10, None)]


class Bench:
    def __init__(self, lib: Library, compile_budget_s: float) -> None:
        self.lib = lib
        self.stream = torch.cuda.Stream()
        self.rows = []
        self.compile_budget_s = compile_budget_s
        self.compile_spent_s = 0.0

    def run_case(self, label: str, spec: str, weights: dict, forward, batch: int, in_shape: tuple,
                 host_path: bool = False, use_compile: bool = True) -> dict:
        print(f"--- {label}", flush=True)
        row = {"case": label, "batch": batch}
        sets = ROTATING_SETS if batch * int(np.prod(in_shape)) <= (1 << 24) else 2
        generator = torch.Generator(device="cuda").manual_seed(batch)
        inputs = [torch.randn(batch, *in_shape, device="cuda", generator=generator)
                  for _ in range(sets)]
        with torch.no_grad():
            expected = [forward(x) for x in inputs]
        outputs = [torch.full_like(e, float("nan")) for e in expected]
        in_count, out_count = inputs[0].numel(), expected[0].numel()
        calls = calls_for(in_count + out_count)
        stream_handle = ctypes.c_void_p(self.stream.cuda_stream)

        model = self.lib.model_from_spec(spec, weights, batch)
        context = self.lib.context(model)
        run_device = self.lib.lib.fdnn_context_run_device
        in_ptrs = [x.data_ptr() for x in inputs]
        out_ptrs = [y.data_ptr() for y in outputs]

        def fusednn_device(i):
            status = run_device(context, batch, in_ptrs[i % sets], in_count, out_ptrs[i % sets],
                                out_count, stream_handle)
            if status:
                self.lib.check(status, "run_device")

        try:
            with torch.cuda.stream(self.stream):
                for i in range(sets):
                    fusednn_device(i)
            self.stream.synchronize()
            row["error_vs_torch"] = max(relative_error(outputs[i], expected[i])
                                        for i in range(sets))
            row["fusednn_device_us"] = median_us_per_call(fusednn_device, calls, self.stream)
            if host_path:
                host_in = inputs[0].cpu().numpy()
                host_out = np.empty(tuple(expected[0].shape), np.float32)
                run_host = self.lib.lib.fdnn_context_run
                host_in_ptr = host_in.ctypes.data_as(ctypes.c_void_p)
                host_out_ptr = host_out.ctypes.data_as(ctypes.c_void_p)

                def fusednn_host(_):
                    status = run_host(context, batch, host_in_ptr, in_count, host_out_ptr,
                                      out_count)
                    if status:
                        self.lib.check(status, "run")

                row["fusednn_host_us"] = median_wall_us(fusednn_host, calls)
                row["error_host_vs_torch"] = relative_error(torch.from_numpy(host_out).cuda(),
                                                            expected[0])
        finally:
            self.lib.lib.fdnn_context_destroy(context)
            self.lib.lib.fdnn_model_destroy(model)

        with torch.no_grad():
            row["torch_eager_us"] = median_us_per_call(lambda i: forward(inputs[i % sets]), calls,
                                                       self.stream)
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
                row["torch_graph_error"] = str(error)[:200]
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
                    row["torch_compile_error"] = str(error)[:200]
                self.compile_spent_s += time.perf_counter() - t0
            elif use_compile:
                row["torch_compile_error"] = "skipped: compile time budget spent"
        torch.cuda.empty_cache()
        print(json.dumps(row), flush=True)
        self.rows.append(row)
        return row

    def copy_case(self, label: str, count: int) -> None:
        """ReLU + Scale over `count` floats against a device-to-device copy of the same bytes."""
        print(f"--- {label}", flush=True)
        width = 1 << 16
        batch = count // width
        spec = json.dumps({"fusednn": 1, "name": "relu_scale", "input": {"shape": [width]},
                           "layers": [{"type": "ReLU"}, {"type": "Scale", "alpha": 0.5}]})
        row = {"case": label, "batch": batch}
        inputs = [torch.randn(batch, width, device="cuda") for _ in range(2)]
        outputs = [torch.full_like(x, float("nan")) for x in inputs]
        model = self.lib.model_from_spec(spec, {}, batch)
        context = self.lib.context(model)
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
                    row["torch_compile_error"] = str(error)[:200]
                self.compile_spent_s += time.perf_counter() - t0
        del inputs, outputs
        torch.cuda.empty_cache()
        print(json.dumps(row), flush=True)
        self.rows.append(row)

    def cold_start(self) -> None:
        """Create + load + first run, after the CUDA context exists (torch made it)."""
        for name in ("seed_mlp", "lenet5"):
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
                self.lib.check(self.lib.lib.fdnn_model_run(
                    model, 1, x.ctypes.data_as(ctypes.c_void_p), x.size,
                    y.ctypes.data_as(ctypes.c_void_p), out_count), "run")
                samples.append((time.perf_counter() - t0) * 1e3)
                self.lib.lib.fdnn_model_destroy(model)
            row = {"case": f"cold start {name}", "first_ms": samples[0],
                   "repeat_median_ms": statistics.median(samples[1:])}
            print(json.dumps(row), flush=True)
            self.rows.append(row)


def fmt(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def markdown(rows: list, environment: dict) -> str:
    lines = [
        "## CUDA",
        "",
        f"Measured {environment['date']} on {environment['device']} (driver "
        f"{environment['driver']}, CUDA runtime of torch {environment['torch_cuda']}, torch "
        f"{environment['torch']}), by `bench/cuda/bench_cuda.py` (run through "
        "`bench/run_on_gpu.sh`). Microseconds per call, medians of 15 runs of back-to-back calls "
        "timed with CUDA events after warm-up, inputs rotating over several buffer sets; the "
        "host path is wall-clock time of synchronous calls (numpy in, numpy out). fusednn and "
        "PyTorch compute in exact fp32 (TF32 off). `speed-up` is the fastest PyTorch column "
        "over fusednn's device path.",
        "",
        "| case | batch | fusednn device | fusednn host | torch eager | torch CUDA graph | "
        "torch.compile | speed-up | error vs torch |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        if "copy_us" in row:
            continue
        if "first_ms" in row:
            continue
        torch_times = [v for v in (row.get("torch_eager_us"), row.get("torch_graph_us"),
                                   row.get("torch_compile_us")) if v is not None]
        torch_best = min(torch_times) if torch_times else float("nan")
        compile_cell = fmt(row.get("torch_compile_us"))
        if row.get("torch_compile_error"):
            compile_cell = "n/a"
        lines.append(
            f"| {row['case']} | {row['batch']} | {fmt(row.get('fusednn_device_us'))} | "
            f"{fmt(row.get('fusednn_host_us'))} | {fmt(row.get('torch_eager_us'))} | "
            f"{fmt(row.get('torch_graph_us'))} | {compile_cell} | "
            f"{torch_best / row['fusednn_device_us']:.2f}x | {row.get('error_vs_torch', 0):.1e} |")
    for row in rows:
        if "copy_us" in row:
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
        if "first_ms" in row:
            lines.append("")
            lines.append(f"{row['case']} (create from file + load + first run at batch 1, host "
                         f"path, CUDA context already made): first in the process "
                         f"{row['first_ms']:.2f} ms, repeated {row['repeat_median_ms']:.2f} ms "
                         f"(median of 10).")
    for note in environment.get("notes", []):
        lines += ["", note]
    return "\n".join(lines) + "\n"


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

    bench = Bench(lib, args.compile_budget)
    bench.cold_start()
    seed_spec, seed_weights, seed_forward = mlp_case("seed_mlp", SEED_LAYERS,
                                                     [torch.relu, torch.relu, None])
    bench.run_case("seed MLP 100-128-64-10", seed_spec, seed_weights, seed_forward, 1, (100,),
                   host_path=True)
    bench.run_case("seed MLP 100-128-64-10", seed_spec, seed_weights, seed_forward, 1024, (100,),
                   host_path=True, use_compile=False)
    bench.run_case("seed MLP 100-128-64-10", seed_spec, seed_weights, seed_forward, 16384, (100,))
    bench.run_case("seed MLP 100-128-64-10", seed_spec, seed_weights, seed_forward, 262144,
                   (100,), use_compile=False)
    gelu = lambda x: F.gelu(x, approximate="tanh")  # noqa: E731
    gelu_spec, gelu_weights, gelu_forward = mlp_case(
        "linear_gelu", [(768, 3072, {"type": "GELU", "approximate": "tanh"})], [gelu])
    bench.run_case("Linear 768->3072 + GELU(tanh)", gelu_spec, gelu_weights, gelu_forward, 32,
                   (768,))
    lenet_spec, lenet_weights, lenet_forward = lenet_case()
    bench.run_case("LeNet-5", lenet_spec, lenet_weights, lenet_forward, 1, (1, 28, 28),
                   use_compile=False)
    bench.run_case("LeNet-5", lenet_spec, lenet_weights, lenet_forward, 1024, (1, 28, 28),
                   use_compile=False)
    bench.copy_case("ReLU + Scale over 2^26 floats", 1 << 26)

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
        "notes": [],
    }
    if args.latency_json and Path(args.latency_json).exists():
        for line in Path(args.latency_json).read_text().splitlines():
            if not line.strip().startswith("{"):
                continue
            item = json.loads(line)
            if "floor" in item:
                environment["notes"].append(
                    f"Floor of this machine (bench/cuda/launch_floor.cu), {item['floor']}: "
                    f"{item['per_call_us']:.2f} us per call, host submits in "
                    f"{item['submit_us']:.2f} us.")
            elif "model" in item:
                environment["notes"].append(
                    f"C++ loop, no Python (bench/cuda/device_latency.cpp), "
                    f"{Path(item['model']).parent.name} batch {item['batch']}, "
                    f"cuda_graphs={item['cuda_graphs']}, {item.get('buffer_sets', 8)} buffer "
                    f"set(s): device path {item['device_path_us']:.2f} us per call (host submits "
                    f"in {item['device_path_submit_us']:.2f} us), host path "
                    f"{item['host_path_us']:.2f} us.")
    text = markdown(bench.rows, environment)
    Path(args.markdown).write_text(text)
    Path(args.json).write_text(json.dumps({"environment": environment, "rows": bench.rows},
                                          indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
