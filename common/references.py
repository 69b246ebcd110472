"""The Secrets a TrussiumRuntime refers to (docs/contract.md section 5, step 2)."""

from common.api import TrussiumRuntimeSpec


def referenced_secret_names(spec: TrussiumRuntimeSpec) -> list[str]:
    """Unique and sorted, so checks, messages and watches are deterministic."""
    names = {ref.name for ref in spec.image_pull_secrets or ()}
    if spec.provider.credentials_secret_ref is not None:
        names.add(spec.provider.credentials_secret_ref.name)
    return sorted(names)
