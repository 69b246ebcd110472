"""An in-process admission app per test, with a settable Secret-name lookup and
Secret access review."""

from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from trussium_operator.webhook.app import AdmissionSettings, create_admission_app
from trussium_operator.webhook.metrics import WebhookMetrics
from trussium_operator.webhook.secret_access import SecretAccess

from .reviews import OPERATOR

MAX_REQUEST_BYTES = 64 * 1024

Client = TestClient[web.Request, web.Application]
SecretNames = Callable[[str], Awaitable[frozenset[str]]]
MakeClient = Callable[..., Awaitable[Client]]


@pytest.fixture
def metrics() -> WebhookMetrics:
    return WebhookMetrics()


@pytest.fixture
def make_client(
    aiohttp_client: Callable[[web.Application], Awaitable[Client]], metrics: WebhookMetrics
) -> MakeClient:
    async def make(
        secret_names: SecretNames | None = None,
        secret_lookup_timeout: float = 0.2,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        secret_access: SecretAccess | None = None,
        secret_access_timeout: float = 0.2,
    ) -> Client:
        settings = AdmissionSettings(
            operator_username=OPERATOR,
            max_request_bytes=max_request_bytes,
            secret_names=secret_names,
            secret_lookup_timeout=secret_lookup_timeout,
            secret_access=secret_access,
            secret_access_timeout=secret_access_timeout,
        )
        return await aiohttp_client(create_admission_app(settings, metrics))

    return make


@pytest.fixture
async def client(make_client: MakeClient) -> Client:
    return await make_client()
