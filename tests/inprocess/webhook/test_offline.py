"""`trussium-webhook validate`: exit codes, messages and outputs a CI job relies on."""

import io
import json
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from trussium_operator.webhook.cli import main

from .reviews import SAMPLES

MINIMAL = (SAMPLES / "valid" / "minimal.yaml").read_text()
VALID = str(SAMPLES / "valid" / "minimal.yaml")
LATEST = str(SAMPLES / "valid" / "latest-tag.yaml")
AUTOSCALING = str(SAMPLES / "invalid" / "autoscaling.yaml")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["validate", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def test_valid_files_exit_0_with_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", VALID)
    assert code == 0
    assert out == (
        "1 TrussiumRuntime(s) in 1 file(s): 1 valid, 0 invalid; 0 error(s), 0 warning(s)\n"
    )


def test_violations_exit_1_with_file_object_field_and_a_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "-f", VALID, "-f", AUTOSCALING)
    assert code == 1
    assert f"{AUTOSCALING}: default/autoscaling: spec.autoscaling: maxReplicas must be" in out
    assert f"{AUTOSCALING}: default/autoscaling: spec.autoscaling.enabled: autoscaling needs" in out
    assert out.splitlines()[-1] == (
        "2 TrussiumRuntime(s) in 2 file(s): 1 valid, 1 invalid; 2 error(s), 0 warning(s) (failed)"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["-f", VALID, AUTOSCALING, LATEST],  # what pre-commit passes: `entry` plus the files
        [VALID, AUTOSCALING, LATEST],
        [VALID, "-f", AUTOSCALING, "--filename", LATEST],
    ],
    ids=["one-f", "positional", "mixed"],
)
def test_several_paths_after_one_f_or_as_arguments(
    capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    code, out, _ = run(capsys, *args)
    assert code == 1
    assert "3 TrussiumRuntime(s) in 3 file(s): 2 valid, 1 invalid" in out


def test_folders_are_read_recursively_and_other_kinds_skipped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write(tmp_path, "a/b/runtime.yml", MINIMAL)
    data = yaml.safe_load(MINIMAL.replace("name: minimal", "name: other"))
    write(tmp_path, "runtime.json", json.dumps(data))
    write(tmp_path, "service.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
    write(tmp_path, "README.md", "not a manifest: {")
    code, out, _ = run(capsys, str(tmp_path))
    assert code == 0
    assert "2 TrussiumRuntime(s) in 3 file(s): 2 valid" in out


def test_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    broken = MINIMAL.replace('tag: "1.4.2"', "tag: -bad")
    monkeypatch.setattr("sys.stdin", io.StringIO(broken))
    code, out, _ = run(capsys, "-f", "-")
    assert code == 1
    assert "<stdin>: default/minimal: spec.image.tag: invalid value '-bad'" in out


def test_a_kind_list_is_checked_item_by_item(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = yaml.safe_load(MINIMAL)
    broken = yaml.safe_load(MINIMAL.replace("name: minimal", "name: broken"))
    broken["spec"]["replicas"] = -1
    listed = {"apiVersion": "v1", "kind": "List", "items": [runtime, broken]}
    monkeypatch.setattr("sys.stdin", io.StringIO(yaml.safe_dump(listed)))
    code, out, _ = run(capsys, "-f", "-")
    assert code == 1
    assert "<stdin>: default/broken: spec.replicas: " in out
    assert "2 TrussiumRuntime(s) in 1 file(s): 1 valid, 1 invalid" in out


def test_warnings_fail_only_with_strict(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", LATEST)
    assert code == 0
    assert "default/latest-tag: warning: spec.image.tag: the mutable tag 'latest'" in out
    assert run(capsys, "-f", LATEST, "--strict")[0] == 1


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        ("kind: TrussiumRuntime", "kind: TrussiumRuntme", "kind", "did you mean 'TrussiumRuntime'"),
        ("kind: TrussiumRuntime", "kind: trussiumruntime", "kind", "did you mean"),
        (
            "apiVersion: runtime.trussium.io/v1alpha1",
            "apiVersion: runtime.trusium.io/v1alpha1",
            "apiVersion",
            "served as runtime.trussium.io/v1alpha1, not 'runtime.trusium.io/v1alpha1'",
        ),
        ("kind: TrussiumRuntime", "kind: Runtime", "kind", "serves only TrussiumRuntime"),
    ],
    ids=["kind-typo", "kind-case", "group-typo", "other-kind-in-group"],
)
def test_near_misses_are_warnings_and_fail_with_strict(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, old: str, new: str, field: str, message: str
) -> None:
    path = write(tmp_path, "typo.yaml", MINIMAL.replace(old, new))
    code, out, _ = run(capsys, path)
    assert code == 0
    assert f"{path}: default/minimal: warning: {field}: " in out
    assert message in out
    assert "0 TrussiumRuntime(s) in 1 file(s)" in out
    assert run(capsys, path, "--strict")[0] == 1


def test_unserved_version_is_a_violation(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write(tmp_path, "old.yaml", MINIMAL.replace("v1alpha1", "v1alpha2"))
    code, out, _ = run(capsys, path)
    assert code == 1
    assert "default/minimal: apiVersion: not served; use runtime.trussium.io/v1alpha1" in out
    assert "1 TrussiumRuntime(s) in 1 file(s): 0 valid, 1 invalid" in out


def test_a_name_is_required_unless_generate_name_is_given(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    nameless = write(tmp_path, "nameless.yaml", MINIMAL.replace("  name: minimal\n", ""))
    code, out, _ = run(capsys, nameless)
    assert code == 1
    assert f"{nameless}: default/<unnamed>: metadata.name: Required value" in out
    generated = write(tmp_path, "gen.yaml", MINIMAL.replace("name: minimal", "generateName: m-"))
    assert run(capsys, generated)[0] == 0


def test_the_same_runtime_twice_is_a_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    first = write(tmp_path, "a.yaml", MINIMAL)
    second = write(
        tmp_path, "b.yaml", MINIMAL.replace("tag:", "digest: sha256:" + "a" * 64 + "\n#")
    )
    elsewhere = write(
        tmp_path, "c.yaml", MINIMAL.replace("name: minimal", "name: m\n  namespace: x")
    )
    code, out, _ = run(capsys, str(tmp_path))
    assert code == 0
    assert (
        f"{second}: default/minimal: warning: metadata.name: default/minimal is also defined "
        f"in {first}" in out
    )
    assert elsewhere not in out
    assert run(capsys, str(tmp_path), "--strict")[0] == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("a: [unclosed", "invalid YAML or JSON at line"),
        ("~: a\n", "unsupported map key"),
    ],
)
def test_parse_errors_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, message: str
) -> None:
    path = write(tmp_path, "broken.yaml", content)
    code, out, err = run(capsys, "-f", path, "-f", str(SAMPLES / "invalid"))
    assert code == 2
    assert err.startswith(f"{path}: ")
    assert message in err
    assert "1 input(s) unreadable (failed)" in out


def test_missing_path_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "-f", str(tmp_path / "nope.yaml"))
    assert code == 2
    assert err == f"{tmp_path / 'nope.yaml'}: no such file or folder\n"


