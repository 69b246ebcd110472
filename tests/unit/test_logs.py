"""JSON log lines never carry an exception's message (it may quote object contents)."""

import io
import json
import logging

from common.logs import JsonFormatter

SECRET = "sk-live-do-not-log"


def test_a_logged_exception_shows_type_and_frames_but_not_its_message() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("test.logs")
    logger.addHandler(handler)
    try:
        try:
            raise KeyError({"env": [{"name": "API_KEY", "value": SECRET}]})
        except KeyError:
            logger.exception("unexpected error", extra={"fields": {"hook": "guard"}})
    finally:
        logger.removeHandler(handler)
    entry = json.loads(stream.getvalue())
    assert SECRET not in stream.getvalue()
    assert entry["error"].startswith("KeyError\n")
    assert "test_logs.py" in entry["error"], "the frames stay, for debugging"
    assert (entry["msg"], entry["hook"]) == ("unexpected error", "guard")
