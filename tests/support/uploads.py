"""Multipart uploads to a runtime's transcription endpoint, as a client sends them.

Standard library only, so that it also runs as a script where the project is
not importable, e.g. inside a node's network namespace:

    python uploads.py URL SIZE          one upload; prints {"status": ..., "body": ...}
    python uploads.py URL SIZE --hold   sends all but the body's last bytes, prints
                                        "held", waits for a line on stdin, then
                                        finishes and prints the answer
"""

import http.client
import json
import sys
from typing import Any
from urllib.parse import urlsplit

PATH = "/v1/audio/transcriptions"
BOUNDARY = "trussium-upload-boundary"
TAIL_BYTES = 64  # what a held upload keeps back: the end of the file part and the last boundary
TIMEOUT_SECONDS = 30


def body(size: int, model: str = "whisper-1") -> bytes:
    """A form with a `model` field and a `file` part of `size` bytes."""
    head = (
        f"--{BOUNDARY}\r\n"
        'Content-Disposition: form-data; name="model"\r\n\r\n'
        f"{model}\r\n"
        f"--{BOUNDARY}\r\n"
        'Content-Disposition: form-data; name="file"; filename="speech.wav"\r\n'
        "Content-Type: audio/wav\r\n\r\n"
    ).encode()
    data = (bytes(range(251)) * (size // 251 + 1))[:size]
    return head + data + f"\r\n--{BOUNDARY}--\r\n".encode()


class Upload:
    """One upload on its own connection, sent in two steps."""

    def __init__(self, url: str, size: int) -> None:
        parts = urlsplit(url)
        self.connection = http.client.HTTPConnection(
            parts.hostname or "", parts.port, timeout=TIMEOUT_SECONDS
        )
        self.payload = body(size)

    def start(self) -> None:
        """Headers and all of the body but its last TAIL_BYTES: the request is in flight."""
        self.connection.putrequest("POST", PATH)
        self.connection.putheader("Content-Type", f"multipart/form-data; boundary={BOUNDARY}")
        self.connection.putheader("Content-Length", str(len(self.payload)))
        self.connection.endheaders()
        self.connection.send(self.payload[:-TAIL_BYTES])

    def finish(self) -> tuple[int, Any]:
        """The rest of the body; the status and the JSON answer."""
        self.connection.send(self.payload[-TAIL_BYTES:])
        response = self.connection.getresponse()
        answer = json.loads(response.read() or b"null")
        self.connection.close()
        return response.status, answer


def upload(url: str, size: int) -> tuple[int, Any]:
    sending = Upload(url, size)
    sending.start()
    return sending.finish()


def main(argv: list[str]) -> None:
    url, size, hold = argv[0], int(argv[1]), argv[2:] == ["--hold"]
    sending = Upload(url, size)
    sending.start()
    if hold:
        print("held", flush=True)
        sys.stdin.readline()
    status, answer = sending.finish()
    print(json.dumps({"status": status, "body": answer}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
