"""Specs the Go operator's CRD admits that break this project's stricter rules.

One per rule a stored runtime may break (`TOLERATED`), and one per family of
rules that still freeze a stored runtime (`FROZEN`, with the field path
reported), for the pure tests of the policy and for the API server's verdict
on their rendered objects.
"""

import copy
from typing import Any

from tests.pure.test_validation import VALID, with_spec
from trussium_operator.common.ratcheting import TolerableRule

APPARMOR = "container.apparmor.security.beta.kubernetes.io/"
SECCOMP_POD = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_CONTAINER = "container.seccomp.security.alpha.kubernetes.io/"
PROVIDER = VALID["spec"]["provider"]
TOLERATIONS_BOUND = 64  # spec.scheduling.tolerations' maxItems

# One spec per tolerated rule, breaking only it.
TOLERATED: dict[TolerableRule, dict[str, Any]] = {
    TolerableRule.RESERVED_POD_LABEL: with_spec(
        podMetadata={"labels": {"app.kubernetes.io/name": "legacy", "team": "ml"}}
    ),
    TolerableRule.RESERVED_POD_ANNOTATION: with_spec(
        podMetadata={"annotations": {"runtime.trussium.io/owner": "ml"}}
    ),
    TolerableRule.SECURITY_PROFILE_ANNOTATION: with_spec(
        podMetadata={"annotations": {f"{APPARMOR}trussium": "unconfined"}}
    ),
    TolerableRule.BASE_URL_NOT_HTTP: with_spec(provider=PROVIDER | {"baseURL": "localhost:11434"}),
    TolerableRule.BASE_URL_CREDENTIALS: with_spec(
        provider=PROVIDER | {"baseURL": "https://user:s3cret@api.example.com/v1"}
    ),
    TolerableRule.AUTOSCALING_WITHOUT_CPU_REQUEST: with_spec(
        autoscaling={"enabled": True, "minReplicas": 1, "maxReplicas": 3}, resources=None
    ),
    TolerableRule.IMAGE_REFERENCE: with_spec(
        image={"repository": "Registry.Example.com/Trussium", "tag": "1.0"}
    ),
    TolerableRule.TOO_MANY_ENTRIES: with_spec(
        scheduling={
            "tolerations": [
                {"key": f"example.com/pool-{i}", "operator": "Exists"}
                for i in range(TOLERATIONS_BOUND + 1)
            ]
        }
    ),
}


# Specs the Go CRD let through whose rendered objects the API server refuses, or that
# break a rule the Go CRD enforced too: frozen, as before.
FROZEN: dict[str, tuple[dict[str, Any], str]] = {
    "toleration operator": (
        with_spec(scheduling={"tolerations": [{"key": "gpu", "operator": "Exist"}]}),
        "spec.scheduling.tolerations[0].operator",
    ),
    "node selector key": (
        with_spec(scheduling={"nodeSelector": {"bad key": "x"}}),
        "spec.scheduling.nodeSelector[bad key]",
    ),
    "request above limit": (
        with_spec(resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
        "spec.resources.requests[cpu]",
    ),
    "pod label value": (
        with_spec(podMetadata={"labels": {"team": "not valid!"}}),
        "spec.podMetadata.labels[team]",
    ),
    "claim name": (
        with_spec(resources={"claims": [{"name": "GPU"}]}),
        "spec.resources.claims[0].name",
    ),
    "runtime name": (
        {**copy.deepcopy(VALID), "metadata": {"name": "a.b", "namespace": "team"}},
        "metadata.name",
    ),
    "seccomp pod annotation other than RuntimeDefault": (
        with_spec(podMetadata={"annotations": {SECCOMP_POD: "unconfined"}}),
        f"spec.podMetadata.annotations[{SECCOMP_POD}]",
    ),
    "seccomp profile path": (
        with_spec(podMetadata={"annotations": {f"{SECCOMP_CONTAINER}trussium": "localhost/../x"}}),
        f"spec.podMetadata.annotations[{SECCOMP_CONTAINER}trussium]",
    ),
    "AppArmor annotation for another container": (
        with_spec(podMetadata={"annotations": {f"{APPARMOR}sidecar": "unconfined"}}),
        f"spec.podMetadata.annotations[{APPARMOR}sidecar]",
    ),
    "AppArmor profile": (
        with_spec(podMetadata={"annotations": {f"{APPARMOR}trussium": "loose"}}),
        f"spec.podMetadata.annotations[{APPARMOR}trussium]",
    ),
    "a Go CRD rule": (with_spec(replicas=-1), "spec.replicas"),
}
