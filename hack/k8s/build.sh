#!/usr/bin/env bash
# Build the pinned Kubernetes components of the local control plane from the
# Go module proxy into a cache outside the repository, keyed by the pins.
#
# Prints the bin directory on its last line. A second run builds nothing.
# `build.sh helm` builds (or finds) only the components named, e.g. helm alone
# for make release-artifacts, etcd kube-apiserver kubectl helm for the api profile.
# TRUSSIUM_K8S_BIN_DIR=/path/with/binaries skips the build entirely (e.g. envtest's
# assets plus kwok/helm/kube-controller-manager/kube-scheduler from elsewhere).
# Besides the binaries, the bin directory holds kwok-stages.yaml: the standalone
# kwok binary has no built-in stages, so its default "fast" set (nodes Ready,
# pods Running and Ready) is taken from the pinned kwok module at build time.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=go-version.sh
source "$here/go-version.sh"
# shellcheck source=pins.sh
source "$here/pins.sh"
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm)
stages=kwok-stages.yaml
if (($#)); then
  for c in "$@"; do
    [[ " ${components[*]} " == *" $c "* ]] || { echo "unknown component: $c" >&2; exit 2; }
  done
  components=("$@")
fi
requested() { [[ " ${components[*]} " == *" $1 "* ]]; }

if [[ -n "${TRUSSIUM_K8S_BIN_DIR:-}" ]]; then
  for c in "${components[@]}"; do
    [[ -x "$TRUSSIUM_K8S_BIN_DIR/$c" ]] || { echo "TRUSSIUM_K8S_BIN_DIR=$TRUSSIUM_K8S_BIN_DIR lacks $c" >&2; exit 1; }
  done
  ! requested kwok || [[ -f "$TRUSSIUM_K8S_BIN_DIR/$stages" ]] || { echo "TRUSSIUM_K8S_BIN_DIR=$TRUSSIUM_K8S_BIN_DIR lacks $stages (kwok Stage objects)" >&2; exit 1; }
  echo "$TRUSSIUM_K8S_BIN_DIR"; exit 0
fi

# The cache key is the pins (BUILD_REVISION in versions.env changes it when the recipe changes).
key="$(sha256sum <<<"$pins" | cut -c1-16)"
cache="${TRUSSIUM_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trussium-operator/k8s}"
bin="$cache/$key/bin"
all_built() {
  for c in "${components[@]}"; do [[ -x "$bin/$c" ]] || return 1; done
  ! requested kwok || [[ -f "$bin/$stages" ]]
}
if all_built; then echo "$bin"; exit 0; fi

# One build per key at a time: a concurrent caller waits for it, then finds everything built.
# (The newest minor's lock keeps the name it had before there were other minors.)
mkdir -p "$cache"
exec 9>"$cache/.lock${pins_override:+-$key}"
flock 9
if all_built; then echo "$bin"; exit 0; fi

require_go "$GO_MIN_COMPONENTS" "the Kubernetes components"
mkdir -p "$bin"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0 GOFLAGS=-trimpath GOTOOLCHAIN=local
step() { echo ">> [$(date +%T)] $*" >&2; }
want() { requested "$1" && [[ ! -x "$bin/$1" ]]; }

# --- Kubernetes: one wrapper module (kubernetes.sh).
# shellcheck source=kubernetes.sh
source "$here/kubernetes.sh"
kube=()
for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do requested "$c" && kube+=("$c"); done
build_kubernetes "$work/k8s" "$bin" "${kube[@]}"

# --- etcd: its server module carries replace directives, so build it from a wrapper too.
if want etcd; then
  step "building etcd $ETCD_VERSION"
  mkdir -p "$work/etcd" && cd "$work/etcd"
  go mod init trussium.local/etcdbuild >/dev/null 2>&1
  cat > main.go <<'GO'
// Command etcd is the upstream etcd server entry point.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>&1
  go mod tidy >/dev/null 2>&1
  go build -ldflags "-s -w" -o "$bin/etcd.tmp" . && mv "$bin/etcd.tmp" "$bin/etcd"
fi

# --- kwok and helm install directly.
if want kwok; then
  step "building kwok $KWOK_VERSION"
  GOBIN="$work/gobin" go install -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  mv "$work/gobin/kwok" "$bin/kwok"
fi
if want helm; then
  step "building helm $HELM_VERSION"
  minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
  ld="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    ld+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$minor"
  done
  GOBIN="$work/gobin" go install -ldflags "$ld" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  mv "$work/gobin/helm" "$bin/helm"
fi
if requested kwok && [[ ! -f "$bin/$stages" ]]; then
  step "extracting kwok $KWOK_VERSION default stages"
  mkdir -p "$work/stages" && cd "$work/stages"
  kwokdir="$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  # kwok's "fast" default: kustomize/stage/fast lists exactly these three.
  for f in "$kwokdir"/kustomize/stage/{node/fast,node/heartbeat-with-lease,pod/fast}/*.yaml; do
    [[ "$(basename "$f")" == kustomization.yaml ]] && continue
    echo "---"; cat "$f"
  done > "$bin/$stages.tmp"
  mv "$bin/$stages.tmp" "$bin/$stages"
fi
step "components ready in $bin"
echo "$bin"
