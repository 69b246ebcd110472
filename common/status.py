"""A TrussiumRuntime's status from what one reconcile observed (docs/contract.md 3, 6, 7).

Zero and empty fields are left out of the written status, as the Go
operator's `omitempty` fields are, so both operators write the same shape;
`desiredReplicas`, which the Go operator does not have, is written at 0 too.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trussium_operator.common import constants as c
from trussium_operator.common.api import (
    ServiceSpec,
    TrussiumRuntime,
    TrussiumRuntimeSpec,
    TrussiumRuntimeStatus,
)
from trussium_operator.common.conditions import (
    ConditionState,
    build_condition,
    conditions_of,
    find_condition,
    state_of,
)
from trussium_operator.common.constants import ConditionType, Reason
from trussium_operator.common.images import render_image
from trussium_operator.common.k8s_validation import FieldError
from trussium_operator.common.lifecycle import (
    Rollout,
    RolloutPhase,
    desired_replicas,
    generation_observed,
    rollout_of,
    status_count,
    upgrade_of,
)
from trussium_operator.common.ratcheting import tolerated

Conditions = dict[ConditionType, ConditionState]
_RESOLVED = ConditionState("True", Reason.REFERENCES_RESOLVED, "All referenced Secrets exist.")
_AS_EXPECTED = ConditionState("False", Reason.AS_EXPECTED, "The runtime is operating as expected.")


@dataclass(frozen=True)
class Outcome:
    """What the reconcile's I/O observed besides the Deployment and Service."""

    missing_secrets: tuple[str, ...] = ()
    reference_check_error: str | None = None
    reconcile_error: str | None = None
    # Objects under the runtime's managed names that it does not own (`common.ownership`).
    conflicts: tuple[str, ...] = ()
    # Referenced Secrets nobody checked: an install without Secret rights (ADR 0028).
    unchecked_secrets: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Observed:
    """The facts of one observation the condition table is decided on."""

    deployment: Mapping[str, Any] | None
    desired: int
    ready: int
    available: int
    rollout: Rollout


