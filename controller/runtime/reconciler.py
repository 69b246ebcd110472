"""Reconcile one TrussiumRuntime: docs/contract.md section 5, step by step.

Every decision (what to apply, what to delete, the status, the Events) is
made by `common/`; this sequences the I/O around those decisions. It
receives only a key and reads the current world from the caches, so it is
level-triggered and idempotent.
"""

import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from trussium_operator.common import constants as c
from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.conditions import conditions_of, find_condition
from trussium_operator.common.events import decide_events
from trussium_operator.common.images import render_image
from trussium_operator.common.k8s_validation import FieldError
from trussium_operator.common.managed_fields import GO_OPERATOR_MANAGER
from trussium_operator.common.ownership import Ownership, conflict_message, ownership
from trussium_operator.common.references import credential_secret_names, referenced_secret_names
from trussium_operator.common.render import RenderContext
from trussium_operator.common.status import (
    Outcome,
    compute_status,
    invalid_spec_status,
    status_differs,
)
from trussium_operator.controller.machinery.cache import Obj
from trussium_operator.controller.machinery.kube import ApiError, Kube
from trussium_operator.controller.machinery.names import NamespacedName
from trussium_operator.controller.migration.takeover import needs_takeover, take_over_fields
from trussium_operator.controller.runtime.applied import AppliedObjects
from trussium_operator.controller.runtime.errors import (
    Failure,
    ReconcileError,
    ResourceConflictError,
    classify,
    failure_message,
)
from trussium_operator.controller.runtime.kinds import (
    MANAGED_KINDS,
    RUNTIMES,
    ManagedKind,
    disabled_kinds,
)
from trussium_operator.controller.runtime.recorder import Recorder
from trussium_operator.controller.runtime.secret_presence import SecretPresence
from trussium_operator.controller.runtime.settled import Inputs, SettledInputs
from trussium_operator.controller.runtime.validated import ValidGenerations
from trussium_operator.controller.runtime.watches import Caches

log = logging.getLogger("controller.runtime.reconciler")
LEGACY_FIELD_MANAGERS = frozenset({GO_OPERATOR_MANAGER})


