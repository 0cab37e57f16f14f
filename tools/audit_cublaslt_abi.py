#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compares two cuBLASLt headers on exactly what fusednn's cuBLASLt code uses.

The list of what is used is read from the sources, not written here: the functions of
cublaslt_library.hpp's table (decltype(&name)) and cublaslt_library.cpp's resolve("name") calls,
which must name the same functions, and any other function it looks up with dlsym (its
version); and every cuBLAS / cuBLASLt / CUDA data-type identifier in
src/backends/cuda/ (the cuBLASLt code and the selection code that picks its compute and data
types): the types (names ending in _t, and cudaDataType), the enum values and
attribute ids (upper-case names), the version macros excepted. For each header a probe program is
compiled with the host C++ compiler and run; it prints, per function, its pointer type as the
compiler mangles it (parameter and return types, typedefs resolved, const included); per type,
sizeof and alignof, and for a struct each member's offset and size; per constant, its value. The
two printouts are compared line by line.

Usage:
  audit_cublaslt_abi.py [--tolerate TYPE]... OLD_INCLUDES NEW_INCLUDES
      (each: include folders joined by ':'; a tolerated type's differences are listed, not
      counted: for an opaque descriptor whose storage another check covers)
  audit_cublaslt_abi.py --self-test OLD_INCLUDES
Exit status: 0 when every used declaration and value agrees, 1 when any differs (each listed),
2 when a header cannot be probed. --self-test checks the audit itself: the header against itself
must agree, and copies doctored in one value each (an enum value, an attribute id, an opaque
struct's size, a function's parameter type) must each be reported.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CUDA_BACKEND = os.path.join(ROOT, "src", "backends", "cuda")
LINEAR = os.path.join(CUDA_BACKEND, "linear")
TABLE_HEADER = os.path.join(LINEAR, "cublaslt_library.hpp")
TABLE_SOURCE = os.path.join(LINEAR, "cublaslt_library.cpp")

IDENTIFIER = re.compile(r"\b(cublas\w*_t|cudaDataType(?:_t)?|CUBLASLT_\w+|CUBLAS_\w+|CUDA_R_\w+)\b")
EXCLUDED_CONSTANTS = re.compile(r"^CUBLAS_VER_\w+$|^CUBLAS_VERSION$")


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def used_items(source_dir=CUDA_BACKEND):
    """(functions, types, constants) that fusednn's cuBLASLt code names, each sorted."""
    with open(TABLE_HEADER) as f:
        table = set(re.findall(r"decltype\(&(\w+)\)", strip_comments(f.read())))
    with open(TABLE_SOURCE) as f:
        loader = strip_comments(f.read())
    resolved = set(re.findall(r'resolve\([^";]*"(\w+)"', loader))
    looked_up = set(re.findall(r'dlsym\([^";]*"(\w+)"', loader))
    if not table or table != resolved:
        raise SystemExit("audit_cublaslt_abi.py: the function table (%s) and the resolved names "
                         "(%s) differ" % (sorted(table), sorted(resolved)))
    types, constants = set(), set()
    sources = sorted(os.path.join(folder, name) for folder, _, names in os.walk(source_dir)
                     for name in names if name.endswith((".hpp", ".cpp", ".cu", ".cuh")))
    for path in sources:
        with open(path) as f:
            for identifier in IDENTIFIER.findall(strip_comments(f.read())):
                if identifier[0].isupper():
                    if not EXCLUDED_CONSTANTS.match(identifier):
                        constants.add(identifier)
                else:
                    types.add(identifier)
    return sorted(table | looked_up), sorted(types), sorted(constants)


def struct_members(include_dirs, type_name):
    """The member names of `typedef struct { ... } type_name;` in the headers, or []."""
    pattern = re.compile(r"typedef\s+struct\s*\w*\s*\{([^{}]*)\}\s*" + type_name + r"\s*;")
    for folder in include_dirs:
        for header in ("cublasLt.h", "cublas_api.h"):
            path = os.path.join(folder, header)
            if not os.path.exists(path):
                continue
            with open(path) as f:
                found = pattern.search(strip_comments(f.read()))
            if found:
                return re.findall(r"(\w+)\s*(?:\[[^\]]*\])?\s*;", found.group(1))
    return []


def probe_source(include_dirs, functions, types, constants):
    lines = ["#include <cublasLt.h>", "#include <cstddef>", "#include <cstdio>",
             "#include <typeinfo>", "int main() {"]
    for function in functions:
        lines.append('  std::printf("function %s %%s\\n", typeid(decltype(&%s)).name());'
                     % (function, function))
    for type_name in types:
        lines.append('  std::printf("type %s sizeof %%zu alignof %%zu\\n", sizeof(%s), '
                     'alignof(%s));' % (type_name, type_name, type_name))
        for member in struct_members(include_dirs, type_name):
            lines.append('  std::printf("type %s member %s offset %%zu sizeof %%zu\\n", '
                         'offsetof(%s, %s), sizeof(((%s*)nullptr)->%s));'
                         % (type_name, member, type_name, member, type_name, member))
    for constant in constants:
        lines.append('  std::printf("value %s %%lld\\n", static_cast<long long>(%s));'
                     % (constant, constant))
    lines += ["  return 0;", "}", ""]
    return "\n".join(lines)


