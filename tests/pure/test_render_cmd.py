"""`trussium-controller render -f FILE` as a user runs it."""

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from trussium_operator.controller.cli import main
from trussium_operator.offline.render import run_render

RUNTIME = """\
apiVersion: runtime.trussium.io/v1alpha1
kind: TrussiumRuntime
metadata:
  name: {name}
  namespace: prod
spec:
  image: {{repository: ghcr.io/trussium/runtime, tag: "1.4.0"}}
  provider: {{type: ollama, model: llama3.2, baseURL: "http://ollama:11434/v1"}}
"""
NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata: {name: prod}\n"
KINDS = ["ConfigMap", "ServiceAccount", "Service", "Deployment", "PodDisruptionBudget"]


def render(text: str, path: str = "-") -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = run_render([path], "yaml", stdout, stderr, io.StringIO(text))
    return code, stdout.getvalue(), stderr.getvalue()


def rendered(stdout: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all(stdout))


def test_renders_the_managed_objects_in_apply_order_skipping_other_kinds() -> None:
    code, stdout, stderr = render(NAMESPACE + "---\n" + RUNTIME.format(name="demo"))
    assert (code, stderr) == (0, "")
    objects = rendered(stdout)
    assert [o["kind"] for o in objects] == KINDS
    assert {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects} == {
        ("prod", "demo")
    }


def test_defaults_are_applied_before_rendering() -> None:
    objects = {o["kind"]: o for o in rendered(render(RUNTIME.format(name="demo"))[1])}
    assert objects["Service"]["spec"]["type"] == "ClusterIP"
    assert objects["Service"]["spec"]["ports"][0]["port"] == 9000
    assert objects["Deployment"]["spec"]["replicas"] == 1
    container = objects["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["imagePullPolicy"] == "IfNotPresent"


def test_optional_objects_appear_when_enabled() -> None:
    text = RUNTIME.format(name="demo") + (
        "  networkPolicy: {enabled: true, ingress: [{namespaceSelector: {}}]}\n"
        "  autoscaling: {enabled: true, minReplicas: 2}\n"
        "  resources: {requests: {cpu: 100m}}\n"
    )
    code, stdout, _ = render(text)
    objects = rendered(stdout)
    assert code == 0
    assert [o["kind"] for o in objects] == [*KINDS, "NetworkPolicy", "HorizontalPodAutoscaler"]
    assert objects[3]["spec"]["replicas"] == 2


def test_several_runtimes_render_one_after_the_other() -> None:
    text = RUNTIME.format(name="a") + "---\n" + RUNTIME.format(name="b")
    names = [o["metadata"]["name"] for o in rendered(render(text)[1])]
    assert names == ["a"] * 5 + ["b"] * 5


def test_owner_reference_carries_the_uid_only_when_known() -> None:
    without = rendered(render(RUNTIME.format(name="demo"))[1])[0]
    assert "uid" not in without["metadata"]["ownerReferences"][0]
    live = RUNTIME.format(name="demo").replace("namespace: prod", "namespace: prod\n  uid: abc-123")
    live += "status:\n  readyReplicas: 1\n  surprising: field\n"
    code, stdout, _ = render(live)
    assert code == 0
    assert rendered(stdout)[0]["metadata"]["ownerReferences"][0]["uid"] == "abc-123"


def test_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "runtime.yaml"
    path.write_text(RUNTIME.format(name="demo"))
    code, stdout, _ = render("", str(path))
    assert code == 0
    assert len(rendered(stdout)) == 5


def test_violations_exit_1_with_field_paths_and_render_nothing() -> None:
    text = RUNTIME.format(name="demo") + "  replicas: 5000\n"
    code, stdout, stderr = render(text)
    assert (code, stdout) == (1, "")
    assert stderr.startswith("<stdin>: prod/demo: spec.replicas: ")


def test_a_runtime_without_a_name_cannot_be_rendered() -> None:
    text = RUNTIME.format(name="demo").replace("  name: demo\n", "  generateName: demo-\n")
    code, stdout, stderr = render(text)
    assert (code, stdout) == (1, "")
    assert "prod/demo-: metadata.name: Required value" in stderr


def test_folders_and_several_paths(tmp_path: Path) -> None:
    (tmp_path / "team" / "a.yaml").parent.mkdir()
    (tmp_path / "team" / "a.yaml").write_text(RUNTIME.format(name="a"))
    (tmp_path / "b.yml").write_text(RUNTIME.format(name="b"))
    (tmp_path / "notes.txt").write_text("not read")
    stdout, stderr = io.StringIO(), io.StringIO()
    code = run_render([str(tmp_path)], "yaml", stdout, stderr, io.StringIO())
    assert (code, stderr.getvalue()) == (0, "")
    assert {o["metadata"]["name"] for o in rendered(stdout.getvalue())} == {"a", "b"}
    stdout = io.StringIO()
    code = run_render(
        [str(tmp_path / "b.yml"), "-"],
        "yaml",
        stdout,
        stderr,
        io.StringIO(RUNTIME.format(name="c")),
    )
    assert [o["metadata"]["name"] for o in rendered(stdout.getvalue())] == ["b"] * 5 + ["c"] * 5


def test_json_output_is_one_list_kubectl_applies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runtime.yaml"
    path.write_text(RUNTIME.format(name="demo"))
    assert main(["render", "-o", "json", "-f", str(path)]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert (listed["apiVersion"], listed["kind"]) == ("v1", "List")
    assert [o["kind"] for o in listed["items"]] == KINDS
    assert main(["render", "-f", str(path)]) == 0
    assert rendered(capsys.readouterr().out) == listed["items"]


@pytest.mark.parametrize(
    "text",
    ["a: [\n", "- just\n- a list\n", "metadata: {name: {{ .Release.Name }}}\n", "a: !Ref b\n"],
    ids=["yaml", "not-object", "template", "custom-tag"],
)
def test_unparsable_input_exits_2(text: str) -> None:
    code, stdout, stderr = render(text)
    assert (code, stdout) == (2, "")
    assert stderr.startswith("<stdin>: ")


def test_a_missing_file_exits_2(tmp_path: Path) -> None:
    code, _, stderr = render("", str(tmp_path / "absent.yaml"))
    assert code == 2
    assert stderr == f"{tmp_path / 'absent.yaml'}: no such file or folder\n"


def test_no_runtime_in_the_input_is_not_an_error() -> None:
    code, stdout, stderr = render(NAMESPACE)
    assert (code, stdout) == (0, "")
    assert "no TrussiumRuntime" in stderr


def test_wired_into_the_controller_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runtime.yaml"
    path.write_text(RUNTIME.format(name="demo"))
    assert main(["render", "-f", str(path)]) == 0
    assert [o["kind"] for o in rendered(capsys.readouterr().out)] == KINDS
