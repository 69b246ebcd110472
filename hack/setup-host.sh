#!/usr/bin/env bash
# Install the Debian packages the node profile and the Prometheus test need, so a fresh machine runs
# `make test` with nothing installed by hand. Idempotent: a host that already
# has every package installs nothing and does not touch apt at all.
#   libseccomp-dev  runc is built with cgo against it (seccomp RuntimeDefault)
#   iptables        kube-proxy's Service rules and the CNI bridge/portmap plugins
#   iproute2        the node's network namespace, veth pair and routes
#   util-linux      unshare/nsenter: the node's own mount and network namespaces
#   pkg-config gcc  cgo for runc
#   prometheus      evaluates the chart's alerts and dashboard queries against a
#                   running operator (tests/cluster/test_observability.py), which
#                   runs its own on loopback; the package's service (started only
#                   where systemd runs) is not used
# Non-root or non-Debian hosts get a one-line note and exit 0: the node tests
# then skip with their own reason, everything else still runs.
set -euo pipefail
packages=(libseccomp-dev iptables iproute2 util-linux pkg-config gcc libc6-dev prometheus)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then exit 0; fi
if ! command -v apt-get >/dev/null || [[ "$(id -u)" != 0 ]]; then
  echo "setup-host: cannot install ${missing[*]} (needs root and apt); the node profile will be unavailable" >&2
  exit 0
fi
echo ">> setup-host: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Other setup scripts may hold the dpkg lock: wait for it rather than fail.
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2
