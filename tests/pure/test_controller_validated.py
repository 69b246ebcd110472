"""A runtime generation that validated clean is not validated again, whatever its
status writes do to its resourceVersion; any other generation, or the same name
created again, is."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from trussium_operator.common import validation
from trussium_operator.controller.machinery.names import NamespacedName
from trussium_operator.controller.runtime import validated
from trussium_operator.controller.runtime.validated import ValidGenerations

MINIMAL = Path(__file__).parents[1] / "samples" / "valid" / "minimal.yaml"
KEY = NamespacedName("team-a", "minimal")


def runtime(
    generation: int,
    version: str,
    replicas: Any = 1,
    uid: str = "u-1",
    base_url: str | None = None,
) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load(MINIMAL.read_text())
    obj["metadata"] |= {
        "namespace": "team-a",
        "uid": uid,
        "generation": generation,
        "resourceVersion": version,
    }
    obj["spec"]["replicas"] = replicas
    if base_url is not None:
        obj["spec"]["provider"]["baseURL"] = base_url
    return obj


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The generations actually validated, in order."""
    seen: list[int] = []

    def counting(obj: Any, *args: Any, **kwargs: Any) -> validation.ValidationResult:
        seen.append(obj["metadata"]["generation"])
        return validation.validate_runtime(obj, *args, **kwargs)

    monkeypatch.setattr(validated, "validate_runtime", counting)
    return seen


def test_a_valid_generation_is_validated_once_across_status_writes(
    validations: list[int],
) -> None:
    valid = ValidGenerations()
    first, second = valid.parse(KEY, runtime(1, "5")), valid.parse(KEY, runtime(1, "6"))
    assert first[0] is not None
    assert second[0] is not None
    assert (first[0].spec, first[1]) == (second[0].spec, second[1])
    assert first[0].spec.replicas == 1
    assert validations == [1]


def test_a_new_generation_is_validated_and_its_errors_reported(validations: list[int]) -> None:
    valid = ValidGenerations()
    assert valid.parse(KEY, runtime(1, "5"))[1:] == ((), ())
    parsed, errors, warnings = valid.parse(KEY, runtime(2, "6", replicas=-1))
    assert parsed is None
    assert [e.path for e in errors] == ["spec.replicas"]
    assert warnings == ()
    assert valid.parse(KEY, runtime(2, "7", replicas=-1)) == (None, errors, ()), "never remembered"
    assert validations == [1, 2, 2]


def test_a_generation_breaking_only_tolerated_rules_is_reconciled_with_its_warnings(
    validations: list[int],
) -> None:
    valid = ValidGenerations()
    first = valid.parse(KEY, runtime(3, "7", base_url="localhost:11434"))
    second = valid.parse(KEY, runtime(3, "8", base_url="localhost:11434"))
    assert first[0] is not None
    assert first[0].spec.provider.base_url == "localhost:11434"
    assert first[1] == ()
    assert [(w.path, w.rule) for w in first[2]] == [("spec.provider.baseURL", "BaseURLNotHTTP")]
    assert second[2] == first[2], "the warnings are kept with the generation"
    assert validations == [3]


def test_a_forgotten_or_recreated_runtime_is_validated_again(validations: list[int]) -> None:
    valid = ValidGenerations()
    valid.parse(KEY, runtime(1, "5"))
    valid.forget(KEY)
    valid.parse(KEY, runtime(1, "5"))
    valid.parse(KEY, runtime(1, "9", uid="u-2"))
    assert validations == [1, 1, 1]


def test_a_runtime_stored_over_a_bound_is_reconciled_whole_with_a_warning() -> None:
    """ADR 0027: the operator renders every entry, as the Go operator did, on every parse."""
    obj = runtime(1, "5")
    tolerations = [{"key": f"pool-{i}", "operator": "Exists"} for i in range(65)]
    obj["spec"]["scheduling"] = {"tolerations": tolerations}
    valid = ValidGenerations()
    for version in ("5", "6"):  # validated, then only parsed
        obj["metadata"]["resourceVersion"] = version
        parsed, errors, warnings = valid.parse(KEY, obj)
        assert parsed is not None, errors
        assert parsed.spec.scheduling is not None
        assert len(parsed.spec.scheduling.tolerations or ()) == 65
        assert [w.rule for w in warnings] == ["TooManyEntries"]
