#!/usr/bin/env bash
# The compilers llama.cpp's portable build needs. On x86-64, Debian's gcc builds every CPU
# variant. On arm64, Debian 12's gcc 12 refuses the armv9.2 (SME) variants' -march, which stops
# the whole build; clang 19 (bookworm) compiles all eight, and libomp gives it OpenMP. Checked by
# cross-compiling for aarch64 and running the variants under qemu-aarch64 (docs/operations.md).
# Prints the environment the build must run with (e.g. CC=clang-19 CXX=clang++-19), nothing on
# x86-64.
set -euo pipefail

[[ $(uname -m) == aarch64 ]] || exit 0

if ! command -v clang-19 >/dev/null 2>&1; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "llama.cpp on arm64 needs clang 19: apt-get install -y clang-19 libomp-19-dev" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -q --no-install-recommends clang-19 libomp-19-dev >&2
fi
echo "CC=clang-19 CXX=clang++-19"
