#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what building and testing fusednn needs, skipping whatever is already there, so it is
# safe to run any number of times. Usage: tools/install_dependencies.sh [--tests]
set -euo pipefail

packages=(cmake g++ make pkg-config nlohmann-json3-dev python3-pip)
if [[ "${1:-}" == "--tests" ]]; then
  packages+=(libgtest-dev googletest doxygen binutils)
  packages+=(clang libclang-rt-dev)  # libFuzzer and the sanitizers for tools/fuzz.sh
  packages+=(g++-aarch64-linux-gnu qemu-user)  # the aarch64 cross build, tools/test_aarch64.sh
  packages+=(dpkg-dev lintian)  # the .deb packages' Depends and checks, tests/package/test_deb.sh
  packages+=(python3-venv)  # venvs of tools/run_samples.sh and tools/build_aarch64_wheel.sh
fi

export DEBIAN_FRONTEND=noninteractive
sudo_cmd=""
[[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"

missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The format check (tools/check_format.sh) needs clang-format 14, the version the sources are
# formatted with: Debian 12's clang-format. Where the archive lacks clang-format-14, the default
# clang-format is installed and the check names the version it found.
if [[ "${1:-}" == "--tests" ]] && ! command -v clang-format-14 >/dev/null; then
  echo "installing: clang-format-14"
  if ! $sudo_cmd apt-get install -y -qq clang-format-14 >/dev/null 2>&1; then
    $sudo_cmd apt-get update -qq
    $sudo_cmd apt-get install -y -qq clang-format-14 >/dev/null ||
      { echo "clang-format-14 is not in this system's archive; installing clang-format" \
             "(tools/check_format.sh will say which version it found)";
        $sudo_cmd apt-get install -y -qq clang-format >/dev/null; }
  fi
fi

python_packages=(numpy)
[[ "${1:-}" == "--tests" ]] && python_packages+=(pytest safetensors)
for module in "${python_packages[@]}"; do
  python3 -c "import $module" 2>/dev/null || python3 -m pip install -q "$module"
done
