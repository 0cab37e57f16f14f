#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fails when a stage under src/ includes a later stage's header.

Data flows one way (docs/architecture.md): common -> graph -> planner -> backends -> runtime ->
api. A stage's files may include their own stage's headers, an earlier stage's and the public
header (fusednn/); src/api, the argument checks and exception firewall, may include only the
runtime's and common's besides its own.

Inside src/backends/cuda the folders are layered too: device code and the plain types kernels
take (device/) < the CUDA runtime underneath (platform/) < the op families' kernels and plans
(mlp/, conv/, linear/, elementwise/, which may include each other) < running a lowered model
(exec/) < choosing and lowering (selection/) < the backend's entry point at the folder's top. A
folder may include its own and earlier folders' headers; so kernels never see the host-side
selection or the executor. Outside the CUDA backend only its top-level header (cuda_backend.hpp)
is included.

Prints each offending line as path:line: text and exits 1 when there is one, 0 when there is
none, 2 on a usage error.

    python3 tools/check_layering.py [SRC_FOLDER]      (default: the repository's src/)
    python3 tools/check_layering.py --self-test
"""

import os
import re
import sys

STAGES = ["common", "graph", "planner", "backends", "runtime", "api"]
PUBLIC = "fusednn"
# What each stage may include besides itself and the public header.
ALLOWED = {stage: set(STAGES[:index]) for index, stage in enumerate(STAGES)}
ALLOWED["api"] = {"common", "runtime"}

INCLUDE = re.compile(r'^\s*#\s*include\s*"([A-Za-z_]+)/')
CUDA = "backends/cuda"
CUDA_INCLUDE = re.compile(r'^\s*#\s*include\s*"backends/cuda/([^"]*)"')
# The CUDA backend's folders, earliest first; one entry may list folders of the same layer.
CUDA_LAYERS = [["device"], ["platform"], ["mlp", "conv", "linear", "elementwise"], ["exec"],
               ["selection"]]
CUDA_TOP = ""  # the files at src/backends/cuda itself
SUFFIXES = (".h", ".hpp", ".c", ".cpp", ".cu", ".cuh")


def cuda_allowed(folder):
    """The CUDA backend's folders that a file in `folder` may include."""
    allowed = set()
    for layer in CUDA_LAYERS:
        allowed.update(layer)
        if folder in layer:
            return allowed
    return allowed | {CUDA_TOP}


def cuda_problem(src, path, line):
    """Why the include `line` of `path` breaks the CUDA backend's layering, or None."""
    found = CUDA_INCLUDE.match(line)
    if not found:
        return None
    target_parts = found.group(1).split("/")
    target = target_parts[0] if len(target_parts) > 1 else CUDA_TOP
    relative = os.path.relpath(path, os.path.join(src, CUDA))
    if relative.startswith(".."):
        if target == CUDA_TOP:
            return None
        return f"{CUDA}/{target}/ is inside the CUDA backend; include {CUDA}/cuda_backend.hpp"
    parts = relative.split(os.sep)
    folder = parts[0] if len(parts) > 1 else CUDA_TOP
    if target in cuda_allowed(folder):
        return None
    where = f"{CUDA}/{folder}/" if folder else f"{CUDA}/"
    what = f"{CUDA}/{target}/" if target else f"{CUDA}/ (its top level)"
    return f"{where} includes {what}, a later layer of the CUDA backend"


def problems_in(src):
    problems = []
    checked = 0
    for stage in STAGES:
        root = os.path.join(src, stage)
        for folder, subfolders, files in os.walk(root):
            subfolders.sort()
            for name in sorted(files):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(folder, name)
                checked += 1
                with open(path, encoding="utf-8", errors="replace") as handle:
                    for number, line in enumerate(handle, 1):
                        cuda = cuda_problem(src, path, line)
                        if cuda:
                            problems.append(f"{path}:{number}: {cuda}: {line.strip()}")
                            continue
                        found = INCLUDE.match(line)
                        if not found:
                            continue
                        target = found.group(1)
                        if target in (stage, PUBLIC) or target in ALLOWED[stage]:
                            continue
                        problems.append(f"{path}:{number}: src/{stage} includes {target}/, "
                                        f"which it may not: {line.strip()}")
    return checked, problems


def self_test():
    import tempfile
    cases = [  # (folder under src, include, allowed)
        ("graph", "common/error.hpp", True),
        ("graph", "planner/plan.hpp", False),
        ("backends", "graph/layer.hpp", True),
        ("backends", "runtime/loaded_model.hpp", False),
        ("api", "runtime/loaded_model.hpp", True),
        ("api", "graph/graph.hpp", False),
        ("api", "backends/backend.hpp", False),
        ("common", "fusednn/fusednn.h", True),
        ("backends/cuda/mlp", "backends/cuda/device/epilogue.cuh", True),
        ("backends/cuda/mlp", "backends/cuda/conv/conv2d.hpp", True),
        ("backends/cuda/mlp", "backends/cuda/selection/form_selection.hpp", False),
        ("backends/cuda/conv", "backends/cuda/exec/cuda_executor.hpp", False),
        ("backends/cuda/device", "backends/cuda/platform/launch.hpp", False),
        ("backends/cuda/platform", "backends/cuda/device/epilogue.cuh", True),
        ("backends/cuda/exec", "backends/cuda/selection/step_lowering.hpp", False),
        ("backends/cuda/selection", "backends/cuda/exec/cuda_executor.hpp", True),
        ("backends/cuda/selection", "backends/cuda/cuda_backend.hpp", False),
        ("backends/cuda", "backends/cuda/selection/step_lowering.hpp", True),
        ("runtime", "backends/cuda/cuda_backend.hpp", True),
        ("runtime", "backends/cuda/exec/cuda_context.hpp", False),
    ]
    failures = []
    for stage, include, allowed in cases:
        with tempfile.TemporaryDirectory() as src:
            os.makedirs(os.path.join(src, stage))
            with open(os.path.join(src, stage, "case.cu"), "w", encoding="utf-8") as handle:
                handle.write(f'#include <vector>\n#include "{include}"\n')
            _, problems = problems_in(src)
            if bool(problems) == allowed:
                failures.append(f"src/{stage} including {include} was "
                                f"{'refused' if problems else 'passed'}")
    for failure in failures:
        print("self-test: wrongly " + failure, file=sys.stderr)
    print("self-test: " + ("FAILED" if failures else "every include told apart"))
    return 1 if failures else 0


def main(arguments):
    if arguments == ["--self-test"]:
        return self_test()
    if any(argument in ("-h", "--help") for argument in arguments) or len(arguments) > 1:
        print(__doc__.strip())
        return 0 if arguments and arguments[0] in ("-h", "--help") else 2
    src = arguments[0] if arguments else os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    if not os.path.isdir(src):
        print(f"check_layering.py: no such folder: {src}", file=sys.stderr)
        return 2
    checked, problems = problems_in(src)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} include(s) reach a later stage (docs/architecture.md)",
              file=sys.stderr)
        return 1
    print(f"{checked} files under {src} checked; every include stays within the one-way layering")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
