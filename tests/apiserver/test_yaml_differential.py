"""Differential test: `offline.manifests` reads YAML exactly as kube-apiserver does.

A generated corpus of scalars (integers and floats in every notation, YAML
1.1 booleans and nulls, timestamps, special floats, each plain, quoted and
explicitly tagged, as values and as keys) and of structures (merge keys,
anchors and aliases, duplicate keys, non-string keys, binary) goes to the
API server as the body of a server-side dry-run create with Content-Type
application/yaml, into a CRD that keeps unknown fields; the JSON it answers
is compared with what our parser makes of the same text: both refuse it,
or both hold the same value, type for type (an int is not a float, a bool
is not an int). With `fieldValidation=Warn` the API server also runs
go-yaml's strict reading and answers its objections (keys set twice) as
warnings: we list the same duplicates.
"""

import asyncio
import json
import ssl
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from devcluster import ControlPlane
from devcluster.polling import wait_for
from trussium_operator.offline.manifests import (
    ManifestError,
    NotAManifestError,
    read_manifests_text,
)

pytestmark = pytest.mark.api

GROUP = "yamldiff.trussium.test"
PLURAL = "probes"
CRD = f"""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {PLURAL}.{GROUP}
spec:
  group: {GROUP}
  scope: Namespaced
  names: {{plural: {PLURAL}, singular: probe, kind: Probe, listKind: ProbeList}}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
"""
ESTABLISHED_TIMEOUT_SECONDS = 60.0
REQUEST_TIMEOUT_SECONDS = 30.0
CONCURRENCY = 8

INTEGERS = [
    *["0", "1", "12", "-1", "+1", "-0", "+0", "007", "08", "0777", "0o17", "0O17", "0o8"],
    *["0x1F", "0X1f", "0x", "-0x10", "+0x10", "0x_1F", "0b101", "0B101", "-0b101", "0b-101"],
    *["0b+101", "0b", "0b2", "1_000", "1__0", "_1", "1_", "1,000", "190:20:30", "1:30"],
    *["9223372036854775807", "9223372036854775808", "-9223372036854775808"],
    *["-9223372036854775809", "18446744073709551615", "18446744073709551616"],
    *["0xFFFFFFFFFFFFFFFF", "0x10000000000000000", "0x7FFFFFFFFFFFFFFF", "-0x8000000000000000"],
    *[
        "0b" + "1" * 64,
        "0b" + "1" * 65,
        "123456789012345678901234567890",
        "0o1777777777777777777777",
    ],
]
FLOATS = [
    *[".5_5", "._5", ".5_", ".5__5", ".5e1_0", "1_0.5_5", "1.5e1_0"],
    *["1.5", "1.", ".5", "+.5", "-.5", "0.1", "1.0", "-0.0", "2.50", "1e3", "1E3", "1e+3"],
    *["1e-3", "1.5e3", "1e21", "1e20", "1e19", "1e400", "-1e400", "1e-400", ".5e400", "1e-7"],
    *["6.02e23", "3.14159265358979323846", "4.611686018427388e18", "9.223372036854775e18"],
    *["1_0.5", "._5", ".5_5", "0x1p3", "1e", "12e", "1e3.5", "1.2.3", "1:30.5", "1_000e1_0"],
    *["Infinity", "-Infinity", "NaN", "inf", "nan", "1d", "0.5f", "$1"],
]
SPECIAL_FLOATS = [
    *[".5_5", "._5", ".5_", ".5__5", ".5e1_0", "1_0.5_5", "1.5e1_0"],
    ".inf",
    ".Inf",
    ".INF",
    "+.inf",
    "-.inf",
    "-.Inf",
    ".nan",
    ".NaN",
    ".NAN",
]
SPECIAL_FLOATS += [".nAn", ".Nan", "+.nan", ".infinity"]
BOOLEANS = [
    *["y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE"],
    *["false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF", "yEs", "tRUE", "oN"],
]
NULLS = ["~", "null", "Null", "NULL", "nULL", "None", "nil"]
TIMESTAMPS = [
    *["2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5"],
    *["2001-12-14T21:59:43Z", "2001-12-14 21:59:43.10", "2001-1-2", "2001-13-01", "2001-02-30"],
    *["20011214", "2001-12-14T25:00:00Z", "12001-12-14", "2001-12-14T1:2:3+01:00"],
]
WORDS = ["<<", "=", "-x", "x-", "a b", "0.0.0.0", "1.2.3.4:80", "v1", "1Gi", "250m", "#x"]
SCALARS = [*INTEGERS, *FLOATS, *SPECIAL_FLOATS, *BOOLEANS, *NULLS, *TIMESTAMPS, *WORDS]
TAGS = ["!!str", "!!int", "!!float", "!!bool", "!!null", "!!timestamp", "!"]