def probe(include_dirs, items, compiler, workdir, label):
    """The probe's printout for one header, as a list of lines."""
    source = os.path.join(workdir, label + ".cpp")
    program = os.path.join(workdir, label)
    with open(source, "w") as f:
        f.write(probe_source(include_dirs, *items))
    command = [compiler, "-std=c++17", "-w", "-o", program, source]
    for folder in include_dirs:
        command[1:1] = ["-isystem", folder]
    built = subprocess.run(command, capture_output=True, text=True)
    if built.returncode != 0:
        sys.stderr.write(built.stderr[-4000:])
        raise SystemExit("audit_cublaslt_abi.py: the probe does not compile against %s"
                         % ":".join(include_dirs))
    ran = subprocess.run([program], capture_output=True, text=True, check=True)
    return ran.stdout.splitlines()


def compare(old_dirs, new_dirs, compiler, quiet=False):
    """The differing lines (old, new); prints the list compared unless quiet."""
    items = used_items()
    with tempfile.TemporaryDirectory() as workdir:
        old = probe(old_dirs, items, compiler, workdir, "old")
        new = probe(new_dirs, items, compiler, workdir, "new")
    key = lambda line: " ".join(line.split()[:4] if " member " in line else line.split()[:2])
    old_by_key = {key(line): line for line in old}
    new_by_key = {key(line): line for line in new}
    differences = []
    for k in sorted(set(old_by_key) | set(new_by_key)):
        if old_by_key.get(k) != new_by_key.get(k):
            differences.append((old_by_key.get(k, "(absent)"), new_by_key.get(k, "(absent)")))
    if not quiet:
        functions, types, constants = items
        print("compared %d functions, %d types, %d values (%d probe lines each):"
              % (len(functions), len(types), len(constants), len(old)))
        print("  functions: " + " ".join(functions))
        print("  types: " + " ".join(types))
        print("  values: " + " ".join(constants))
    return differences


def report(differences, old_dirs, new_dirs, tolerated_types=()):
    tolerated = [d for d in differences
                 if any(d[0].startswith("type %s " % t) or d[1].startswith("type %s " % t)
                        for t in tolerated_types)]
    differences = [d for d in differences if d not in tolerated]
    for old, new in tolerated:
        print("  tolerated (--tolerate): old: %s; new: %s" % (old, new))
    if not differences:
        print("audit_cublaslt_abi.py: every used declaration and value agrees%s"
              % (" (but the tolerated)" if tolerated else ""))
        return 0
    print("audit_cublaslt_abi.py: %d differences (old: %s, new: %s):"
          % (len(differences), old_dirs[0], new_dirs[0]))
    for old, new in differences:
        print("  old: " + old)
        print("  new: " + new)
    return 1


def doctor(old_dirs, workdir, name, pattern, replacement):
    """A copy of the first include folder with one substitution in cublasLt.h."""
    copy = os.path.join(workdir, name)
    shutil.copytree(old_dirs[0], copy)
    path = os.path.join(copy, "cublasLt.h")
    with open(path) as f:
        text = f.read()
    doctored, count = re.subn(pattern, replacement, text, count=1)
    if count != 1:
        raise SystemExit("audit_cublaslt_abi.py: self-test cannot doctor %s (%s not found)"
                         % (name, pattern))
    with open(path, "w") as f:
        f.write(doctored)
    return [copy] + old_dirs[1:]


def self_test(old_dirs, compiler):
    if compare(old_dirs, old_dirs, compiler, quiet=True):
        print("self-test FAIL: a header differs from itself")
        return 1
    cases = [
        ("enum value", r"(CUBLASLT_EPILOGUE_GELU_BIAS\s*=\s*)[^,\n]+", r"\g<1>12345",
         "value CUBLASLT_EPILOGUE_GELU_BIAS"),
        ("attribute id", r"(CUBLASLT_MATMUL_DESC_BIAS_POINTER\s*=\s*)\d+", r"\g<1>999",
         "value CUBLASLT_MATMUL_DESC_BIAS_POINTER"),
        ("opaque size", r"(uint64_t data\[)\d+(\];\s*\}\s*cublasLtMatmulDescOpaque_t)",
         r"\g<1>99\g<2>", "type cublasLtMatmulDescOpaque_t"),
        ("parameter type", r"(cublasLtMatmulDescSetAttribute\((?:\s*//)?\s*cublasLtMatmulDesc_t\s+"
         r"\w+,\s*cublasLtMatmulDescAttributes_t\s+\w+,\s*const void\*\s*\w+,\s*)size_t",
         r"\g<1>int", "function cublasLtMatmulDescSetAttribute"),
    ]
    failures = 0
    with tempfile.TemporaryDirectory() as workdir:
        for index, (what, pattern, replacement, expected) in enumerate(cases):
            doctored = doctor(old_dirs, workdir, "case%d" % index, pattern, replacement)
            differences = compare(old_dirs, doctored, compiler, quiet=True)
            flagged = [new for _, new in differences if new.startswith(expected)]
            if len(differences) >= 1 and flagged:
                print("self-test: a doctored %s is reported (%s)" % (what, flagged[0]))
            else:
                print("self-test FAIL: a doctored %s is not reported as %s (differences: %s)"
                      % (what, expected, differences))
                failures += 1
    print("self-test %s" % ("FAIL" if failures else "passed"))
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument("--compiler", default=os.environ.get("CXX", "g++"))
    parser.add_argument("--tolerate", action="append", default=[], metavar="TYPE")
    parser.add_argument("includes", nargs="+")
    args = parser.parse_args()
    dirs = [[os.path.abspath(d) for d in group.split(":") if d] for group in args.includes]
    if args.self_test:
        if len(dirs) != 1:
            parser.error("--self-test takes one include path")
        return self_test(dirs[0], args.compiler)
    if len(dirs) != 2:
        parser.error("two include paths: OLD NEW")
    return report(compare(dirs[0], dirs[1], args.compiler), dirs[0], dirs[1], args.tolerate)


if __name__ == "__main__":
    sys.exit(main())
