#!/usr/bin/env bash
# Builds llama.cpp's `llama-mtmd-cli` (the vision oracle: a model GGUF plus its mmproj, `--image`) from the tree bundled
# with node-llama-cpp, CPU only, into .cache/llama-mtmd/<bundle commit>/bin/llama-mtmd-cli, pinned by the bundle's
# commit; does nothing when it is there. The cmake flags are those of scripts/build-llama-server.sh (GGML_NATIVE, no
# curl, no GPU backends) so one tree serves both peers. Needs cmake and g++. Runs at nice 19 with -j2 unless JOBS says
# otherwise, so a shared machine stays usable. Prints the binary's path as its last line.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bundle="$root/node_modules/node-llama-cpp/llama/gitRelease.bundle"
[ -f "$bundle" ] || { echo "build-llama-mtmd: no bundle at $bundle (npm ci first)" >&2; exit 2; }
commit="$(git bundle list-heads "$bundle" | awk '$2 == "HEAD" { print $1 }')"
[ -n "$commit" ] || { echo "build-llama-mtmd: the bundle names no HEAD commit" >&2; exit 2; }
out="$root/.cache/llama-mtmd/$commit"
bin="$out/bin/llama-mtmd-cli"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
mkdir -p "$out"
src="$out/src"
if [ ! -d "$src/.git" ]; then
  rm -rf "$src"
  git clone --quiet "$bundle" "$src"
  git -C "$src" checkout --quiet "$commit"
fi
# LLAMA_BUILD_TOOLS: tools/mtmd (libmtmd and llama-mtmd-cli) lives under tools/
nice -n 19 cmake -S "$src" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
  -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF >"$out/cmake.log"
nice -n 19 cmake --build "$out/build" --target llama-mtmd-cli -j "${JOBS:-2}" >"$out/build.log"
mkdir -p "$out/bin"
cp "$out/build/bin/llama-mtmd-cli" "$bin"
echo "$bin"
