"""Counting the parses of TrussiumRuntime objects, for tests of how often a step parses.

`objects` records each call of the one parse function,
`common.parsing.parse_runtime`: every module holding it, whether it
imported the name or reaches it as `parsing.parse_runtime`, gets a counting
wrapper inside the `with` block. `spec_models` counts every pydantic parse of
a spec besides, wherever it happens (`TrussiumRuntimeSpec.model_validate`,
or `TrussiumRuntime.model_validate` given a spec that is not yet a model), so
a parse that bypasses `parse_runtime` is counted too.
"""

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from trussium_operator.common import parsing
from trussium_operator.common.api import TrussiumRuntime, TrussiumRuntimeSpec
from trussium_operator.common.parsing import ParsedRuntime


@dataclass
class Parses:
    objects: list[object] = field(default_factory=list)
    spec_models: int = 0


@contextmanager
def counting_parses() -> Iterator[Parses]:
    parses = Parses()
    parse = parsing.parse_runtime
    validate_spec = TrussiumRuntimeSpec.model_validate
    validate_runtime = TrussiumRuntime.model_validate

    def counted_parse(obj: object, **options: Any) -> ParsedRuntime:
        parses.objects.append(obj)
        return parse(obj, **options)

    def counted_spec(obj: Any, *args: Any, **kwargs: Any) -> TrussiumRuntimeSpec:
        parses.spec_models += 1
        return validate_spec(obj, *args, **kwargs)

    def counted_runtime(obj: Any, *args: Any, **kwargs: Any) -> TrussiumRuntime:
        spec = obj.get("spec") if isinstance(obj, dict) else None
        parses.spec_models += not isinstance(spec, TrussiumRuntimeSpec)
        return validate_runtime(obj, *args, **kwargs)

    holders = [m for m in list(sys.modules.values()) if getattr(m, "parse_runtime", None) is parse]
    with pytest.MonkeyPatch.context() as patch:
        for module in holders:
            patch.setattr(module, "parse_runtime", counted_parse)
        patch.setattr(TrussiumRuntimeSpec, "model_validate", counted_spec)
        patch.setattr(TrussiumRuntime, "model_validate", counted_runtime)
        yield parses
