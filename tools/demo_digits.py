#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""Classify the held-out digits with fusednn and compare with PyTorch.

Loads models/digits/mlp.safetensors and lenet5.safetensors through the fusednn Python binding
(device "auto": the GPU when there is one, else the CPU), classifies the test slice written by
models/digits/train.py, and prints for each model its accuracy next to the accuracy PyTorch
recorded, how many predictions disagree with PyTorch's, and the median latency of a run of one
sample and of the whole slice. Exits 1 when an accuracy differs or any prediction disagrees.

Needs numpy and the fusednn package (taken from bindings/python/src when not installed); no
torch. The library is found as the package finds it (FUSEDNN_LIBRARY, a bundled copy, the system
loader); when none is found, the newest libfusednn.so under <repo>/build*/ is used.

    python3 tools/demo_digits.py [--device auto|cpu|cuda] [--repeats 200] [--library PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DIGITS = REPO / "models" / "digits"
MODELS = ("mlp", "lenet5")

try:
    import fusednn
except ImportError:
    sys.path.insert(0, str(REPO / "bindings" / "python" / "src"))
    import fusednn


def ensure_library(explicit: str) -> None:
    """Point FUSEDNN_LIBRARY at --library, or at a local build when nothing else is found."""
    if explicit:
        os.environ[fusednn.ENV_LIBRARY] = explicit
        return
    try:
        fusednn.version()
        return
    except fusednn.LibraryNotFoundError as not_found:
        built = [p for p in REPO.glob("build*/**/libfusednn.so") if p.is_file()]
        if not built:
            raise SystemExit(f"error: {not_found}") from None
        os.environ[fusednn.ENV_LIBRARY] = str(max(built, key=lambda p: p.stat().st_mtime))


def median_seconds(function: Callable[[], object], repeats: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        function()
    times: List[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def format_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    return f"{seconds * 1e3:.2f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--repeats", type=int, default=200,
                        help="timed runs per latency figure (whole-slice runs use a fifth)")
    parser.add_argument("--library", default="", help="path of libfusednn.so to load")
    args = parser.parse_args()

    ensure_library(args.library)
    slice_ = np.load(DIGITS / "test_slice.npz")
    pytorch = json.loads((DIGITS / "pytorch_results.json").read_text())
    labels = slice_["labels"]
    count = len(labels)
    print(f"fusednn {fusednn.version()} ({fusednn.library_path()})")
    print(f"digits test slice: {count} images (sklearn load_digits, seed {pytorch['seed']}); "
          f"PyTorch {pytorch['torch']}")

    rows: Dict[str, Dict[str, object]] = {}
    failed = False
    for name in MODELS:
        recorded = pytorch["models"][name]
        images = np.ascontiguousarray(slice_[recorded["input"]], dtype=np.float32)
        with fusednn.Model.from_file(DIGITS / recorded["bundle"], device=args.device,
                                     max_batch=max(count, 1)) as model:
            predictions = model.run(images).argmax(axis=1)
            one = np.ascontiguousarray(images[:1])
            latency_one = median_seconds(lambda: model.run(one), args.repeats)
            latency_all = median_seconds(lambda: model.run(images), max(args.repeats // 5, 5))
            device = model.device
        accuracy = float((predictions == labels).mean())
        disagree = int((predictions != np.asarray(recorded["predictions"])).sum())
        same_accuracy = int((predictions == labels).sum()) == recorded["correct"]
        failed |= disagree > 0 or not same_accuracy
        rows[name] = {"device": device, "accuracy": accuracy, "pytorch": recorded["accuracy"],
                      "disagree": disagree, "one": latency_one, "all": latency_all,
                      "ok": disagree == 0 and same_accuracy}

    header = (f"{'model':<8} {'device':<6} {'fusednn acc':>11} {'pytorch acc':>11} "
              f"{'disagree':>10} {'p50 batch 1':>12} {f'p50 batch {count}':>14}")
    print(header)
    print("-" * len(header))
    for name, row in rows.items():
        print(f"{name:<8} {row['device']:<6} {row['accuracy']:>11.2%} {row['pytorch']:>11.2%} "
              f"{str(row['disagree']) + '/' + str(count):>10} {format_time(row['one']):>12} "
              f"{format_time(row['all']):>14}  {'ok' if row['ok'] else 'MISMATCH'}")
    if failed:
        print("FAIL: fusednn's predictions differ from PyTorch's", file=sys.stderr)
        return 1
    print("OK: fusednn matches PyTorch on every sample")
    return 0


if __name__ == "__main__":
    sys.exit(main())
