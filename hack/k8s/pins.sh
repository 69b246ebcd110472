# Sourced by build.sh and build-node.sh: the pins of the Kubernetes minor to
# build. versions.env pins the newest supported minor (what `make test` runs);
# TRUSSIUM_K8S_VERSION=1.NN (`make test-k8s K8S_VERSION=1.NN`) selects another
# supported minor, whose versions-1.NN.env overrides KUBERNETES_VERSION and
# KUBERNETES_STAGING_VERSION (and KUBERNETES_EXTRA_LDFLAGS where a minor needs
# them to build with today's Go).
# Sets `pins`: the effective pin lines, which key the caches (for the newest
# minor exactly versions.env's, so its cache key is what it always was).
# shellcheck source=versions.env
source "$here/versions.env"
pins="$(grep -hv '^#' "$here/versions.env")"
KUBERNETES_EXTRA_LDFLAGS=""
if [[ -n "${TRUSSIUM_K8S_VERSION:-}" && "v${TRUSSIUM_K8S_VERSION#v}." != "${KUBERNETES_VERSION%.*}." ]]; then
  pins_override="$here/versions-${TRUSSIUM_K8S_VERSION#v}.env"
  if [[ ! -f "$pins_override" ]]; then
    pinned="$(cd "$here" && ls versions-1.*.env | sed 's/^versions-\(.*\)\.env$/\1/' | sort -V | tr '\n' ' ')"
    newest="${KUBERNETES_VERSION#v}"
    echo "TRUSSIUM_K8S_VERSION=$TRUSSIUM_K8S_VERSION: no pins (pinned: ${pinned}${newest%.*})" >&2
    exit 1
  fi
  # shellcheck disable=SC1090
  source "$pins_override"
  pins+=$'\n'"$(grep -hv '^#' "$pins_override")"
fi
