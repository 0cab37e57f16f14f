#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""Runs the code in README.md's fenced blocks, so that this check fails when the README drifts
from the code.

Usage: python3 tests/readme/run_readme_snippets.py [BUILD_DIR]     (default: build/dev)

BUILD_DIR is a built fusednn tree (library and CLI). It is installed into a temporary prefix,
which stands for the README's /opt/fusednn, and then:

* the C block is compiled and run three ways: by the README's pkg-config commands (the sh block
  that calls pkg-config, run as written), by the README's CMake lines (find_package) in a small
  project, and the C++ block by the C++ compiler against the same prefix;
* each program prints the outputs its snippet computed, which must equal the Python binding's run
  of the same model on the same input;
* the Python blocks run with the binding from bindings/python/src and BUILD_DIR's library
  (FUSEDNN_LIBRARY); a block that needs torch is skipped when torch is not importable, and
  otherwise given a small torch module for its `torch_module`;
* the CLI lines (build/release/tools/fusednn ...) run with BUILD_DIR's CLI, `bench` with one
  iteration; a line with `--device cuda` is skipped where the library sees no GPU.

Every program runs in a work folder where models/ points at the repository's. Prints one line per
check and exits 1 when any failed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_PREFIX = "/opt/fusednn"
README_CLI = "build/release/tools/fusednn"
TIMEOUT_S = 300

failures: List[str] = []


def report(name: str, ok: bool, note: str = "") -> None:
    print(f"{'PASS' if ok else 'FAIL'}  {name}{'  ' + note if note else ''}")
    if not ok:
        failures.append(name)


def fenced_blocks(text: str) -> List[Tuple[str, str]]:
    """(language, code) of every fenced block, in order."""
    return [(match.group(1), match.group(2))
            for match in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M)]


def run(command, cwd: Path, env: Optional[dict] = None, shell: bool = False) -> Tuple[bool, str]:
    """Runs a command; (succeeded, its output)."""
    try:
        done = subprocess.run(command, cwd=cwd, env=env, shell=shell, capture_output=True,
                              text=True, timeout=TIMEOUT_S,
                              executable="/bin/bash" if shell else None)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {TIMEOUT_S} s: {command}"
    output = done.stdout + done.stderr
    if done.returncode != 0:
        return False, f"exit status {done.returncode}: {command}\n{output}"
    return True, done.stdout


def wrap_c_like(code: str, prologue: str, epilogue: str) -> str:
    """The snippet as a program: its #include lines first, the rest inside main()."""
    includes = [line for line in code.splitlines() if line.startswith("#include")]
    body = [line for line in code.splitlines() if not line.startswith("#include")]
    return (prologue + "\n".join(includes) + "\n\nint main(void) {\n" +
            "\n".join("  " + line for line in body) + "\n" + epilogue + "  return 0;\n}\n")


def printed_floats(output: str) -> List[float]:
    return [float(line) for line in output.split() if re.fullmatch(r"[-+0-9.eE]+|nan|inf", line)]


def report_program(name: str, ok: bool, output: str, expected: List[float]) -> None:
    """A program's line: it ran, and printed the expected outputs."""
    if not ok:
        report(name, False, output)
        return
    got = printed_floats(output)
    same = bool(expected) and len(got) == len(expected) and all(
        abs(a - b) <= 1e-5 * max(1.0, abs(b)) for a, b in zip(got, expected))
    report(name, same, "" if same else f"printed {got}, expected {expected}")


