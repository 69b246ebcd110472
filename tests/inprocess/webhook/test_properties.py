"""No input makes a hook fail: every answer is a well-formed review or a clear 400."""

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import Client
from .reviews import DEPLOYMENT_KIND, RUNTIME_KIND, response, review, runtime

HOOKS = ["/mutate-trussiumruntime", "/validate-trussiumruntime", "/validate-managed-deployment"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)

# Plausible and implausible values for each spec field, so that documents are
# often nearly valid (reaching deep rules) and sometimes wildly wrong.
spec_fields = st.fixed_dictionaries(
    {},
    optional={
        "image": st.fixed_dictionaries(
            {},
            optional={
                "repository": st.sampled_from(["ghcr.io/t/r", "", "UPPER/ok", "bad repo"])
                | json_values,
                "tag": st.sampled_from(["1.0", "latest", "-bad", "x" * 200]) | json_values,
                "digest": st.sampled_from(["sha256:" + "a" * 64, "sha256:zz"]) | json_values,
                "pullPolicy": st.sampled_from(["Always", "Sometimes"]),
            },
        )
        | json_values,
        "replicas": st.integers(-5, 2000) | json_values,
        "imagePullSecrets": st.lists(st.fixed_dictionaries({"name": st.text(max_size=8)}))
        | json_values,
        "provider": st.fixed_dictionaries(
            {"type": st.sampled_from(["openai", "ollama", "other"]), "model": st.text(max_size=8)},
            optional={
                "baseURL": st.sampled_from(["https://a.example", "ftp://x", "http://u:p@h", "::"])
                | json_values,
                "credentialsSecretRef": st.fixed_dictionaries(
                    {"name": st.text(max_size=8), "key": st.text(max_size=8)}
                )
                | json_values,
            },
        )
        | json_values,
        "autoscaling": st.fixed_dictionaries(
            {},
            optional={
                "enabled": st.booleans(),
                "minReplicas": st.integers(-1, 1001),
                "maxReplicas": st.integers(-1, 1001),
            },
        )
        | json_values,
        "networkPolicy": json_values,
        "resources": st.fixed_dictionaries(
            {},
            optional={
                "requests": st.dictionaries(
                    st.sampled_from(["cpu", "memory", "bad name!"]),
                    st.sampled_from(["1", "500m", "1Gi", "lots", "-1"]) | json_values,
                ),
                "limits": json_values,
            },
        )
        | json_values,
        "podMetadata": st.fixed_dictionaries(
            {},
            optional={
                "labels": st.dictionaries(st.text(max_size=12), st.text(max_size=12)),
                "annotations": st.dictionaries(
                    st.sampled_from(
                        ["runtime.trussium.io/x", "seccomp.security.alpha.kubernetes.io/pod", "a"]
                    ),
                    st.text(max_size=5),
                ),
            },
        )
        | json_values,
        "scheduling": st.fixed_dictionaries(
            {},
            optional={
                "nodeSelector": json_values,
                "tolerations": st.lists(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "key": st.text(max_size=5),
                            "operator": st.sampled_from(["Exists", "Equal", "Maybe"]),
                            "value": st.text(max_size=5),
                            "effect": st.sampled_from(["NoSchedule", "Never", ""]),
                            "tolerationSeconds": json_values,
                        },
                    ),
                    max_size=2,
                )
                | json_values,
                "affinity": json_values,
            },
        )
        | json_values,
        "unknownField": json_values,
    },
)

fuzz = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def assert_answered(result: dict[str, Any]) -> None:
    """Allowed, or denied with a Status that explains why."""
    if not result["allowed"]:
        assert result["status"]["code"] in (400, 403, 422)
        assert result["status"]["message"]


review_shaped = st.fixed_dictionaries(
    {
        "apiVersion": st.sampled_from(["admission.k8s.io/v1", "admission.k8s.io/v1beta1"]),
        "kind": st.sampled_from(["AdmissionReview", "Pod"]),
        "request": st.fixed_dictionaries(
            {"uid": st.text(min_size=1, max_size=8)},
            optional={
                "kind": st.sampled_from([RUNTIME_KIND, DEPLOYMENT_KIND]) | json_values,
                "operation": st.sampled_from(["CREATE", "UPDATE", "DELETE"]) | json_values,
                "namespace": json_values,
                "name": json_values,
                "userInfo": json_values,
                "object": json_values,
                "oldObject": json_values,
                "dryRun": json_values,
            },
        ),
    }
)


@fuzz
@given(body=json_values | review_shaped)
async def test_arbitrary_bodies(client: Client, body: Any) -> None:
    for path in HOOKS:
        answer = await client.post(path, data=json.dumps(body))
        if answer.status == 400:
            assert (await answer.json())["error"]
        else:
            assert answer.status == 200
            assert_answered(response(await answer.json(), uid=body["request"]["uid"]))


@fuzz
@given(obj=json_values, old=json_values)
async def test_arbitrary_objects_in_a_review(client: Client, obj: object, old: object) -> None:
    for path in HOOKS:
        body = review(None, operation="UPDATE")
        body["request"]["object"], body["request"]["oldObject"] = obj, old
        answer = await client.post(path, json=body)
        assert answer.status == 200
        assert_answered(response(await answer.json()))


@fuzz
@given(spec=spec_fields, old_spec=spec_fields, operation=st.sampled_from(["CREATE", "UPDATE"]))
async def test_generated_runtimes(
    client: Client, spec: dict[str, Any], old_spec: dict[str, Any], operation: str
) -> None:
    obj, old = runtime(**spec), runtime(**old_spec)
    for path in HOOKS[:2]:
        answer = await client.post(path, json=review(obj, old=old, operation=operation))
        assert answer.status == 200
        assert_answered(response(await answer.json()))
    guard = review(obj, old=old, operation="UPDATE", kind=DEPLOYMENT_KIND, username="admin")
    answer = await client.post(HOOKS[2], json=guard)
    assert answer.status == 200
    assert_answered(response(await answer.json()))
