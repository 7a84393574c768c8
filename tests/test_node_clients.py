"""The JavaScript clients people point at the proxy, for real: the official `openai` npm package and the Vercel
AI SDK with `@ai-sdk/openai-compatible` (the layer OpenCode and Kilo are built on), pinned in tests/node and
installed by `make test`. The proxy runs under gunicorn in front of a scripted upstream that writes calls as
text in several dialects; each client asks for every case whole and streamed, and the two must agree."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from typing import Any

import pytest

from tests.conftest import ROOT, Gunicorn, make_tool, with_settings
from tests.fake_upstream import FakeUpstream, Received, Wire, as_chunks, completion
from tests.readme import PLACEHOLDER_URL, code_block, recipe

NODE_DIR = ROOT / "tests" / "node"
READ = make_tool("read", {"path": {"type": "string"}, "limit": {"type": "integer"}}, ["path"])
BASH = make_tool("bash", {"command": {"type": "string"}}, ["command"])

# model name -> (the upstream's reply as text, expected content, expected calls as (name, arguments))
CASES: dict[str, tuple[str, str | None, list[tuple[str, dict[str, Any]]]]] = {
    "hermes": ('Let me look.\n<tool_call>\n{"name": "read", "arguments": {"path": "src/app.py", "limit": "20"}}\n'
               '</tool_call>\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>',
               "Let me look.", [("read", {"path": "src/app.py", "limit": 20}), ("bash", {"command": "ls -la"})]),
    "qwen3_coder": ("<tool_call>\n<function=read>\n<parameter=path>\nsrc/app.py\n</parameter>\n"
                    "<parameter=limit>\n20\n</parameter>\n</function>\n</tool_call>",
                    None, [("read", {"path": "src/app.py", "limit": 20})]),
    "mistral": ('[TOOL_CALLS]bash[ARGS]{"command": "grep -n \\"<tool_call>\\" README.md"}',
                None, [("bash", {"command": 'grep -n "<tool_call>" README.md'})]),
    "json": ('{"name": "read", "arguments": {"path": "notes/été.md"}}',
             None, [("read", {"path": "notes/été.md"})]),
    "roo_xml": ("I will read it.\n\n<read>\n<path>src/app.py</path>\n</read>",
                "I will read it.", [("read", {"path": "src/app.py"})]),
    "plain_text": ("No tool needed: the answer is 42 ✓", "No tool needed: the answer is 42 ✓", []),
    "undeclared_tool": ('<tool_call>{"name": "format_disk", "arguments": {}}</tool_call>',
                        '<tool_call>{"name": "format_disk", "arguments": {}}</tool_call>', []),
    # Asked without tools: the passthrough route, streamed event by event as the upstream sends it.
    "no_tools": ("Hello from upstream, <tool_call> and all", "Hello from upstream, <tool_call> and all", []),
}
FINISH = {"openai": {True: "tool_calls", False: "stop"}, "ai-sdk": {True: "tool-calls", False: "stop"}}


def answer_by_model(request: Received, wire: Wire) -> None:
    """The upstream answers each case by the request's model name, whole or streamed as it was asked."""
    body = request.json()
    payload = completion(CASES[body["model"]][0])
    if body.get("stream"):
        wire.send_events(as_chunks(payload))
    else:
        wire.send_json(payload)


def node_binary() -> str:
    node = shutil.which("node")
    if node is None or not (NODE_DIR / "node_modules").is_dir():
        pytest.fail("the node clients are not installed: run `make test` (it runs `npm ci` in tests/node)")
    return node


def run_client(client: str, base_url: str) -> list[dict[str, Any]]:
    node = node_binary()
    messages = [{"role": "user", "content": "look at src/app.py"}]
    cases = [{"model": model, "messages": messages, **({} if model == "no_tools" else {"tools": [READ, BASH]})}
             for model in CASES]
    request = {"client": client, "baseURL": f"{base_url}/v1", "apiKey": "sk-unused", "cases": cases}
    result = subprocess.run([node, "clients.mjs"], cwd=NODE_DIR, input=json.dumps(request), text=True,
                            capture_output=True, timeout=100, check=False)
    assert result.returncode == 0, result.stderr
    return list(json.loads(result.stdout)["results"])


