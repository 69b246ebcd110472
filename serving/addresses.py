"""The HOST:PORT form of the programs' `--*-bind-address` flags."""

ANY_HOST = "0.0.0.0"
# A bind address of "0" serves nothing (controller-runtime's convention).
DISABLED = "0"


def split_address(address: str) -> tuple[str, int]:
    """ "host:port" (IPv6 as "[::1]:9443") -> (host, port); an empty host (":8081",
    as the Go operator writes it) binds every address. ValueError when malformed."""
    host, separator, port = address.rpartition(":")
    if not separator or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT, got {address!r}")
    return host.strip("[]") or ANY_HOST, int(port)
