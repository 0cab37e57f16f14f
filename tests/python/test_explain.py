# SPDX-License-Identifier: Apache-2.0

"""Model.explain / Model.explain_text on the CPU backend: the plan's steps, forms, fused
activations and costs, checked against figures worked out by hand from the seed MLP's sizes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import fusednn
from conftest import GOLDEN

pytestmark = pytest.mark.usefixtures("native")

SEED_MLP = GOLDEN / "seed_mlp"


def seed_mlp(max_batch: int = 64) -> fusednn.Model:
    return fusednn.Model.from_file(SEED_MLP / "model.safetensors", max_batch=max_batch,
                                   cpu_threads=1)


def test_explain_lists_the_seed_mlp_steps_with_hand_worked_costs() -> None:
    with seed_mlp() as model:
        document = model.explain(16)
    assert document["device"] == "cpu" and document["precision"] == "fp32"
    assert document["batch"] == 16 and document["max_batch"] == 64
    steps = document["steps"]
    assert [step["kinds"] for step in steps] == [["Linear"], ["Linear"], ["Linear"]]
    assert [step["fused_activations"] for step in steps] == [["ReLU"], ["ReLU"], []]
    # 16 rows on one thread: the packed GEMM (from 4 rows).
    assert all(step["form"].startswith("packed GEMM") for step in steps), steps
    # FLOPs per sample: 2 x in x out per layer, plus one per output for each ReLU.
    expected = [2 * 100 * 128 + 128, 2 * 128 * 64 + 64, 2 * 64 * 10]
    assert [step["flops_per_sample"] for step in steps] == expected
    assert [step["flops"] for step in steps] == [16 * f for f in expected]
    assert document["totals"]["flops_per_sample"] == sum(expected)
    # Weights (W and b, float32) read once a run; activations in and out per sample.
    assert [step["weight_bytes"] for step in steps] == [
        4 * (128 * 100 + 128), 4 * (64 * 128 + 64), 4 * (10 * 64 + 10)]
    assert [step["activation_bytes_per_sample"] for step in steps] == [
        4 * (100 + 128), 4 * (128 + 64), 4 * (64 + 10)]
    assert steps[0]["bytes"] == 16 * 4 * (100 + 128) + 4 * (128 * 100 + 128)
    assert steps[0]["output"]["storage"] == "workspace"
    assert steps[0]["output"]["slot_bytes_per_sample"] >= 4 * 128
    assert steps[2]["output"]["storage"] == "output"


def test_few_rows_take_dot_products() -> None:
    with seed_mlp() as model:
        steps = model.explain(1)["steps"]
    assert all(step["form"].startswith("dot products") for step in steps), steps
    assert "fewer than 4" in steps[0]["reason"]


def test_explain_text_is_the_cli_table() -> None:
    with seed_mlp() as model:
        text = model.explain_text(8)
    for expected in ("batch 8 (max 64)", "packed GEMM", "fused: ReLU", "why: 8 rows", "total: "):
        assert expected in text, text


def test_explain_works_before_weights_and_freezes_nothing() -> None:
    spec = (SEED_MLP / "spec.json").read_text()
    with fusednn.Model.from_spec(spec, max_batch=8, cpu_threads=1) as model:
        assert len(model.explain(4)["steps"]) == 3
        model.load_weights(SEED_MLP / "model.safetensors")  # still accepted
        model.validate()


def test_explain_rejects_a_bad_batch() -> None:
    with seed_mlp(max_batch=8) as model:
        with pytest.raises(fusednn.InvalidArgumentError, match="batch is 9"):
            model.explain(9)
        with pytest.raises(fusednn.InvalidArgumentError, match="batch is 0"):
            model.explain_text(0)
        with pytest.raises(TypeError, match="batch must be an int"):
            model.explain(2.0)  # type: ignore[arg-type]
