"""What reaches the log at debug level: never payloads of the Kubernetes client."""

import io
import json
import logging
from collections.abc import Iterator

import pytest

from trussium_operator.cmdline.logs import configure_logging

REST_LOGGER = "kubernetes_asyncio.client.rest"


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("kubernetes_asyncio").setLevel(logging.NOTSET)


@pytest.mark.usefixtures("restore_logging")
def test_debug_level_does_not_open_the_kubernetes_client_response_bodies() -> None:
    stream = io.StringIO()
    configure_logging("debug", stream=stream)
    logging.getLogger(REST_LOGGER).debug("response body: %s", '{"data": {"tls.key": "S3CR3T"}}')
    logging.getLogger(REST_LOGGER).info("client message at info")
    logging.getLogger("trussium_operator.webhook.app").debug("our own debug line")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["msg"] for line in lines] == ["client message at info", "our own debug line"]
    assert "S3CR3T" not in stream.getvalue()


@pytest.mark.usefixtures("restore_logging")
def test_a_quieter_level_stays_quieter_for_the_client_too() -> None:
    stream = io.StringIO()
    configure_logging("warning", stream=stream)
    logging.getLogger(REST_LOGGER).info("client message at info")
    assert stream.getvalue() == ""
