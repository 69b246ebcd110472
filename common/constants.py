"""Fixed strings and numbers of the TrussiumRuntime contract.

Users, dashboards and the zero-restart migration from the Go operator key on
these exact values (docs/contract.md), so each is named once, here.
"""

from enum import StrEnum
from typing import Final

GROUP: Final = "runtime.trussium.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "TrussiumRuntime"
PLURAL: Final = "trussiumruntimes"
SINGULAR: Final = "trussiumruntime"
SHORT_NAME: Final = "truntime"
CRD_NAME: Final = f"{PLURAL}.{GROUP}"

FIELD_MANAGER: Final = "trussium-operator"
REPORTING_CONTROLLER: Final = "trussium-operator"

LABEL_NAME: Final = "app.kubernetes.io/name"
LABEL_INSTANCE: Final = "app.kubernetes.io/instance"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
APP_NAME: Final = "trussium"
COMPONENT: Final = "runtime"
MANAGED_BY: Final = "trussium-operator"
OPERATOR_LABEL_KEYS: Final = (LABEL_NAME, LABEL_INSTANCE, LABEL_COMPONENT, LABEL_MANAGED_BY)
MANAGED_SELECTOR: Final = f"{LABEL_MANAGED_BY}={MANAGED_BY}"

ANNOTATION_PREFIX: Final = f"{GROUP}/"
CONFIG_CHECKSUM_ANNOTATION: Final = f"{GROUP}/config-checksum"
SECRET_VERSIONS_ANNOTATION: Final = f"{GROUP}/secret-versions"
RESTARTED_AT_ANNOTATION: Final = "kubectl.kubernetes.io/restartedAt"

CONTAINER_NAME: Final = "trussium"
CONTAINER_PORT: Final = 9000
PORT_NAME: Final = "http"
RUNTIME_UID: Final = 10001
RUNTIME_GID: Final = 10001
DEFAULT_SHUTDOWN_DRAIN_SECONDS: Final = 30
TERMINATION_GRACE_MARGIN_SECONDS: Final = 6
PROGRESS_DEADLINE_SECONDS: Final = 600
REVISION_HISTORY_LIMIT: Final = 3
API_KEY_ENV: Final = "TRUSSIUM_PROVIDER__API_KEY"
RERANKING_API_KEY_ENV: Final = "TRUSSIUM_RERANKING__API_KEY"
# Scratch space (docs/contract.md section 12): an emptyDir where the runtime spools uploads.
SCRATCH_VOLUME: Final = "scratch"
SCRATCH_PATH: Final = "/tmp"
SCRATCH_ENV: Final = "TMPDIR"
SCRATCH_DEFAULT_SIZE: Final = "1Gi"
SCRATCH_MIN_SIZE: Final = "16Mi"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"


class ConditionType(StrEnum):
    CONFIGURATION_VALID = "ConfigurationValid"
    PROGRESSING = "Progressing"
    AVAILABLE = "Available"
    READY = "Ready"
    DEGRADED = "Degraded"
    UPGRADING = "Upgrading"
    # Present only while a reconciled runtime breaks rules it may break (contract section 12).
    CONFIGURATION_WARNINGS = "ConfigurationWarnings"


