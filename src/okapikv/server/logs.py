"""Structured server logs: one event per line, every line naming the server's DC and partition.

Why: a cluster's logs end up interleaved (journald, a log shipper, `okapi up`'s terminal), so each
line must say which server wrote it, and a traceback spread over many lines would be split apart
by those tools. Two formats, chosen with ``okapi server --log-format`` (or ``$OKAPI_LOG_FORMAT``):

- ``text`` (default): ``TIME LEVEL LOGGER dc=NAME partition=N message key=value ...``, for people;
- ``json``: one JSON object per line (``time``, ``level``, ``logger``, ``dc``, ``partition``,
  ``message``, then any structured fields), for log pipelines.

Structured fields are whatever a call passes in ``extra`` (for example
``log.warning("...", extra={"event": "peer_refused", "peer": "10.0.0.2:7100"})``); an exception's
traceback goes in one ``exception`` field, its newlines escaped in the text format.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

LOG_FORMATS = ("text", "json")
_STANDARD_ATTRIBUTES = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return {name: value for name, value in record.__dict__.items()
            if name not in _STANDARD_ATTRIBUTES and not name.startswith("_")}


def _one_line(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def _text_value(value: Any) -> str:
    text = str(value)
    if not text or any(char.isspace() or char in '"=' for char in text):
        return json.dumps(text)
    return _one_line(text)


class ServerLogFormatter(logging.Formatter):
    """Formats records as single lines in ``text`` or ``json``, labelled with the server."""

    def __init__(self, log_format: str, dc: str, partition: int) -> None:
        if log_format not in LOG_FORMATS:
            raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {log_format!r}")
        super().__init__()
        self.log_format = log_format
        self.dc = dc
        self.partition = partition

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        exception = self.formatException(record.exc_info) if record.exc_info else None
        fields = _fields(record)
        if self.log_format == "json":
            document: dict[str, Any] = {
                "time": _timestamp(record), "level": record.levelname, "logger": record.name,
                "dc": self.dc, "partition": self.partition, "message": message,
            }
            for name, value in fields.items():
                document.setdefault(name, value)
            if exception:
                document["exception"] = exception
            return json.dumps(document, default=str, separators=(",", ":"))
        parts = [_timestamp(record), record.levelname, record.name, f"dc={_text_value(self.dc)}",
                 f"partition={self.partition}", _one_line(message)]
        parts += [f"{name}={_text_value(value)}" for name, value in fields.items()]
        if exception:
            parts.append(f"exception={json.dumps(exception)}")
        return " ".join(parts)


def configure_logging(dc: str, partition: int, log_format: str | None = None, stream: TextIO | None = None) -> None:
    """Send every log record of the process to ``stream`` (stderr) as single-line events.

    The level comes from ``$OKAPI_LOG_LEVEL`` (default INFO), the format from ``log_format``, else
    ``$OKAPI_LOG_FORMAT``, else ``text``."""
    chosen = log_format or os.environ.get("OKAPI_LOG_FORMAT") or "text"
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(ServerLogFormatter(chosen, dc, partition))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    level = os.environ.get("OKAPI_LOG_LEVEL", "INFO").upper()
    root.setLevel(getattr(logging, level, logging.INFO))
    logging.captureWarnings(True)
