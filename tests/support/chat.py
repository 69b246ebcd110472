"""Chat requests to a runtime, as a client sends them: JSON, or a stream of
server-sent events read to its end.

Standard library only, so that it also runs as a script where the project is
not importable, e.g. inside a node's network namespace:

    python chat.py URL MODEL TEXT [--stream]   prints {"status": ..., "body"|"events": ...}
"""

import http.client
import json
import sys
from typing import Any
from urllib.parse import urlsplit

PATH = "/v1/chat/completions"
TIMEOUT_SECONDS = 30


def request_body(model: str, text: str, stream: bool) -> bytes:
    return json.dumps(
        {"model": model, "messages": [{"role": "user", "content": text}], "stream": stream}
    ).encode()


def events_of(text: str) -> list[dict[str, Any]]:
    """The server-sent events of a stream, each as {"event": ..., "data": <parsed JSON>}."""
    events = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in fields:
            events.append({"event": fields.get("event"), "data": json.loads(fields["data"])})
    return events


def chat(url: str, model: str, text: str, stream: bool = False) -> dict[str, Any]:
    """POST one chat request to the runtime at `url`: its status, content type, and
    its JSON body or its events."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(
        parts.hostname or "", parts.port, timeout=TIMEOUT_SECONDS
    )
    try:
        connection.request(
            "POST",
            PATH,
            body=request_body(model, text, stream),
            headers={"Content-Type": "application/json"},
        )
        response = connection.getresponse()
        raw = response.read().decode()
    finally:
        connection.close()
    answer: dict[str, Any] = {
        "status": response.status,
        "contentType": response.getheader("Content-Type", ""),
    }
    if answer["contentType"].startswith("text/event-stream"):
        answer["events"] = events_of(raw)
    else:
        answer["body"] = json.loads(raw) if raw else None
    return answer


def main(argv: list[str]) -> None:
    url, model, text, stream = argv[0], argv[1], argv[2], argv[3:] == ["--stream"]
    print(json.dumps(chat(url, model, text, stream)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
