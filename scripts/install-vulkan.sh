#!/usr/bin/env bash
# Installs what Dawn (the npm `webgpu` package) needs to find a Vulkan adapter on Debian bookworm without a GPU:
# libvulkan1 (the loader) and Mesa's lavapipe CPU driver from bookworm-backports (Mesa 25; bookworm's own Mesa 22.x
# lavapipe is too old for Dawn). Idempotent: safe to run again. Needs root or sudo (CI calls it from scripts/install-test-deps.sh).
#   scripts/install-vulkan.sh            install (no-op when the adapter's driver is already there)
set -euo pipefail

SOURCES=/etc/apt/sources.list.d/debian.sources
BACKPORTS=bookworm-backports
ICD=/usr/share/vulkan/icd.d/lvp_icd.json

SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"

# Lavapipe from backports is already in place: nothing to do.
if dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null | grep -q bpo && dpkg-query -W libvulkan1 >/dev/null 2>&1 && [ -f "$ICD" ]; then
  echo "install-vulkan: libvulkan1 and mesa-vulkan-drivers (backports) already installed"
  exit 0
fi

# Enable backports by adding it to the Suites: line of the existing Debian entry (the one whose suites include
# "bookworm" itself, not bookworm-security): same mirror, no new URL.
if [ -f "$SOURCES" ]; then
  if ! grep -Eq "^Suites:.*[[:space:]]$BACKPORTS([[:space:]]|$)" "$SOURCES"; then
    $SUDO sed -i -E "/^Suites:.*[[:space:]]bookworm([[:space:]]|$)/ s/\$/ $BACKPORTS/" "$SOURCES"
    echo "install-vulkan: added $BACKPORTS to $SOURCES"
  fi
elif ! grep -Rqs "$BACKPORTS" /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "install-vulkan: no $SOURCES and no $BACKPORTS entry; add $BACKPORTS to your Debian apt source" >&2
  exit 2
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends libvulkan1 "mesa-vulkan-drivers/$BACKPORTS"
echo "install-vulkan: installed $(dpkg-query -W -f='mesa-vulkan-drivers ${Version}' mesa-vulkan-drivers)"
