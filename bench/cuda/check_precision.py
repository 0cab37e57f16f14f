#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""fusednn's accuracy contract for each precision, checked on the GPU machine.

For every precision (and the fp32 chains on tensor cores, the override fp32_tensor_cores=1), five
models with fresh random weights and inputs for every check: the seed MLP 100-128-64-10, the
64-wide MLP 32-64-64-64-64-16, an MLP off the power-of-two grid (37-200-13-255-5, SiLU, Tanh,
GELU) and LeNet-5, each at batches 1, 33 and 4097, and a convolution too large for the fused
conv + pool kernel (16 -> 32 channels, 3x3 on 60 x 60) at batches 1 and 33. A check runs
fusednn's CPU backend in fp32 (the reference), fusednn's CUDA backend in the precision and
PyTorch on the GPU in the same precision, measures both errors as max|a-b|/max|b| against the
reference, and asserts:

  - fusednn's error <= LIMITS[precision]: tf32 1e-3, fp16 and bf16 1e-2 (issue #4), fp32 1e-5
    (the bound of the CUDA tests);
  - for tf32, fp16 and bf16: fusednn's error <= 2 x PyTorch's error + FLOORS[precision].

Prints one table line per check as it completes and a summary line; exits 1 when a check fails
or breaks, 2 when nothing could run. The seed is new on every run and printed (--seed repeats a
run). A plain script; pytest runs it too (test_precision_contract). Needs torch with CUDA and
libfusednn.so built with the CUDA backend (--library or FUSEDNN_LIBRARY).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_cuda as bench  # noqa: E402 - the benchmark's binding, cases and precision settings

