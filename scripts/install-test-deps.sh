#!/usr/bin/env bash
# System packages the test suite drives for real: Chromium (Swagger UI browser test), Prometheus + promtool
# (/metrics tests), and a Vulkan CPU driver for the WebGPU backend tests. Idempotent; needs root (or sudo).
set -euo pipefail
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
if [ ${#need[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
here="$(cd "$(dirname "$0")" && pwd)"
[ -x "$here/install-vulkan.sh" ] && "$here/install-vulkan.sh"
echo "test dependencies: chromium $(command -v chromium >/dev/null && echo ok), promtool $(command -v promtool >/dev/null && echo ok)"
