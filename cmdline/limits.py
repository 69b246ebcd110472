"""The webhook server's size and time limits, apart from the server itself.

`trussium-webhook` needs them for its flags' defaults; kept here, free of
aiohttp, so that `trussium-webhook validate` in a user's CI starts without
loading the server.
"""

from dataclasses import dataclass

DEFAULT_MAX_REQUEST_BYTES = 3 * 1024 * 1024
DEFAULT_BODY_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class ConnectionLimits:
    """Seconds and counts every listener of the webhook holds clients to."""

    header_timeout: float = 10.0
    max_connections: int = 256
    # Time given to a client still sending a body the server has answered
    # (a 413 or 408) before the connection is closed.
    linger_seconds: float = 1.0


DEFAULT_LIMITS = ConnectionLimits()
