#!/usr/bin/env bash
# Build what a release publishes, from this checkout, into DIST (default dist/):
# the wheel, the sdist, the packaged Helm chart, the one-file install bundle
# (install.yaml, rendered from the chart), the CycloneDX SBOM of the wheel and its
# locked dependencies (requirements.lock), and SHA256SUMS over all five.
# Publishing them (PyPI, the chart repository, the image registry) is a
# separate, manual step: see docs/install.md, "Release steps".
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
# helm alone of the pinned components (built once from the Go module proxy, then cached).
helm="${HELM:-$(bash "$root/hack/k8s/build.sh" helm | tail -n 1)/helm}"
dist="$(mkdir -p "${DIST:-$root/dist}" && cd "${DIST:-$root/dist}" && pwd)"
version="$(cat "$root/VERSION")"
chart="$root/charts/trussium-operator"

# One version everywhere, or no release (tests/pure/test_version.py checks the same).
grep -qx "version: $version" "$chart/Chart.yaml" || { echo "Chart.yaml version is not $version (VERSION)" >&2; exit 1; }
grep -qx "appVersion: \"$version\"" "$chart/Chart.yaml" || { echo "Chart.yaml appVersion is not $version (VERSION)" >&2; exit 1; }

rm -f "$dist"/trussium_operator-* "$dist"/trussium-operator-python-*.tgz "$dist/install.yaml" "$dist/SHA256SUMS"
sbom="trussium_operator-$version.cdx.json"
# No isolation: the build backend comes from the project's own environment, so
# this needs no index beyond what `make venv` already installed.
"$python" -m build --no-isolation --sdist --wheel --outdir "$dist" "$root" >&2
"$helm" lint --strict "$chart" >&2
"$helm" package "$chart" --destination "$dist" >&2
(cd "$root" && "$python" -m hack.bundle --helm "$helm" --output "$dist/install.yaml" >&2)
# Every component pinned by version and hash: read from the lock, no index queried.
"$(dirname "$python")/cyclonedx-py" requirements --pyproject "$root/pyproject.toml" \
  --output-reproducible --of JSON -o "$dist/$sbom" "$root/requirements.lock" 2>/dev/null
# pyproject.toml's version is dynamic (the VERSION file), so the tool leaves it out.
"$python" - "$dist/$sbom" "$version" <<'PY'
import json, sys
from pathlib import Path
path, version = Path(sys.argv[1]), sys.argv[2]
bom = json.loads(path.read_text())
bom["metadata"]["component"]["version"] = version
path.write_text(json.dumps(bom, indent=2) + "\n")
PY
cd "$dist"
sha256sum trussium_operator-"$version"-*.whl trussium_operator-"$version".tar.gz \
  trussium-operator-python-"$version".tgz install.yaml "$sbom" > SHA256SUMS
cat SHA256SUMS
