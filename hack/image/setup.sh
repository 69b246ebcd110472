#!/usr/bin/env bash
# Install the Debian packages the image build needs: mmdebstrap (the base
# root filesystem from Debian packages) and umoci (OCI image layouts).
# Idempotent: installs nothing, and does not touch apt, when both are present.
set -euo pipefail
packages=(mmdebstrap umoci)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
# Like hack/setup-host.sh: without root or apt, say so and go on; the image
# tests then skip with their own reason.
if ! command -v apt-get >/dev/null || [[ $EUID -ne 0 ]]; then
  echo "image setup: cannot install ${missing[*]} (needs root and apt); images cannot be built here" >&2
  exit 0
fi
echo ">> installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Other setup scripts may hold the dpkg lock: wait for it rather than fail.
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2
