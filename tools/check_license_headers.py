#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fails when a source file lacks its SPDX license line at the top.

Every tracked C, C++, CUDA, Rust, C#, Python, CMake and shell file starts with
"SPDX-License-Identifier: Apache-2.0" in its language's line comment: on the first line, or on
the second after a shebang line. This script lists the repository's tracked files (git ls-files;
a walk of the tree outside build folders when git is absent), prints each source file that does
not start so, and exits 1 when any does not, 0 when all do, and 2 on a usage error.

    python3 tools/check_license_headers.py [--add] [file ...]
    python3 tools/check_license_headers.py --self-test

--add writes the line into the files that lack it (before a comment that opens the file, or
followed by a blank line before code). --self-test checks, in a temporary folder, that files
without the line are refused and files with it pass (exit 0 when they are told apart).
"""

import os
import subprocess
import sys

LICENSE = "SPDX-License-Identifier: Apache-2.0"

SLASH_SUFFIXES = (".c", ".h", ".cc", ".cpp", ".hpp", ".cu", ".cuh", ".inl", ".rs", ".cs")
HASH_SUFFIXES = (".py", ".sh", ".cmake", ".cmake.in")
HASH_NAMES = ("CMakeLists.txt",)
SKIPPED_FOLDERS = {".git", "build", "target", "bin", "obj", ".venv", "__pycache__", "node_modules"}


def comment_marker(path):
    """The line-comment marker of path's language, or None when path is not a source file."""
    name = os.path.basename(path)
    if name.endswith(SLASH_SUFFIXES):
        return "//"
    if name.endswith(HASH_SUFFIXES) or name in HASH_NAMES:
        return "#"
    if "." not in name:  # a script without a suffix, known by its shebang
        try:
            with open(path, "rb") as handle:
                first = handle.readline(200)
        except OSError:
            return None
        if first.startswith(b"#!") and any(shell in first for shell in (b"sh", b"python")):
            return "#"
    return None


def expected_line(marker):
    return f"{marker} {LICENSE}"


def has_license(lines, marker):
    first = 1 if lines and lines[0].startswith("#!") else 0
    return len(lines) > first and lines[first].rstrip("\r\n") == expected_line(marker)


def read_lines(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return handle.read().splitlines(keepends=True)


def add_license(path, marker):
    lines = read_lines(path)
    at = 1 if lines and lines[0].startswith("#!") else 0
    inserted = [expected_line(marker) + "\n"]
    following = lines[at] if at < len(lines) else ""
    if following.strip() and not following.lstrip().startswith(marker):
        inserted.append("\n")
    lines[at:at] = inserted
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write("".join(lines))


def tracked_files(repository):
    try:
        listing = subprocess.run(["git", "-C", repository, "ls-files", "-z"], check=True,
                                 capture_output=True).stdout.decode("utf-8")
        return [path for path in listing.split("\0") if path]
    except (OSError, subprocess.CalledProcessError):
        found = []
        for folder, subfolders, files in os.walk(repository):
            subfolders[:] = sorted(d for d in subfolders if d not in SKIPPED_FOLDERS)
            found.extend(os.path.relpath(os.path.join(folder, name), repository)
                         for name in sorted(files))
        return found


def check(paths, add, report=print):
    """Prints each source file without the line (adding it with add); returns how many lacked it."""
    missing = 0
    checked = 0
    for path in paths:
        marker = comment_marker(path)
        if marker is None or not os.path.isfile(path):
            continue
        checked += 1
        try:
            lines = read_lines(path)
        except (OSError, UnicodeDecodeError) as error:
            report(f"{path}: cannot read as UTF-8 text: {error}")
            missing += 1
            continue
        if has_license(lines, marker):
            continue
        missing += 1
        if add:
            add_license(path, marker)
            report(f"{path}: added '{expected_line(marker)}'")
        else:
            report(f"{path}: does not start with '{expected_line(marker)}'")
    return checked, missing


# (file name, content, whether it must pass)
CASES = [
    ("plain.cpp", "#include <cstdio>\n", False),
    ("late.hpp", "#pragma once\n// SPDX-License-Identifier: Apache-2.0\n", False),
    ("other.rs", "// SPDX-License-Identifier: MIT\n", False),
    ("wrong_marker.py", "// SPDX-License-Identifier: Apache-2.0\n", False),
    ("script", "#!/usr/bin/env bash\necho hi\n", False),
    ("CMakeLists.txt", "project(x)\n", False),
    ("good.cu", "// SPDX-License-Identifier: Apache-2.0\n__global__ void k() {}\n", True),
    ("good.sh", "#!/bin/sh\n# SPDX-License-Identifier: Apache-2.0\n", True),
    ("good.cmake", "# SPDX-License-Identifier: Apache-2.0\n", True),
    ("notes.txt", "no license needed\n", True),
]


def quiet(_):
    pass


def self_test():
    import tempfile
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for name, content, passes in CASES:
            path = os.path.join(folder, name)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(content)
            paths.append(path)
            _, missing = check([path], add=False, report=quiet)
            if (missing == 0) != passes:
                failures.append(f"{name} was {'refused' if missing else 'passed'}")
        # --add then makes every file pass, the code that followed untouched.
        check(paths, add=True, report=quiet)
        if check(paths, add=False, report=quiet)[1] != 0:
            failures.append("files still lack the line after --add")
        with open(os.path.join(folder, "plain.cpp"), encoding="utf-8") as handle:
            if handle.read() != f"// {LICENSE}\n\n#include <cstdio>\n":
                failures.append("--add wrote plain.cpp wrongly")
        with open(os.path.join(folder, "script"), encoding="utf-8") as handle:
            if handle.read() != f"#!/usr/bin/env bash\n# {LICENSE}\n\necho hi\n":
                failures.append("--add wrote the script wrongly")
    for failure in failures:
        print("self-test: wrongly " + failure, file=sys.stderr)
    print("self-test: " + ("FAILED" if failures else "files without the line refused, the rest "
                           "passed, --add fixed them"))
    return 1 if failures else 0


def main(arguments):
    if arguments == ["--self-test"]:
        return self_test()
    if any(argument in ("-h", "--help") for argument in arguments):
        print(__doc__.strip())
        return 0
    add = "--add" in arguments
    paths = [argument for argument in arguments if argument != "--add"]
    unknown = [path for path in paths if path.startswith("-")]
    if unknown:
        print("check_license_headers.py: unknown option " + ", ".join(unknown) + " (see --help)",
              file=sys.stderr)
        return 2
    if not paths:
        repository = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        os.chdir(repository)
        paths = tracked_files(repository)
    checked, missing = check(paths, add)
    if missing and not add:
        print(f"{missing} of {checked} source files lack '{LICENSE}' in their first line (the "
              "second after a shebang); tools/check_license_headers.py --add writes it",
              file=sys.stderr)
        return 1
    if add:
        print(f"{checked} source files checked; the line added to {missing}")
    else:
        print(f"{checked} source files checked; every one starts with its SPDX license line")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
