#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""Writes the committed seed corpus of the fuzz harnesses (tests/fuzz/corpus/<harness>/).

Seeds are small valid inputs that reach every layer kind and weight format: the repository's own
specs and bundles, a few tiny bundles made here (one per family of layers), and the tiny_mlp
weights encoded in the record formats of fuzz_weight_directory.cpp and fuzz_set_weight.cpp.
Deterministic (fixed seeds, sorted keys), numpy and the standard library only; rerun after a spec
change and commit the result. Usage: python3 tests/fuzz/make_seed_corpus.py
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FORMATS = REPO / "tests" / "fixtures" / "formats"
GOLDEN = REPO / "tests" / "fixtures" / "golden"
CORPUS = HERE / "corpus"
SPEC_KEY = "fusednn.spec"

# The tiny spec's tensors in the order of tiny_spec.hpp's table (the selector is the index).
TINY_TENSORS = ["fc1.weight", "fc1.bias", "bn.weight", "bn.bias", "bn.running_mean",
                "bn.running_var", "fc2.weight"]
TINY_SHAPES = {"fc1.weight": (3, 4), "fc1.bias": (3,), "bn.weight": (3,), "bn.bias": (3,),
               "bn.running_mean": (3,), "bn.running_var": (3,), "fc2.weight": (2, 3)}


def safetensors_bytes(tensors: Dict[str, np.ndarray], metadata: Dict[str, str]) -> bytes:
    header: Dict[str, object] = {"__metadata__": metadata}
    data = b""
    for name in sorted(tensors):
        raw = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def bundle(spec: Dict[str, object], shapes: Dict[str, Tuple[int, ...]], seed: int) -> bytes:
    random = np.random.default_rng(seed)
    tensors = {}
    for name, shape in shapes.items():
        values = random.standard_normal(shape).astype(np.float32) * 0.5
        if name.endswith("running_var"):
            values = np.abs(values) + 0.5
        tensors[name] = values
    return safetensors_bytes(tensors, {SPEC_KEY: json.dumps(spec, separators=(",", ":"))})


def layer_spec(name: str, shape: List[int], layers: List[Dict[str, object]]) -> Dict[str, object]:
    return {"fusednn": 1, "name": name, "input": {"shape": shape, "dtype": "float32"},
            "layers": layers}


def small_bundles() -> Dict[str, bytes]:
    cnn = layer_spec("small_cnn", [2, 6, 6], [
        {"type": "Conv2d", "name": "conv1", "in_channels": 2, "out_channels": 4, "kernel_size": 3,
         "padding": 1, "groups": 2},
        {"type": "BatchNorm2d", "name": "bn1", "num_features": 4},
        {"type": "ReLU"},
        {"type": "MaxPool2d", "kernel_size": 2, "stride": 2},
        {"type": "Conv2d", "name": "conv2", "in_channels": 4, "out_channels": 4, "kernel_size": 3,
         "padding": 2, "dilation": 2, "bias": False},
        {"type": "AvgPool2d", "kernel_size": 2, "stride": 1},
        {"type": "Flatten"},
        {"type": "Linear", "name": "fc", "in_features": 16, "out_features": 3}])
    cnn_shapes = {"conv1.weight": (4, 1, 3, 3), "conv1.bias": (4,), "bn1.weight": (4,),
                  "bn1.bias": (4,), "bn1.running_mean": (4,), "bn1.running_var": (4,),
                  "conv2.weight": (4, 4, 3, 3), "fc.weight": (3, 16), "fc.bias": (3,)}
    residual = layer_spec("small_residual", [6], [
        {"type": "Linear", "name": "fc1", "in_features": 6, "out_features": 8},
        {"type": "ReLU", "name": "relu"},
        {"type": "Linear", "name": "fc2", "in_features": 8, "out_features": 6},
        {"type": "Add", "name": "add", "inputs": ["fc2", "input"]},
        {"type": "Concat", "name": "cat", "dim": 1, "inputs": ["add", "input"]},
        {"type": "Linear", "name": "head", "in_features": 12, "out_features": 3}])
    residual_shapes = {"fc1.weight": (8, 6), "fc1.bias": (8,), "fc2.weight": (6, 8),
                       "fc2.bias": (6,), "head.weight": (3, 12), "head.bias": (3,)}
    activations = layer_spec("small_activations", [5], [
        {"type": "Linear", "name": "fc", "in_features": 5, "out_features": 6},
        {"type": "GELU", "approximate": "tanh"},
        {"type": "LayerNorm", "name": "norm", "normalized_shape": 6},
        {"type": "SiLU"}, {"type": "Sigmoid"}, {"type": "Tanh"},
        {"type": "LeakyReLU", "negative_slope": 0.1}, {"type": "Scale", "alpha": 2.0},
        {"type": "GELU"}, {"type": "Softmax", "dim": -1}])
    activations_shapes = {"fc.weight": (6, 5), "fc.bias": (6,), "norm.weight": (6,),
                          "norm.bias": (6,)}
    return {"small_cnn.safetensors": bundle(cnn, cnn_shapes, 1),
            "small_residual.safetensors": bundle(residual, residual_shapes, 2),
            "small_activations.safetensors": bundle(activations, activations_shapes, 3)}


