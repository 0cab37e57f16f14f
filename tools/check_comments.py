#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""Fails when a C, C++ or CUDA comment records history or measurements.

Comments say what the code does and why, in the present tense. Session numbers, notes versions,
commit hashes, dates, GPU model names and timings belong in commit messages, CHANGELOG.md and
docs/performance.md instead. This script reads every source file under the given folders (by
default the repository's src/ and include/), extracts its comments and prints each line that
matches one of the patterns below as path:line: reason: text. It exits 1 when any line matches,
0 when none does, and 2 on a usage error.

    python3 tools/check_comments.py [folder or file ...]
    python3 tools/check_comments.py --self-test

--self-test plants comments that must be refused and code that must pass in a temporary folder
and checks that the script tells them apart (exit 0 when it does).
"""

import os
import re
import sys

SOURCE_SUFFIXES = (".h", ".hpp", ".c", ".cc", ".cpp", ".cu", ".cuh", ".inl")

# (reason, pattern) pairs, matched against the text of each comment line.
RULES = [
    ("names a session", re.compile(r"\bsessions?\b", re.IGNORECASE)),
    ("names a notes version",
     re.compile(r"\bNOTES\b(\.md)?\s*(version|v\.?)\s*\d+|\bNOTES\.md\b", re.IGNORECASE)),
    # Seven to forty hex digits with at least one digit and one letter: plain words such as
    # "defaced" and plain numbers are not hashes; a 0x prefix makes a constant, not a hash.
    ("names a commit hash",
     re.compile(r"(?<![0-9A-Za-z_])(?!0x)(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}"
                r"(?![0-9A-Za-z_])")),
    ("names a date", re.compile(r"\b(19|20)\d\d-(0[1-9]|1[0-2])(-\d\d)?\b")),
    ("names a GPU model", re.compile(r"\b(H100|H200|A100|A10G|L4|L40S?|V100|T4|B200|GB200)\b")),
    ("states a timing", re.compile(r"\d(\.\d+)?\s*(ns|us|µs|usec|ms)\b")),
    ("states a throughput", re.compile(r"\d(\.\d+)?\s*(GB/s|TB/s|TFLOP/?s|TFLOPS|GFLOP/?s)\b")),
]


def comment_lines(text):
    """Yields (line number, comment text) for every line that holds part of a comment.

    Understands // and /* */ comments, string and character literals with escapes, and raw
    string literals R"delim( ... )delim", which is what C, C++ and CUDA sources contain.
    """
    i = 0
    line = 1
    length = len(text)
    pieces = {}

    def add(line_number, piece):
        if piece.strip():
            pieces.setdefault(line_number, []).append(piece)

    while i < length:
        ch = text[i]
        if ch == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = length if end < 0 else end
            add(line, text[i + 2:end])
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = length if end < 0 else end
            for offset, piece in enumerate(text[i + 2:end].split("\n")):
                add(line + offset, piece)
            line += text.count("\n", i, end)
            i = end + 2
        elif ch == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or
                                                                      text[i - 1] == "_")):
            open_paren = text.find("(", i + 2)
            if open_paren < 0:
                i += 2
                continue
            closing = ")" + text[i + 2:open_paren] + '"'
            end = text.find(closing, open_paren)
            end = length if end < 0 else end + len(closing)
            line += text.count("\n", i, end)
            i = end
        elif ch in "\"'":
            # A quote inside a number such as 1'000'000 is a digit separator, not a literal.
            if ch == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < length and \
                    text[i + 1].isalnum() and not text[i - 1].isalpha():
                i += 1
                continue
            j = i + 1
            while j < length and text[j] != ch and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    for line_number in sorted(pieces):
        yield line_number, " ".join(pieces[line_number])


def check_file(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError as error:
        return [f"{path}: cannot read: {error}"]
    problems = []
    for line_number, comment in comment_lines(text):
        for reason, pattern in RULES:
            if pattern.search(comment):
                problems.append(f"{path}:{line_number}: {reason}: {comment.strip()}")
                break
    return problems


def source_files(roots):
    for root in roots:
        if os.path.isfile(root):
            yield root
            continue
        for folder, subfolders, files in os.walk(root):
            subfolders.sort()
            for name in sorted(files):
                if name.endswith(SOURCE_SUFFIXES):
                    yield os.path.join(folder, name)


# Each planted comment must be refused; each clean line (comments and code that merely look like
# the patterns) must pass.
PLANTED = [
    "// Tuned in the twelfth session.",
    "/* bench/cuda/NOTES.md, version 13 */",
    "// Fixed at 1537fc5.",
    "int x = 0;  // since 2026-11-25",
    "// Timed on an H200.",
    "// took 146.7 us against 152.0",
    "// the first load took ~3 ms",
    "/**\n * Reads W at ~3.3 TB/s.\n */",
]
CLEAN = [
    "// Divides by a divisor fixed at plan time; 0x7fffffff is the largest index.",
    "// The defaced and accepted cases: 4096 tiles over 396 warpgroups, batch 262144.",
    'const char* text = "the twelfth session, H100, 146 us";  // a string, not a comment',
    "// 16 users, 2 usages, 4 uses on the Hopper path.",
    "constexpr float kTwoOverLn2 = 2.8853900817779268f;  // 2 log2(e)",
]


def self_test():
    import tempfile
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        for index, text in enumerate(PLANTED + CLEAN):
            path = os.path.join(folder, f"case{index}.cpp")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text + "\n")
            refused = bool(check_file(path))
            if refused != (index < len(PLANTED)):
                failures.append(("passed" if not refused else "refused") + ": " + text)
        main_result = main([folder])
    if main_result != 1:
        failures.append(f"main() returned {main_result} on a folder with planted comments")
    for failure in failures:
        print("self-test: wrongly " + failure, file=sys.stderr)
    print("self-test: " + ("FAILED" if failures else "every planted comment refused, every clean "
                           "line passed"))
    return 1 if failures else 0


def main(arguments):
    if arguments == ["--self-test"]:
        return self_test()
    if any(argument in ("-h", "--help") for argument in arguments):
        print(__doc__.strip())
        return 0
    if not arguments:
        repository = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        arguments = [os.path.join(repository, "src"), os.path.join(repository, "include")]
    missing = [root for root in arguments if not os.path.exists(root)]
    if missing:
        print("check_comments.py: no such file or folder: " + ", ".join(missing), file=sys.stderr)
        return 2
    problems = []
    checked = 0
    for path in source_files(arguments):
        checked += 1
        problems.extend(check_file(path))
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} comment line(s) record history or measurements; say what the code "
              "does and why instead (figures go to docs/performance.md, history to commit "
              "messages and CHANGELOG.md)", file=sys.stderr)
        return 1
    print(f"{checked} source files checked; no comment records history or measurements")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
