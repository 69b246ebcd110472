#!/usr/bin/env bash
# Build cert-manager (controller and cainjector, one binary: see
# certmanager/main.go) from the Go module proxy at the version pinned in
# certmanager.env, into a cache outside the repository keyed by the pins and
# the wrapper source. Also copies cert-manager's CRDs from the same module.
#
# Prints the bin directory on its last line; a second run builds nothing.
# TRUSSIUM_CERT_MANAGER_BIN_DIR=/path skips the build (it must hold
# cert-manager and cert-manager-crds.yaml).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=go-version.sh
source "$here/go-version.sh"
# shellcheck source=certmanager.env
source "$here/certmanager.env"
binary=cert-manager
crds=cert-manager-crds.yaml

if [[ -n "${TRUSSIUM_CERT_MANAGER_BIN_DIR:-}" ]]; then
  for f in "$binary" "$crds"; do
    [[ -e "$TRUSSIUM_CERT_MANAGER_BIN_DIR/$f" ]] || { echo "TRUSSIUM_CERT_MANAGER_BIN_DIR lacks $f" >&2; exit 1; }
  done
  echo "$TRUSSIUM_CERT_MANAGER_BIN_DIR"; exit 0
fi

key="$(cat "$here/certmanager.env" "$here/certmanager/main.go" | sha256sum | cut -c1-16)"
cache="${TRUSSIUM_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trussium-operator/k8s}/cert-manager"
bin="$cache/$key/bin"
built() { [[ -x "$bin/$binary" && -f "$bin/$crds" ]]; }
if built; then echo "$bin"; exit 0; fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if built; then echo "$bin"; exit 0; fi

require_go "$GO_MIN_CERT_MANAGER" "cert-manager"
mkdir -p "$bin"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0 GOFLAGS=-trimpath GOTOOLCHAIN=local
step() { echo ">> [$(date +%T)] $*" >&2; }

step "resolving github.com/cert-manager/cert-manager $CERT_MANAGER_VERSION"
cd "$work"
go mod init trussium.local/certmanagerbuild >/dev/null 2>&1
cp "$here/certmanager/main.go" .
go get "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION" >/dev/null
go mod tidy >/dev/null
# The module's own requirements decide every dependency: tidy must not have moved it.
resolved="$(go list -m github.com/cert-manager/cert-manager)"
[[ "$resolved" == "github.com/cert-manager/cert-manager $CERT_MANAGER_VERSION" ]] || {
  echo "go mod tidy resolved $resolved, not the pinned $CERT_MANAGER_VERSION" >&2; exit 1; }
step "building cert-manager $CERT_MANAGER_VERSION"
go build -ldflags "-s -w" -o "$bin/$binary.tmp" . && mv "$bin/$binary.tmp" "$bin/$binary"
moddir="$(go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)"
for f in "$moddir"/deploy/crds/*.yaml; do echo "---"; cat "$f"; done > "$bin/$crds.tmp"
mv "$bin/$crds.tmp" "$bin/$crds"
step "cert-manager ready in $bin"
echo "$bin"
