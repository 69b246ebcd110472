#!/usr/bin/env bash
# Build the node profile's components from the Go module proxy into a cache
# outside the repository, keyed by their pins: kubelet and kube-proxy from the
# Kubernetes release of versions.env (same wrapper module as build.sh, so the Go
# build cache is shared), containerd v2 with its runc shim and ctr, runc (cgo and
# libseccomp, for seccomp RuntimeDefault), and the CNI plugins the node's bridge
# network uses. Prints the bin directory on its last line; a second run builds
# nothing. TRUSSIUM_NODE_BIN_DIR=/path/with/binaries skips the build.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=go-version.sh
source "$here/go-version.sh"
# shellcheck source=pins.sh
source "$here/pins.sh"
# shellcheck source=node-versions.env
source "$here/node-versions.env"
components=(kubelet kube-proxy containerd containerd-shim-runc-v2 ctr runc bridge host-local loopback portmap)

if [[ -n "${TRUSSIUM_NODE_BIN_DIR:-}" ]]; then
  for c in "${components[@]}"; do
    [[ -x "$TRUSSIUM_NODE_BIN_DIR/$c" ]] || { echo "TRUSSIUM_NODE_BIN_DIR=$TRUSSIUM_NODE_BIN_DIR lacks $c" >&2; exit 1; }
  done
  echo "$TRUSSIUM_NODE_BIN_DIR"; exit 0
fi

# Key: this file's pins plus the Kubernetes release and a selected minor's pins (not the
# rest of versions.env, whose own key must not move when only the node components
# change, nor vice versa).
key="$( { grep -v '^#' "$here/node-versions.env"; grep '^KUBERNETES_' "$here/versions.env"
  [[ -z "${pins_override:-}" ]] || grep -v '^#' "$pins_override"; } | sha256sum | cut -c1-16)"
cache="${TRUSSIUM_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trussium-operator/k8s}"
bin="$cache/node-$key/bin"
all_built() { for c in "${components[@]}"; do [[ -x "$bin/$c" ]] || return 1; done; }
if all_built; then echo "$bin"; exit 0; fi

mkdir -p "$cache"
exec 9>"$cache/.node-lock${pins_override:+-$key}"
flock 9
if all_built; then echo "$bin"; exit 0; fi

require_go "$GO_MIN_NODE" "the node components"
mkdir -p "$bin"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0 GOFLAGS=-trimpath GOTOOLCHAIN=local
step() { echo ">> [$(date +%T)] $*" >&2; }
want() { [[ ! -x "$bin/$1" ]]; }
began=$SECONDS

# --- kubelet and kube-proxy: the same wrapper module as build.sh (kubernetes.sh).
# shellcheck source=kubernetes.sh
source "$here/kubernetes.sh"
build_kubernetes "$work/k8s" "$bin" kubelet kube-proxy

# Installs the commands of one module at one version into $bin.
goinstall() {
  local version="$1" ld="$2" tags="$3"; shift 3
  GOBIN="$work/gobin" go install -tags "$tags" -ldflags "$ld" "${@/%/@$version}"
  for pkg in "$@"; do mv "$work/gobin/${pkg##*/}" "$bin/"; done
}

# --- containerd v2: daemon, runc shim, ctr. No btrfs/devmapper snapshotters
# (cgo-only, and the node uses overlayfs).
if want containerd || want containerd-shim-runc-v2 || want ctr; then
  step "building containerd $CONTAINERD_VERSION"
  goinstall "$CONTAINERD_VERSION" \
    "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
    "no_btrfs no_devmapper" \
    github.com/containerd/containerd/v2/cmd/{containerd,containerd-shim-runc-v2,ctr}
fi

# --- runc: cgo for its nsenter, libseccomp for seccomp profiles.
if want runc; then
  step "building runc $RUNC_VERSION"
  CGO_ENABLED=1 goinstall "$RUNC_VERSION" "-s -w -X main.version=${RUNC_VERSION#v}" "seccomp" \
    github.com/opencontainers/runc
fi

# --- CNI plugins of the node's bridge network.
if want bridge || want host-local || want loopback || want portmap; then
  step "building CNI plugins $CNI_PLUGINS_VERSION"
  goinstall "$CNI_PLUGINS_VERSION" \
    "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION" "" \
    github.com/containernetworking/plugins/plugins/{main/bridge,ipam/host-local,main/loopback,meta/portmap}
fi
step "node components ready in $bin ($((SECONDS - began))s)"
echo "$bin"