def test_no_path_is_a_one_line_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert err.startswith("trussium-webhook validate: error: give at least one PATH")


def test_json_output_fills_field_on_every_finding(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-o", "json", "-f", str(SAMPLES))
    report = json.loads(out)
    assert code == 1
    assert report["valid"] is False
    assert report["runtimes"] == len(list(SAMPLES.rglob("*.yaml")))
    assert {
        "file": str(SAMPLES / "invalid" / "tag-and-digest.yaml"),
        "namespace": "default",
        "name": "tag-and-digest",
        "severity": "error",
        "field": "spec.image",
        "message": "exactly one of tag or digest must be specified",
        "line": 7,
        "column": 3,
        "rule": "ImageTagOrDigest",
    } in report["errors"]
    assert report["warnings"] == [
        {  # an OpenAI runtime whose key is in its URL has none the runtime can use
            "file": str(SAMPLES / "invalid" / "base-url-credentials.yaml"),
            "namespace": "default",
            "name": "base-url-credentials",
            "severity": "warning",
            "field": "spec.provider.credentialsSecretRef",
            "message": "unset, so the runtime has no API key and serves no chat: it builds no "
            "OpenAI client without one. Reference the key's Secret (a server that needs no key "
            "takes any value)",
            "line": 10,
            "column": 3,
            "rule": "ProviderSettings",
        },
        {
            "file": LATEST,
            "namespace": "default",
            "name": "latest-tag",
            "severity": "warning",
            "field": "spec.image.tag",
            "message": "the mutable tag 'latest' makes rollouts unreproducible; "
            "pin a version tag or a digest",
            "line": 9,
            "column": 5,
            "rule": "MutableImageTag",
        },
    ]
    assert all(finding["field"] for finding in report["errors"] + report["warnings"])
    assert report["summary"].endswith("(failed)")


def test_junit_output_has_one_case_per_runtime(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-o", "junit", VALID, AUTOSCALING, LATEST)
    suite = ET.fromstring(out)
    assert code == 1
    assert (suite.tag, suite.get("tests"), suite.get("failures")) == ("testsuite", "3", "1")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) == {"default/minimal", "default/autoscaling", "default/latest-tag"}
    failure = cases["default/autoscaling"].find("failure")
    assert failure is not None
    assert cases["default/autoscaling"].get("classname") == AUTOSCALING
    assert "spec.autoscaling.enabled: autoscaling needs" in (failure.text or "")
    assert cases["default/latest-tag"].find("failure") is None
    assert "spec.image.tag" in (cases["default/latest-tag"].findtext("system-out") or "")

    strict = ET.fromstring(run(capsys, "-o", "junit", "--strict", LATEST)[1])
    assert strict.get("failures") == "1"


def test_junit_reports_unreadable_inputs_as_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "-o", "junit", VALID, str(tmp_path / "absent.yaml"))
    suite = ET.fromstring(out)
    assert code == 2
    assert (suite.get("tests"), suite.get("errors")) == ("2", "1")


