#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""Train the two digits models of the demo and write them as fusednn bundles.

Needs torch and scikit-learn (its bundled 8x8 digits, no download). Run once from anywhere:

    python3 models/digits/train.py

and commit what it writes next to this script:

    mlp.safetensors         64-64-32-10 MLP on the flattened 8x8 images (bundle)
    lenet5.safetensors      classic LeNet-5 on the images resized to 1x28x28 (bundle)
    test_slice.npz          the held-out slice: mlp_images (N, 64), lenet5_images (N, 1, 28, 28),
                            labels (N,), indices (N,) into load_digits()
    pytorch_results.json    PyTorch's accuracy and predictions on that slice, per model

Seeds and the split are fixed; training runs on the CPU on one thread in float32.
tools/demo_digits.py runs the bundles through fusednn and compares with pytorch_results.json.
"""

from __future__ import annotations

import json
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Dict, Tuple

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

try:
    import fusednn.export as fexport
except ImportError:
    sys.path.insert(0, str(REPO / "bindings" / "python" / "src"))
    import fusednn.export as fexport

import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

SEED = 20240601
TEST_SIZE = 360  # of 1797 images: 20 %
LENET_SIZE = 28


def mlp() -> nn.Module:
    return nn.Sequential(OrderedDict([
        ("fc1", nn.Linear(64, 64)), ("relu1", nn.ReLU()), ("dropout", nn.Dropout(0.1)),
        ("fc2", nn.Linear(64, 32)), ("relu2", nn.ReLU()),
        ("fc3", nn.Linear(32, 10)),
    ]))


def lenet5() -> nn.Module:
    return nn.Sequential(OrderedDict([
        ("features", nn.Sequential(
            nn.Conv2d(1, 6, kernel_size=5, padding=2), nn.Tanh(), nn.AvgPool2d(2),
            nn.Conv2d(6, 16, kernel_size=5), nn.Tanh(), nn.AvgPool2d(2),
        )),
        ("flatten", nn.Flatten()),
        ("classifier", nn.Sequential(
            nn.Linear(400, 120), nn.Tanh(),
            nn.Linear(120, 84), nn.Tanh(),
            nn.Linear(84, 10),
        )),
    ]))


def load_split() -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(images in [0, 1] as (N, 8, 8) float32, labels, train indices, test indices)."""
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(SEED).permutation(len(labels))
    return images, labels, np.sort(order[TEST_SIZE:]), np.sort(order[:TEST_SIZE])


def mlp_inputs(images: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(images.reshape(len(images), 64).copy())


def lenet_inputs(images: np.ndarray) -> torch.Tensor:
    small = torch.from_numpy(images[:, None, :, :].copy())
    return F.interpolate(small, size=(LENET_SIZE, LENET_SIZE), mode="bilinear",
                         align_corners=False).contiguous()


def train(model: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int, lr: float,
          seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=generator)
        for start in range(0, len(y), 64):
            batch = order[start:start + 64]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x[batch]), y[batch])
            loss.backward()
            optimizer.step()
    model.eval()


def evaluate(model: nn.Module, x: torch.Tensor, labels: np.ndarray) -> Dict[str, object]:
    with torch.no_grad():
        logits = model(x)
    top2 = torch.topk(logits, 2, dim=1).values
    predictions = logits.argmax(dim=1).numpy()
    correct = int((predictions == labels).sum())
    return {
        "accuracy": correct / len(labels),
        "correct": correct,
        "count": len(labels),
        # The smallest gap between the two best logits: how close a prediction comes to a tie.
        "min_top2_margin": float((top2[:, 0] - top2[:, 1]).min()),
        "predictions": [int(p) for p in predictions],
    }


def main() -> int:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    images, labels, train_idx, test_idx = load_split()
    y_train = torch.from_numpy(labels[train_idx])

    results: Dict[str, Dict[str, object]] = {}
    inputs = {"mlp": mlp_inputs(images), "lenet5": lenet_inputs(images)}
    plans = {"mlp": (mlp, 60, 3e-3), "lenet5": (lenet5, 30, 2e-3)}
    for name, (make, epochs, lr) in plans.items():
        torch.manual_seed(SEED)
        model = make()
        x = inputs[name]
        train(model, x[train_idx], y_train, epochs, lr, SEED)
        input_shape = tuple(x.shape[1:])
        fexport.save_bundle(model, HERE / f"{name}.safetensors", input_shape,
                            name=f"digits_{name}")
        results[name] = {"bundle": f"{name}.safetensors", "input": f"{name}_images",
                         "input_shape": list(input_shape), "epochs": epochs,
                         **evaluate(model, x[test_idx], labels[test_idx])}
        print(f"{name}: accuracy {results[name]['accuracy']:.4f} "
              f"({results[name]['correct']}/{len(test_idx)})")

    np.savez_compressed(HERE / "test_slice.npz",
                        mlp_images=inputs["mlp"][test_idx].numpy(),
                        lenet5_images=inputs["lenet5"][test_idx].numpy(),
                        labels=labels[test_idx], indices=test_idx.astype(np.int64))
    summary = {
        "dataset": "sklearn.datasets.load_digits (8x8, values / 16)",
        "seed": SEED,
        "train_count": int(len(train_idx)),
        "test_count": int(len(test_idx)),
        "torch": torch.__version__,
        "models": results,
    }
    (HERE / "pytorch_results.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
