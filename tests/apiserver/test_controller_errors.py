"""The API server's answers `controller.runtime.errors.classify` relies on: a JSON patch whose
`test` no longer holds is a race, an invalid object a reported failure."""

from collections.abc import AsyncIterator
from typing import Any

import pytest

from devcluster import ControlPlane
from trussium_operator.cmdline.kubeconfig import new_api_client
from trussium_operator.controller.machinery.kube import JSON_PATCH, ApiError, Kube
from trussium_operator.controller.runtime.errors import Failure, classify
from trussium_operator.controller.runtime.kinds import OWNED

pytestmark = pytest.mark.api
CONFIGMAPS = OWNED["ConfigMap"]


@pytest.fixture
async def kube(plane: ControlPlane) -> AsyncIterator[Kube]:
    kube = Kube(await new_api_client(str(plane.kubeconfig)))
    yield kube
    await kube.api.close()


async def refusal(kube: Kube, method: str, path: str, body: Any, **options: Any) -> ApiError:
    with pytest.raises(ApiError) as refused:
        await kube.request(method, path, body=body, **options)
    return refused.value


async def test_a_stale_guarded_write_is_a_race_and_an_invalid_object_is_reported(
    kube: Kube, namespace: str
) -> None:
    created = await kube.request(
        "POST",
        CONFIGMAPS.path(namespace),
        body={
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm"},
            "data": {"a": "1"},
        },
    )
    path = CONFIGMAPS.path(namespace, "cm")
    version = created["metadata"]["resourceVersion"]
    await kube.request("PATCH", path, body=[{"op": "add", "path": "/data/b", "value": "2"}],
                       content_type=JSON_PATCH)  # fmt: skip

    answers = {
        "a failed test op": await refusal(
            kube,
            "PATCH",
            path,
            [
                {"op": "test", "path": "/metadata/resourceVersion", "value": version},
                {"op": "remove", "path": "/data/a"},
            ],
            content_type=JSON_PATCH,
        ),
        "a removal of what is gone": await refusal(
            kube, "PATCH", path, [{"op": "remove", "path": "/data/gone"}], content_type=JSON_PATCH
        ),
        "a stale update": await refusal(kube, "PUT", path, created | {"data": {"a": "3"}}),
        "an invalid object": await refusal(
            kube,
            "PATCH",
            path,
            [{"op": "add", "path": "/data/not a key", "value": "x"}],
            content_type=JSON_PATCH,
        ),
    }
    assert {what: (e.status, classify(e)) for what, e in answers.items()} == {
        "a failed test op": (422, Failure.RACE),
        "a removal of what is gone": (422, Failure.RACE),
        "a stale update": (409, Failure.RACE),
        "an invalid object": (422, Failure.REPORTED),
    }
