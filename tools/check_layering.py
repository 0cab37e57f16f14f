#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fails when a stage under src/ includes a later stage's header.

Data flows one way (docs/architecture.md): common -> graph -> planner -> backends -> runtime ->
api. A stage's files may include their own stage's headers, an earlier stage's and the public
header (fusednn/); src/api, the argument checks and exception firewall, may include only the
runtime's and common's besides its own. Prints each offending line as path:line: text and exits 1
when there is one, 0 when there is none, 2 on a usage error.

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
SUFFIXES = (".h", ".hpp", ".c", ".cpp", ".cu", ".cuh")


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
    cases = [  # (stage, include, allowed)
        ("graph", "common/error.hpp", True),
        ("graph", "planner/plan.hpp", False),
        ("backends", "graph/layer.hpp", True),
        ("backends", "runtime/loaded_model.hpp", False),
        ("api", "runtime/loaded_model.hpp", True),
        ("api", "graph/graph.hpp", False),
        ("api", "backends/backend.hpp", False),
        ("common", "fusednn/fusednn.h", True),
    ]
    failures = []
    for stage, include, allowed in cases:
        with tempfile.TemporaryDirectory() as src:
            os.makedirs(os.path.join(src, stage))
            with open(os.path.join(src, stage, "case.cpp"), "w", encoding="utf-8") as handle:
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
