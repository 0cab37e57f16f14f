#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Sourced by the scripts that fetch Debian packages for cross builds without installing anything
# system-wide (tools/jetson_cuda_dependencies.sh, tools/aarch64_glibc_2.31_sysroot.sh).
#
# use_private_apt DIR SOURCE_LINE ARCH...
#   Points apt at a configuration of its own under DIR: the one sources line given (signed by
#   Debian's archive keyring, which $DEBIAN_KEYRING names), its own package lists and cache, the
#   architectures given, and no dpkg status, so that nothing installed on the machine counts.
#   Exports APT_CONFIG; apt-get update, apt-cache policy and apt-get download then use it.
DEBIAN_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

use_private_apt() {
  local dir=$1 source_line=$2
  shift 2
  [[ -f "$DEBIAN_KEYRING" ]] ||
    { echo "$DEBIAN_KEYRING not found: apt-get install debian-archive-keyring" >&2; return 1; }
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/sources.list.d" \
    "$dir/preferences.d"
  echo "deb [signed-by=$DEBIAN_KEYRING] $source_line" >"$dir/sources.list"
  local architectures="" arch
  for arch in "$@"; do architectures+="\"$arch\"; "; done
  cat >"$dir/apt.conf" <<CONF
Dir::Etc::SourceList "$dir/sources.list";
Dir::Etc::SourceParts "$dir/sources.list.d";
Dir::Etc::Preferences "$dir/preferences";
Dir::Etc::PreferencesParts "$dir/preferences.d";
Dir::State::Lists "$dir/lists";
Dir::Cache "$dir/cache";
Dir::State::status "/dev/null";
APT::Architectures { ${architectures}};
APT::Sandbox::User "$(id -un)";
CONF
  export APT_CONFIG="$dir/apt.conf"
}
