# SPDX-License-Identifier: Apache-2.0
"""Writes a golden fixture's input and PyTorch output at one batch as raw float32 files.

    python3 write_golden_io.py IO_SAFETENSORS BATCH OUT_DIR

IO_SAFETENSORS is a fixture's io.safetensors (tests/fixtures/golden/<name>); its tensors
input_b<BATCH> and output_b<BATCH> go to OUT_DIR/input.f32 and OUT_DIR/expected.f32, the files
tests/package/golden_check.c reads. Needs nothing beyond the standard library.
"""
import json
import struct
import sys


def main() -> None:
    path, batch, out = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(path, "rb") as handle:
        header_size = struct.unpack("<Q", handle.read(8))[0]
        header = json.loads(handle.read(header_size))
        data = handle.read()
    for key, name in ((f"input_b{batch}", "input.f32"), (f"output_b{batch}", "expected.f32")):
        entry = header[key]
        if entry["dtype"] != "F32":
            sys.exit(f"{path}: {key} is {entry['dtype']}, not F32")
        begin, end = entry["data_offsets"]
        with open(f"{out}/{name}", "wb") as handle:
            handle.write(data[begin:end])


if __name__ == "__main__":
    main()
