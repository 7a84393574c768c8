"""Start-up under the real `gunicorn -c gunicorn.conf.py app:app`, and the official OpenAI SDK as the client."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest
import requests

from tests.conftest import ROOT, free_port, make_tool
from tests.fake_upstream import completion
from tests.test_dashboard import sign_in

READ = make_tool("read", {"path": {"type": "string"}, "limit": {"type": "integer"}}, ["path"])
BASH = make_tool("bash", {"command": {"type": "string"}}, ["command"])
MESSAGES = [{"role": "user", "content": "look at /etc/hosts and list the dir"}]
REPLY = ('I will check both.\n<tools>\n{"name": "read", "arguments": {"path": "/etc/hosts", "limit": "10"}}\n'
         '{"name": "bash", "arguments": {"command": "ls -la"}}\n</tools>')


def test_openai_sdk_sees_the_same_answer_streamed_and_not(upstream, gunicorn_proxy):
    upstream.script = lambda request, wire: wire.send_json(completion(REPLY))
    client = openai.OpenAI(base_url=f"{gunicorn_proxy.url}/v1", api_key="unused", max_retries=0)
    whole = client.chat.completions.create(model="m", messages=MESSAGES, tools=[READ, BASH])
    message = whole.choices[0].message
    assert whole.choices[0].finish_reason == "tool_calls"
    assert message.content == "I will check both."
    expected = [("read", {"path": "/etc/hosts", "limit": 10}), ("bash", {"command": "ls -la"})]
    assert [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == expected

    content, calls, finish, usage = "", {}, None, None
    stream = client.chat.completions.create(model="m", messages=MESSAGES, tools=[READ, BASH], stream=True,
                                            stream_options={"include_usage": True})
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:
                slot = calls.setdefault(call.index, ["", ""])
                slot[0] += call.function.name or ""
                slot[1] += call.function.arguments or ""
            finish = choice.finish_reason or finish
    assert content == message.content
    assert [(name, json.loads(arguments)) for name, arguments in calls.values()] == expected
    assert finish == "tool_calls" and usage is not None and usage.total_tokens == 15


def test_openai_sdk_raises_on_errors(upstream, gunicorn_proxy):
    client = openai.OpenAI(base_url=f"{gunicorn_proxy.url}/v1", api_key="unused", max_retries=0)
    upstream.script = lambda request, wire: wire.send_json({"error": {"message": "too long", "type": "x"}}, 400)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", messages=MESSAGES, tools=[READ], stream=True)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", messages=[{"role": "wizard", "content": "x"}])


def test_demo_model_answers_without_an_upstream(start_gunicorn):
    server = start_gunicorn({}).wait_ready()
    response = requests.post(f"{server.url}/v1/chat/completions", timeout=10, json={
        "model": "anything", "messages": [{"role": "user", "content": "read the file src/app.py"}],
        "tools": [READ]})
    call = response.json()["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "read"
    assert json.loads(call["function"]["arguments"]) == {"path": "src/app.py"}
    assert "demo model" in requests.get(f"{server.url}/", timeout=5).text.lower()
    assert "DEMO MODEL IN USE" in server.output()


def _run_gunicorn(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", *args, "app:app"],
                          cwd=ROOT, env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True,
                          timeout=30)


def test_open_proxy_on_the_network_refuses_to_start():
    result = _run_gunicorn({"TOOLPROXY_BIND": f"0.0.0.0:{free_port()}"})
    assert result.returncode != 0
    assert "TOOLPROXY_API_KEYS" in result.stdout + result.stderr


def test_command_line_bind_is_checked_too():
    result = _run_gunicorn({}, "-b", f"0.0.0.0:{free_port()}")
    assert result.returncode != 0
    assert "refusing to listen on 0.0.0.0" in result.stdout + result.stderr


def test_command_line_bind_overrides_the_setting(start_gunicorn):
    port = free_port()
    server = start_gunicorn({"TOOLPROXY_BIND": f"127.0.0.1:{free_port()}"}, ["-b", f"127.0.0.1:{port}"])
    server.url = f"http://127.0.0.1:{port}"
    assert requests.get(f"{server.wait_ready().url}/health", timeout=5).status_code == 200


def test_configuration_mistakes_are_listed_before_start(tmp_path):
    config = tmp_path / "toolproxy.yaml"
    config.write_text("upstream: localhost:8000\nmodels:\n  - match: 'q*'\n    tool_mode: magic\n")
    result = _run_gunicorn({"TOOLPROXY_CONFIG": str(config), "TOOLPROXY_WORKERS": "zero"})
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "TOOLPROXY_UPSTREAM" in output and "http(s) URL" in output
    assert "models[0].tool_mode" in output and "TOOLPROXY_WORKERS" in output
    assert "Traceback" not in output


def test_secrets_never_reach_logs_or_answers(upstream, start_gunicorn):
    client_key, upstream_key = "sk-SENTINEL-client-1234", "sk-SENTINEL-upstream-5678"
    server = start_gunicorn({"TOOLPROXY_UPSTREAM": upstream.url, "TOOLPROXY_API_KEYS": client_key,
                             "TOOLPROXY_UPSTREAM_API_KEY": upstream_key}).wait_ready()
    answers = []
    upstream.script = lambda request, wire: wire.send_json({"error": {"message": "nope", "type": "x"}}, 500)
    for key in (client_key, "sk-SENTINEL-wrong", None):
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        for body in ({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [READ], "stream": True},
                     {"model": "m", "messages": "bad", "api_key": "sk-SENTINEL-in-body"}):
            answers.append(requests.post(f"{server.url}/v1/chat/completions", json=body, headers=headers,
                                         timeout=10).text)
    answers.append(requests.get(f"{server.url}/", timeout=5).text)
    assert upstream.received[0].headers["authorization"] == f"Bearer {upstream_key}"
    log = server.output()
    assert "route=tools_stream" in log, "the request log is there"
    for text in [*answers, log]:
        assert "SENTINEL" not in text


def test_secrets_never_reach_the_access_log_records_pages_or_metrics(upstream, start_gunicorn):
    """Issue 12 failure 11: Basic-auth users and `?api_key=` in the access log, an upstream error that echoes the
    upstream key, a key written with JSON escapes in the model's text. Every place is read, the store's bytes too."""
    client_key, upstream_key = "sk-SENTINEL-client-1234", "sk-SENTINEL-upstream-5678"
    server = start_gunicorn({"TOOLPROXY_UPSTREAM": upstream.url, "TOOLPROXY_API_KEYS": client_key,
                             "TOOLPROXY_UPSTREAM_API_KEY": upstream_key}).wait_ready()
    bearer = {"Authorization": f"Bearer {client_key}"}
    escaped = upstream_key.replace("-", "\\u002d").replace("s", "\\u0073", 1)
    answers = [
        requests.get(f"{server.url}/v1/models?api_key=sk-SENTINEL-query-1", auth=("sk-SENTINEL-user", "pw"),
                     timeout=10).text,
        requests.post(f"{server.url}/v1/chat/completions?api_key=sk-SENTINEL-query-2", json={"model": "m"},
                      headers={**bearer, "Referer": "http://x/?api_key=sk-SENTINEL-ref"}, timeout=10).text]
    upstream.script = lambda request, wire: wire.send_json(
        {"error": {"message": f"Incorrect API key provided: {upstream_key}", "type": "auth",
                   "param": upstream_key, "code": upstream_key}}, 401)
    for stream in (False, True):
        answers.append(requests.post(f"{server.url}/v1/chat/completions", headers=bearer, timeout=10, json={
            "model": "m", "messages": MESSAGES, "tools": [READ], "stream": stream}).text)
    upstream.script = lambda request, wire: wire.send_events([{"error": {"message": f"bad key {upstream_key}"}}])
    answers.append(requests.post(f"{server.url}/v1/chat/completions", headers=bearer, timeout=10, json={
        "model": "m", "messages": MESSAGES, "stream": True}).text)
    text = f'Using it: {escaped}\n<tool_call>{{"name": "read", "arguments": {{"path": "{escaped}"}}}}</tool_call>'
    upstream.script = lambda request, wire: wire.send_json(completion(text))
    assert requests.post(f"{server.url}/v1/chat/completions", headers=bearer, timeout=10, json={
        "model": "m", "messages": MESSAGES, "tools": [READ]}).status_code == 200
    pages = _every_page(server.url, client_key, count=5)
    store = b"".join(path.read_bytes() for path in Path(server._data.name).glob("translog.sqlite3*"))
    log = server.output()
    assert "method=GET path=/v1/models" in log, "the request log is there"
    for text in [*answers, *pages, log, store.decode("latin-1")]:
        assert "SENTINEL" not in text


def _every_page(url: str, key: str, count: int) -> list[str]:
    session = requests.Session()
    sign_in(session, url, key)
    deadline = time.monotonic() + 20
    rows: list[dict] = []
    while len(rows) < count and time.monotonic() < deadline:
        rows = session.get(f"{url}/dashboard/records.json", timeout=10).json()["records"]
        time.sleep(0.1)
    assert len(rows) >= count, rows
    pages = [session.get(f"{url}{path}", timeout=10).text for path in ("/dashboard/", "/dashboard/records.json", "/")]
    pages.append(requests.get(f"{url}/metrics", headers={"Authorization": f"Bearer {key}"}, timeout=10).text)
    for row in rows:
        pages.append(session.get(f"{url}/dashboard/record/{row['id']}", timeout=10).text)
        pages.append(session.get(f"{url}/dashboard/record/{row['id']}/testcase.json", timeout=10).text)
    return pages
