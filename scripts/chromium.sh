#!/usr/bin/env bash
# Makes sure headless Chromium is at /usr/bin/chromium for the dashboard's browser tests
# (driven by playwright-core). Idempotent: does nothing when it is there; otherwise installs the
# Debian `chromium` package with apt-get, running `apt-get update` only when the package is unknown.
set -euo pipefail

if [[ -x /usr/bin/chromium ]]; then
  echo "[chromium] /usr/bin/chromium present"
  exit 0
fi
command -v apt-get >/dev/null 2>&1 || { echo "[chromium] ERROR: /usr/bin/chromium missing and no apt-get" >&2; exit 1; }

as_root() {
  if [[ "$(id -u)" -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
    echo "[chromium] ERROR: need root (or sudo) to run: $*" >&2; exit 1
  fi
}

if ! apt-cache show chromium >/dev/null 2>&1; then
  echo "[chromium] apt-get update"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
fi
echo "[chromium] installing chromium"
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
echo "[chromium] installed: $(/usr/bin/chromium --version 2>/dev/null || echo unknown)"
