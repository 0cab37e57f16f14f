#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what building and testing fusednn needs, skipping whatever is already there, so it is
# safe to run any number of times. Usage: tools/install_dependencies.sh [--tests]
set -euo pipefail

packages=(cmake g++ make pkg-config nlohmann-json3-dev python3-pip)
if [[ "${1:-}" == "--tests" ]]; then
  packages+=(libgtest-dev googletest doxygen binutils)
  packages+=(clang libclang-rt-dev)  # libFuzzer and the sanitizers for tools/fuzz.sh
fi

missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python_packages=(numpy)
[[ "${1:-}" == "--tests" ]] && python_packages+=(pytest safetensors)
for module in "${python_packages[@]}"; do
  python3 -c "import $module" 2>/dev/null || python3 -m pip install -q "$module"
done
