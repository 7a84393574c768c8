"""A local OTLP/HTTP endpoint for the tests: a small HTTP server on 127.0.0.1 that takes `POST /v1/traces` as a
collector does (protobuf `ExportTraceServiceRequest`) and keeps every span, decoded into plain values."""

from __future__ import annotations

import http.server
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

KINDS = {1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    status: str
    start_ns: int
    end_ns: int
    resource: dict[str, Any] = field(default_factory=dict)


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


def _attributes(items: Any) -> dict[str, Any]:
    return {item.key: _value(item.value) for item in items}


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path == "/v1/traces":
                    receiver.take(body)
                    answer = ExportTraceServiceResponse().SerializeToString()
                    self.send_response(200)
                else:
                    answer = b""
                    self.send_response(404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_port}"

    def take(self, body: bytes) -> None:
        export = ExportTraceServiceRequest.FromString(body)
        found = []
        for resource_spans in export.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope in resource_spans.scope_spans:
                found += [ReceivedSpan(span.name, KINDS.get(span.kind, str(span.kind)), span.trace_id.hex(),
                                       span.span_id.hex(), span.parent_span_id.hex(), _attributes(span.attributes),
                                       STATUS.get(span.status.code, ""), span.start_time_unix_nano,
                                       span.end_time_unix_nano, resource) for span in scope.spans]
        with self._lock:
            self.spans += found
            self.requests += 1

    def wait_for(self, count: int, trace_id: str | None = None, timeout: float = 30) -> list[ReceivedSpan]:
        """The spans (of one trace, if given) once at least `count` have come."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                found = [span for span in self.spans if trace_id is None or span.trace_id == trace_id]
            if len(found) >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.05)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
