"""toolproxy's own log: one line per request with what an access line lacks (record id, calls, dialects, time
upstream and in the proxy), as text or as JSON (`TOOLPROXY_LOG_FORMAT`), at `TOOLPROXY_LOG_LEVEL`."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from toolproxy.observe.record import redact

if TYPE_CHECKING:
    from toolproxy.config.settings import Settings
    from toolproxy.observe.record import TransformRecord

logger = logging.getLogger("toolproxy.request")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_FIELDS_ATTRIBUTE = "toolproxy_fields"
_PLAIN = re.compile(r"[A-Za-z0-9_.,:/@+-]{1,200}")


def configure(settings: Settings) -> None:
    """The root logger writes to stderr in the configured format and level; called once per process."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if settings.log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level)


def request_fields(record: TransformRecord) -> dict[str, Any]:
    """What the request's line says, in this order."""
    return {"request_id": record.request_id, "client_request_id": record.client_request_id or None,
            "model": record.model, "client": record.client or None, "route": record.route, "status": record.status,
            "calls": [call.get("name") for call in record.calls], "dialects": record.dialects,
            "upstream_ms": round(record.upstream_ms, 1), "overhead_ms": round(record.overhead_ms, 2),
            "repairs": record.repairs, "issues": record.issues}


def log_request(record: TransformRecord, secrets: Sequence[str] = ()) -> None:
    """The request's one line; never raises (the request is already answered)."""
    try:
        fields = {key: _redacted(value, secrets) for key, value in request_fields(record).items()}
        level = logging.WARNING if isinstance(record.status, int) and record.status >= 500 else logging.INFO
        logger.log(level, "request %s", " ".join(_pair(key, value) for key, value in fields.items()
                                                 if value not in (None, [])),
                   extra={_FIELDS_ATTRIBUTE: fields})
    except Exception:  # an outer edge: a log line must not fail a request
        logging.getLogger(__name__).exception("could not log request %s", getattr(record, "request_id", "?"))


def log_other(request_id: str, method: str, path: str, status: int) -> None:
    """The line of a request that is not a chat completion (those have a record): at INFO for the API (`/v1/models`),
    at DEBUG for probes, pages, metrics and static files, which would drown the log otherwise."""
    fields = {"request_id": request_id, "method": method, "path": path, "status": status}
    level = logging.INFO if path.startswith("/v1/") else logging.DEBUG
    if logger.isEnabledFor(level):
        logger.log(level, "request %s", " ".join(_pair(key, value) for key, value in fields.items()),
                   extra={_FIELDS_ATTRIBUTE: fields})


def _redacted(value: Any, secrets: Sequence[str]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list):
        return [_redacted(item, secrets) for item in value]
    return value


def _pair(key: str, value: Any) -> str:
    if isinstance(value, list):
        value = ",".join(map(str, value)) if all(isinstance(item, str) and "," not in item and
                                                 _PLAIN.fullmatch(item) for item in value) else value
    text = str(value)
    # Anything but a plain token is quoted as JSON: a model name or an issue cannot forge a second line.
    return f"{key}={text if _PLAIN.fullmatch(text) else json.dumps(value, ensure_ascii=False)}"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and a request line's fields as keys."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
                                 + f".{int(record.msecs):03d}Z", "level": record.levelname, "logger": record.name}
        fields = getattr(record, _FIELDS_ATTRIBUTE, None)
        if isinstance(fields, dict):
            entry |= {"message": "request", **fields}
        else:
            entry["message"] = record.getMessage()
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)