STRUCTURES = [
    "value: &a 1\nalias: *a\n",
    "base: &b {x: 1, y: 2}\nmerged:\n  <<: *b\n  z: 3\n",
    "base: &b {x: 1, y: 2}\nmerged:\n  <<: *b\n  x: 3\n",
    "base: &b {x: 1, y: 2}\nmerged:\n  x: 3\n  <<: *b\n",
    "a: &a {x: 1}\nb: &b {y: 2}\nmerged:\n  <<: [*a, *b]\n",
    "a: &a {x: 1}\nb: &b {x: 2}\nmerged:\n  <<: [*a, *b]\n",
    "merged:\n  <<: {x: 1}\n  y: 2\n",
    "merged:\n  <<: [{x: 1}, {y: 2}]\n",
    "merged:\n  <<: 1\n",
    "merged:\n  <<: [1]\n",
    'merged:\n  "<<": {x: 1}\n',
    "merged:\n  !!merge <<: {x: 1}\n",
    "merged:\n  ! <<: {x: 1}\n",
    "s: &s [1, 2]\nmerged:\n  <<: *s\n",
    "value: *missing\n",
    "value: &r [*r]\n",
    "a: &x 1\nb: &x 2\nc: *x\n",
    "a: 1\na: 2\n",
    "a: 1\n'a': 2\n",
    "1: a\n2: b\n",
    "1.5: a\n1e3: b\n1e7: c\n123456.7: d\n3.14159265358979: e\n0.000012: f\n1e-5: g\n",
    "0x10: a\n0o10: b\n010: c\n",
    "yes: a\noff: b\n",
    ".inf: a\n-.inf: b\n.nan: c\n",
    "~: a\n",
    "18446744073709551615: a\n",
    "2001-12-14: a\n",
    "[1]: a\n",
    "{a: 1}: b\n",
    "? [1, 2]\n: a\n",
    "value: !!binary aGVsbG8=\n",
    "value: !!binary 'aGVsbG8'\n",
    "value: !!binary /w==\n",
    "value: |\n  123\n",
    "value: >\n  true\n",
    "value: [1, yes, ~, 1e3, '1e3', 0x10]\n",
    "value: {a: 1, b: no}\n",
    "value: !!map {a: 1}\n",
    "value: !!seq [1]\n",
    "value: !!set {a, b}\n",
    "value: !!omap [{a: 1}]\n",
    "value: -\n",
    "value:\n  - a\n  -\n  - ~\n",
    "value: 'it''s'\n",
    'value: "tab\\tand \\u00e9"\n',
]


def _documents() -> Iterator[str]:
    """Each case as the `spec` of its own document."""
    for scalar in SCALARS:
        yield f"value: {scalar}\n"
        yield f"value: '{scalar}'\n"
        yield f'value: "{scalar}"\n'
        yield f"{scalar}: key\n" if scalar not in ("", "#x", "-x") else f"'{scalar}': key\n"
        for tag in TAGS:
            yield f"value: {tag} {scalar}\n"
    yield from STRUCTURES
    # Billion laughs: go-yaml's "excessive aliasing" limit.
    laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 7)
    )
    yield laughs


def _body(index: int, spec: str) -> str:
    indented = "".join(f"  {line}\n" for line in spec.splitlines())
    return (
        f"apiVersion: {GROUP}/v1\nkind: Probe\nmetadata:\n  name: case-{index}\nspec:\n" + indented
    )


def _int64_or_float(literal: str) -> int | float:
    """The API server's JSON decoder: an integer that fits in 64 bits, else a float."""
    value = int(literal)
    return value if -(2**63) <= value < 2**63 else float(value)


def _same(ours: Any, theirs: Any) -> bool:
    if type(ours) is not type(theirs):
        return False
    if isinstance(ours, dict):
        return ours.keys() == theirs.keys() and all(_same(ours[k], theirs[k]) for k in ours)
    if isinstance(ours, list):
        return len(ours) == len(theirs) and all(map(_same, ours, theirs))
    return bool(ours == theirs)


Verdict = tuple[str, Any, bool]


def _ours(text: str) -> Verdict:
    """("accepted", spec, any key set twice), ("refused", reason, _) or ("skipped", reason, _)."""
    try:
        (manifest,) = read_manifests_text(text, "case")
    except NotAManifestError as error:
        return "skipped", str(error), False
    except ManifestError as error:
        return "refused", str(error), False
    return "accepted", manifest.object.get("spec"), bool(manifest.duplicates)


@pytest.fixture(scope="module")
def probe_crd(api_plane: ControlPlane) -> Iterator[None]:
    api_plane.kubectl("apply", "--server-side", "-f", "-", input=CRD)
    query = '{.status.conditions[?(@.type=="Established")].status}'
    wait_for(
        lambda: (
            api_plane.kubectl(
                "get", "crd", f"{PLURAL}.{GROUP}", "-o", f"jsonpath={query}", check=False
            ).stdout.strip()
            == "True"
        ),
        "the probe CRD Established",
        ESTABLISHED_TIMEOUT_SECONDS,
    )
    yield
    api_plane.kubectl("delete", "crd", f"{PLURAL}.{GROUP}", "--wait=false", check=False)


