"""JSON log lines never carry an exception's message (it may quote object contents)."""

import io
import json
import logging

from trussium_operator.cmdline.logs import PACKAGE_PREFIX, JsonFormatter, configure_logging

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


def test_text_format_for_a_terminal_keeps_the_fields_and_hides_the_message() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    configure_logging("debug", "text", stream)
    try:
        try:
            raise KeyError(SECRET)
        except KeyError:
            logging.getLogger("controller.manager").exception(
                "reconcile error",
                extra={"fields": {"namespace": "team-a", "error": "a b", "managers": ["m"]}},
            )
    finally:
        root.handlers[:], root.level = saved
    first, *frames = stream.getvalue().splitlines()
    assert first.endswith(
        ' ERROR   controller.manager: reconcile error namespace=team-a error="a b" managers=["m"]'
    )
    assert frames[0] == "KeyError"
    assert SECRET not in stream.getvalue()


def test_logger_names_leave_out_the_package_namespace() -> None:
    """A module's logger may be named after it (trussium_operator.controller.manager);
    lines read controller.manager, as before the package had a namespace."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(PACKAGE_PREFIX + "controller.manager")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("slow client")
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    assert json.loads(stream.getvalue())["logger"] == "controller.manager"
