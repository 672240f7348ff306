#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` from the tree bundled with node-llama-cpp (the benchmark peer), CPU only, into
# .cache/llama-server/<bundle commit>/bin/llama-server, pinned by the bundle's commit; does nothing when it is there.
# Used by bench/serve-compare.ts. Needs cmake and g++ (Debian: apt-get install cmake g++). Runs at nice 19 with -j2
# unless JOBS says otherwise, so a shared machine stays usable. Prints the binary's path as its last line.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bundle="$root/node_modules/node-llama-cpp/llama/gitRelease.bundle"
[ -f "$bundle" ] || { echo "build-llama-server: no bundle at $bundle (npm ci first)" >&2; exit 2; }
commit="$(git bundle list-heads "$bundle" | awk '$2 == "HEAD" { print $1 }')"
[ -n "$commit" ] || { echo "build-llama-server: the bundle names no HEAD commit" >&2; exit 2; }
out="$root/.cache/llama-server/$commit"
bin="$out/bin/llama-server"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
mkdir -p "$out"
src="$out/src"
if [ ! -d "$src/.git" ]; then
  rm -rf "$src"
  git clone --quiet "$bundle" "$src"
  git -C "$src" checkout --quiet "$commit"
fi
# GGML_NATIVE: the same -march=native the kernels' peer gets in bench:compare; no GPU backends, no curl (local files)
nice -n 19 cmake -S "$src" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
  -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=ON -DBUILD_SHARED_LIBS=OFF >"$out/cmake.log"
nice -n 19 cmake --build "$out/build" --target llama-server -j "${JOBS:-2}" >"$out/build.log"
mkdir -p "$out/bin"
cp "$out/build/bin/llama-server" "$bin"
echo "$bin"
