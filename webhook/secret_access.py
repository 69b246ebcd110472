"""Whether a user may read a Secret, as the API server's authorizers say
(SubjectAccessReview), for the validating hook's rule on Secret references
(`common.secret_access`, ADR 0034).

The review carries the admission request's userInfo unchanged (name, uid,
groups, extra), so every authorizer of the cluster (RBAC, a webhook
authorizer, Node) answers for the real requester. Any failure to get an
answer raises: the hook then refuses, it never guesses.
"""

from collections.abc import Awaitable, Callable

from kubernetes_asyncio import client

from trussium_operator.common.admission import UserInfo

# (user, namespace, Secret name) -> may the user `get` it.
SecretAccess = Callable[[UserInfo, str, str], Awaitable[bool]]


class ReviewUnansweredError(Exception):
    """The API server's answer to a SubjectAccessReview carried no status."""


def secret_access_reviewer(api_client: client.ApiClient) -> SecretAccess:
    authorization = client.AuthorizationV1Api(api_client)

    async def may_get(user: UserInfo, namespace: str, name: str) -> bool:
        spec = client.V1SubjectAccessReviewSpec(
            user=user.username,
            uid=user.uid or None,
            groups=list(user.groups),
            extra={key: list(values) for key, values in user.extra},
            resource_attributes=client.V1ResourceAttributes(
                group="",
                version="v1",
                resource="secrets",
                verb="get",
                namespace=namespace,
                name=name,
            ),
        )
        review = await authorization.create_subject_access_review(
            client.V1SubjectAccessReview(spec=spec)
        )
        if review.status is None:
            raise ReviewUnansweredError
        return bool(review.status.allowed) and not review.status.denied

    return may_get
