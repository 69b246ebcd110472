"""The rule each finding breaks: named where the rule is checked, explained in webhook-rules.md.

SARIF (`validate -o sarif`) lists every rule with the link to its section,
and each result names the rule it breaks, so a code-scanning tool groups
the findings by rule and links each to the explanation.
"""

import json
import re
from pathlib import Path

import pytest
import yaml

from trussium_operator.common.ratcheting import TolerableRule
from trussium_operator.common.rules import CATALOGUE, RULES_DOC, Rule
from trussium_operator.offline.checks import check_documents
from trussium_operator.webhook.cli import main

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "tests" / "samples"
GENERIC = {"invalid", "warning", "unreadable", "skipped"}


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings: lowercase, punctuation dropped, spaces '-'."""
    headings = re.findall(r"^#+ (.+)$", markdown, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_rule_has_a_section_in_the_rules_document() -> None:
    assert set(CATALOGUE) == set(Rule) | set(TolerableRule)
    anchors = github_anchors((REPO / RULES_DOC).read_text())
    missing = {rule: doc.anchor for rule, doc in CATALOGUE.items() if doc.anchor not in anchors}
    assert not missing
    assert "shape-and-bounds-schema" in anchors  # the slugging itself


def sarif(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    main(["validate", "-o", "sarif", *args])
    document: dict[str, object] = json.loads(capsys.readouterr().out)
    return document


def test_each_result_names_the_rule_it_breaks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "typo.yaml").write_text(
        "apiVersion: runtime.trussium.io/v1alpha1\nkind: TrussiumRuntme\nmetadata: {name: a}\n"
    )
    (tmp_path / "broken.yaml").write_text("a: [\n")
    run = sarif(capsys, str(SAMPLES), str(tmp_path))["runs"][0]  # type: ignore[index]
    rules = {rule["id"]: rule for rule in run["tool"]["driver"]["rules"]}
    results = run["results"]
    assert {r["ruleId"] for r in results} <= set(rules)
    assert not {r["ruleId"] for r in results} & GENERIC
    by_object: dict[str, set[str]] = {}
    for result in results:
        name = result["locations"][0].get("logicalLocations", [{}])[0].get("fullyQualifiedName")
        by_object.setdefault(name, set()).add(result["ruleId"])
    assert by_object["default/autoscaling"] == {
        "AutoscalingBounds",
        "AutoscalingWithoutCPURequest",
    }
    assert by_object["default/tag-and-digest"] == {"ImageTagOrDigest"}
    assert by_object["default/latest-tag"] == {"MutableImageTag"}
    assert by_object["default/a"] == {"NearMissKind"}
    assert rules["ReservedPodLabel"]["helpUri"] == (
        "docs/webhook-rules.md#operator-owned-pod-labels-and-annotations"
    )
    assert "Unreadable" in {r["ruleId"] for r in results}


def test_the_help_links_take_the_given_base(capsys: pytest.CaptureFixture[str]) -> None:
    base = "https://docs.example/trussium/webhook-rules.html"
    run = sarif(capsys, "--rules-doc-url", base, str(SAMPLES / "valid"))["runs"][0]  # type: ignore[index]
    assert {r["helpUri"].split("#")[0] for r in run["tool"]["driver"]["rules"]} == {base}


def test_every_finding_of_the_samples_names_a_catalogued_rule() -> None:
    documents = [
        (str(path), document)
        for path in sorted(SAMPLES.rglob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
    ]
    for stored in (False, True):
        findings = check_documents(documents, stored=stored).findings
        assert findings
        assert {f.rule for f in findings} <= set(CATALOGUE), [f for f in findings if not f.rule]