class Reason(StrEnum):
    """Condition reasons (docs/contract.md sections 6 and 7)."""

    SECRET_NOT_FOUND = "SecretNotFound"
    REFERENCE_CHECK_FAILED = "ReferenceCheckFailed"
    REFERENCES_RESOLVED = "ReferencesResolved"
    CONFIGURATION_INVALID = "ConfigurationInvalid"
    INVALID_SPEC = "InvalidSpec"
    RECONCILIATION_FAILED = "ReconciliationFailed"
    RESOURCE_CONFLICT = "ResourceConflict"
    RECONCILIATION_COMPLETE = "ReconciliationComplete"
    DEPLOYMENT_PROGRESSING = "DeploymentProgressing"
    DEPLOYMENT_GENERATION_PENDING = "DeploymentGenerationPending"
    DEPLOYMENT_FAILED = "DeploymentFailed"
    SCALED_TO_ZERO = "ScaledToZero"
    RUNTIME_AVAILABLE = "RuntimeAvailable"
    RUNTIME_UNAVAILABLE = "RuntimeUnavailable"
    RUNTIME_READY = "RuntimeReady"
    RUNTIME_NOT_READY = "RuntimeNotReady"
    AS_EXPECTED = "AsExpected"
    PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
    REPLICA_FAILURE = "ReplicaFailure"
    NO_UPGRADE = "NoUpgrade"
    UPGRADE_IN_PROGRESS = "UpgradeInProgress"
    UPGRADE_COMPLETE = "UpgradeComplete"
    UPGRADE_FAILED = "UpgradeFailed"
    ACCEPTED_WITH_WARNINGS = "AcceptedWithWarnings"


class EventReason(StrEnum):
    """Event reasons (docs/contract.md section 8)."""

    CONFIGURATION_INVALID = "ConfigurationInvalid"
    RUNTIME_DEGRADED = "RuntimeDegraded"
    RUNTIME_RECOVERED = "RuntimeRecovered"
    RUNTIME_PROGRESSING = "RuntimeProgressing"
    RUNTIME_READY = "RuntimeReady"
    RUNTIME_SCALED_TO_ZERO = "RuntimeScaledToZero"
    RUNTIME_UPGRADE_STARTED = "RuntimeUpgradeStarted"
    RUNTIME_UPGRADE_COMPLETED = "RuntimeUpgradeCompleted"
    RUNTIME_UPGRADE_FAILED = "RuntimeUpgradeFailed"
    RECONCILIATION_FAILED = "ReconciliationFailed"
    ACCEPTED_WITH_WARNINGS = "AcceptedWithWarnings"


class EventAction(StrEnum):
    VALIDATE_CONFIGURATION = "ValidateConfiguration"
    OBSERVE_RUNTIME = "ObserveRuntime"
    RECONCILE_RUNTIME = "ReconcileRuntime"
    UPGRADE_RUNTIME = "UpgradeRuntime"