class Reconciler:
    def __init__(
        self,
        kube: Kube,
        caches: Caches,
        secrets: SecretPresence,
        recorder: Recorder,
        legacy_managers: frozenset[str] = LEGACY_FIELD_MANAGERS,
        kinds: tuple[ManagedKind, ...] = MANAGED_KINDS,
    ) -> None:
        self.kube = kube
        self.kinds = kinds
        self.caches = caches
        self.secrets = secrets
        self.recorder = recorder
        self.legacy_managers = legacy_managers
        self.applied = AppliedObjects()
        self.valid = ValidGenerations()
        self.settled = SettledInputs()

    async def reconcile(self, key: NamespacedName) -> None:
        obj = self.caches.runtimes.store.get(key)
        if obj is None:
            self.applied.forget(key)
            self.valid.forget(key)
            self.settled.forget(key)
            return
        if obj["metadata"].get("deletionTimestamp"):
            return
        runtime, errors, warnings = self.valid.parse(key, obj)
        if runtime is None:
            # Admitted by an older or looser CRD, or while the webhook was bypassed: report
            # it and leave the managed objects exactly as they are until the spec is fixed.
            deployment, service = self._observed(key)
            now = datetime.now(UTC)
            status = invalid_spec_status(
                obj, errors, deployment=deployment, service=service, now=_stamp(now)
            )
            if status_differs(obj.get("status"), status):
                log.warning(
                    "invalid TrussiumRuntime, not reconciled until its spec is fixed",
                    extra={"fields": key.fields() | {"paths": [e.path for e in errors]}},
                )
            await self._publish(obj, status, now)
            return
        outcome = self.secrets.check(key.namespace, referenced_secret_names(runtime.spec))
        if outcome is None:
            log.debug("waiting for a Secret lookup", extra={"fields": key.fields()})
            return
        if outcome.missing_secrets or outcome.reference_check_error:
            await self._report(obj, runtime, outcome, *self._observed(key), warnings)
            if outcome.reference_check_error:
                raise ReconcileError(outcome.reference_check_error)
            return
        versions = self.secrets.versions(key.namespace, credential_secret_names(runtime.spec))
        if self.settled.unchanged(key, self._inputs(obj, outcome, versions, self._cached(key))):
            return
        self.settled.forget(key)
        obj = await self._announce_upgrade(obj, runtime, outcome, warnings)
        try:
            observed = await self._converge(runtime, versions)
        except ResourceConflictError as conflict:
            # Reported once as a state (Degraded, with its Warning event), not as a
            # failure per retry; retried with backoff, as nothing watches the other object.
            blocked = replace(outcome, conflicts=conflict.messages)
            await self._report(obj, runtime, blocked, *self._observed(key), warnings)
            raise
        except Exception as error:
            if classify(error) is Failure.REPORTED:
                failure = replace(outcome, reconcile_error=failure_message(error))
                await self._report(obj, runtime, failure, *self._observed(key), warnings)
            raise
        deployment, service = observed.get("Deployment"), observed.get("Service")
        await self._report(obj, runtime, outcome, deployment, service, warnings)
        written = self.caches.runtimes.store.get(key) or obj
        self.settled.record(key, self._inputs(written, outcome, versions, observed))

    def _cached(self, key: NamespacedName) -> dict[str, Obj | None]:
        """Each served kind's cached object under the runtime's name."""
        return {
            kind.kind: cache.store.get(key)
            for kind in self.kinds
            if (cache := self.caches.owned(kind.kind)).served
        }

    @staticmethod
    def _inputs(
        obj: Obj, outcome: Outcome, versions: Mapping[str, str], objects: Mapping[str, Obj | None]
    ) -> Inputs:
        """What a reconcile reads, as versions (`controller/runtime/settled.py`)."""
        return (
            obj["metadata"].get("resourceVersion"),
            outcome,
            tuple(sorted(versions.items())),
            tuple(sorted((kind, _version(o)) for kind, o in objects.items())),
        )

    async def _announce_upgrade(
        self,
        obj: Obj,
        runtime: TrussiumRuntime,
        outcome: Outcome,
        warnings: tuple[FieldError, ...],
    ) -> Obj:
        """Report an upgrade (status and RuntimeUpgradeStarted) before the new image is
        applied. Reported only after the apply, a controller killed in between could
        find the rollout finished on restart and never announce its start.

        Returns the runtime as written, so the status write after the apply carries
        the current resourceVersion."""
        key = NamespacedName.of(obj)
        deployment, service = self._observed(key)
        status = obj.get("status") or {}
        desired = render_image(runtime.spec.image)
        last = status.get("lastSuccessfulImage")
        if deployment is None or not last or desired in (last, status.get("desiredImage")):
            return obj
        await self._report(obj, runtime, outcome, deployment, service, warnings)
        return self.caches.runtimes.store.get(key) or obj

    def _observed(self, key: NamespacedName) -> tuple[Obj | None, Obj | None]:
        return (
            self.caches.owned("Deployment").store.get(key),
            self.caches.owned("Service").store.get(key),
        )

    async def _converge(
        self, runtime: TrussiumRuntime, versions: dict[str, str]
    ) -> dict[str, Obj | None]:
        """Apply every enabled kind's object in registry order, each with its kind's step
        (`controller/runtime/kinds.py`), then delete the disabled kinds' objects; return
        each served kind's object as the API server last answered or the cache holds it
        (None once deleted). An optional kind whose API is not served is
        left out until it is (its appearance requeues every runtime).

        Nothing is written while any managed name is held by an object the runtime
        does not own (`ResourceConflictError`): a runtime is not half provisioned around
        someone else's Service or NetworkPolicy."""
        key = NamespacedName(runtime.metadata.namespace, runtime.metadata.name)
        context = RenderContext(runtime, self.caches.owned("Deployment").store.get(key), versions)
        observed = self._cached(key)
        served = [kind for kind in self.kinds if self.caches.owned(kind.kind).served]
        enabled = [kind for kind in served if kind.enabled(runtime)]
        conflicts = [
            conflict_message(kind.kind, key.name, found)
            for kind in enabled
            if not (found := await self._ownership(runtime, kind, key)).claim.writable
        ]
        if conflicts:
            raise ResourceConflictError(tuple(conflicts))
        for kind in enabled:
            rendered = kind.manifest(context)
            live = self.caches.owned(kind.kind).store.get(key)
            if needs_takeover(live, self.legacy_managers):
                # Apply after the takeover even if nothing else changed: it is what prunes.
                # An autoscaled Deployment's apply stays guarded by the cached version (its
                # replica count came from there), so it fails once and retries fresh.
                await take_over_fields(
                    self.kube, kind.resource, key, self.legacy_managers, c.FIELD_MANAGER
                )
            elif self.applied.unchanged(rendered, live):
                continue
            answer = await kind.step.apply(self.kube, kind.resource, runtime, rendered, live)
            self.applied.record(rendered, answer)
            observed[kind.kind] = answer
        for kind in disabled_kinds(runtime, tuple(served)):
            if await self._delete_if_ours(runtime, kind, key):
                observed[kind.kind] = None
        return observed

    async def _ownership(
        self, runtime: TrussiumRuntime, kind: ManagedKind, key: NamespacedName
    ) -> Ownership:
        """Whose the object under this kind's managed name is. The cache holds only
        objects labelled as managed, so where it has none the API server is asked:
        an object of someone else's is invisible to the cache."""
        live = self.caches.owned(kind.kind).store.get(key)
        if live is None:
            try:
                live = await self.kube.request("GET", kind.resource.path(*key))
            except ApiError as error:
                if not error.not_found:
                    raise
        return ownership(live, key.name, runtime.metadata.uid)

    async def _delete_if_ours(
        self, runtime: TrussiumRuntime, kind: ManagedKind, key: NamespacedName
    ) -> bool:
        """Whether the object was ours and is gone (or going) now."""
        live = self.caches.owned(kind.kind).store.get(key)
        if live is None or not ownership(live, key.name, runtime.metadata.uid).claim.writable:
            return False
        try:
            await self.kube.request(
                "DELETE",
                kind.resource.path(*key),
                body={"preconditions": {"uid": live["metadata"]["uid"]}},
            )
        except ApiError as error:
            if not (error.not_found or error.conflict):
                raise
        return True

    async def _report(
        self,
        obj: Obj,
        runtime: TrussiumRuntime,
        outcome: Outcome,
        deployment: Obj | None,
        service: Obj | None,
        warnings: tuple[FieldError, ...],
    ) -> None:
        """Post the Events the status transitions call for, then write the status if it
        changed. In this order, with idempotent event names, a crash in between
        neither loses nor duplicates an event (see controller/runtime/recorder.py)."""
        now = datetime.now(UTC)
        new = compute_status(
            runtime,
            deployment=deployment,
            service=service,
            outcome=outcome,
            now=_stamp(now),
            warnings=warnings,
        )
        await self._publish(
            obj, new, now, failure=outcome.reference_check_error or outcome.reconcile_error
        )

    async def _publish(
        self, obj: Obj, new: dict[str, Any], now: datetime, failure: str | None = None
    ) -> None:
        """The events `new` calls for, then `new` itself if it differs from the stored status."""
        old = obj.get("status")
        changed = status_differs(old, new)
        if not changed and failure is None:
            return
        for decision in decide_events(old, new, failure=failure):
            await self.recorder.record(obj, decision, now)
        if not changed:
            return  # only a failure Event was posted: the status says it already
        await self._write_status(obj, new)
        ready = _condition(new, c.ConditionType.READY)
        log.info(
            "status updated", extra={"fields": NamespacedName.of(obj).fields() | {"ready": ready}}
        )

    async def _write_status(self, obj: Obj, status: dict[str, Any]) -> None:
        meta = obj["metadata"]
        body = {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND,
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "resourceVersion": meta["resourceVersion"],
            },
            "status": status,
        }
        path = RUNTIMES.path(meta["namespace"], meta["name"]) + "/status"
        answer = await self.kube.request("PUT", path, body=body)
        # The watch brings the same object later; storing it now keeps a quick
        # follow-up reconcile from writing on top of a stale version.
        self.caches.runtimes.store.upsert(answer)


def _version(obj: Obj | None) -> str | None:
    return None if obj is None else obj["metadata"].get("resourceVersion")


def _stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(status: Mapping[str, Any], type_: str) -> str:
    condition = find_condition(conditions_of(status), type_)
    return f"{condition.get('status')} {condition.get('reason')}" if condition else ""
