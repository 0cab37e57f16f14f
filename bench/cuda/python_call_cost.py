# SPDX-License-Identifier: Apache-2.0

"""What a call costs through each Python path, at small batches where the host paces the stream.

On the GPU machine, in one process and on the same buffers, for each model and batch: the C
function through bare ctypes (what bench_cuda.py times), the binding's Context.run_device with
torch tensors, and a BoundRun (Context.bind_device). Each row gives CUDA-event time per call
over back-to-back calls on one stream (median of 7) and the host's submit time per call. Also
the cost of a bare 7-argument ctypes call into a no-op C function, and of torch's
__cuda_array_interface__. Prints JSON lines.

    python3 bench/cuda/python_call_cost.py --library build-gpu/src/api/libfusednn.so
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, List, Tuple

ROOT = Path(__file__).resolve().parents[2]
CALLS = 2000
REPEATS = 7


def per_call(enqueue: Callable[[int], None], stream: Any, torch: Any) -> Tuple[float, float]:
    """(events us, host submit us) per call: medians over REPEATS rounds of CALLS calls."""
    device, submit = [], []
    with torch.cuda.stream(stream):
        for i in range(CALLS // 4):
            enqueue(i)
        stream.synchronize()
        for _ in range(REPEATS):
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record(stream)
            t0 = time.perf_counter()
            for i in range(CALLS):
                enqueue(i)
            t1 = time.perf_counter()
            stop.record(stream)
            stop.synchronize()
            device.append(start.elapsed_time(stop) * 1000.0 / CALLS)
            submit.append((t1 - t0) * 1e6 / CALLS)
    return round(statistics.median(device), 3), round(statistics.median(submit), 3)


def bare_ctypes_us() -> float:
    """Host time of a 7-argument ctypes call (the device run's signature) into a no-op."""
    with tempfile.TemporaryDirectory() as folder:
        source, library = Path(folder) / "noop.c", Path(folder) / "libnoop.so"
        source.write_text("#include <stddef.h>\n#include <stdint.h>\n"
                          "int noop(void* c, int64_t b, const void* x, size_t xc, void* y, "
                          "size_t yc, void* s) { return 0; }\n")
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", str(source), "-o", str(library)],
                       check=True)
        noop = ctypes.CDLL(str(library)).noop
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        noop.argtypes = [vp, ctypes.c_int64, vp, sz, vp, sz, vp]
        context, stream = vp(1), vp(2)
        samples = []
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            for _ in range(CALLS * 10):
                noop(context, 1, 0x7F0000001000, 100, 0x7F0000002000, 10, stream)
            samples.append((time.perf_counter() - t0) * 1e6 / (CALLS * 10))
        return round(statistics.median(samples), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", default=str(ROOT / "build-gpu/src/api/libfusednn.so"))
    args = parser.parse_args()
    os.environ["FUSEDNN_LIBRARY"] = str(Path(args.library).resolve())
    sys.path.insert(0, str(ROOT / "bindings/python/src"))
    import torch
    import fusednn

    torch.zeros(1, device="cuda")
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "fusednn": fusednn.version()}))
    print(json.dumps({"path": "bare ctypes call, 7 arguments, no-op",
                      "submit_us": bare_ctypes_us()}))

    stream = torch.cuda.Stream()
    probe = torch.empty(1, device="cuda")
    samples = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(CALLS):
            probe.__cuda_array_interface__
        samples.append((time.perf_counter() - t0) * 1e6 / CALLS)
    print(json.dumps({"path": "torch __cuda_array_interface__ read",
                      "submit_us": round(statistics.median(samples), 3)}))

    vp, i64, sz = ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t
    for name, batch in (("seed_mlp", 1), ("seed_mlp", 32), ("lenet5", 1), ("linear_gelu", 32)):
        path = ROOT / "tests/fixtures/golden" / name / "model.safetensors"
        model = fusednn.Model.from_file(path, device="cuda", max_batch=batch)
        context = model.create_context()
        shape_in, shape_out = model.input_shape, model.output_shape
        xs = [torch.randn((batch,) + shape_in, device="cuda") for _ in range(8)]
        ys = [torch.empty((batch,) + shape_out, device="cuda") for _ in range(8)]
        in_count, out_count = xs[0].numel(), ys[0].numel()
        raw = context._library.cdll["fdnn_context_run_device"]
        raw.argtypes = [vp, i64, vp, sz, vp, sz, vp]
        handle = ctypes.cast(context._handle, vp)
        stream_handle = vp(stream.cuda_stream)
        x_pointers = [x.data_ptr() for x in xs]
        y_pointers = [y.data_ptr() for y in ys]
        bound = [context.bind_device(xs[i], ys[i], stream) for i in range(8)]

        def bare(i: int) -> None:
            raw(handle, batch, x_pointers[i & 7], in_count, y_pointers[i & 7], out_count,
                stream_handle)

        def binding(i: int) -> None:
            context.run_device(xs[i & 7], ys[i & 7], stream)

        def bound_run(i: int) -> None:
            bound[i & 7]()

        rows: List[Tuple[str, Callable[[int], None]]] = [
            ("bare ctypes fdnn_context_run_device", bare),
            ("Context.run_device, torch tensors", binding),
            ("BoundRun (Context.bind_device)", bound_run)]
        for label, enqueue in rows:
            events_us, submit_us = per_call(enqueue, stream, torch)
            print(json.dumps({"model": name, "batch": batch, "path": label,
                              "per_call_us": events_us, "submit_us": submit_us}))
        expected = model.run(xs[3].cpu().numpy())
        error = float((torch.from_numpy(expected).cuda() - ys[3]).abs().max()
                      / max(float(abs(expected).max()), 1e-30))
        print(json.dumps({"model": name, "batch": batch, "max_relative_error": error}))
        for run in bound:
            run.close()
        context.close()
        model.close()


if __name__ == "__main__":
    main()
