"""What a PromQL expression reads: each series selector's metric name and the label
names it matches, groups or joins on, found by walking Prometheus' own grammar
(promql_parser) rather than by pattern."""

from dataclasses import dataclass, field
from typing import Any

import promql_parser as p


@dataclass
class Reads:
    # metric name -> label names its selectors match on
    matchers: dict[str, set[str]] = field(default_factory=dict)
    # (label names grouped by or joined on, the metric names under that operation)
    groupings: list[tuple[set[str], set[str]]] = field(default_factory=list)


def reads(expr: str) -> Reads:
    found = Reads()
    _walk(p.parse(expr), found)
    return found


def _walk(node: Any, found: Reads) -> set[str]:
    """Record what `node` reads; return the metric names under it."""
    if isinstance(node, p.VectorSelector):
        assert node.name, f"a selector without a metric name: {node.prettify()}"
        labels = {m.name for m in node.matchers.matchers if m.name != "__name__"}
        found.matchers.setdefault(node.name, set()).update(labels)
        return {node.name}
    if isinstance(node, p.MatrixSelector):
        return _walk(node.vector_selector, found)
    if isinstance(node, p.AggregateExpr):
        names = _walk(node.expr, found)
        if node.modifier is not None:
            found.groupings.append((set(node.modifier.labels), names))
        return names
    if isinstance(node, p.BinaryExpr):
        names = _walk(node.lhs, found) | _walk(node.rhs, found)
        modifier = node.modifier
        if modifier is not None and modifier.matching is not None:
            found.groupings.append((set(modifier.matching.labels), names))
        return names
    if isinstance(node, p.Call):
        return set().union(*(_walk(arg, found) for arg in node.args))
    if isinstance(node, p.ParenExpr | p.UnaryExpr | p.SubqueryExpr):
        return _walk(node.expr, found)
    assert isinstance(node, p.NumberLiteral | p.StringLiteral), type(node)
    return set()