# Managed objects (docs/contract.md section 4). The Deployment's apiVersion is also the
# autoscaler's scale target's; every other kind's is in its registry entry.
DEPLOYMENT_API_VERSION: Final = "apps/v1"
# Where the runtime serves its metrics (its one port), and the target labels its
# PodMonitor gives every series, named as the operator's per-runtime series (ADR 0022).
METRICS_PATH: Final = "/metrics"
RUNTIME_TARGET_LABELS: Final = {
    "runtime_namespace": "__meta_kubernetes_namespace",
    "runtime_name": "__meta_kubernetes_pod_label_app_kubernetes_io_instance",
}
CONFIG_ENVIRONMENT: Final = "production"
CONFIG_HOST: Final = "0.0.0.0"
ENV_ENVIRONMENT: Final = "TRUSSIUM_ENVIRONMENT"
ENV_HOST: Final = "TRUSSIUM_RUNTIME__HOST"
ENV_PORT: Final = "TRUSSIUM_RUNTIME__PORT"
ENV_PROVIDER_NAME: Final = "TRUSSIUM_PROVIDER__NAME"
ENV_PROVIDER_BASE_URL: Final = "TRUSSIUM_PROVIDER__BASE_URL"
ENV_PROVIDER_REQUEST_TIMEOUT: Final = "TRUSSIUM_TIMEOUTS__PROVIDER_REQUEST_SECONDS"
ENV_STREAM_IDLE_TIMEOUT: Final = "TRUSSIUM_TIMEOUTS__STREAM_IDLE_SECONDS"
ENV_GRACEFUL_SHUTDOWN: Final = "TRUSSIUM_RUNTIME__GRACEFUL_SHUTDOWN_SECONDS"
ENV_SERVICE_CLEANUP: Final = "TRUSSIUM_RUNTIME__SERVICE_CLEANUP_SECONDS"
ENV_COMPONENT_HEALTH_TIMEOUT: Final = "TRUSSIUM_RUNTIME__COMPONENT_HEALTH_TIMEOUT_SECONDS"
ENV_CAPABILITY_AVAILABILITY_TIMEOUT: Final = (
    "TRUSSIUM_RUNTIME__CAPABILITY_AVAILABILITY_TIMEOUT_SECONDS"
)
ENV_CAPABILITY_HEALTH_TIMEOUT: Final = "TRUSSIUM_RUNTIME__CAPABILITY_HEALTH_TIMEOUT_SECONDS"
ENV_DEPENDENCY_CHECKS: Final = "TRUSSIUM_READINESS__DEPENDENCY_CHECKS_ENABLED"
ENV_DEPENDENCY_TIMEOUT: Final = "TRUSSIUM_READINESS__DEPENDENCY_TIMEOUT_SECONDS"
ENV_DEPENDENCY_CACHE: Final = "TRUSSIUM_READINESS__DEPENDENCY_CACHE_SECONDS"
ENV_REQUIRED_MODEL: Final = "TRUSSIUM_READINESS__REQUIRED_MODEL"
ENV_RERANKING_BASE_URL: Final = "TRUSSIUM_RERANKING__BASE_URL"
ENV_METRICS: Final = "TRUSSIUM_OBSERVABILITY__METRICS_ENABLED"
ENV_TRACING: Final = "TRUSSIUM_OBSERVABILITY__TRACING_ENABLED"
ENV_TRACING_SERVICE_NAME: Final = "TRUSSIUM_OBSERVABILITY__TRACING_SERVICE_NAME"
ENV_TRACING_SAMPLE_RATIO: Final = "TRUSSIUM_OBSERVABILITY__TRACING_SAMPLE_RATIO"
ENV_OTLP_ENDPOINT: Final = "TRUSSIUM_OBSERVABILITY__OTLP_TRACES_ENDPOINT"
ENV_OTLP_EXPORT_TIMEOUT: Final = "TRUSSIUM_OBSERVABILITY__OTLP_EXPORT_TIMEOUT_SECONDS"
# The runtime's provider client: the API root it uses for Ollama when none is given, and
# the path Ollama serves the OpenAI API under (docs/contract.md section 13).
RUNTIME_OLLAMA_BASE_URL: Final = "http://127.0.0.1:11434/v1"
OLLAMA_API_PATH: Final = "/v1"
LIVE_PATH: Final = "/health/live"
READY_PATH: Final = "/health/ready"
# (periodSeconds, timeoutSeconds, failureThreshold)
STARTUP_PROBE_TIMING: Final = (2, 1, 30)
LIVENESS_PROBE_TIMING: Final = (10, 2, 3)
READINESS_PROBE_TIMING: Final = (5, 2, 3)
MAX_SURGE: Final = 1
MAX_UNAVAILABLE: Final = 0
PDB_MAX_UNAVAILABLE: Final = 1
PDB_UNHEALTHY_POD_EVICTION_POLICY: Final = "AlwaysAllow"
TOPOLOGY_KEY: Final = "kubernetes.io/hostname"
EVENT_NOTE_MAX_LENGTH: Final = 1024

# The admission webhook's own objects (ADR 0001 flag defaults; the chart uses the same names).
WEBHOOK_CONFIG_NAME: Final = "trussium-operator"
WEBHOOK_SECRET_NAME: Final = "trussium-webhook-tls"
WEBHOOK_CA_SECRET_NAME: Final = "trussium-webhook-ca"
WEBHOOK_SERVICE_NAME: Final = "trussium-webhook"
MUTATE_RUNTIME_PATH: Final = "/mutate-trussiumruntime"
VALIDATE_RUNTIME_PATH: Final = "/validate-trussiumruntime"
VALIDATE_DEPLOYMENT_PATH: Final = "/validate-managed-deployment"
