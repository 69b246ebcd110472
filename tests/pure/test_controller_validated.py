"""A runtime version that validated clean is not validated again; any other version is."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from common import validation
from controller import validated
from controller.machinery.names import NamespacedName
from controller.validated import ValidVersions

MINIMAL = Path(__file__).parents[1] / "samples" / "valid" / "minimal.yaml"
KEY = NamespacedName("team-a", "minimal")


def runtime(version: str, replicas: Any = 1) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load(MINIMAL.read_text())
    obj["metadata"] |= {"namespace": "team-a", "resourceVersion": version}
    obj["spec"]["replicas"] = replicas
    return obj


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The resourceVersions actually validated, in order."""
    seen: list[str] = []

    def counting(obj: Any, *args: Any, **kwargs: Any) -> validation.ValidationResult:
        seen.append(obj["metadata"]["resourceVersion"])
        return validation.validate_runtime(obj, *args, **kwargs)

    monkeypatch.setattr(validated, "validate_runtime", counting)
    return seen


def test_a_valid_version_is_validated_once(validations: list[str]) -> None:
    valid = ValidVersions()
    first, second = valid.parse(KEY, runtime("5")), valid.parse(KEY, runtime("5"))
    assert first == second
    assert first[0] is not None
    assert first[0].spec.replicas == 1
    assert validations == ["5"]


def test_a_new_version_is_validated_and_its_errors_reported(validations: list[str]) -> None:
    valid = ValidVersions()
    assert valid.parse(KEY, runtime("5"))[1] == ()
    parsed, errors = valid.parse(KEY, runtime("6", replicas=-1))
    assert parsed is None
    assert [e.path for e in errors] == ["spec.replicas"]
    assert valid.parse(KEY, runtime("6", replicas=-1)) == (None, errors), "never remembered"
    assert validations == ["5", "6", "6"]


def test_a_forgotten_runtime_is_validated_again(validations: list[str]) -> None:
    valid = ValidVersions()
    valid.parse(KEY, runtime("5"))
    valid.forget(KEY)
    valid.parse(KEY, runtime("5"))
    assert validations == ["5", "5"]