def test_sarif_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-o", "sarif", AUTOSCALING, LATEST)
    sarif = json.loads(out)
    assert code == 1
    assert sarif["version"] == "2.1.0"
    (results_run,) = sarif["runs"]
    rules = {rule["id"] for rule in results_run["tool"]["driver"]["rules"]}
    results = results_run["results"]
    assert {result["ruleId"] for result in results} <= rules
    assert [r["level"] for r in results] == ["error", "error", "warning"]
    location = results[0]["locations"][0]
    assert location["physicalLocation"]["artifactLocation"]["uri"] == AUTOSCALING
    assert location["logicalLocations"][0]["fullyQualifiedName"] == "default/autoscaling"
    assert results[2]["message"]["text"].startswith("default/latest-tag: warning: spec.image.tag")


def test_print_defaulted_writes_yaml_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--print-defaulted", "-f", LATEST)
    assert code == 0
    (defaulted,) = yaml.safe_load_all(out)
    assert defaulted["spec"]["replicas"] == 1
    assert defaulted["spec"]["service"] == {"type": "ClusterIP", "port": 9000}
    assert "warning" in err
    assert "1 TrussiumRuntime(s)" in err


def test_numbers_are_read_as_the_api_server_reads_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`1e3` is the number 1000 for the API server: no tag, but a replica count."""
    tag = write(tmp_path, "tag.yaml", MINIMAL.replace("name: minimal", "name: a") + "")
    tag_text = Path(tag).read_text()
    Path(tag).write_text(re.sub(r"tag: .*", "tag: 1e3", tag_text))
    replicas = write(
        tmp_path, "replicas.yaml", MINIMAL.replace("spec:\n", "spec:\n  replicas: 1e3\n")
    )
    code, out, _ = run(capsys, tag)
    assert code == 1
    assert f"{tag}: default/a: spec.image.tag:" in out
    code, out, _ = run(capsys, replicas)
    assert (code, out.splitlines()[-1].split(":")[1]) == (
        0,
        " 1 valid, 0 invalid; 0 error(s), 0 warning(s)",
    )


def test_folder_walks_leave_out_version_control_and_node_modules(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write(tmp_path, "deploy/runtime.yaml", MINIMAL)
    for hidden in (".git/objects/x.yaml", "node_modules/pkg/a.yaml", "deploy/.hg/b.yml"):
        write(tmp_path, hidden, "not: [valid")
    code, out, err = run(capsys, str(tmp_path))
    assert (code, err) == (0, "")
    assert "1 TrussiumRuntime(s) in 1 file(s)" in out


def test_ignore_filename_pattern_is_repeatable_and_searched(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write(tmp_path, "repo/deploy/runtime.yaml", MINIMAL)
    write(tmp_path, "repo/deploy/kustomization.yaml", "resources: [runtime.yaml]\n")
    write(tmp_path, "repo/chart/templates/runtime.yaml", "spec: [broken")
    named = write(tmp_path, "other/broken.yaml", "spec: [broken")
    repo = str(tmp_path / "repo")
    args = ["--ignore-filename-pattern", "templates/", "--ignore-filename-pattern", r"kustom"]
    code, out, err = run(capsys, *args, repo, named)
    assert code == 2
    assert err.startswith(f"{named}: invalid YAML or JSON at line 2")
    assert err.count("\n") == 1
    assert "1 TrussiumRuntime(s) in 2 file(s)" in out
    code, _, _ = run(capsys, *args, "--ignore-filename-pattern", "broken", repo, named)
    assert code == 0
    with pytest.raises(SystemExit) as exited:
        main(["validate", "--ignore-filename-pattern", "(", repo])
    assert exited.value.code == 2
    assert "not a regular expression" in capsys.readouterr().err


def test_unreadable_files_are_counted(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    broken = write(tmp_path, "broken.yaml", "a: [unclosed")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    code, out, err = run(capsys, broken, str(binary))
    assert code == 2
    assert out == (
        "0 TrussiumRuntime(s) in 2 file(s): 0 valid, 0 invalid; 0 error(s), 0 warning(s); "
        "2 input(s) unreadable (failed)\n"
    )
    assert f"{binary}: cannot read: not UTF-8 text" in err


HELM_TEMPLATE = """apiVersion: runtime.trussium.io/v1alpha1
kind: TrussiumRuntime
metadata:
  name: {{ include "chart.fullname" . }}
