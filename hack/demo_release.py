"""The operator as the demo installs it into a cluster the user gives: the
chart's release, its pods running the operator image that cluster can pull or
has imported (`IMAGE_REPOSITORY`, `IMAGE_TAG`: docs/local-control-plane.md).

On the local control plane the demo runs both programs as host processes
instead (devcluster.hostoperator); a given cluster's API server, often in a
container (kind, k3d), cannot call a webhook on this host's 127.0.0.1.
"""

import json
import os
from collections.abc import Mapping
from types import TracebackType
from typing import Self

from devcluster import ControlPlane, polling
from devcluster.hostoperator import CHART

RELEASE = "trussium-demo"
INSTALL_TIMEOUT_SECONDS = 300
CA_TIMEOUT_SECONDS = 120.0


def image_values(environ: Mapping[str, str] = os.environ) -> list[str]:
    """`--set` flags for the operator image: the chart's default unless overridden."""
    values = []
    repository = environ.get("IMAGE_REPOSITORY", "")
    if repository:
        # The whole reference, registry included (a local registry, kind's names).
        values += ["--set", "image.registry=", "--set", f"image.repository={repository}"]
    tag = environ.get("IMAGE_TAG", "")
    if tag:
        values += ["--set", f"image.tag={tag}"]
    return values


class ChartRelease:
    """`with ChartRelease(cluster):` installs and waits; leaving uninstalls (the CRD stays)."""

    def __init__(self, cluster: ControlPlane, namespace: str = RELEASE) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.values = image_values()

    def image(self) -> str:
        """The image the controller's pod runs, as the cluster has it."""
        out = self.cluster.kubectl(
            "get", "deployments", "-n", self.namespace, "-l",
            f"app.kubernetes.io/instance={RELEASE}", "-o",
            "jsonpath={.items[0].spec.template.spec.containers[0].image}",
        )  # fmt: skip
        return out.stdout

    def logs_hint(self) -> str:
        return f"kubectl logs -n {self.namespace} -l app.kubernetes.io/instance={RELEASE}"

    def __enter__(self) -> Self:
        try:
            self._install()
        except BaseException:
            self._uninstall()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._uninstall()

    def _install(self) -> None:
        self.cluster.helm(
            "upgrade", "--install", RELEASE, str(CHART), "--namespace", self.namespace,
            "--create-namespace", "--wait", f"--timeout={INSTALL_TIMEOUT_SECONDS}s", *self.values,
            timeout=INSTALL_TIMEOUT_SECONDS + 60,
        )  # fmt: skip
        what = "the webhook's CA in its configurations"
        polling.wait_for(self._ca_injected, what, CA_TIMEOUT_SECONDS)

    def _uninstall(self) -> None:
        self.cluster.helm(
            "uninstall", RELEASE, "--namespace", self.namespace, "--wait", check=False
        )
        self.cluster.kubectl(
            "delete", "namespace", self.namespace, "--ignore-not-found", check=False
        )

    def _ca_injected(self) -> bool:
        answer = self.cluster.kubectl(
            "get", "mutatingwebhookconfigurations,validatingwebhookconfigurations",
            "-l", f"app.kubernetes.io/instance={RELEASE}", "-o", "json",
        )  # fmt: skip
        hooks = [h for c in json.loads(answer.stdout)["items"] for h in c.get("webhooks", [])]
        return bool(hooks) and all(h.get("clientConfig", {}).get("caBundle") for h in hooks)
