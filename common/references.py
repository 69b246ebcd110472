"""The Secrets a TrussiumRuntime refers to (docs/contract.md section 5, step 2)."""

from trussium_operator.common.api import TrussiumRuntimeSpec

CREDENTIALS_PATH = "spec.provider.credentialsSecretRef.name"


def referenced_secret_paths(spec: TrussiumRuntimeSpec) -> dict[str, str]:
    """Each referenced Secret name with the field path of its first reference, sorted by name."""
    paths: dict[str, str] = {}
    if spec.provider.credentials_secret_ref is not None:
        paths[spec.provider.credentials_secret_ref.name] = CREDENTIALS_PATH
    reranking = spec.reranking.credentials_secret_ref if spec.reranking else None
    if reranking is not None:
        paths.setdefault(reranking.name, "spec.reranking.credentialsSecretRef.name")
    for index, ref in enumerate(spec.image_pull_secrets or ()):
        paths.setdefault(ref.name, f"spec.imagePullSecrets[{index}].name")
    return dict(sorted(paths.items()))


def referenced_secret_names(spec: TrussiumRuntimeSpec) -> list[str]:
    """Unique and sorted, so checks, messages and watches are deterministic."""
    return list(referenced_secret_paths(spec))


def credential_secret_names(spec: TrussiumRuntimeSpec) -> list[str]:
    """The Secrets the runtime reads its credentials from when a Pod starts, unique and
    sorted: a Pod sees a new value only when it is replaced (image pull Secrets are read
    by the kubelet at each pull instead)."""
    refs = (
        spec.provider.credentials_secret_ref,
        spec.reranking.credentials_secret_ref if spec.reranking else None,
    )
    return sorted({ref.name for ref in refs if ref is not None})
