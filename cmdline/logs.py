"""Structured log lines, shared by the webhook and the controller.

JSON by default: one object per line so log pipelines can index fields
(hook, uid, verdict, ...) without parsing prose. The text format, for a
person at a terminal, carries the same fields as `key=value` pairs. Callers pass fields with
`logger.info("message", extra={"fields": {...}})`; they must never pass
object contents or Secret values.

A logged exception shows its type and stack frames but not its message:
an unexpected error's message can quote the object being processed (a
hand-edited Deployment may carry a literal credential in an env value).
"""

import json
import logging
import sys
import traceback
from datetime import UTC, datetime
from typing import Any, TextIO

FIELDS_ATTRIBUTE = "fields"
# Libraries that log payloads at debug: the generated Kubernetes client's REST
# layer logs every response body, Secrets (and the webhook's own key) included.
PAYLOAD_LOGGERS = ("kubernetes_asyncio",)


# The distribution's namespace (ADR 0023): left out of logger names, which stay as
# the modules are known in the repository (webhook.app, certs.reload).
PACKAGE_PREFIX = "trussium_operator."


def logger_name(record: logging.LogRecord) -> str:
    return record.name.removeprefix(PACKAGE_PREFIX)


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line: time, level, logger, message, fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": logger_name(record),
            "msg": record.getMessage(),
        }
        fields = getattr(record, FIELDS_ATTRIBUTE, None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info and record.exc_info[1] is not None:
            entry["error"] = exception_summary(record.exc_info[1])
        return json.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """Formats a record as `time LEVEL logger: message key=value ...` (logfmt-style values)."""

    def format(self, record: logging.LogRecord) -> str:
        time = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        line = f"{time} {record.levelname:<7} {logger_name(record)}: {record.getMessage()}"
        fields = getattr(record, FIELDS_ATTRIBUTE, None)
        if isinstance(fields, dict):
            line += "".join(f" {key}={_text_value(value)}" for key, value in fields.items())
        if record.exc_info and record.exc_info[1] is not None:
            line += "\n" + exception_summary(record.exc_info[1])
        return line


def _text_value(value: object) -> str:
    """Strings bare unless they need quotes; other values as compact JSON."""
    if not isinstance(value, str):
        text = json.dumps(value, default=str, separators=(",", ":"))
        return json.dumps(text) if any(c.isspace() for c in text) else text
    return (
        value if value and not any(c.isspace() or c in '"=' for c in value) else json.dumps(value)
    )


def exception_summary(error: BaseException) -> str:
    """`Type` and the traceback's frames (file, line, source), never the message."""
    frames = "".join(traceback.format_tb(error.__traceback__))
    return f"{type(error).__qualname__}\n{frames}".rstrip()


def configure_logging(
    level: str = "info", log_format: str = "json", stream: TextIO = sys.stderr
) -> None:
    """Route every logger of the process to one handler at `level`, in JSON or text."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(TextFormatter() if log_format == "text" else JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    quiet_payload_loggers()


def quiet_payload_loggers() -> None:
    """PAYLOAD_LOGGERS never below INFO, whatever level the process logs at."""
    floor = max(logging.INFO, logging.getLogger().getEffectiveLevel())
    for name in PAYLOAD_LOGGERS:
        logging.getLogger(name).setLevel(floor)
