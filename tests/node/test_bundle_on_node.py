"""The installs without Helm on a real node: the kustomize install applied with
`kubectl apply --server-side -k config/default` (ADR 0043), which holds the objects
of the one-file bundle (`make bundle`, a release artifact; ADR 0031), object for
object (tests/apiserver/test_kustomize_config.py), and the bundle applied again
over it as an upgrade. The operator image runs as its pods, the webhook admits and
refuses, the controller turns a runtime into its workload, and
`kubectl delete -f install.yaml` leaves nothing behind."""

import json
from pathlib import Path

import pytest
import yaml

from devcluster import ControlPlane
from devcluster.controller_harness import (
    Obj,
    apply,
    get,
    runtime_manifest,
    wait_condition,
    wait_for,
)
from devcluster.node import build_image
from hack.bundle import NAMESPACE, RELEASE, render
from tests.node.runtime_image import STANDIN_REPOSITORY, STANDIN_TAG, import_standin

pytestmark = pytest.mark.node
REPO = Path(__file__).resolve().parents[2]
CRD = "trussiumruntimes.runtime.trussium.io"
ROLLOUT_SECONDS = 240.0
DELETE_SECONDS = 300.0


def _objects(bundle: Path) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(bundle.read_text()) if doc]


def _absent(plane: ControlPlane, obj: Obj) -> bool:
    metadata = obj["metadata"]
    where = ("-n", metadata["namespace"]) if "namespace" in metadata else ()
    kind = f"{obj['kind'].lower()}.{obj['apiVersion'].rsplit('/', 1)[0]}".removesuffix(".v1")
    answer = plane.kubectl(
        "get", kind, metadata["name"], *where, "--ignore-not-found", "-o", "name"
    )
    return answer.stdout.strip() == ""


def test_config_default_installs_runs_a_runtime_and_the_bundle_deletes_it_cleanly(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    plane.node.import_image(build_image("operator"))
    import_standin(plane)
    bundle = tmp_path / "install.yaml"
    bundle.write_text(render(plane.bin_dir / "helm"))
    objects = _objects(bundle)
    assert objects[0]["kind"] == "Namespace"
    assert {o["metadata"].get("namespace", NAMESPACE) for o in objects} == {NAMESPACE}

    plane.kubectl("apply", "--server-side", "-k", str(REPO / "config" / "default"))
    for component in ("controller", "webhook"):
        plane.kubectl(
            "rollout", "status", f"deployment/{RELEASE}-{component}", "-n", NAMESPACE,
            f"--timeout={ROLLOUT_SECONDS:.0f}s", timeout=ROLLOUT_SECONDS + 30,
        )  # fmt: skip

    # The webhook admits and refuses through its Service (it wrote its own CA bundle).
    refused = plane.kubectl(
        "apply", "--dry-run=server", "-n", namespace,
        "-f", str(REPO / "examples" / "invalid-runtime.yaml"), check=False,
    )  # fmt: skip
    assert refused.returncode != 0
    assert 'The TrussiumRuntime "broken" is invalid' in refused.stderr
    # The controller renders a runtime's workload, which runs on the node.
    apply(
        plane,
        runtime_manifest(
            "bundled",
            namespace,
            image={"repository": STANDIN_REPOSITORY, "tag": STANDIN_TAG},
            runtime={"shutdownDrainTimeoutSeconds": 1},
        ),
    )
    wait_condition(plane, "bundled", namespace, "Ready", "True", "RuntimeReady", ROLLOUT_SECONDS)
    deployment = get(plane, "deployment", "bundled", namespace)
    assert deployment is not None
    assert deployment["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "trussium-operator"

    # Applying the bundle over it (an upgrade to the same version, or a switch from
    # config/ to the bundle) changes nothing and conflicts with nothing: the same
    # field manager (kubectl), and the webhook's CA bundle is its own field.
    plane.kubectl("apply", "--server-side", "-f", str(bundle))
    hooks = json.loads(
        plane.kubectl("get", "validatingwebhookconfiguration", RELEASE, "-o", "json").stdout
    )["webhooks"]
    assert all(hook["clientConfig"].get("caBundle") for hook in hooks)

    # docs/install.md's order: the runtimes first (garbage collection takes their
    # workloads while their kind still exists), then the bundle.
    plane.kubectl("delete", "trussiumruntimes", "--all", "--all-namespaces", "--wait=true")
    wait_for(
        lambda: get(plane, "deployment", "bundled", namespace) is None,
        "the runtime's Deployment collected",
        DELETE_SECONDS,
    )
    plane.kubectl(
        "delete", "-f", str(bundle), "--wait=true", f"--timeout={DELETE_SECONDS:.0f}s",
        timeout=DELETE_SECONDS + 30,
    )  # fmt: skip
    assert [o for o in objects if not _absent(plane, o)] == []
    assert plane.kubectl("get", "crd", CRD, check=False).returncode != 0