def current_image(deployment: Mapping[str, Any] | None) -> str:
    """The image of the `trussium` container (else the first) in the live template."""
    pod = (((deployment or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = [x for x in pod.get("containers") or () if isinstance(x, Mapping)]
    chosen = next((x for x in containers if x.get("name") == c.CONTAINER_NAME), None)
    if chosen is None and containers:
        chosen = containers[0]
    return str((chosen or {}).get("image") or "")


def endpoint(service: Mapping[str, Any] | None, namespace: str, default_port: int) -> str:
    if service is None:
        return ""
    name = (service.get("metadata") or {}).get("name", "")
    ports = [p for p in (service.get("spec") or {}).get("ports") or () if isinstance(p, Mapping)]
    http = next((p for p in ports if p.get("name") == c.PORT_NAME), None)
    port = (http or {}).get("port", default_port)
    return f"http://{name}.{namespace}.svc.cluster.local:{port}"


def availability(desired: int, available: int) -> ConditionState:
    """The rule A(D) of docs/contract.md section 7."""
    if desired == 0:
        return ConditionState("False", Reason.SCALED_TO_ZERO, "The runtime is scaled to zero.")
    if available > 0:
        return ConditionState(
            "True", Reason.RUNTIME_AVAILABLE, f"{available} of {desired} replicas are available."
        )
    return ConditionState("False", Reason.RUNTIME_UNAVAILABLE, "No replica is available.")


def _not_ready(o: _Observed) -> ConditionState:
    return ConditionState(
        "False", Reason.RUNTIME_NOT_READY, f"{o.ready} of {o.desired} replicas are ready."
    )


def _failed(reason: Reason, message: str, available: ConditionState) -> Conditions:
    """Progressing, Available, Ready and Degraded when reconciling could not go on."""
    return {
        ConditionType.PROGRESSING: ConditionState("False", reason, message),
        ConditionType.AVAILABLE: available,
        ConditionType.READY: ConditionState("False", reason, message),
        ConditionType.DEGRADED: ConditionState("True", reason, message),
    }


def _missing_secrets_message(namespace: str, names: tuple[str, ...]) -> str:
    quoted = ", ".join(f'"{name}"' for name in names)
    if len(names) == 1:
        return f"Secret {quoted} was not found in namespace {namespace}."
    return f"Secrets {quoted} were not found in namespace {namespace}."


def _resolved(outcome: Outcome) -> ConditionState:
    """ConfigurationValid when nothing refutes the references; the contract's reason
    stays, the message says when the Secrets were not checked (ADR 0028)."""
    if not outcome.unchecked_secrets:
        return _RESOLVED
    quoted = ", ".join(f'"{name}"' for name in outcome.unchecked_secrets)
    return ConditionState(
        "True",
        Reason.REFERENCES_RESOLVED,
        "Referenced Secrets are not checked (this installation has no Secret access): "
        f"{quoted}. A missing one shows when the kubelet starts a Pod.",
    )


def _configuration(runtime: TrussiumRuntime, outcome: Outcome, o: _Observed) -> Conditions | None:
    """The first four rows of the table: the reconcile could not run to its end."""
    namespace = runtime.metadata.namespace
    if outcome.missing_secrets:
        message = _missing_secrets_message(namespace, outcome.missing_secrets)
        invalid = ConditionState("False", Reason.SECRET_NOT_FOUND, message)
        return {
            ConditionType.CONFIGURATION_VALID: invalid,
            **_failed(
                Reason.CONFIGURATION_INVALID,
                f"The configuration is invalid: {message}",
                availability(runtime.spec.replicas, o.available),
            ),
        }
    if outcome.reference_check_error is not None:
        message = f"Checking the referenced Secrets failed: {outcome.reference_check_error}"
        return {
            ConditionType.CONFIGURATION_VALID: ConditionState(
                "False", Reason.REFERENCE_CHECK_FAILED, message
            ),
            **_failed(Reason.RECONCILIATION_FAILED, message, availability(o.desired, o.available)),
        }
    if outcome.conflicts:
        message = " ".join(outcome.conflicts)
        return {
            ConditionType.CONFIGURATION_VALID: _resolved(outcome),
            **_failed(Reason.RESOURCE_CONFLICT, message, availability(o.desired, o.available)),
        }
    if outcome.reconcile_error is not None:
        message = f"Reconciliation failed: {outcome.reconcile_error}"
        return {
            ConditionType.CONFIGURATION_VALID: _resolved(outcome),
            **_failed(Reason.RECONCILIATION_FAILED, message, availability(o.desired, o.available)),
        }
    return None


def _workload(o: _Observed) -> Conditions:
    """The remaining rows: the state of the managed Deployment."""
    available = availability(o.desired, o.available)
    pending = ConditionState(
        "True",
        Reason.DEPLOYMENT_GENERATION_PENDING,
        "Waiting for the Deployment controller to observe the latest Deployment spec.",
    )
    progressing = ConditionState(
        "True", Reason.DEPLOYMENT_PROGRESSING, "The Deployment is rolling out."
    )
    if o.deployment is None:
        return {
            ConditionType.PROGRESSING: ConditionState(
                "True", Reason.DEPLOYMENT_PROGRESSING, "Waiting for the Deployment to be created."
            ),
            ConditionType.AVAILABLE: available,
            ConditionType.READY: _not_ready(o),
            ConditionType.DEGRADED: _AS_EXPECTED,
        }
    observed = generation_observed(o.deployment)
    if o.desired == 0:
        if observed and o.ready == 0 and o.available == 0:
            zero = ConditionState("False", Reason.SCALED_TO_ZERO, "The runtime is scaled to zero.")
            return {
                ConditionType.PROGRESSING: zero,
                ConditionType.AVAILABLE: zero,
                ConditionType.READY: ConditionState("True", zero.reason, zero.message),
                ConditionType.DEGRADED: _AS_EXPECTED,
            }
        return {
            ConditionType.PROGRESSING: pending,
            ConditionType.AVAILABLE: ConditionState(
                "False", Reason.RUNTIME_UNAVAILABLE, "The runtime is scaling to zero."
            ),
            ConditionType.READY: _not_ready(o),
            ConditionType.DEGRADED: _AS_EXPECTED,
        }
    if o.rollout.phase is RolloutPhase.FAILED:
        reason = o.rollout.failure_reason
        message = o.rollout.failure_message or f"The Deployment rollout failed: {reason}."
        failed = ConditionState("False", Reason.DEPLOYMENT_FAILED, message)
        return {
            ConditionType.PROGRESSING: failed,
            ConditionType.AVAILABLE: available,
            ConditionType.READY: failed,
            ConditionType.DEGRADED: ConditionState("True", reason, message),
        }
    if observed and o.ready == o.available == o.desired:
        return {
            ConditionType.PROGRESSING: ConditionState(
                "False", Reason.RECONCILIATION_COMPLETE, "The Deployment is up to date."
            ),
            ConditionType.AVAILABLE: available,
            ConditionType.READY: ConditionState(
                "True", Reason.RUNTIME_READY, f"{o.ready} of {o.desired} replicas are ready."
            ),
            ConditionType.DEGRADED: _AS_EXPECTED,
        }
    return {
        ConditionType.PROGRESSING: progressing if observed else pending,
        ConditionType.AVAILABLE: available,
        ConditionType.READY: _not_ready(o),
        ConditionType.DEGRADED: _AS_EXPECTED,
    }


def compute_status(
    runtime: TrussiumRuntime,
    *,
    deployment: Mapping[str, Any] | None,
    service: Mapping[str, Any] | None,
    outcome: Outcome,
    now: str,
    warnings: Sequence[FieldError] = (),
) -> dict[str, Any]:
    """The whole status (camelCase), ready for the status subresource.

    `now` is the RFC 3339 time used for conditions whose status flips;
    `warnings`, the rules the stored spec breaks but may (`common.ratcheting`).
    """
    previous = runtime.status
    desired = desired_replicas(runtime.spec, deployment)
    o = _Observed(
        deployment=deployment,
        desired=desired,
        ready=status_count(deployment, "readyReplicas"),
        available=status_count(deployment, "availableReplicas"),
        rollout=rollout_of(deployment, desired),
    )
    desired_image = render_image(runtime.spec.image)
    image = current_image(deployment)
    upgrade = upgrade_of(
        previous, desired_image=desired_image, current_image=image, rollout=o.rollout
    )
    states = _configuration(runtime, outcome, o) or {
        ConditionType.CONFIGURATION_VALID: _resolved(outcome),
        **_workload(o),
    }
    states[ConditionType.UPGRADING] = upgrade.condition
    if warnings:
        states[ConditionType.CONFIGURATION_WARNINGS] = ConditionState(
            "True", Reason.ACCEPTED_WITH_WARNINGS, warnings_message(warnings)
        )
    return _status(
        previous,
        states,
        generation=runtime.metadata.generation,
        now=now,
        readyReplicas=o.ready,
        availableReplicas=o.available,
        desiredReplicas=o.desired,
        desiredImage=desired_image,
        currentImage=image,
        lastSuccessfulImage=upgrade.last_successful_image,
        endpoint=endpoint(service, runtime.metadata.namespace, runtime.spec.service.port),
    )


def _status(
    previous: Mapping[str, Any] | None,
    states: Conditions,
    *,
    generation: int,
    now: str,
    **fields: int | str,
) -> dict[str, Any]:
    """The status to write: `fields` without zero or empty values (a desiredReplicas of 0
    is kept: absent, it means a status that does not report it), then the conditions."""
    old_conditions = conditions_of(previous)
    status: dict[str, Any] = {"observedGeneration": generation} if generation else {}
    status.update(
        {key: value for key, value in fields.items() if value or key == "desiredReplicas"}
    )
    status["conditions"] = [
        build_condition(
            type_,
            states[type_],
            previous=find_condition(old_conditions, type_),
            generation=generation,
            now=now,
        )
        for type_ in ConditionType
        if type_ in states
    ]
    return status


MAX_LISTED_ERRORS = 20


def _listed(errors: Sequence[FieldError], show: Callable[[FieldError], str]) -> str:
    """The first MAX_LISTED_ERRORS errors, then a count."""
    shown = [show(error) for error in errors[:MAX_LISTED_ERRORS]]
    more = len(errors) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def invalid_spec_message(errors: Sequence[FieldError]) -> str:
    """Every error with its field path."""
    listed = _listed(errors, lambda e: f"{e.path}: {e.message}")
    return f"The spec is invalid: {listed}. Fix the spec to resume reconciling."


def warnings_message(warnings: Sequence[FieldError]) -> str:
    """Every rule a reconciled runtime breaks, with its field path and name; then each
    provider setting it cannot serve with (`common.provider_warnings`)."""
    broken = [w for w in warnings if tolerated(w)]
    advice = [w for w in warnings if not tolerated(w)]
    parts = []
    if broken:
        listed = _listed(broken, lambda e: f"{e.path}: {e.message} [{e.rule}]")
        parts.append(
            "The spec breaks rules a new runtime must meet; it is reconciled as the Go "
            f"operator reconciled it: {listed}."
        )
    if advice:
        listed = _listed(advice, lambda e: f"{e.path}: {e.message}")
        parts.append(f"The runtime is reconciled, but its provider settings look wrong: {listed}.")
    return " ".join([*parts, "Fix the spec to clear this."])


def invalid_spec_status(
    obj: Mapping[str, Any],
    errors: Sequence[FieldError],
    *,
    deployment: Mapping[str, Any] | None,
    service: Mapping[str, Any] | None,
    now: str,
) -> dict[str, Any]:
    """The status of a stored runtime our rules reject (docs/contract.md section 11).

    Built from the raw object, since the spec cannot be trusted: what is
    observed (replicas, current image, endpoint) is reported as it is, what
    would need the spec (desired image, the upgrade lifecycle) keeps its last
    value, and the workload is neither touched nor judged.
    """
    previous = obj.get("status") if isinstance(obj.get("status"), Mapping) else None
    meta = obj.get("metadata") or {}
    generation = meta.get("generation")
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    counts = (((deployment or {}).get("spec") or {}).get("replicas"), spec.get("replicas"))
    # D: what the Deployment runs, else what the spec asks for, else the default.
    desired = next(
        (n for n in counts if isinstance(n, int) and not isinstance(n, bool)),
        TrussiumRuntimeSpec.model_fields["replicas"].default,
    )
    available = status_count(deployment, "availableReplicas")
    message = invalid_spec_message(errors)
    states: Conditions = {
        ConditionType.CONFIGURATION_VALID: ConditionState("False", Reason.INVALID_SPEC, message),
        **_failed(
            Reason.CONFIGURATION_INVALID,
            f"The configuration is invalid: {message}",
            availability(desired, available),
        ),
    }
    upgrading = state_of(find_condition(conditions_of(previous), ConditionType.UPGRADING))
    if upgrading is not None:
        states[ConditionType.UPGRADING] = upgrading
    previous_fields = previous or {}
    return _status(
        previous,
        states,
        generation=generation if isinstance(generation, int) else 0,
        now=now,
        readyReplicas=status_count(deployment, "readyReplicas"),
        availableReplicas=available,
        desiredReplicas=desired,
        desiredImage=str(previous_fields.get("desiredImage") or ""),
        currentImage=current_image(deployment),
        lastSuccessfulImage=str(previous_fields.get("lastSuccessfulImage") or ""),
        endpoint=endpoint(service, str(meta.get("namespace") or ""), ServiceSpec().port),
    )


# Each field's value when absent, as the status model declares it (conditions compare apart).
_STATUS_DEFAULTS: dict[str, Any] = {
    field.alias or name: field.default
    for name, field in TrussiumRuntimeStatus.model_fields.items()
    if name != "conditions"
}


def _comparable(status: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[Any, Any]]:
    """The semantic content of a status: fields with defaults, conditions by type."""
    status = status or {}
    fields = {key: status.get(key, default) for key, default in _STATUS_DEFAULTS.items()}
    conditions = {
        condition.get("type"): (state_of(condition), condition.get("observedGeneration"))
        for condition in conditions_of(status)
    }
    return fields, conditions


def status_differs(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether writing `new` over `old` changes anything a user could see.

    Condition order is irrelevant (the list is a map keyed by type) and so
    are transition times, which `compute_status` carries over whenever the
    status did not flip.
    """
    return _comparable(old) != _comparable(new)