def bundled_spec(raw: bytes) -> bytes:
    (length,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + length])["__metadata__"][SPEC_KEY].encode()


def tiny_weights() -> Dict[str, np.ndarray]:
    return {name: np.fromfile(FORMATS / "tiny_mlp_bin" / f"{name}.bin", dtype="<f4")
            for name in TINY_TENSORS}


def weight_directory_seed(extension: str) -> bytes:
    out = b""
    for index, name in enumerate(TINY_TENSORS):
        content = (FORMATS / f"tiny_mlp_{extension}" / f"{name}.{extension}").read_bytes()
        selector = index | (0x10 if extension == "txt" else 0)
        out += struct.pack("<BH", selector, len(content)) + content
    return out


def set_weight_seed(dtype: int) -> bytes:
    """Every tiny tensor set once: [name][dtype][rank][extents][values]."""
    out = b""
    for index, (name, values) in enumerate(tiny_weights().items()):
        shape = TINY_SHAPES[name]
        out += bytes([index, dtype, len(shape)]) + bytes(shape)
        if dtype == 0:
            out += values.astype("<f4").tobytes()
        elif dtype == 1:
            out += values.astype("<f2").tobytes()
        else:
            out += (values.astype("<f4").view("<u4") >> 16).astype("<u2").tobytes()
    return out


def main() -> None:
    shutil.rmtree(CORPUS, ignore_errors=True)
    seeds: Dict[str, Dict[str, bytes]] = {name: {} for name in (
        "fuzz_spec_parser", "fuzz_safetensors", "fuzz_bundle", "fuzz_weight_directory",
        "fuzz_set_weight")}

    bundles = {"tiny_mlp.safetensors": (FORMATS / "tiny_mlp.safetensors").read_bytes()}
    bundles.update(small_bundles())
    seeds["fuzz_bundle"].update(bundles)
    seeds["fuzz_bundle"]["tiny_mlp.json"] = (FORMATS / "tiny_mlp.json").read_bytes()
    seeds["fuzz_safetensors"].update(bundles)
    seeds["fuzz_safetensors"]["dtypes.safetensors"] = (FORMATS / "dtypes.safetensors").read_bytes()

    seeds["fuzz_spec_parser"]["tiny_mlp.json"] = (FORMATS / "tiny_mlp.json").read_bytes()
    for model in sorted(path.parent.name for path in GOLDEN.glob("*/model.safetensors")):
        seeds["fuzz_spec_parser"][f"{model}.json"] = bundled_spec(
            (GOLDEN / model / "model.safetensors").read_bytes())
    for name, raw in small_bundles().items():
        seeds["fuzz_spec_parser"][name.replace(".safetensors", ".json")] = bundled_spec(raw)

    seeds["fuzz_weight_directory"]["tiny_mlp_bin"] = weight_directory_seed("bin")
    seeds["fuzz_weight_directory"]["tiny_mlp_txt"] = weight_directory_seed("txt")
    for dtype, label in ((0, "float32"), (1, "float16"), (2, "bfloat16")):
        seeds["fuzz_set_weight"][f"tiny_mlp_{label}"] = set_weight_seed(dtype)

    total = 0
    for harness, files in seeds.items():
        folder = CORPUS / harness
        folder.mkdir(parents=True)
        for name, raw in sorted(files.items()):
            (folder / name).write_bytes(raw)
            total += len(raw)
    print(f"wrote {sum(len(f) for f in seeds.values())} seeds, {total} bytes, under {CORPUS}")


if __name__ == "__main__":
    main()