spec:
  {{- toYaml .Values.spec | nindent 2 }}
"""
CLOUDFORMATION = (
    "Resources:\n  Bucket:\n    Type: AWS::S3::Bucket\n    Properties:\n"
    "      BucketName: !Ref Name\n"
)


def test_templates_and_custom_tags_are_skipped_with_a_notice(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    template = write(tmp_path, "chart/templates/runtime.yaml", HELM_TEMPLATE)
    tagged = write(tmp_path, "aws/stack.yaml", CLOUDFORMATION)
    python = write(tmp_path, "py.yaml", "a: !!python/tuple [1, 2]\n")
    for extra in ([], ["--strict"]):  # what pre-commit runs
        code, out, err = run(capsys, *extra, VALID, template, tagged, python)
        assert code == 0
        assert out.splitlines()[-1] == (
            "1 TrussiumRuntime(s) in 4 file(s): 1 valid, 0 invalid; 0 error(s), 0 warning(s); "
            "3 skipped (templates or custom tags)"
        )
    assert err.splitlines() == [
        f"{template}: skipped: a template (it contains {{{{ ... }}}}): render it first, "
        "for example helm template ... | trussium-webhook validate -f -",
        f"{tagged}: skipped: custom tag !Ref at line 5: not a Kubernetes manifest "
        "(the API server would ignore the tag)",
        f"{python}: skipped: custom tag tag:yaml.org,2002:python/tuple at line 1: not a "
        "Kubernetes manifest (the API server would ignore the tag)",
    ]
    code, out, _ = run(capsys, "--fail-on-skipped", VALID, template)
    assert code == 2
    assert out.endswith("1 skipped (templates or custom tags) (failed)\n")
    code, out, _ = run(capsys, "-o", "junit", VALID, template)
    suite = ET.fromstring(out)
    assert (code, suite.get("tests"), suite.get("skipped")) == (0, "2", "1")


def test_sarif_regions_point_at_the_field_and_at_parse_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    broken = write(tmp_path, "broken.yaml", "kind: A\nspec:\n  a: 1\n  a: .nan\n")
    template = write(tmp_path, "t.yaml", CLOUDFORMATION)
    code, out, _ = run(capsys, "-o", "sarif", AUTOSCALING, broken, template)
    assert code == 2
    results = json.loads(out)["runs"][0]["results"]
    regions = {
        (r["ruleId"], r["message"]["text"].split(":")[1].strip()): r["locations"][0][
            "physicalLocation"
        ].get("region")
        for r in results
    }
    autoscaling = (SAMPLES / "invalid" / "autoscaling.yaml").read_text().splitlines()
    line = next(i for i, text in enumerate(autoscaling, 1) if text.strip() == "autoscaling:")
    assert regions[("AutoscalingBounds", "spec.autoscaling")] == {
        "startLine": line,
        "startColumn": 3,
    }
    (unreadable,) = [r for r in results if r["ruleId"] == "Unreadable"]
    assert unreadable["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 4,
        "startColumn": 6,
    }
    assert [r["level"] for r in results if r["ruleId"] == "Skipped"] == ["note"]


def test_many_files_are_checked_in_processes_with_the_same_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Duplicates across the processes' shares are still found; the order is the files'."""
    for i in range(250):
        name = "dup" if i in (3, 240) else f"r{i}"
        write(tmp_path, f"r{i:03}.yaml", MINIMAL.replace("name: minimal", f"name: {name}"))
    write(tmp_path, "r100.yaml", MINIMAL.replace("tag:", "digest:"))
    serial = run(capsys, "--jobs", "1", "-o", "json", str(tmp_path))
    parallel = run(capsys, "--jobs", "2", "-o", "json", str(tmp_path))
    assert serial == parallel
    report = json.loads(parallel[1])
    assert [w["message"] for w in report["warnings"]] == [
        f"default/dup is also defined in {tmp_path / 'r003.yaml'}; "
        "applying both keeps only the later one"
    ]
    assert [e["file"] for e in report["errors"]] == [str(tmp_path / "r100.yaml")]


