#!/usr/bin/env bash
# Installs what building and testing ge2 needs on Debian bookworm. Idempotent:
# packages already installed are skipped, and when nothing is missing it does
# not touch apt at all (so it also works offline). Run as root (or via sudo)
# when something must be installed.
#
# The CUDA 13 toolkit is not a Debian package: install it from NVIDIA first
# (default /usr/local/cuda, or set CUDA_PATH). ge2 compiles its CUDA code in
# every build, so nvcc is required even on machines without a GPU.
set -euo pipefail

packages=(
    bazel-bootstrap       # Bazel 4.2.3, the build system (offline, WORKSPACE mode)
    build-essential       # gcc/g++: C toolchain and nvcc's host compiler
    check                 # unit-test framework (linked statically)
    libsubunit-dev        # Check's static dependency
    libjemalloc-dev       # host allocator (linked statically)
    zlib1g-dev            # reading the .gz datasets
    libopenblas-dev       # <cblas.h> and a fast libblas.so.3 for the CPU backend
    libblas3              # reference BLAS: small libblas.so.3 staged for the GPU machine
    dataset-fashion-mnist # /usr/share/datasets/fashion-mnist/*.gz
    pkg-config
)

say() { printf 'setup: %s\n' "$*"; }

missing=()
for p in "${packages[@]}"; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
        say "have $p"
    else
        missing+=("$p")
    fi
done

if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        say "missing: ${missing[*]}; run as root: sudo tools/setup.sh" >&2
        exit 1
    fi
    say "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
else
    say "all ${#packages[@]} packages present; nothing to install"
fi

cuda="${CUDA_PATH:-/usr/local/cuda}"
if [ -x "$cuda/bin/nvcc" ]; then
    say "CUDA toolkit: $cuda ($("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
else
    say "error: no nvcc at $cuda/bin/nvcc; install the CUDA 13 toolkit or set CUDA_PATH" >&2
    exit 1
fi
