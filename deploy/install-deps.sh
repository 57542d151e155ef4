#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# install-deps.sh: installs every Debian package that tide's build, tests,
# demo and benchmarks need. Idempotent and non-interactive; runs as root (or
# through sudo) on a fresh Debian 12 machine, and returns at once when every
# package is already there.
set -euo pipefail

packages=(
    build-essential cmake ninja-build pkg-config
    clang libclang-rt-14-dev          # libFuzzer and sanitizer runtimes
    libgrpc-dev                       # gRPC C core
    libprotobuf-c-dev protobuf-c-compiler
    libev-dev
    libcmocka-dev
    libopenblas-dev
    libdnnl-dev                       # oneDNN: the CPU backend's convolutions (optional in CMake)
    zlib1g-dev
    libsystemd-dev systemd
    openssl                           # test certificates for tided's TLS listener
    dataset-fashion-mnist             # demo and accuracy checks
    fortunes                          # the byte-level language models' corpus
    libjson-c-dev                     # JSON out: tidectl/tide-bench --json, traces, dashboard API
    libcairo2-dev                     # memory pictures (cairo's SVG surface)
    libmicrohttpd-dev                 # tided's /metrics and dashboard listener
    libxxhash-dev                     # checkpoint checksums (xxHash64)
    libzip-dev                        # tidectl export --npz (an .npz is a zip of .npy files)
    chromium                          # the dashboard's headless-browser test
    python3 python3-prometheus-client # a real Prometheus parser for the metrics test
    python3-numpy                     # numpy.load reads what tidectl export --npz writes
    libonnx-dev                       # onnx.proto, compiled with protoc-c for ONNX import
    libonnx-testdata                  # ONNX's conformance cases (tide-bench onnx-tests)
    python3-onnx                      # ONNX's own checker reads what tide-bench --save writes
)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#packages[@]} packages present"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