def test_many_files_print_every_defaulted_object_in_order(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Files are read and checked in batches; the defaulted objects of all are printed."""
    for i in range(250):
        write(tmp_path, f"r{i:03}.yaml", MINIMAL.replace("name: minimal", f"name: r{i}"))
    for jobs in ("1", "2"):
        code, out, _ = run(capsys, "--jobs", jobs, "--print-defaulted", str(tmp_path))
        printed = list(yaml.safe_load_all(out))
        assert code == 0
        assert [d["metadata"]["name"] for d in printed] == [f"r{i}" for i in range(250)]
        assert {d["spec"]["service"]["port"] for d in printed} == {9000}


def test_a_key_set_twice_is_a_warning_at_its_place(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    twice = write(tmp_path, "twice.yaml", MINIMAL + "  replicas: 2\n  replicas: 3\n")
    code, out, _ = run(capsys, "-o", "json", twice)
    (warning,) = json.loads(out)["warnings"]
    assert code == 0
    assert (warning["field"], warning["line"]) == ("spec.replicas", MINIMAL.count("\n") + 2)
    assert warning["message"].startswith("set more than once in one mapping")
    code, _, _ = run(capsys, "--strict", twice)
    assert code == 1


def test_stored_judges_live_objects_as_the_controller_will(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The migration preflight: a tolerated rule is a warning saying what the operator
    does; a rule that freezes the runtime fails, saying so."""
    sample = yaml.safe_load(MINIMAL)
    sample["metadata"]["name"] = "go-sample"
    sample["spec"]["autoscaling"] = {"enabled": True}
    frozen = yaml.safe_load(MINIMAL)
    frozen["metadata"]["name"] = "frozen"
    frozen["spec"]["scheduling"] = {"tolerations": [{"key": "gpu", "operator": "Exist"}]}
    tolerated_only = write(tmp_path, "sample.yaml", yaml.safe_dump(sample))
    code, out, _ = run(capsys, "--stored", "-f", tolerated_only)
    assert code == 0, out
    assert (
        f"{tolerated_only}: default/go-sample: warning: spec.autoscaling.enabled: autoscaling "
        "needs spec.resources.requests.cpu" in out
    )
    assert "[AutoscalingWithoutCPURequest]; still reconciled, with the ConfigurationWarnings" in out
    assert "it cannot measure CPU utilization, so it does not scale" in out
    assert run(capsys, "-f", tolerated_only)[0] == 1, "without --stored, every rule holds"

    both = write(tmp_path, "both.yaml", yaml.safe_dump_all([sample, frozen]))
    code, out, _ = run(capsys, "--stored", "-f", both)
    assert code == 1
    assert (
        "default/frozen: spec.scheduling.tolerations[0].operator: unsupported operator 'Exist'"
        in out
    )
    assert "does not reconcile this runtime until it is fixed (InvalidSpec)" in out
    assert out.splitlines()[-1] == (
        "2 TrussiumRuntime(s) in 1 file(s): 1 valid, 1 invalid; 1 error(s), 1 warning(s) (failed)"
    )


# A line of braces is the worst case of a template search that backtracks ({{.*}}:
# quadratic per line); the others nest as deep as the parser allows, or make it
# scan far for the end of a token.
HOSTILE = {
    "lines-of-braces": ("{" * 20_000 + "\n") * 50,
    "one-line-of-braces": "{" * 1_000_000,
    "unclosed-templates": ("{{ a" * 5_000 + "\n") * 50,
    "lines-of-brackets": ("[" * 20_000 + "\n") * 50,
    "unterminated-quote": 'a: "' + "x" * 1_000_000,
    "one-long-key": "k" * 1_000_000 + ": 1",
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_megabyte_is_refused_in_linear_time(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str
) -> None:
    path = write(tmp_path, "hostile.yaml", text)
    started = time.perf_counter()
    code, _, err = run(capsys, path)
    elapsed = time.perf_counter() - started
    print(f"{len(text):,} characters in {elapsed:.3f} s")
    assert code == 2
    assert err.startswith(f"{path}: ")
    assert elapsed < 2


def test_a_file_over_the_size_cap_is_refused_unread(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = write(tmp_path, "big.yaml", MINIMAL + "#" * 2**20)
    code, out, err = run(capsys, "--max-file-mib", "1", VALID, big)
    assert code == 2
    assert err == f"{big}: larger than 1 MiB, the limit per file (--max-file-mib)\n"
    assert out.startswith("1 TrussiumRuntime(s) in 2 file(s): 1 valid")
    assert run(capsys, "--max-file-mib", "2", big)[0] == 0

    monkeypatch.setattr("sys.stdin", io.StringIO("#" + "é" * (2**19)))  # 1 MiB + 1 byte
    code, _, err = run(capsys, "--max-file-mib", "1", "-")
    assert code == 2
    assert err == "<stdin>: larger than 1 MiB, the limit per file (--max-file-mib)\n"
    assert run(capsys, "--max-file-mib", "0", VALID)[0] == 2


def test_the_default_size_cap_is_32_mib(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("w") as file:
        file.write(MINIMAL)
        file.truncate(32 * 2**20 + 1)  # sparse: read up to the cap, never parsed
    code, _, err = run(capsys, str(path))
    assert (code, err) == (2, f"{path}: larger than 32 MiB, the limit per file (--max-file-mib)\n")
