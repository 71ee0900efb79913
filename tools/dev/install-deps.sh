#!/usr/bin/env bash
# Installs the Debian 12 packages dist builds and tests with, if missing.
# Idempotent; needs root (or sudo). Nothing is downloaded outside apt.
set -euo pipefail

packages=(
  bazel-bootstrap bazel-rules-java
  g++ pkg-config make cmake
  libabsl-dev libgtest-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin mpich libmpich-dev
  libuv1-dev libtomlplusplus-dev nlohmann-json3-dev libssl-dev clang-14 libfuzzer-14-dev
  gnuplot-nox procps iproute2 file patchelf python3 python3-numpy
  python3-torch libtorch-dev pybind11-dev python3-dev
  slurm-wlm munge util-linux
  clang-format-14
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