async def _dry_run_creates(
    api_client: client.ApiClient, namespace: str, bodies: list[str], validation: str = "Warn"
) -> list[Verdict]:
    """The API server's ("accepted", spec, warned of a key set twice) or ("refused",
    message, _) for each YAML body."""
    configuration = api_client.configuration
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    context.load_cert_chain(str(configuration.cert_file), str(configuration.key_file))
    url = f"{configuration.host}/apis/{GROUP}/v1/namespaces/{namespace}/{PLURAL}"
    params = {"dryRun": "All", "fieldValidation": validation}
    headers = {"Content-Type": "application/yaml", "Accept": "application/json"}
    limit = asyncio.Semaphore(CONCURRENCY)

    async def verdict(session: aiohttp.ClientSession, body: str) -> Verdict:
        async with limit, session.post(url, params=params, data=body, headers=headers) as answer:
            text = await answer.text()
        warned = "already set in map" in " ".join(answer.headers.getall("Warning", []))
        if answer.status in (200, 201):
            return "accepted", json.loads(text, parse_int=_int64_or_float).get("spec"), warned
        assert answer.status in (400, 422), f"{answer.status}: {text[:300]}"
        return "refused", json.loads(text).get("message", text)[:300], warned

    connector = aiohttp.TCPConnector(ssl=context, limit=CONCURRENCY)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        return await asyncio.gather(*(verdict(session, body) for body in bodies))


@pytest.mark.usefixtures("probe_crd")
async def test_the_api_server_and_our_parser_read_yaml_alike(
    api_client: client.ApiClient, namespace: str
) -> None:
    bodies = [_body(i, spec) for i, spec in enumerate(_documents())]
    verdicts = await _dry_run_creates(api_client, namespace, bodies)
    disagreements = []
    for body, theirs in zip(bodies, verdicts, strict=True):
        ours = _ours(body)
        same = ours[0] == theirs[0] and (
            ours[0] != "accepted" or (_same(ours[1], theirs[1]) and ours[2] == theirs[2])
        )
        if not same:
            spec = body.split("spec:\n", 1)[1]
            disagreements.append(f"{spec!r}: server {theirs!r}; ours {ours!r}")
    refused = sum(1 for verdict, *_ in verdicts if verdict == "refused")
    duplicated = sum(1 for verdict, _, warned in verdicts if verdict == "accepted" and warned)
    assert len(bodies) > 1000, "the corpus should be large"
    assert 50 < refused < len(bodies) // 2, "the corpus should hold refused and accepted cases"
    assert duplicated >= 5, "and keys set twice, merges included"
    assert disagreements == [], f"{len(disagreements)} of {len(bodies)} disagree:\n" + "\n".join(
        disagreements[:60]
    )


@pytest.mark.usefixtures("probe_crd")
async def test_custom_tags_are_dropped_by_the_api_server_and_skipped_by_us(
    api_client: client.ApiClient, namespace: str
) -> None:
    """What the validator says of a file with custom tags (it skips it) is true."""
    body = _body(0, "value: !Ref bucket\nlist: !!python/tuple [1, 2]\n")
    [(verdict, spec, _)] = await _dry_run_creates(api_client, namespace, [body])
    assert (verdict, spec) == ("accepted", {"value": "bucket", "list": [1, 2]})
    assert _ours(body)[0] == "skipped"


@pytest.mark.usefixtures("probe_crd")
async def test_keys_that_meet_as_json_are_refused_where_the_api_server_picks_one(
    api_client: client.ApiClient, namespace: str
) -> None:
    """`true` and `'true'` are two keys to go-yaml and one to JSON: the API server keeps
    either value (Go's map order); we refuse the file instead (docs/offline-validation.md)."""
    body = _body(0, "true: 1\n'true': 2\n")
    [(verdict, spec, _)] = await _dry_run_creates(api_client, namespace, [body])
    assert verdict == "accepted"
    assert spec in ({"true": 1}, {"true": 2})
    assert _ours(body)[0] == "refused"


DUPLICATES = ["a: 1\na: 2\n", "base: &b {a: 1}\nm:\n  <<: *b\n  a: 2\n"]


@pytest.mark.usefixtures("probe_crd")
async def test_keys_set_twice_are_refused_by_strict_validation_and_kept_last_by_kubectl(
    api_plane: ControlPlane, api_client: client.ApiClient, namespace: str
) -> None:
    """What the validator's warning on a key set twice says is true."""
    bodies = [_body(i, spec) for i, spec in enumerate(DUPLICATES)]
    strict = await _dry_run_creates(api_client, namespace, bodies, validation="Strict")
    assert [verdict for verdict, *_ in strict] == ["refused", "refused"]
    for body, ours in zip(bodies, map(_ours, bodies), strict=True):
        created = api_plane.kubectl(
            "create", "--dry-run=server", "-n", namespace, "-o", "json", "-f", "-", input=body
        )
        assert ours[2], "we list the key set twice"
        assert _same(ours[1], json.loads(created.stdout)["spec"]), "and keep kubectl's value"
