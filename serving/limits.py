"""The listeners' and the webhook's size and time limits, apart from the servers.

Both programs need them for their flags' defaults; kept here, free of
aiohttp, so that `trussium-webhook validate` in a user's CI starts without
loading the server. The derivation of each default is in
docs/adr/0025-memory-bounded-by-configuration.md.
"""

from dataclasses import dataclass

MIB = 1024 * 1024

# What the API server can send in one AdmissionReview: object and oldObject,
# each at most etcd's 1.5 MiB request limit, plus the review's own fields.
DEFAULT_MAX_REQUEST_BYTES = 3 * MIB + 256 * 1024
DEFAULT_BODY_TIMEOUT_SECONDS = 10.0
# Bytes all admissions may hold at once, as estimated from their request
# bodies decoded (common/decode_cost.py): while a body is read, four per
# byte beyond its first SMALL_REQUEST_BYTES, so bodies being read hold at
# most 10 MiB; once read, the estimate from its contents beyond
# SMALL_REVIEW_DECODED_BYTES. Sized for the chart's 256 MiB memory limit.
DEFAULT_MEMORY_BUDGET_BYTES = 40 * MIB
# How long a request waits for budget before it is answered 429.
DEFAULT_BUDGET_WAIT_SECONDS = 1.0
# Every request may hold this much without the budget: real reviews are a few
# KiB, so they are never made to wait, and the connection cap bounds the sum.
SMALL_REQUEST_BYTES = 16 * 1024
# And may decode this much (as estimated from its bytes) without the budget:
# real reviews, a few hundred values, are estimated at tens of KiB. Reviews
# are decoded and decided one at a time on the event loop, so only those
# awaiting the optional Secret lookup hold a decoded review at once.
SMALL_REVIEW_DECODED_BYTES = 128 * 1024


@dataclass(frozen=True)
class ConnectionLimits:
    """Seconds and counts every listener of both programs holds clients to."""

    header_timeout: float = 10.0
    # A TLS handshake takes milliseconds; a connection still handshaking is idle.
    handshake_timeout: float = 3.0
    max_connections: int = 256
    # At the cap, connections in their current state (idle, or one request in
    # flight) for less than this are closed last: a new client's handshake and
    # head take milliseconds, so a flood cannot push it out for a newer one.
    newcomer_grace: float = 1.0
    # Time given to a client still sending a body the server has answered
    # (a 413) before the connection is closed.
    linger_seconds: float = 1.0


DEFAULT_LIMITS = ConnectionLimits()
