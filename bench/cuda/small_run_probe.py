# SPDX-License-Identifier: Apache-2.0

"""Where a small run's time goes: the call against the GPU work alone, fusednn and PyTorch.

On the GPU machine, for sweep points given as MODEL/PRECISION/bBATCH (the ids of
`bench/sweep.py --list`), each side in the precision's dtype on one stream:

* fusednn: a BoundRun (Context.bind_device) called back to back: CUDA-event time per call and the
  host's submit time per call; and the GPU time alone, 32 calls captured in one CUDA graph
  (fusednn then adds its kernels to the caller's capture) and the graph replayed.
* PyTorch: the module called back to back (eager), its CUDA graph replayed one call a replay (the
  sweep's "graph" mode), and 32 calls captured in one graph (its GPU time alone).

A call is host-bound where its time is near the submit time and well over the GPU time. Each row
also names the kernels fusednn runs at that batch (Model.explain). Prints one JSON line a point.

    python3 bench/cuda/small_run_probe.py --library build/src/api/libfusednn.so \\
        linear_96x96_relu/fp32/b1 mlp_seed/fp32/b1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "cuda"))
sys.path.insert(0, str(ROOT / "bindings" / "python" / "src"))

CAPTURED = 32  # calls in one graph for the GPU-only times
DTYPES = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def per_call(enqueue: Callable[[], None], stream: Any, torch: Any) -> Tuple[float, float]:
    """(event us, submit us) per call over back-to-back calls (python_call_cost.py's timing)."""
    from python_call_cost import per_call as timed

    return timed(lambda _: enqueue(), stream, torch)


def captured_gpu_us(enqueue: Callable[[], None], stream: Any, torch: Any) -> float:
    """GPU time per call: CAPTURED calls in one CUDA graph, the graph replayed."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        enqueue()  # warm-up outside the capture
        stream.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(CAPTURED):
                enqueue()
        replay, _ = per_call(graph.replay, stream, torch)
    return round(replay / CAPTURED, 3)


def torch_graph_call(module: Any, x: Any, stream: Any, torch: Any) -> Callable[[], None]:
    """One call of the module as a CUDA graph (the sweep's "graph" mode)."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        module(x)
        stream.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            module(x)
    return graph.replay


def kernels(model: Any, batch: int) -> List[str]:
    """The kernel forms fusednn runs at `batch`, as explain names them."""
    document = model.explain(batch)
    return [str(step.get("form", "?")) for step in document.get("steps", [])]


def probe_point(point: str, specs: Dict[str, Any], work: Path) -> Dict[str, Any]:
    import fusednn
    import fusednn.export
    import torch
    from bench_cuda import torch_precision

    name, precision, batch_text = point.split("/")
    batch = int(batch_text.lstrip("b"))
    spec = specs[name]
    dtype = getattr(torch, DTYPES[precision])
    cpu_module = spec.build()
    bundle = work / f"{name}.safetensors"
    if not bundle.exists():
        fusednn.export.save_bundle(cpu_module, bundle, spec.input_shape, name=name)
    module = cpu_module.to("cuda", dtype)
    x = torch.randn((batch,) + tuple(spec.input_shape), device="cuda").to(dtype)
    stream = torch.cuda.Stream()
    row: Dict[str, Any] = {"point": point, "io_dtype": DTYPES[precision]}
    with torch_precision(precision), torch.no_grad():
        out = module(x)
        with fusednn.Model.from_file(bundle, max_batch=batch, device="cuda",
                                     precision=precision) as model:
            row["kernels"] = kernels(model, batch)
            with model.create_context() as context:
                y = torch.empty_like(out)
                torch.cuda.synchronize()
                with context.bind_device(x, y, stream=stream) as run:
                    row["fusednn_call_us"], row["fusednn_submit_us"] = per_call(run, stream,
                                                                                torch)
                    row["fusednn_gpu_us"] = captured_gpu_us(run, stream, torch)
        row["torch_eager_call_us"], row["torch_eager_submit_us"] = per_call(
            lambda: module(x), stream, torch)
        replay = torch_graph_call(module, x, stream, torch)
        row["torch_graph_call_us"], row["torch_graph_submit_us"] = per_call(replay, stream, torch)
        row["torch_gpu_us"] = captured_gpu_us(lambda: module(x), stream, torch)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", required=True, help="libfusednn.so built with CUDA")
    parser.add_argument("points", nargs="+", help="MODEL/PRECISION/bBATCH, as sweep.py names them")
    args = parser.parse_args()
    os.environ["FUSEDNN_LIBRARY"] = str(Path(args.library).resolve())  # the binding's override
    import sweep

    specs = {spec.name: spec for spec in sweep.model_family()}
    unknown = [p for p in args.points if p.split("/")[0] not in specs]
    if unknown:
        parser.error(f"no such sweep model: {', '.join(unknown)}")
    with tempfile.TemporaryDirectory() as folder:
        for point in args.points:
            try:
                row = probe_point(point, specs, Path(folder))
            except Exception as error:  # noqa: BLE001 - one point's failure is reported
                row = {"point": point, "error": f"{type(error).__name__}: {error}"}
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
