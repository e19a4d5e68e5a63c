#!/usr/bin/env bash
# Debian packages for the real-tool checks of rendered files (validators) and the QEMU boot.
# Idempotent: installs only what is missing.
set -euo pipefail
packages=(make)
missing=()
for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
