"""OpenTelemetry traces, received by a local OTLP/HTTP endpoint (tests/otlp_receiver.py) as a collector would:
span names, kinds, attributes and parentage; a client's `traceparent` continued and passed upstream; no prompt,
answer or key on a span unless content is asked for (and never a key); the SDK not even loaded when tracing is off.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator

import openai
import pytest
import requests

from tests.conftest import ROOT, make_body, make_tool, with_settings
from tests.fake_upstream import completion
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])
CALL = '<tool_call>{"name": "read", "arguments": {"path": "notes.txt"}}</tool_call>'
PROMPT = "the prompt words 7f3a"
KEY = "sk-upstream-key-0123456789"


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    server = OtlpReceiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", server.url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # milliseconds: spans leave at once
    yield server
    server.close()


def traceparent() -> tuple[str, str, str]:
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{parent_id}-01", trace_id, parent_id


def by_kind(spans: list[ReceivedSpan], kind: str) -> list[ReceivedSpan]:
    return sorted((span for span in spans if span.kind == kind), key=lambda span: span.start_ns)


def test_a_tool_call_request_is_one_server_span_and_one_client_span(upstream, serve, settings, receiver):
    proxy = serve(with_settings(settings, upstream_api_key=KEY, otel="on"))
    upstream.completion(f"Reading it. {CALL}")
    header, trace_id, client_parent = traceparent()
    response = proxy.post(make_body(PROMPT, [READ], temperature=0.2), headers={"traceparent": header})
    assert response.ok, response.text
    spans = receiver.wait_for(2, trace_id)
    (server,), (client,) = by_kind(spans, "SERVER"), by_kind(spans, "CLIENT")

    assert server.name == "POST /v1/chat/completions" and server.parent_id == client_parent
    assert server.attributes["toolproxy.record_id"] == response.headers["X-Request-Id"]
    assert server.attributes["toolproxy.route"] == "tools" and server.attributes["toolproxy.protocol"] == "chat"
    assert server.attributes["toolproxy.calls"] == ["read"] and server.attributes["toolproxy.dialects"] == ["hermes"]
    assert server.attributes["toolproxy.repairs"] == 0 and server.attributes["http.response.status_code"] == 200
    assert server.attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert server.resource["service.name"] == "toolproxy"

    assert client.name == "chat test-model" and client.parent_id == server.span_id
    assert client.attributes["gen_ai.operation.name"] == "chat"
    assert client.attributes["gen_ai.provider.name"] == "generic"  # the scripted server shows no known kind
    assert client.attributes["gen_ai.request.model"] == "test-model"
    assert client.attributes["gen_ai.request.stream"] is False
    assert client.attributes["gen_ai.request.temperature"] == 0.2
    assert client.attributes["gen_ai.response.finish_reasons"] == ["stop"]  # as the upstream said it
    assert client.attributes["gen_ai.usage.input_tokens"] == 10
    assert client.attributes["gen_ai.usage.output_tokens"] == 5
    assert client.attributes["server.address"] == "127.0.0.1"
    assert client.attributes["server.port"] == upstream.port
    assert server.start_ns <= client.start_ns <= client.end_ns <= server.end_ns

    (sent,) = upstream.received
    assert sent.headers["traceparent"] == f"00-{trace_id}-{client.span_id}-01"  # the call's own span, upstream
    text = json.dumps([span.attributes for span in spans])
    assert PROMPT not in text and "notes.txt" not in text and KEY not in text


def test_a_stream_a_repair_and_an_upstream_error(upstream, serve, settings, receiver):
    proxy = serve(with_settings(settings, otel="on", repair_rounds=1))
    upstream.completion("a streamed answer")
    header, trace_id, _ = traceparent()
    body = make_body("hello", stream=True, stream_options={"include_usage": True})
    assert proxy.post(body, headers={"traceparent": header}).ok
    (client,) = by_kind(receiver.wait_for(2, trace_id), "CLIENT")
    assert client.attributes["gen_ai.request.stream"] is True
    assert client.attributes["gen_ai.response.finish_reasons"] == ["stop"]

    answers = iter([completion('<tool_call>{"name": "read", "arguments": {"path": 5}}</tool_call>'),
                    completion(CALL)])
    upstream.script = lambda request, wire: wire.send_json(next(answers))
    header, trace_id, _ = traceparent()
    assert proxy.post(make_body("read", [READ]), headers={"traceparent": header}).ok
    spans = receiver.wait_for(3, trace_id)
    (server,), clients = by_kind(spans, "SERVER"), by_kind(spans, "CLIENT")
    assert len(clients) == 2 and all(span.parent_id == server.span_id for span in clients)
    assert server.attributes["toolproxy.repairs"] == 1 and server.attributes["toolproxy.calls"] == ["read"]

    upstream.script = lambda request, wire: wire.send_json({"error": {"message": "the model is loading"}}, 503)
    header, trace_id, _ = traceparent()
    assert proxy.post(make_body("x"), headers={"traceparent": header}).status_code == 503
    spans = receiver.wait_for(2, trace_id)
    (server,), (client,) = by_kind(spans, "SERVER"), by_kind(spans, "CLIENT")
    assert client.status == "ERROR" and client.attributes["error.type"] == "upstream_http_503"
    assert server.status == "ERROR" and server.attributes["http.response.status_code"] == 503


def test_content_goes_on_spans_only_when_asked_and_redacted(upstream, serve, settings, receiver):
    proxy = serve(with_settings(settings, otel="on", otel_content=True, upstream_api_key=KEY))
    upstream.completion(f"the answer, with {KEY} in it")
    header, trace_id, _ = traceparent()
    assert proxy.post(make_body(f"{PROMPT} and my key {KEY}"), headers={"traceparent": header}).ok
    (client,) = by_kind(receiver.wait_for(2, trace_id), "CLIENT")
    sent = json.loads(client.attributes["gen_ai.input.messages"])
    assert sent == [{"role": "user", "parts": [{"type": "text", "content": f"{PROMPT} and my key [redacted]"}]}]
    answer = json.loads(client.attributes["gen_ai.output.messages"])
    assert answer[0]["parts"] == [{"type": "text", "content": "the answer, with [redacted] in it"}]
    assert answer[0]["finish_reason"] == "stop"


def test_a_messages_request_is_traced_as_any_other(upstream, serve, settings, receiver):
    proxy = serve(with_settings(settings, otel="on"))
    upstream.completion(CALL)
    header, trace_id, _ = traceparent()
    body = {"model": "qwen3", "max_tokens": 100, "messages": [{"role": "user", "content": "read"}],
            "tools": [{"name": "read", "input_schema": READ["function"]["parameters"]}]}
    response = requests.post(f"{proxy.url}/v1/messages", json=body, headers={"traceparent": header}, timeout=30)
    assert response.ok, response.text
    spans = receiver.wait_for(2, trace_id)
    (server,), (client,) = by_kind(spans, "SERVER"), by_kind(spans, "CLIENT")
    assert server.name == "POST /v1/messages" and server.attributes["toolproxy.protocol"] == "messages"
    assert server.attributes["toolproxy.calls"] == ["read"] and client.parent_id == server.span_id


def test_under_gunicorn_the_openai_sdk_trace_is_continued(upstream, start_gunicorn, receiver):
    server = start_gunicorn({"TOOLPROXY_UPSTREAM": upstream.url, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
                             "OTEL_BSP_SCHEDULE_DELAY": "50"}).wait_ready()
    upstream.completion(CALL)
    header, trace_id, client_parent = traceparent()
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
    answer = client.chat.completions.create(model="qwen3", messages=[{"role": "user", "content": "read"}],
                                            tools=[READ], extra_headers={"traceparent": header})
    assert answer.choices[0].message.tool_calls
    spans = receiver.wait_for(2, trace_id)
    (served,), (called,) = by_kind(spans, "SERVER"), by_kind(spans, "CLIENT")
    assert served.parent_id == client_parent and called.parent_id == served.span_id
    assert called.name == "chat qwen3"
    assert upstream.received[-1].headers["traceparent"] == f"00-{trace_id}-{called.span_id}-01"


def test_without_tracing_the_sdk_is_never_loaded(tmp_path):
    """`otel: auto` without an endpoint: no tracer, and no OpenTelemetry module in the process."""
    script = ("import sys\nfrom toolproxy import create_app\nfrom toolproxy.config.settings import Settings\n"
              f"app = create_app(Settings(data_dir={str(tmp_path)!r}))\n"
              "assert app.extensions['toolproxy'].tracing is None\n"
              "print(sorted(name for name in sys.modules if name.startswith('opentelemetry')))\n")
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "TOOLPROXY_"))}
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=environ, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