LIMITS = {"fp32": 1e-5, "tf32": 1e-3, "fp16": 1e-2, "bf16": 1e-2}
# The floor added to 2 x PyTorch's error, for checks where PyTorch's error is about 0: cuBLAS's
# gemv kernels (batch 1) and some cuDNN convolution algorithms ignore the TF32 flag and compute in
# fp32, and PyTorch in fp16 or bf16 can land on the reference by luck when a batch has few outputs.
# Against ~0, the rule would demand less than one rounding of the result in the requested format,
# which no kernel that honours the precision can give. The floor is that one rounding: the unit
# roundoff u of the format, the largest relative error of rounding a value to it (2^-11 for tf32
# and fp16, which keep 10 fraction bits; 2^-8 for bf16, which keeps 7). It is under half of each
# limit, so the limits still bind where PyTorch's error is small.
FLOORS = {"tf32": 2.0 ** -11, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
# (label, precision asked of fusednn and PyTorch, knobs set while fusednn creates its model)
VARIANTS = [
    ("fp32", "fp32", {}),
    ("fp32 [fp32_tensor_cores=1]", "fp32", {"fp32_tensor_cores": "1"}),
    ("tf32", "tf32", {}),
    ("fp16", "fp16", {}),
    ("bf16", "bf16", {}),
]
BATCHES = (1, 33, 4097)
OFF_GRID_LAYERS = [(37, 200, {"type": "SiLU"}), (200, 13, {"type": "Tanh"}),
                   (13, 255, {"type": "GELU"}), (255, 5, None)]
# (name, builder(seed) -> (spec, weights, functional), per-sample input shape)
MODELS = [
    ("seed MLP 100-128-64-10",
     lambda seed: bench.mlp_case("seed_mlp", bench.SEED_LAYERS, [torch.relu, torch.relu, None],
                                 seed), (100,)),
    ("MLP 32-64-64-64-64-16",
     lambda seed: bench.mlp_case("mlp64", bench.WIDE64_LAYERS, [torch.relu] * 4 + [None], seed),
     (32,)),
    ("MLP 37-200-13-255-5",
     lambda seed: bench.mlp_case("off_grid", OFF_GRID_LAYERS, [F.silu, torch.tanh, F.gelu, None],
                                 seed), (37,)),
    ("LeNet-5", bench.lenet_case, (1, 28, 28)),
    # Too large for the fused conv + pool kernel: an implicit GEMM on tensor cores.
    ("Conv2d 16->32 3x3 on 60x60",
     lambda seed: bench.conv_case("conv16", 16, 32, 3, 1, 1, 60, seed), (16, 60, 60)),
]
# Batches per model where the CPU reference would take too long at BATCHES' largest.
MODEL_BATCHES = {"Conv2d 16->32 3x3 on 60x60": (1, 33)}


def run_fusednn(lib: bench.Library, spec: str, weights: dict, x: np.ndarray, device: int,
                precision: str) -> tuple:
    """(output, precision the model reports) of one fresh model run on host buffers."""
    model = lib.model_from_spec(spec, weights, x.shape[0], device=device, precision=precision)
    try:
        return lib.run_host(model, x), lib.model_precision(model)
    finally:
        lib.lib.fdnn_model_destroy(model)


def check(lib: bench.Library, variant: tuple, model: tuple, batch: int, seed: int) -> dict:
    label, precision, knobs = variant
    name, build, in_shape = model
    spec, weights, functional = build(2 * seed)
    x = torch.randn(batch, *in_shape, generator=torch.Generator().manual_seed(2 * seed + 1))
    result = {"variant": label, "model": name, "batch": batch, "precision": precision}
    reference, _ = run_fusednn(lib, spec, weights, x.numpy(), bench.DEVICE_CPU, "fp32")
    with bench.environment_knobs(knobs):
        got, result["ran"] = run_fusednn(lib, spec, weights, x.numpy(), bench.DEVICE_CUDA,
                                         precision)
    forward = bench.torch_forward(weights, functional, precision)
    # PyTorch in the precision's dtype takes and returns tensors of that dtype.
    dtype = bench.TORCH_DTYPES.get(precision, torch.float32)
    with torch.no_grad(), bench.torch_precision(precision):
        torch_out = forward(x.cuda().to(dtype)).float().cpu()
    reference = torch.from_numpy(reference)
    result["fusednn_error"] = bench.relative_error(torch.from_numpy(got), reference)
    result["torch_error"] = bench.relative_error(torch_out, reference)
    result["limit"] = LIMITS[precision]
    problems = []
    if not result["fusednn_error"] <= result["limit"]:  # also catches NaN
        problems.append("limit")
    if precision in FLOORS:
        result["bound"] = 2 * result["torch_error"] + FLOORS[precision]
        if not result["fusednn_error"] <= result["bound"]:
            problems.append("2x torch")
    result["result"] = "ok" if not problems else "FAIL (" + ", ".join(problems) + ")"
    return result


def fmt_error(value) -> str:
    return "-" if value is None else f"{value:.2e}"


def table_line(result: dict) -> str:
    return (f"| {result['variant']} | {result['model']} | {result['batch']} | "
            f"{result.get('ran', '-')} | {fmt_error(result.get('fusednn_error'))} | "
            f"{fmt_error(result.get('torch_error'))} | {fmt_error(result.get('limit'))} | "
            f"{fmt_error(result.get('bound'))} | {result['result']} |")


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", default=os.environ.get(
        "FUSEDNN_LIBRARY", str(bench.ROOT / "build-gpu/src/api/libfusednn.so")))
    parser.add_argument("--seed", type=int, default=None,
                        help="repeat a run's random data (default: a new seed, printed)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")

    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.zeros(1, device="cuda")
        lib = bench.Library(args.library)
    except Exception as error:  # noqa: BLE001
        print(f"cannot start: {bench.describe(error)}", flush=True)
        return 2
    print(f"precision contract: seed {seed} (repeat with --seed {seed}); library "
          f"{args.library}; precision option in the library: {lib.has_precision_option}",
          flush=True)
    print("| variant | model | batch | fusednn ran | fusednn error | torch error | limit | "
          "2x torch + floor | result |", flush=True)
    print("|---|---|---:|---|---:|---:|---:|---:|---|", flush=True)
    t0 = time.perf_counter()
    results = []
    for variant in VARIANTS:
        if variant[1] != "fp32" and not lib.has_precision_option:
            result = {"variant": variant[0], "model": "all", "batch": "-",
                      "result": "SKIP (this library has no precision option)"}
            print(table_line(result), flush=True)
            results.append(result)
            continue
        for model in MODELS:
            for batch in MODEL_BATCHES.get(model[0], BATCHES):
                seed += 1
                try:
                    result = check(lib, variant, model, batch, seed)
                except Exception as error:  # noqa: BLE001 - one broken check, the rest still run
                    result = {"variant": variant[0], "model": model[0], "batch": batch,
                              "result": f"ERROR {bench.describe(error)}"}
                print(table_line(result), flush=True)
                results.append(result)
    failed = sum(r["result"].startswith("FAIL") for r in results)
    broken = sum(r["result"].startswith("ERROR") for r in results)
    skipped = sum(r["result"].startswith("SKIP") for r in results)
    print(f"precision contract: {len(results)} checks, {failed} failed, {broken} broken, "
          f"{skipped} skipped ({time.perf_counter() - t0:.1f} s)", flush=True)
    return 1 if failed or broken else 0


def test_precision_contract():
    assert main([]) == 0


if __name__ == "__main__":
    sys.exit(main())
