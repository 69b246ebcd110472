"""A minimal synchronous client for the harness's own readiness checks and
setup (faster than a kubectl process per poll, and no async loop needed)."""

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

from devcluster.pki import KeyPair


class Rest:
    def __init__(self, server: str, ca_cert: str, client: KeyPair, timeout: float = 10.0) -> None:
        self._server = server
        self._timeout = timeout
        self._context = ssl.create_default_context(cafile=ca_cert)
        self._context.load_cert_chain(str(client.cert), str(client.key))

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """(HTTP status, decoded JSON body or text); connection errors become status 0."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self._server + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout, context=self._context) as r:
                return r.status, _decode(r.read())
        except urllib.error.HTTPError as error:
            return error.code, _decode(error.read())
        except (OSError, TimeoutError) as error:
            return 0, str(error)

    def get(self, path: str) -> tuple[int, Any]:
        return self.request("GET", path)


def _decode(raw: bytes) -> Any:
    text = raw.decode(errors="replace")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
