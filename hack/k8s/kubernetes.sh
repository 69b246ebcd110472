# Sourced by build.sh and build-node.sh: build commands of k8s.io/kubernetes at
# $KUBERNETES_VERSION through one wrapper module, every staging module replaced
# by its published $KUBERNETES_STAGING_VERSION, with the real version stamped in.
# Both scripts use the same recipe, so the Go build cache serves both.

# build_kubernetes WORKDIR BINDIR COMMAND...: builds each COMMAND (e.g. kubelet)
# missing from BINDIR into it.
build_kubernetes() {
  local work="$1" bin="$2"; shift 2
  local missing=() c
  for c in "$@"; do [[ -x "$bin/$c" ]] || missing+=("$c"); done
  ((${#missing[@]})) || return 0
  echo ">> [$(date +%T)] resolving k8s.io/kubernetes $KUBERNETES_VERSION" >&2
  mkdir -p "$work" && cd "$work"
  go mod init trussium.local/k8sbuild >/dev/null 2>&1
  local modfile m
  modfile="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  go mod edit -require="k8s.io/kubernetes@$KUBERNETES_VERSION"
  for m in $(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$modfile"); do
    go mod edit -replace="$m=$m@$KUBERNETES_STAGING_VERSION"
  done
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for c in "${missing[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
    printf ')\n'
  } > tools.go
  go mod tidy -e >/dev/null 2>&1 || true
  go get "k8s.io/kubernetes/cmd/${missing[0]}@$KUBERNETES_VERSION" >/dev/null 2>&1 || true
  local minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
  local ld="-s -w" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  [[ -z "${KUBERNETES_EXTRA_LDFLAGS:-}" ]] || ld+=" $KUBERNETES_EXTRA_LDFLAGS"
  for c in "${missing[@]}"; do
    echo ">> [$(date +%T)] building $c $KUBERNETES_VERSION" >&2
    go build -tags tools -ldflags "$ld" -o "$bin/$c.tmp" "k8s.io/kubernetes/cmd/$c"
    mv "$bin/$c.tmp" "$bin/$c"
  done
}
