"""What others added to the pod template is found (by managedFields) and removed."""

from typing import Any

from trussium_operator.controller.runtime.drift import (
    POD_TEMPLATE,
    foreign_removals,
    service_ports_restoration,
)

OURS = {
    "manager": "trussium-operator",
    "operation": "Apply",
    "fieldsV1": {
        "f:spec": {
            "f:replicas": {},
            "f:template": {
                "f:metadata": {"f:annotations": {"f:runtime.trussium.io/config-checksum": {}}},
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"trussium"}': {
                            ".": {},
                            "f:image": {},
                            "f:name": {},
                            "f:env": {'k:{"name":"TRUSSIUM_PROVIDER__API_KEY"}': {".": {}}},
                        }
                    },
                    "f:securityContext": {"f:runAsUser": {}},
                },
            },
        }
    },
}


def deployment(*foreign: dict[str, Any], extra_container: bool = True) -> dict[str, Any]:
    containers: list[dict[str, Any]] = [
        {
            "name": "trussium",
            "image": "r:1",
            "env": [{"name": "TRUSSIUM_PROVIDER__API_KEY"}, {"name": "DEBUG", "value": "1"}],
            "terminationMessagePath": "/dev/termination-log",
        }
    ]
    if extra_container:
        containers.append({"name": "sidecar", "image": "busybox"})
    return {
        "metadata": {"resourceVersion": "7", "managedFields": [OURS, *foreign]},
        "spec": {
            "replicas": 1,
            "template": {
                "metadata": {
                    "annotations": {
                        "runtime.trussium.io/config-checksum": "abc",
                        "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z",
                    }
                },
                "spec": {
                    "containers": containers,
                    "securityContext": {"runAsUser": 10001, "fsGroup": 2000},
                    "dnsPolicy": "ClusterFirst",
                },
            },
        },
    }


def update(manager: str, template: dict[str, Any]) -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": "Update",
        "fieldsV1": {"f:spec": {"f:template": template}},
    }


SIDECAR = update(
    "kubectl-edit",
    {
        "f:spec": {
            "f:containers": {
                'k:{"name":"sidecar"}': {".": {}, "f:image": {}, "f:name": {}},
                'k:{"name":"trussium"}': {
                    "f:env": {'k:{"name":"DEBUG"}': {".": {}, "f:value": {}}}
                },
            },
            "f:securityContext": {"f:fsGroup": {}},
        }
    },
)
RESTART = update(
    "kubectl-rollout",
    {"f:metadata": {"f:annotations": {"f:kubectl.kubernetes.io/restartedAt": {}}}},
)


def removed(patch: list[dict[str, Any]]) -> list[str]:
    return [op["path"] for op in patch if op["op"] == "remove"]


def test_nothing_foreign_means_no_patch() -> None:
    assert (
        foreign_removals(deployment(extra_container=False), "trussium-operator", POD_TEMPLATE) == []
    )


def test_foreign_container_env_and_pod_field_are_removed_later_indices_first() -> None:
    patch = foreign_removals(deployment(SIDECAR), "trussium-operator", POD_TEMPLATE)
    assert removed(patch) == [
        "/spec/template/spec/securityContext/fsGroup",
        "/spec/template/spec/containers/1",
        "/spec/template/spec/containers/0/env/1",
    ]


def test_every_removal_is_guarded_by_a_test_of_the_value_seen() -> None:
    patch = foreign_removals(deployment(SIDECAR), "trussium-operator", POD_TEMPLATE)
    tests = [op for op in patch if op["op"] == "test"]
    assert patch[: len(tests)] == tests, "tests come first, before anything shifts"
    assert {
        "op": "test",
        "path": "/spec/template/spec/containers/1",
        "value": {"name": "sidecar", "image": "busybox"},
    } in tests


def test_rollout_restart_annotation_and_server_defaults_are_kept() -> None:
    patch = foreign_removals(
        deployment(RESTART, extra_container=False), "trussium-operator", POD_TEMPLATE
    )
    assert patch == [], "restartedAt is kept; defaults (dnsPolicy) are owned by nobody"


def test_status_subresource_managers_are_ignored() -> None:
    status = SIDECAR | {"subresource": "status"}
    assert removed(foreign_removals(deployment(status), "trussium-operator", POD_TEMPLATE)) == []


def test_a_field_already_gone_is_not_removed_again() -> None:
    patch = foreign_removals(
        deployment(SIDECAR, extra_container=False), "trussium-operator", POD_TEMPLATE
    )
    assert "/spec/template/spec/containers/1" not in removed(patch)


def _service(ports: list[dict[str, Any]], foreign_key: str) -> dict[str, Any]:
    return {
        "metadata": {
            "managedFields": [
                {
                    "manager": "trussium-operator",
                    "operation": "Apply",
                    "fieldsV1": {"f:spec": {"f:type": {}, "f:selector": {}}},
                },
                {
                    "manager": "kubectl-patch",
                    "operation": "Update",
                    "fieldsV1": {"f:spec": {"f:ports": {foreign_key: {".": {}, "f:port": {}}}}},
                },
            ]
        },
        "spec": {"ports": ports},
    }


HTTP = {"name": "http", "protocol": "TCP", "port": 9000, "targetPort": "http"}


def test_hand_edited_service_port_is_swapped_for_ours_in_one_patch() -> None:
    edited = HTTP | {"port": 9001}
    service = _service([edited], 'k:{"port":9001,"protocol":"TCP"}')
    patch = service_ports_restoration(service, "trussium-operator", [HTTP])
    assert patch == [
        {"op": "test", "path": "/spec/ports/0", "value": edited},
        {"op": "remove", "path": "/spec/ports/0"},
        {"op": "add", "path": "/spec/ports/-", "value": HTTP},
    ]


def test_service_ports_nobody_else_touched_need_no_patch() -> None:
    service = _service([HTTP], 'k:{"port":9002,"protocol":"TCP"}')
    assert service_ports_restoration(service, "trussium-operator", [HTTP]) == []
