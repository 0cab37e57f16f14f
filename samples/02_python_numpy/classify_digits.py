#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""02_python_numpy: classify handwritten digits with fusednn from Python and numpy.

Loads the two bundled models (models/digits/mlp.safetensors and lenet5.safetensors: spec and
weights in one file each), classifies the 360 held-out digits of models/digits/test_slice.npz
(a numpy .npz archive) in one batch, and checks every prediction against the predictions PyTorch
made with the same weights, recorded in models/digits/pytorch_results.json. It also runs a few
samples one at a time through a Context and shows how a failure is reported.

No torch is needed: only numpy and the fusednn package with its library (the package finds it
through FUSEDNN_LIBRARY, a copy bundled in the wheel, or the system loader).

    python3 samples/02_python_numpy/classify_digits.py [--digits models/digits]

Exit status 0 when every prediction matches PyTorch's, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]

try:
    import fusednn
except ImportError:  # not installed: use the package in this checkout
    sys.path.insert(0, str(REPO / "bindings" / "python" / "src"))
    import fusednn


def classify(name: str, record: dict, digits: Path, data: np.lib.npyio.NpzFile) -> int:
    """Runs one model over the test slice; returns the number of failed checks."""
    images = data[record["input"]]  # float32, (360, 64) for the MLP, (360, 1, 28, 28) for LeNet-5
    labels = data["labels"]
    expected = np.asarray(record["predictions"])

    with fusednn.Model.from_file(digits / record["bundle"], max_batch=len(images)) as model:
        print(f"{name}: {model.input_shape} -> {model.output_shape} on {model.device}, "
              f"{model.memory_info.parameter_count} parameters")

        # One batch of 360 samples: a (360, *input_shape) float32 array in, (360, 10) out.
        logits = model.run(images)
        predictions = logits.argmax(axis=1)

        # A Context is one thread's scratch memory: no allocation per run. Single samples
        # (shape input_shape, no batch axis) come back without a batch axis too.
        with model.create_context() as context:
            single = np.stack([context.run(images[i]) for i in range(16)])
        same_as_batch = np.allclose(single, logits[:16], rtol=1e-5, atol=1e-6)

    disagreements = int((predictions != expected).sum())
    correct = int((predictions == labels).sum())
    print(f"  accuracy {correct}/{len(labels)} (PyTorch: {record['correct']}/{record['count']}), "
          f"predictions differing from PyTorch's: {disagreements}, "
          f"one-at-a-time runs equal the batch: {same_as_batch}")
    failures = 0
    if disagreements:
        print(f"  MISMATCH at samples {np.flatnonzero(predictions != expected)[:10].tolist()}")
        failures += 1
    if correct != record["correct"]:
        failures += 1
    if not same_as_batch:
        failures += 1
    return failures


def show_error_handling() -> int:
    """A failing call raises a FusednnError subclass carrying .status and .message."""
    try:
        fusednn.Model.from_file("no-such-model.safetensors")
    except fusednn.FileError as error:
        print(f"bad call: Model.from_file('no-such-model.safetensors') raised "
              f"{type(error).__name__}\n  status: {error.status!r}\n  message: {error.message}")
        return 0 if error.status == fusednn.Status.IO_ERROR and error.message else 1
    print("a missing file raised nothing")
    return 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--digits", type=Path, default=REPO / "models" / "digits",
                        help="folder with the bundles, test_slice.npz and pytorch_results.json")
    args = parser.parse_args()

    print(f"fusednn {fusednn.version()} from {fusednn.library_path()}")
    results = json.loads((args.digits / "pytorch_results.json").read_text())
    failures = 0
    with np.load(args.digits / "test_slice.npz") as data:
        for name in ("mlp", "lenet5"):
            failures += classify(name, results["models"][name], args.digits, data)
    failures += show_error_handling()

    if failures:
        print(f"FAIL: {failures} check(s) failed", file=sys.stderr)
        return 1
    print("PASS: 02_python_numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
