"""`toolproxy doctor` against scripted upstreams that imitate the common cases: each gets the right diagnosis and
recommendation; a server that is down, hangs, refuses the key or lacks the model gets one line and exit 2."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading

import pytest

from tests.backend_servers import MODEL_OWNERS, VERSION_PATHS
from tests.conftest import ROOT, free_port, with_settings
from tests.fake_upstream import as_chunks, completion
from tests.test_dashboard import sign_in
from toolproxy.cli import main

ARGS = {"path": "README.md", "max_lines": 20}
HERMES = '<tool_call>\n{"name": "read_file", "arguments": {"path": "README.md", "max_lines": 20}}\n</tool_call>'
ROO = "<read_file>\n<path>README.md</path>\n<max_lines>20</max_lines>\n</read_file>"
NATIVE = [{"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": json.dumps(ARGS)}}]


def model_server(kind: str, *, native: str = "calls", stream: str = "same", choice: str = "honoured",
                 prompt: str = "hermes"):
    """A server of this kind whose model: answers tools natively (`calls`), writes the call into content
    (`content`) or ignores them (`prose`); streams the same or drops the arguments; honours tool_choice or not;
    in prompt mode writes hermes, Roo XML or prose."""

    def message(body):
        system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
        if not body.get("tools"):  # prompt mode
            if prompt == "roo" and "XML-formatted tool calls" in system:
                return {"content": ROO}
            if prompt == "hermes" and "<tool_call>" in system:
                return {"content": HERMES}
            return {"content": "It is a README file."}
        forced = body.get("tool_choice") not in (None, "auto") and choice == "honoured"
        if forced or (native == "calls" and "README.md" in body["messages"][-1]["content"]):
            return {"content": None, "tool_calls": NATIVE}
        if native == "content" and "README.md" in body["messages"][-1]["content"]:
            return {"content": HERMES}
        return {"content": "Hello there, how are you?"}

    def script(request, wire):
        if request.method == "GET":
            if request.path == "/v1/models":
                wire.send_json({"object": "list", "data": [{"id": "m", "owned_by": MODEL_OWNERS[kind]}]})
            elif kind in VERSION_PATHS and request.path == VERSION_PATHS[kind][0]:
                wire.send_json(VERSION_PATHS[kind][1])
            else:
                wire.send_json({"detail": "Not Found"}, status=404)
            return
        body = request.json()
        answer = message(body)
        payload = completion(answer.pop("content"), "tool_calls" if answer.get("tool_calls") else "stop", **answer)
        if not body.get("stream"):
            wire.send_json(payload)
            return
        chunks = as_chunks(payload)
        if stream == "drops":
            for chunk in chunks:
                for call in chunk["choices"][0]["delta"].get("tool_calls") or []:
                    call["function"] = {**call["function"], "arguments": ""}
        wire.send_events(chunks)

    return script


def doctor(upstream, capsys, *extra: str) -> tuple[int, str, str]:
    code = main(["doctor", "--upstream", upstream.url, "--model", "m", "--tries", "2", *extra])
    out, err = capsys.readouterr()
    return code, out, err


def rows(out: str) -> dict[str, str]:
    return {line.split()[1]: line for line in out.splitlines() if line[:1] in "✓✗!·" and len(line.split()) > 1}


def test_native_calls_fine(upstream, capsys):
    upstream.script = model_server("vllm")
    code, out, err = doctor(upstream, capsys)
    assert code == 0 and "[1/5] backend" in err
    assert "· backend" in out and "vllm 0.11.2 (GET /version)" in out
    assert out.count("✓ native") == 2 and "Tool calling works natively with this model." in out
    assert '  - match: "m"\n    upstream: ' in out and "tool_mode: native" in out and "constrain: auto" in out
    assert "stream_strategy: incremental" in out and "repair_rounds: 0" in out
    assert "✓ tool_choice required" in out and "✓ strict" in out


def test_native_streaming_that_drops_the_arguments(upstream, capsys):
    upstream.script = model_server("vllm", stream="drops")
    code, out, _ = doctor(upstream, capsys)
    stream_row = next(line for line in out.splitlines() if " native stream " in line)
    assert code == 0 and stream_row.startswith("✗") and "differs from the whole answer" in stream_row
    assert "arguments are not JSON" in stream_row or "is a required property" in stream_row
    assert "stream_strategy: buffered" in out and "repair_rounds: 1" in out


def test_calls_left_in_content_name_the_missing_parser_flag(upstream, capsys):
    upstream.script = model_server("vllm", native="content")
    code, out, _ = doctor(upstream, capsys)
    assert code == 0
    assert "! call in content" in out and "--enable-auto-tool-choice --tool-call-parser hermes" in out
    assert "the server leaves them in the text (hermes)" in out
    assert "tool_mode: native" in out and "dialect: hermes" in out


def test_no_tool_support_but_good_roo_xml_in_prompt_mode(upstream, capsys):
    upstream.script = model_server("generic", native="prose", choice="ignored", prompt="roo")
    code, out, _ = doctor(upstream, capsys, "--json")
    found = json.loads(out)
    assert code == 0
    marks = {probe["name"]: probe["mark"] for probe in found["probes"]}
    assert marks["native"] == "fail" and marks["prompt roo_xml"] == "ok" and marks["prompt hermes"] == "fail"
    assert found["recommendation"]["tool_mode"] == "prompt" and found["recommendation"]["dialect"] == "roo_xml"
    assert "prompt mode (roo_xml)" in found["verdict"]


def test_a_server_that_ignores_tool_choice(upstream, capsys):
    upstream.script = model_server("ollama", choice="ignored")
    code, out, _ = doctor(upstream, capsys)
    assert code == 0 and "ollama 0.12.6" in out
    assert "! tool_choice required" in out and "answered without a call: ignored" in out
    assert "! tool_choice named" in out and "constrain: off" in out


def test_a_server_that_is_down():
    url = f"http://127.0.0.1:{free_port()}/v1"
    result = subprocess.run([sys.executable, "-m", "toolproxy", "doctor", "--upstream", url, "--model", "m"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines()[-1] == (f"toolproxy doctor: cannot reach {url}: the connection was "
                                                      "refused or the host is down")
    assert "Traceback" not in result.stderr


def test_a_server_that_hangs(upstream, capsys):
    release = threading.Event()
    upstream.script = lambda request, wire: release.wait(30)
    try:
        code, out, err = doctor(upstream, capsys, "--timeout", "1")
    finally:
        release.set()
    assert code == 2 and out == ""
    assert err.strip().splitlines()[-1].endswith("did not answer GET /models in time: the server hangs or is busy")


@pytest.mark.parametrize(("status", "models", "message"), [
    (401, {"error": {"message": "Invalid API key"}},
     "refused the key (HTTP 401): pass the server's key with --api-key"),
    (200, {"data": [{"id": "qwen3"}, {"id": "llama"}]}, "does not serve the model 'm'; it serves: qwen3, llama"),
])
def test_a_wrong_key_or_model_is_one_line(status, models, message, upstream, capsys):
    upstream.script = lambda request, wire: wire.send_json(models, status=status)
    code, out, err = doctor(upstream, capsys)
    assert code == 2 and out == "" and err.strip().splitlines()[-1].endswith(message)


def test_the_dashboard_runs_the_doctor_behind_its_key(upstream, serve, settings):
    import requests

    upstream.script = model_server("vllm")
    proxy = serve(with_settings(settings, api_keys=("sk-doc",)))
    assert requests.post(f"{proxy.url}/dashboard/doctor", data={"upstream": 0, "model": "m"}, timeout=30,
                         allow_redirects=False).status_code == 302, "not signed in: to the login page"
    session = requests.Session()
    sign_in(session, proxy.url, "sk-doc")
    board = session.get(f"{proxy.url}/dashboard/", timeout=10).text
    assert "Run the doctor" in board
    token = re.search(r'name="doctor_csrf" value="([^"]+)"', board).group(1)
    assert session.post(f"{proxy.url}/dashboard/doctor", data={"upstream": 0, "model": "m"},
                        timeout=30).status_code == 400, "without the form's token"
    page = session.post(f"{proxy.url}/dashboard/doctor", data={"upstream": 0, "model": "m", "doctor_csrf": token},
                        timeout=120)
    assert page.status_code == 200 and "Tool calling works natively with this model." in page.text
    assert "tool_mode: native" in page.text and "&lt;" not in page.text.split("<pre>")[0][-50:]
    open_proxy = serve(settings)
    refused = requests.post(f"{open_proxy.url}/dashboard/doctor", data={"upstream": 0, "model": "m"}, timeout=10)
    assert refused.status_code == 403 and "toolproxy doctor" in refused.text
