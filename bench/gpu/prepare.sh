#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# prepare.sh — on the build machine (no GPU needed): build tide with CUDA for
# the GPU machine and bundle what bench/gpu/run.sh runs there.
#
#   bench/gpu/prepare.sh [BUILD_DIR] [BUNDLE_DIR]
#
# Defaults: build-gpu and .device-bundle, from the repository root. The
# architecture is CMAKE_CUDA_ARCHITECTURES (default 90: H100 and H200). The
# bundle is ../shared/device/bundle.sh's: bin/ (stripped), lib/ and env.sh;
# the large CUDA libraries stay behind and env.sh finds the GPU machine's.
# When the bundle is larger than the device tool carries (64 MiB), it is also
# packed as BUNDLE_DIR.tar.xz, which run.sh unpacks.
#
# Keep the bundle out of git: add "/.device-bundle/" (and the .tar.xz) to
# .git/info/exclude once; this script does not touch .git.
set -euo pipefail

build=${1:-build-gpu}
bundle=${2:-.device-bundle}
arch=${CMAKE_CUDA_ARCHITECTURES:-90}
bundler=${TIDE_BUNDLE_SH:-$(cd .. && pwd)/shared/device/bundle.sh}
binaries=(test_backend_ops test_backend test_executor test_swap tide-bench tide-bandwidth)

if [[ ! -f CMakeLists.txt || ! -d bench/gpu ]]; then
  echo "prepare.sh: run from the repository root" >&2
  exit 2
fi
if [[ ! -f $bundler ]]; then
  echo "prepare.sh: no bundler at $bundler (set TIDE_BUNDLE_SH)" >&2
  exit 2
fi

cmake -S . -B "$build" -G Ninja -DTIDE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
      -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" --target "${binaries[@]}"

rm -rf "$bundle" "$bundle.tar.xz"
paths=()
for b in "${binaries[@]}"; do paths+=("$build/bin/$b"); done
bash "$bundler" "$bundle" "${paths[@]}"
strip --strip-debug "$bundle"/bin/* "$bundle"/lib/* 2>/dev/null || true

size_mib=$(du -sm "$bundle" | awk '{print $1}')
if (( size_mib > 60 )); then
  tar -cJf "$bundle.tar.xz" "$bundle"
  packed=$(du -sh "$bundle.tar.xz" | awk '{print $1}')
  echo "prepare.sh: $bundle is ${size_mib} MiB; carry $bundle.tar.xz ($packed)"
else
  echo "prepare.sh: carry $bundle (${size_mib} MiB)"
fi
echo "prepare.sh: on the GPU machine, from the repository root: bench/gpu/run.sh $bundle"
