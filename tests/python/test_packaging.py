# SPDX-License-Identifier: Apache-2.0

"""The two ways to pip-install the package build the same thing.

`pip install ./bindings/python` and `pip install .` (the repository root) each have a
pyproject.toml; they differ only in the paths that lead to the same sources. Both take their
version from the CMake project, which must agree with the C header's. Installing them for real is
tests/python_package/run_pip_install.sh (slow, outside CI).
"""

from __future__ import annotations

import copy
import re

import pytest

from conftest import REPO

tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")

ROOT_PROJECT = REPO / "pyproject.toml"
BINDING_PROJECT = REPO / "bindings" / "python" / "pyproject.toml"


def load(path):
    with open(path, "rb") as handle:
        return tomllib.load(handle)


def without_paths(config, readme, source_dir, packages, version_input):
    """config with its path settings checked against the expected ones and then removed."""
    config = copy.deepcopy(config)
    assert config["project"].pop("readme") == readme
    build = config["tool"]["scikit-build"]
    assert build["cmake"].pop("source-dir", ".") == source_dir
    assert build["wheel"].pop("packages") == packages
    assert build["metadata"]["version"].pop("input") == version_input
    return config


def test_root_and_binding_projects_match_but_for_paths():
    root = without_paths(load(ROOT_PROJECT), "bindings/python/README.md", ".",
                         ["bindings/python/src/fusednn"], "CMakeLists.txt")
    binding = without_paths(load(BINDING_PROJECT), "README.md", "../..", ["src/fusednn"],
                            "../../CMakeLists.txt")
    assert root == binding


def test_version_read_from_cmake_matches_the_header():
    settings = load(ROOT_PROJECT)["tool"]["scikit-build"]["metadata"]["version"]
    assert load(ROOT_PROJECT)["project"]["dynamic"] == ["version"]
    found = re.search(settings["regex"], (REPO / "CMakeLists.txt").read_text(), re.MULTILINE)
    assert found, "the version regex finds nothing in CMakeLists.txt"
    header = (REPO / "include" / "fusednn" / "fusednn.h").read_text()
    parts = [re.search(rf"#define FDNN_VERSION_{part}\s+(\d+)", header).group(1)
             for part in ("MAJOR", "MINOR", "PATCH")]
    assert found.group("value") == ".".join(parts)
