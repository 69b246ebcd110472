# Sourced by the build scripts: `require_go MIN WHAT` stops a build before it
# starts when the Go on PATH is older than MIN (go-versions.env), naming both.
# shellcheck source=go-versions.env
source "$here/go-versions.env"

require_go() {
  local need="$1" what="$2" found
  if ! command -v go >/dev/null; then
    echo "Go $need or newer is required to build $what, and there is no go on PATH." >&2
    echo "Install it from https://go.dev/dl/ (or your package manager) and put it first on PATH." >&2
    exit 1
  fi
  found="$(GOTOOLCHAIN=local go version | awk '{print $3}')"
  found="${found#go}"
  if [[ "$(printf '%s\n%s\n' "$need" "$found" | sort -V | head -n 1)" != "$need" ]]; then
    echo "Go $found ($(command -v go)) is too old to build $what: their go.mod files require Go $need or newer." >&2
    echo "Install Go $need or newer from https://go.dev/dl/ and put it first on PATH (the builds never fetch a toolchain: GOTOOLCHAIN=local)." >&2
    exit 1
  fi
}
