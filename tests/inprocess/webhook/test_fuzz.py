"""Seeded fuzzing of the admission app through its HTTP layer.

Valid reviews of all three hooks are mutated with the inputs that broke the
webhook before (depth, huge numbers, lone surrogates, wrong types, huge
collections, out-of-range quantities, unusable names, broken bodies and
encodings) and posted one by one. Every answer must be something other
than a 500; every well-formed review (JSON, admission.k8s.io/v1, a uid)
must get an AdmissionReview echoing its uid; no request may take longer
than the API server's webhook timeout. The figures are printed (-s).

TRUSSIUM_FUZZ_CASES (default 2000) and TRUSSIUM_FUZZ_SEED (default 15)
choose the run; e.g. TRUSSIUM_FUZZ_CASES=100000 for a long local one.
"""

import copy
import gzip
import json
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .conftest import MakeClient
from .reviews import DEPLOYMENT_KIND, review, runtime, sample

CASES = int(os.environ.get("TRUSSIUM_FUZZ_CASES", "2000"))
SEED = int(os.environ.get("TRUSSIUM_FUZZ_SEED", "15"))
# The webhook configurations' timeoutSeconds: a slower answer is a failed admission.
MAX_SECONDS_PER_REQUEST = 5.0
MAX_REQUEST_BYTES = 8 * 1024 * 1024
HOOKS = ("/mutate-trussiumruntime", "/validate-trussiumruntime", "/validate-managed-deployment")

QUANTITIES = ["1", "500m", "2Gi", "1e1000000", "1e-1000000", "8Ei", "9223372036854775808",
              "-1", "1.5Gi", "abc", "0.1n", "1e" + "9" * 40, "", "7Ei"]  # fmt: skip
NAMES = ["chat", "1abc", "a.b", "a" * 63, "a" * 64, "-x", "x-", "UPPER", "", "ünïcode"]
RESOURCE_NAMES = ["cpu", "memory", "hugepages-2Mi", "hugepages-1Gi", "example.com/gpu",
                  "hugepages-", "ephemeral-storage", "x/y/z"]  # fmt: skip


@dataclass
class Case:
    path: str
    body: bytes
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    kind: str = "review"


def scalar(rng: random.Random) -> Any:
    choice = rng.randrange(12)
    if choice == 0:
        return 10 ** rng.randint(1, 4000) * rng.choice((1, -1))
    if choice == 1:
        return "x" * rng.choice((0, 1, 63, 64, 254, 5000, 100_000))
    if choice == 2:
        return "\ud800" if rng.random() < 0.5 else "ok\udfff"
    if choice == 3:
        return rng.choice(QUANTITIES)
    if choice == 4:
        return rng.choice(NAMES)
    if choice == 5:
        return rng.choice((None, True, False, 0, -1, 2**63, 1.5, 1e308))
    if choice == 6:
        return "".join(chr(rng.randrange(0x20, 0x2FFF)) for _ in range(rng.randrange(1, 20)))
    return rng.choice(("", "a", "In", "Exists", "NoExecute", "Equal", "Gt", "metadata.name"))


