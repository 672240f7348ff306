#!/usr/bin/env bash
# Builds one of llama.cpp's tools from the tree bundled with node-llama-cpp, CPU only, pinned by the bundle's commit,
# into .cache/<folder>/<bundle commit>/bin/<tool>; does nothing when it is there. Prints the binary's path last.
#   llama-server     the serving benchmark's peer (bench/serve-compare.ts), in .cache/llama-server/
#   llama-mtmd-cli   the vision oracle (a model GGUF plus its mmproj, --image), in .cache/llama-mtmd/
# Needs cmake and g++ (Debian: apt-get install cmake g++). Runs at nice 19 with -j2 unless JOBS says otherwise, so a
# shared machine stays usable.
set -euo pipefail
tool="${1:-}"
case "$tool" in
  llama-server) folder=llama-server; build_flags=(-DLLAMA_BUILD_SERVER=ON) ;;
  # LLAMA_BUILD_TOOLS: tools/mtmd (libmtmd and llama-mtmd-cli) lives under tools/
  llama-mtmd-cli) folder=llama-mtmd; build_flags=(-DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF) ;;
  *) echo "build-llama-tool: give llama-server or llama-mtmd-cli (got '${tool}')" >&2; exit 2 ;;
esac
root="$(cd "$(dirname "$0")/.." && pwd)"
bundle="$root/node_modules/node-llama-cpp/llama/gitRelease.bundle"
[ -f "$bundle" ] || { echo "build-llama-tool: no bundle at $bundle (npm ci first)" >&2; exit 2; }
commit="$(git bundle list-heads "$bundle" | awk '$2 == "HEAD" { print $1 }')"
[ -n "$commit" ] || { echo "build-llama-tool: the bundle names no HEAD commit" >&2; exit 2; }
out="$root/.cache/$folder/$commit"
bin="$out/bin/$tool"
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
  "${build_flags[@]}" -DBUILD_SHARED_LIBS=OFF >"$out/cmake.log" 2>&1
nice -n 19 cmake --build "$out/build" --target "$tool" -j "${JOBS:-2}" >"$out/build.log" 2>&1 || { tail -30 "$out/build.log" >&2; exit 1; }
mkdir -p "$out/bin"
cp "$out/build/bin/$tool" "$bin"
echo "$bin"