def main() -> int:
    build = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build" / "dev").resolve()
    library = build / "src" / "api" / "libfusednn.so"
    if not library.exists():
        print(f"run_readme_snippets.py: no {library}; build {build} first")
        return 2
    blocks = fenced_blocks(README.read_text())

    def the_block(language: str, needle: str) -> Optional[str]:
        found = [code for lang, code in blocks if lang == language and needle in code]
        if len(found) != 1:
            report(f"README has one ```{language} block with '{needle}'", False,
                   f"found {len(found)}: update the README or this check")
            return None
        return found[0]

    c_code = the_block("c", "fdnn_model_run")
    cpp_code = the_block("cpp", "fusednn::Model")
    cmake_code = the_block("cmake", "find_package(fusednn")
    pkg_config_code = the_block("sh", "pkg-config --cflags --libs fusednn")
    python_blocks = [code for lang, code in blocks if lang == "python"]
    cli_lines = [line.split("#")[0].strip() for lang, code in blocks if lang == "sh"
                 for line in code.splitlines() if line.startswith(README_CLI + " ")]
    if not python_blocks:
        report("README has ```python blocks", False)
    if not cli_lines:
        report(f"README has {README_CLI} lines", False)

    work = Path(tempfile.mkdtemp(prefix="fusednn-readme."))
    try:
        (work / "models").symlink_to(ROOT / "models")
        prefix = work / "prefix"
        ok, output = run(["cmake", "--install", str(build), "--prefix", str(prefix)], work)
        if not ok:
            report("cmake --install", False, output)
            return 1
        env = dict(os.environ, FUSEDNN_LIBRARY=str(library),
                   PYTHONPATH=str(ROOT / "bindings" / "python" / "src"))
        for variable in ("LD_LIBRARY_PATH", "PKG_CONFIG_PATH", "CMAKE_PREFIX_PATH"):
            env.pop(variable, None)

        # What the C and C++ snippets must print: the MLP's outputs for one zero sample.
        ok, output = run([sys.executable, "-c",
                          "import numpy as np, fusednn\n"
                          "with fusednn.Model.from_file('models/digits/mlp.safetensors') as m:\n"
                          "    print(*m.run(np.zeros((1, 64), np.float32)).ravel(), sep='\\n')"],
                         work, env)
        expected = printed_floats(output) if ok else []
        if not ok:
            report("the reference run (Python binding)", False, output)

        if c_code is not None:
            (work / "app.c").write_text(wrap_c_like(
                c_code, "#include <stdio.h>\n",
                "  for (int i = 0; i < (int)(sizeof output / sizeof output[0]); ++i) "
                "printf(\"%.9g\\n\", output[i]);\n"))
            if pkg_config_code is not None:
                script = pkg_config_code.replace(README_PREFIX, str(prefix))
                ok, output = run(script, work, env, shell=True)
                report_program("C block, built by the pkg-config commands", ok, output, expected)
            if cmake_code is not None:
                project = work / "cmake_app"
                project.mkdir()
                (project / "CMakeLists.txt").write_text(
                    "cmake_minimum_required(VERSION 3.16)\nproject(readme_app C)\n"
                    f"add_executable(app {work / 'app.c'})\n" + cmake_code)
                ok, output = run(["cmake", "-S", str(project), "-B", str(project / "build"),
                                  f"-DCMAKE_PREFIX_PATH={prefix}"], work, env)
                if ok:
                    ok, output = run(["cmake", "--build", str(project / "build")], work, env)
                if ok:
                    ok, output = run([str(project / "build" / "app")], work, env)
                report_program("C block, built by the CMake lines (find_package)", ok, output,
                               expected)

        if cpp_code is not None:
            (work / "app.cpp").write_text(wrap_c_like(
                cpp_code, "#include <cstdio>\n#include <vector>\n",
                "  for (float value : logits) std::printf(\"%.9g\\n\", value);\n"
            ).replace("int main(void)", "int main()"))
            libdir = next(prefix.glob("lib*/libfusednn.so")).parent
            compiler = os.environ.get("CXX", "c++")
            ok, output = run([compiler, "-std=c++17", "-Wall", "-Wextra", "-o", "app_cpp",
                              "app.cpp", f"-I{prefix / 'include'}", f"-L{libdir}", "-lfusednn",
                              f"-Wl,-rpath,{libdir}"], work, env)
            if ok:
                ok, output = run([str(work / "app_cpp")], work, env)
            report_program("C++ block", ok, output, expected)

        try:
            import torch  # noqa: F401
            have_torch = True
        except ImportError:
            have_torch = False
        for number, code in enumerate(python_blocks, 1):
            name = f"Python block {number}"
            if "torch" in code and not have_torch:
                print(f"SKIP  {name} (needs torch, which is not installed)")
                continue
            prologue = ("import torch\n"
                        "torch_module = torch.nn.Sequential(torch.nn.Linear(100, 10))\n"
                        if "torch_module" in code else "")
            # A snippet that computes logits must have computed finite ones.
            epilogue = ("\nimport numpy\n"
                        "assert numpy.isfinite(logits).all() and logits.size, logits\n"
                        if "logits =" in code else "")
            (work / f"snippet_{number}.py").write_text(prologue + code + epilogue)
            ok, output = run([sys.executable, f"snippet_{number}.py"], work, env)
            report(name, ok, "" if ok else output)

        # A line that asks for the GPU runs only where the library can use one.
        ok, output = run([sys.executable, "-c",
                          "import fusednn; print(fusednn.cuda_device_count())"], work, env)
        gpus = int(output.strip()) if ok and output.strip().isdigit() else 0
        for line in cli_lines:
            if "--device cuda" in line and gpus == 0:
                print(f"SKIP  CLI: {line} (the library sees no GPU)")
                continue
            command = str(build / "tools" / "fusednn") + line[len(README_CLI):]
            if line.startswith(README_CLI + " bench "):
                # One timed run: the check is that the command works, and BUILD_DIR may be Debug.
                command += " --iterations 1 --warmup 0"
            ok, output = run(command, ROOT, env, shell=True)
            report(f"CLI: {line}", ok, "" if ok else output)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"README snippets: {len(failures)} failed" if failures else "README snippets: all ran")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
