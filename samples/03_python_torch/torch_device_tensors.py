#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""03_python_torch: run fusednn on CUDA torch tensors, zero-copy, on torch's stream.

Context.run_device() takes CUDA torch tensors (or any object exposing ``__cuda_array_interface__``,
a CuPy or Numba array) and hands their device pointers to fdnn_context_run_device(): the input is
read and the output written where torch allocated them, with no copy through the host, and the
work is queued on the CUDA stream given (here a torch stream), so it is ordered with torch's own
kernels before and after it. For a loop over the same buffers, Context.bind_device() checks them
once and returns a run to call per sample.

The sample classifies the 360 held-out digits of models/digits/test_slice.npz with both bundled
models on the GPU and checks every prediction against the ones PyTorch recorded in
models/digits/pytorch_results.json, and the logits against fusednn's CPU backend.

It skips (prints a line starting with "SKIP:" and exits 0) when torch is not installed, when
torch sees no GPU, or when fdnn_cuda_device_count() is 0 (a CPU-only libfusednn).

    python3 samples/03_python_torch/torch_device_tensors.py [--digits models/digits]

Exit status 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def skip(reason: str) -> int:
    print(f"SKIP: {reason}")
    return 0


def classify_on_gpu(name: str, record: dict, digits: Path, images_host: np.ndarray) -> int:
    """Runs one model on device tensors; returns the number of failed checks."""
    import torch

    import fusednn

    count = len(images_host)
    expected = torch.tensor(record["predictions"], device="cuda")
    with fusednn.Model.from_file(digits / record["bundle"], device="cuda",
                                 max_batch=count) as model:
        images = torch.from_numpy(images_host).to("cuda")  # (360, *input_shape), float32
        logits = torch.empty((count,) + model.output_shape, dtype=torch.float32, device="cuda")
        address_before = logits.data_ptr()

        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())  # the upload above is done first
        with model.create_context() as context:
            with torch.cuda.stream(stream):
                # Queued on `stream`; returns at once. torch's argmax follows on the same stream.
                context.run_device(images, logits, stream=stream)
                predictions = logits.argmax(dim=1)
            # A context must not be destroyed while its work is in flight: wait for the stream.
            stream.synchronize()

    in_place = logits.data_ptr() == address_before
    disagreements = int((predictions != expected).sum().item())

    # The same model on the CPU backend: the GPU's logits must agree closely.
    with fusednn.Model.from_file(digits / record["bundle"], max_batch=count) as cpu_model:
        cpu_logits = cpu_model.run(images_host)
    gpu_logits = logits.cpu().numpy()
    scale = float(np.abs(cpu_logits).max())
    difference = float(np.abs(gpu_logits - cpu_logits).max()) / scale

    print(f"{name}: {count} samples on the GPU; written in place: {in_place}; predictions "
          f"differing from PyTorch's: {disagreements}; largest difference from the CPU "
          f"backend: {difference:.2e} of the largest logit")
    failures = 0
    if disagreements:
        failures += 1
    failures += classify_one_at_a_time(name, record, digits, images_host[:32], expected[:32])
    if not in_place:
        failures += 1
    if not difference <= 1e-4:
        failures += 1
    return failures


def classify_one_at_a_time(name: str, record: dict, digits: Path, images_host: np.ndarray,
                           expected: "torch.Tensor") -> int:
    """A serving loop at batch 1: the input and output tensors are bound once
    (Context.bind_device), then each sample is copied into the bound input and the bound run
    queued, all on one stream. Returns 1 if a prediction differs from PyTorch's, else 0."""
    import torch

    import fusednn

    with fusednn.Model.from_file(digits / record["bundle"], device="cuda", max_batch=1) as model:
        images = torch.from_numpy(images_host).to("cuda")
        x = torch.empty(model.input_shape, dtype=torch.float32, device="cuda")  # one sample
        y = torch.empty(model.output_shape, dtype=torch.float32, device="cuda")
        predictions = torch.empty(len(images), dtype=torch.int64, device="cuda")
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with model.create_context() as context, torch.cuda.stream(stream):
            with context.bind_device(x, y, stream=stream) as run:  # checked here, once
                for i in range(len(images)):
                    x.copy_(images[i])  # on `stream`, before the run that reads it
                    run()
                    predictions[i] = y.argmax()
            stream.synchronize()
    disagreements = int((predictions != expected).sum().item())
    print(f"{name}: {len(images)} samples one at a time through a BoundRun; predictions "
          f"differing from PyTorch's: {disagreements}")
    return 1 if disagreements else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--digits", type=Path, default=REPO / "models" / "digits",
                        help="folder with the bundles, test_slice.npz and pytorch_results.json")
    args = parser.parse_args()

    try:
        import torch
    except ImportError:
        return skip("torch is not installed (pip install torch)")
    try:
        import fusednn
    except ImportError:  # not installed: use the package in this checkout
        sys.path.insert(0, str(REPO / "bindings" / "python" / "src"))
        import fusednn

    print(f"fusednn {fusednn.version()} from {fusednn.library_path()}; torch {torch.__version__}")
    if fusednn.cuda_device_count() == 0:
        return skip("fdnn_cuda_device_count() is 0 (libfusednn was built without CUDA, or no "
                    "GPU can be used)")
    if not torch.cuda.is_available():
        return skip("torch sees no GPU (torch.cuda.is_available() is False)")

    results = json.loads((args.digits / "pytorch_results.json").read_text())
    failures = 0
    with np.load(args.digits / "test_slice.npz") as data:
        for name in ("mlp", "lenet5"):
            record = results["models"][name]
            failures += classify_on_gpu(name, record, args.digits, data[record["input"]])

    if failures:
        print(f"FAIL: {failures} check(s) failed", file=sys.stderr)
        return 1
    print("PASS: 03_python_torch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
