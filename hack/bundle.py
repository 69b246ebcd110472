"""Build script: the one-file install bundle, `install.yaml`, rendered from the chart.

What the Go operator's releases ship as `dist/install.yaml` (its kustomize
bundle): everything in one file for `kubectl apply --server-side -f`, in the
namespace `trussium-operator-system`. Ours is the chart itself, rendered by
`helm template` with its default values (certificates self-managed by the
controller, the CRD included) and one change: the CRD without `helm.sh/resource-policy: keep`,
which only Helm reads; the `helm test` hook is left out. So the bundle follows every
change to the chart.
A Namespace comes first, enforcing the restricted Pod Security Standard that
both programs' Pods meet. ADR 0031.

`make bundle` (`python -m hack.bundle --helm PATH --output dist/install.yaml`)
writes it; `make release-artifacts` adds it to the release.
"""

import argparse
import subprocess
import sys
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
CHART = REPO_ROOT / "charts" / "trussium-operator"
VERSION = (REPO_ROOT / "VERSION").read_text().strip()
NAMESPACE = "trussium-operator-system"
# Objects named trussium-operator-controller, -webhook, ...: as the chart's docs name them.
RELEASE = "trussium-operator"
# The `helm test` hook's objects are Helm's alone: `--skip-tests` leaves them out.
VALUES = ("--skip-tests", "--set", "crds.keep=false")
RENDER_TIMEOUT_SECONDS = 120

NAMESPACE_OBJECT = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {
        "name": NAMESPACE,
        "labels": {
            "app.kubernetes.io/name": "trussium-operator",
            "pod-security.kubernetes.io/enforce": "restricted",
        },
    },
}


def render(helm: Path) -> str:
    """The bundle's text: a header, the Namespace, then the chart's objects."""
    chart = subprocess.run(
        [str(helm), "template", RELEASE, str(CHART), "--namespace", NAMESPACE, *VALUES],
        check=True,
        capture_output=True,
        text=True,
        timeout=RENDER_TIMEOUT_SECONDS,
    ).stdout
    header = (
        f"# Trussium operator {VERSION}: the install bundle, rendered from the Helm chart\n"
        f"# (charts/trussium-operator) by hack/bundle.py: its defaults, crds.keep=false.\n"
        f"#   kubectl apply --server-side -f install.yaml\n"
        f"# Deleting it (kubectl delete -f install.yaml) deletes the CRD, and with it\n"
        f'# every TrussiumRuntime and its workloads. docs/install.md, "One-file bundle".\n'
    )
    namespace = yaml.safe_dump(NAMESPACE_OBJECT, sort_keys=False)
    return f"{header}---\n{namespace}{chart}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.bundle", description=__doc__)
    parser.add_argument("--helm", type=Path, required=True, help="the helm binary")
    parser.add_argument("--output", type=Path, required=True, help="where to write install.yaml")
    args = parser.parse_args(argv)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(render(args.helm))
    print(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
