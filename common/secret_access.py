"""Which referenced Secrets a requester must be allowed to read (ADR 0034).

A runtime hands the Secrets it references to its Pod: the provider key goes,
as a request header, to whatever host `spec.provider.baseURL` names, and pull
secrets go to the registries they name. Were the right to edit runtimes
enough to reference a Secret, it would be the right to read every Secret of
the namespace. So the validating hook asks the API server whether the
requesting user may `get` each Secret whose use the request starts or
redirects: every referenced one on CREATE; on UPDATE, a Secret newly
referenced (the provider key also when its key or the `baseURL` changes).
Pure: which Secrets to check, and what to answer; the webhook asks.
"""

import json
from itertools import islice

from trussium_operator.common.api import TrussiumRuntimeSpec
from trussium_operator.common.json_limits import cut
from trussium_operator.common.k8s_validation import FieldError, as_dict, as_list
from trussium_operator.common.parsing import MAX_COLLECTION_ENTRIES
from trussium_operator.common.references import CREDENTIALS_PATH, referenced_secret_paths

NEEDS_READ = "referencing a Secret needs the right to read it"


def secrets_to_check(
    spec: TrussiumRuntimeSpec, old: object = None, *, requester: str, operator: str
) -> dict[str, str]:
    """Each Secret name the requester must be allowed to `get`, with the field path of
    the reference that needs it, sorted by name: at most one per referenced Secret.
    Empty for the operator's own account (`operator`): the Deployments it writes pass
    every referenced Secret to Pods, so it holds that power already.

    `old`, the stored object of an UPDATE (None on CREATE), is read as plain data:
    a stored runtime need not parse under today's rules, and what cannot be read
    there counts as changed, so it is checked.
    """
    if requester == operator:
        return {}
    if old is None:
        return referenced_secret_paths(spec)
    old_spec = as_dict(as_dict(old).get("spec"))
    old_provider = as_dict(old_spec.get("provider"))
    old_credentials = as_dict(old_provider.get("credentialsSecretRef"))
    # The operator reads no more entries of a stored runtime's list than this.
    old_pull_secrets = {
        as_dict(ref).get("name")
        for ref in islice(as_list(old_spec.get("imagePullSecrets")), MAX_COLLECTION_ENTRIES)
    }
    checks: dict[str, str] = {}
    credentials = spec.provider.credentials_secret_ref
    if credentials is not None and (
        old_credentials.get("name") != credentials.name
        or old_credentials.get("key") != credentials.key
        or old_provider.get("baseURL") != spec.provider.base_url
    ):
        checks[credentials.name] = CREDENTIALS_PATH
    for index, ref in enumerate(spec.image_pull_secrets or ()):
        if ref.name not in old_pull_secrets:
            checks.setdefault(ref.name, f"spec.imagePullSecrets[{index}].name")
    return dict(sorted(checks.items()))


def _quoted(text: str) -> str:
    return json.dumps(cut(text))


def _secret(namespace: str, name: str) -> str:
    return _quoted(f"{namespace}/{name}")


def may_not_read(path: str, username: str, namespace: str, name: str) -> FieldError:
    """The error at the reference of a Secret the API server says the user may not get."""
    return FieldError(
        path,
        f"user {_quoted(username)} may not get Secret {_secret(namespace, name)}; {NEEDS_READ}",
        "FieldValueForbidden",
    )


def unchecked_message(names: list[str], username: str, namespace: str) -> str:
    """Why a request is refused when the access reviews of `names` failed or timed out:
    nothing is admitted that could not be checked."""
    secrets = ", ".join(_secret(namespace, name) for name in names)
    plural = "s" if len(names) > 1 else ""
    return (
        f"cannot check whether user {_quoted(username)} may get Secret{plural} {secrets}: "
        f"the access review failed or timed out; {NEEDS_READ}, and the webhook "
        "admits no reference it cannot check; try again"
    )