@pytest.fixture(scope="module", params=["openai", "ai-sdk"])
def client_results(request: pytest.FixtureRequest, _upstream_server: FakeUpstream,
                   gunicorn_proxy: Gunicorn) -> tuple[str, dict[str, dict[str, Any]], list[Received]]:
    """One node process per client runs every case; the tests below read its printout case by case."""
    _upstream_server.reset_state()
    _upstream_server.script = answer_by_model
    results = run_client(request.param, gunicorn_proxy.url)
    received = list(_upstream_server.received)
    _upstream_server.reset_state()
    return request.param, {result["model"]: result for result in results}, received


def named(calls: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(call["name"], call["arguments"]) for call in calls]


@pytest.mark.parametrize("model", list(CASES))
def test_whole_answer_has_the_calls(client_results, model):
    client, results, _ = client_results
    _, content, calls = CASES[model]
    whole = results[model]["whole"]
    assert whole["errors"] == []
    assert named(whole["calls"]) == calls
    assert (whole["content"] or None) == content  # the AI SDK says "" where the wire said null
    assert whole["finish"] == FINISH[client][bool(calls)]
    ids = [call["id"] for call in whole["calls"]]
    assert all(ids) and len(set(ids)) == len(ids)
    assert not any(call.get("invalid") for call in whole["calls"])


@pytest.mark.parametrize("model", list(CASES))
def test_stream_adds_up_to_the_whole_answer(client_results, model):
    _, results, _ = client_results
    whole, stream = results[model]["whole"], results[model]["stream"]
    assert stream["errors"] == []
    assert named(stream["calls"]) == named(whole["calls"])
    assert stream["content"] == (whole["content"] or "")
    assert stream["finish"] == whole["finish"]
    assert not any(call.get("invalid") for call in stream["calls"])


def test_tools_reach_the_upstream_natively(client_results):
    _, _, received = client_results
    assert len(received) == 2 * len(CASES)
    for request in received:
        body = request.json()
        if body["model"] == "no_tools":
            assert "tools" not in body
            continue
        assert [tool["function"]["name"] for tool in body["tools"]] == ["read", "bash"]
        assert body.get("stream") in (None, False), "the proxy asks for a whole answer and streams it itself"


@pytest.mark.parametrize("title", ["OpenAI SDK (Node)", "Vercel AI SDK"])
def test_readme_snippet_runs_as_written(title, serve, settings, tmp_path):
    """The JavaScript snippet of docs/clients.md, saved under the `.mjs` name its recipe gives and run with `node`
    against the demo model, only the address changed; the packages the recipe says to install are the ones
    tests/node pins, and nothing else is there to import."""
    node = node_binary()
    text = recipe(title)
    (file_name,) = set(re.findall(r"`node ([\w.-]+\.mjs)`", text))
    installed = re.search(r"`npm install ([^`]+)`", text)
    assert installed is not None, f"{title}: the recipe does not say what to install"
    pinned = json.loads((NODE_DIR / "package.json").read_text(encoding="utf-8"))["dependencies"]
    assert set(installed.group(1).split()) <= set(pinned)
    modules = tmp_path / "node_modules"
    modules.mkdir()
    for package in installed.group(1).split():
        (modules / package).parent.mkdir(parents=True, exist_ok=True)
        (modules / package).symlink_to(NODE_DIR / "node_modules" / package)
    proxy = serve(with_settings(settings, upstream=None))
    (tmp_path / file_name).write_text(code_block(title, "js").replace(PLACEHOLDER_URL, f"{proxy.url}/v1"))
    result = subprocess.run([node, file_name], cwd=tmp_path, capture_output=True, text=True, timeout=100,
                            check=False)
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("call"))
    assert line.split(": ", 1)[1].startswith("read_file ")
    assert json.loads(line.split("read_file ", 1)[1]) == {"path": "README.md"}