def value(rng: random.Random, depth: int = 0) -> Any:
    choice = rng.randrange(10)
    if depth > 3 or choice < 5:
        return scalar(rng)
    if choice == 5:
        inner: Any = scalar(rng)
        for _ in range(rng.choice((5, 90, 99, 100, 101, 150, 400))):
            inner = [inner]
        return inner
    if choice == 6:
        size = rng.choice((2, 20, 1001, 3000))
        return {
            f"{rng.choice(('k', '-bad', 'x/y/z', 'example.com/'))}{i}": "v" for i in range(size)
        }
    if choice == 7:
        return [value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    return {scalar_key(rng): value(rng, depth + 1) for _ in range(rng.randrange(0, 4))}


def scalar_key(rng: random.Random) -> str:
    key = scalar(rng)
    return key if isinstance(key, str) else str(key)


def locations(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a dict or list entry in `node`."""
    found = []
    if isinstance(node, dict):
        for key, item in node.items():
            found.append((*path, key))
            found.extend(locations(item, (*path, key)))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            found.append((*path, index))
            found.extend(locations(item, (*path, index)))
    return found


def put(document: Any, path: tuple[Any, ...], new: Any) -> None:
    *parents, last = path
    target = document
    for part in parents:
        target = target[part]
    if new is _DELETE and isinstance(target, dict):
        del target[last]
    elif new is not _DELETE:
        target[last] = new


_DELETE = object()
_RUNTIME_TARGETS = [
    ("spec", "resources"),
    ("spec", "podMetadata"),
    ("spec", "scheduling"),
    ("spec", "image"),
    ("spec", "provider"),
    ("metadata", "name"),
]
_DEPLOYMENT_TARGETS = [
    ("metadata", "ownerReferences"),
    ("metadata", "labels"),
    ("metadata", "namespace"),
    ("spec", "template"),
    ("spec", "replicas"),
]


def aimed(rng: random.Random, guard: bool) -> tuple[tuple[str, str], Any]:
    """A value aimed at a field whose rules do real work (or that the guard reads)."""
    target = rng.choice(_DEPLOYMENT_TARGETS if guard else _RUNTIME_TARGETS)
    if target == ("spec", "resources"):
        kinds = {
            k: {rng.choice(RESOURCE_NAMES): rng.choice(QUANTITIES)} for k in ("limits", "requests")
        }
        return target, kinds
    if target == ("spec", "podMetadata"):
        return target, {rng.choice(("labels", "annotations")): value(rng)}
    if target == ("spec", "scheduling"):
        key = rng.choice(("tolerations", "affinity", "nodeSelector"))
        return target, {key: value(rng)}
    if target == ("metadata", "name"):
        return target, rng.choice(NAMES)
    return target, scalar(rng) if rng.random() < 0.5 else value(rng)


def mutated_document(rng: random.Random, path: str) -> dict[str, Any]:
    if path.endswith("deployment"):
        base = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "chat",
                "labels": {"app.kubernetes.io/managed-by": "trussium-operator"},
            },
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "t"}]}}},
        }
        new = copy.deepcopy(base)
        document = review(new, old=base, operation="UPDATE", kind=DEPLOYMENT_KIND)
    else:
        obj = sample("valid/production.yaml") if rng.random() < 0.3 else runtime()
        operation = rng.choice(("CREATE", "UPDATE"))
        old = copy.deepcopy(obj) if operation == "UPDATE" else None
        document = review(obj, old=old, operation=operation)
    document = copy.deepcopy(document)  # it shares the kind constants of `reviews`
    for _ in range(rng.randrange(1, 4)):
        roll = rng.random()
        request = document.get("request")
        guard = path.endswith("deployment")
        side = "object" if rng.random() < (0.5 if guard else 0.8) else "oldObject"
        if roll < 0.45 and isinstance(request, dict) and isinstance(request.get(side), dict):
            where, new_value = aimed(rng, guard)
            parent = request[side].setdefault(where[0], {})
            if isinstance(parent, dict):
                parent[where[1]] = new_value
        elif roll < 0.85:
            places = locations(document)
            put(document, rng.choice(places), _DELETE if rng.random() < 0.2 else value(rng))
        elif isinstance(request, dict):
            key = rng.choice(
                ("uid", "kind", "operation", "userInfo", "object", "oldObject", "dryRun")
            )
            request[key] = value(rng)
    return document


def case(rng: random.Random) -> Case:
    path = rng.choice(HOOKS)
    document = mutated_document(rng, path)
    try:
        body = json.dumps(document).encode()
    except (ValueError, RecursionError):  # an integer past Python's limit: write it by hand
        body = (
            json.dumps(review(runtime()))
            .replace('"CREATE"', '"CREATE", "n": ' + "7" * 4301, 1)
            .encode()
        )
    roll = rng.random()
    if roll < 0.03:
        return Case(path, body[: rng.randrange(len(body))], kind="truncated")
    if roll < 0.05:
        depth = rng.choice((99, 101, 999, 1000, 3000))
        return Case(
            path,
            body.replace(b'"CREATE"', b'"CREATE", "d": ' + b"[" * depth + b"]" * depth, 1),
            kind="deep",
        )
    if roll < 0.07:
        return Case(path, body, {"Content-Encoding": "gzip"}, kind="fake gzip")
    if roll < 0.08:
        return Case(path, gzip.compress(body), {"Content-Encoding": "gzip"}, kind="gzip")
    if roll < 0.09:
        return Case(
            path, bytes(rng.randrange(256) for _ in range(rng.randrange(200))), kind="bytes"
        )
    return Case(path, body)


def well_formed_uid(body: bytes, headers: dict[str, str]) -> str | None:
    """The uid of a body that is a JSON admission.k8s.io/v1 AdmissionReview; else None."""
    if headers.get("Content-Encoding") == "gzip":
        try:
            body = gzip.decompress(body)
        except OSError:
            return None
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict) or (document.get("apiVersion"), document.get("kind")) != (
        "admission.k8s.io/v1",
        "AdmissionReview",
    ):
        return None
    request = document.get("request")
    uid = request.get("uid") if isinstance(request, dict) else None
    if not isinstance(uid, str) or not uid:
        return None
    try:
        uid.encode()
    except UnicodeEncodeError:
        return None
    return uid


async def test_no_input_gets_a_500_and_every_review_is_answered(make_client: MakeClient) -> None:
    client = await make_client(max_request_bytes=MAX_REQUEST_BYTES)
    rng = random.Random(SEED)
    statuses: Counter[int] = Counter()
    kinds: Counter[str] = Counter()
    slowest, slowest_kind = 0.0, ""
    started = time.perf_counter()
    for number in range(CASES):
        fuzz = case(rng)
        kinds[fuzz.kind] += 1
        sent = time.perf_counter()
        answer = await client.post(fuzz.path, data=fuzz.body, headers=fuzz.headers)
        reply = await answer.read()
        elapsed = time.perf_counter() - sent
        if elapsed > slowest:
            slowest, slowest_kind = elapsed, f"{fuzz.kind} on {fuzz.path} ({len(fuzz.body)} bytes)"
        statuses[answer.status] += 1
        where = f"case {number} (seed {SEED}, {fuzz.kind} on {fuzz.path})"
        assert answer.status != 500, where
        assert elapsed < MAX_SECONDS_PER_REQUEST, where
        if number and number % 10_000 == 0:  # long local runs: progress (shown with -s)
            print(f"\nfuzz: {number} requests, slowest {slowest:.3f} s", flush=True)
        uid = well_formed_uid(fuzz.body, fuzz.headers)
        if uid is None:
            assert answer.status in (200, 400, 413), where
            continue
        assert answer.status == 200, where
        document = json.loads(reply)
        assert (document["apiVersion"], document["kind"]) == (
            "admission.k8s.io/v1",
            "AdmissionReview",
        ), where
        assert document["response"]["uid"] == uid, where
        assert isinstance(document["response"]["allowed"], bool), where
    print(
        f"\nfuzz: {CASES} requests (seed {SEED}) in {time.perf_counter() - started:.1f} s; "
        f"statuses {dict(statuses)}; 500s: {statuses[500]}; slowest {slowest * 1000:.0f} ms "
        f"({slowest_kind}); body kinds {dict(kinds)}"
    )
