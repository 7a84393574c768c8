"""Virtual tool calling: Cline, Roo Code and Kilo Code carry calls as XML in content (seed 000)."""

from __future__ import annotations

import json

import pytest
import requests

from tests.conftest import with_settings
from tests.sse_client import accumulate, read_stream
from tests.test_dashboard import wait_for_records
from toolproxy.clients import vtc
from toolproxy.dialects.base import source_of
from toolproxy.meaning.extraction import scanner
from toolproxy.meaning.holdback import BoundedScanner

CLINE_PROMPT = """You are Cline, a highly skilled software engineer.

====

TOOL USE

You have access to a set of tools that are executed upon the user's approval. You can use one tool per message.

# Tool Use Formatting

Tool use is formatted using XML-style tags. The tool name is enclosed in opening and closing tags:

<tool_name>
<parameter1_name>value1</parameter1_name>
</tool_name>

# Tools

## execute_command
Description: Request to execute a CLI command on the system.
Parameters:
- command: (required) The CLI command to execute.
- requires_approval: (required) A boolean indicating whether this command requires explicit user approval.
Usage:
<execute_command>
<command>Your command here</command>
<requires_approval>true or false</requires_approval>
</execute_command>

## read_file
Description: Request to read the contents of a file at the specified path.
Parameters:
- path: (required) The path of the file to read
Usage:
<read_file>
<path>File path here</path>
</read_file>
"""
INVOKE_PROMPT = CLINE_PROMPT.replace("Tool use is formatted using XML-style tags.",
                                     "Tool use is formatted as <function_calls> with <invoke> elements.")
CLINE_UA = {"User-Agent": "Cline/3.17.0"}
HERMES_CALL = 'Let me look.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "src/app.ts"}}\n</tool_call>'
TAG_CALL = "<read_file>\n<path>src/app.ts</path>\n</read_file>"


def body(prompt: str = CLINE_PROMPT, stream: bool = False, **extra) -> dict:
    return {"model": "m", "stream": stream, "messages": [{"role": "system", "content": prompt},
                                                         {"role": "user", "content": "show me src/app.ts"}], **extra}


KILO_CLI = "Kilo-Code/7.7.7 ai-sdk/provider-utils/4.0.27 runtime/bun/1.3.14"  # what Kilo Code CLI 7.7.7 sends


@pytest.mark.parametrize(("agent", "header", "patterns", "has_tools", "expected"), [
    ("Cline/3.17.0", None, ("cline", "kilo", "roo"), False, True),
    ("kilo-code/4.1", None, ("cline", "kilo", "roo"), False, True),
    ("RooCode/3.2", None, ("cline", "kilo", "roo"), False, True),
    ("OpenAI/Python 2.1", None, ("cline", "kilo", "roo"), False, False),
    ("Cline/3.17.0", None, (), False, False),
    ("OpenAI/Python 2.1", "on", ("cline",), False, True),
    ("Cline/3.17.0", "off", ("cline",), False, False),
    # native tools win over the User-Agent; only the explicit header still forces VTC
    (KILO_CLI, None, ("cline", "kilo", "roo"), True, False),
    ("Cline/3.17.0", None, ("cline",), True, False),
    ("Cline/3.17.0", "on", ("cline",), True, True),
])
def test_route_choice(agent, header, patterns, has_tools, expected):
    choice = vtc.choose_route(agent, header, patterns, has_tools)
    assert choice.vtc is expected and choice.reason


def test_a_client_that_sends_native_tools_gets_native_calls_whatever_its_user_agent(upstream, proxy):
    """Kilo Code CLI 7.7.7: `kilo` in its User-Agent, 16 native tools; it must get `tool_calls`, not XML."""
    upstream.completion(HERMES_CALL)
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
    request = {"model": "m", "messages": [{"role": "user", "content": "show me src/app.ts"}], "tools": tools}
    for stream in (False, True):
        reply = proxy.post({**request, "stream": stream}, headers={"User-Agent": KILO_CLI})
        if stream:
            message = accumulate(read_stream(reply))
            calls, finish = message["tool_calls"], message["finish_reason"]
            assert [(call["name"], json.loads(call["arguments"])) for call in calls] == [
                ("read_file", {"path": "src/app.ts"})]
            assert finish == ["tool_calls"] and "<read_file>" not in message["content"]
        else:
            choice = reply.json()["choices"][0]
            assert choice["finish_reason"] == "tool_calls"
            assert choice["message"]["tool_calls"][0]["function"]["name"] == "read_file"
            assert "<read_file>" not in (choice["message"]["content"] or "")
    records = wait_for_records(proxy.url, 2)
    page = requests.get(f"{proxy.url}/dashboard/record/{records[0]['id']}", timeout=10).text
    assert "route: native: the request carries tools (the User-Agent matches &#39;kilo&#39;)" in page


def test_a_call_in_any_dialect_comes_back_as_the_clients_xml(upstream, proxy):
    upstream.completion(HERMES_CALL)
    message = proxy.post(body(), headers=CLINE_UA).json()["choices"][0]
    assert message["message"]["content"] == "Let me look.\n\n" + TAG_CALL
    assert "tool_calls" not in message["message"] and message["finish_reason"] == "stop"
    sent = upstream.received[0].json()
    assert "tools" not in sent, "plain VTC sends the client's request as it is"


def test_the_invoke_form_is_answered_in_kind(upstream, proxy):
    upstream.completion(HERMES_CALL)
    content = proxy.post(body(INVOKE_PROMPT), headers=CLINE_UA).json()["choices"][0]["message"]["content"]
    assert content == ('Let me look.\n\n<function_calls>\n<invoke name="read_file">\n<parameter name="path">'
                       'src/app.ts</parameter>\n</invoke>\n</function_calls>')


def test_native_calls_from_the_backend_become_xml(upstream, proxy):
    native = [{"id": "x", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}]
    upstream.completion(None, finish_reason="tool_calls", tool_calls=native)
    choice = proxy.post(body(), headers=CLINE_UA).json()["choices"][0]
    assert choice["message"]["content"] == "<read_file>\n<path>a.py</path>\n</read_file>"
    assert choice["finish_reason"] == "stop"


def test_without_detection_nothing_is_rewritten(upstream, proxy):
    upstream.completion(HERMES_CALL)
    assert proxy.post(body()).json()["choices"][0]["message"]["content"] == HERMES_CALL
    content = proxy.post(body(), headers={**CLINE_UA, "X-Toolproxy-VTC": "off"}).json()
    assert content["choices"][0]["message"]["content"] == HERMES_CALL


def stream_text(upstream, proxy, pieces: list[str], **settings_changes) -> tuple[list, dict]:
    events = [{"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]} for piece in pieces]
    events.append({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    upstream.script = lambda request, wire: wire.send_events(events)
    got = read_stream(proxy.post(body(stream=True), headers=CLINE_UA))
    return got, accumulate(got)


def test_streamed_calls_split_at_every_position(upstream, proxy):
    text = "I'll read it.\n\n" + TAG_CALL + "\n\nThen I will explain <b>it</b>."
    for cut in range(1, len(text)):
        got, assembled = stream_text(upstream, proxy, [text[:cut], text[cut:]])
        assert assembled["content"] == text and assembled["tool_calls"] == []
        assert assembled["finish_reason"] == ["stop"]
        pieces = [e["choices"][0]["delta"].get("content", "") for e in got[:-1] if e["choices"]]
        assert any(TAG_CALL in piece for piece in pieces), f"the call was split when cut at {cut}"
        assert upstream.received[-1].json()["stream"] is True


def test_streamed_text_goes_out_live(upstream, proxy):
    got, _ = stream_text(upstream, proxy, ["Hello ", "there, ", "no tools."])
    contents = [e["choices"][0]["delta"].get("content") for e in got[:-1] if e["choices"]]
    assert [c for c in contents if c] == ["Hello ", "there, ", "no tools."]


def test_buffer_limit_releases_held_text(upstream, serve, settings):
    proxy = serve(with_settings(settings, max_buffer_bytes=200))
    long_block = "<read_file>\n<path>" + "x" * 1000 + "\n"  # never closes
    got, assembled = stream_text(upstream, proxy, [long_block[i:i + 50] for i in range(0, len(long_block), 50)])
    assert assembled["content"] == long_block
    contents = [e["choices"][0]["delta"].get("content") for e in got[:-1] if e["choices"]]
    assert len([c for c in contents if c]) > 2, "held text went out before the stream ended"


def test_bounded_scanner_never_holds_more_than_its_limit():
    tools = {"read_file": {"type": "object", "properties": {"path": {"type": "string"}}}}
    bounded = BoundedScanner(lambda: scanner(tools), 100)
    text = "<read_file><path>" + "y" * 1000
    fed, released = 0, []
    for char in text:
        released += bounded.feed(char)
        fed += len(char)
        assert fed - len(source_of(released)) <= 101
    assert source_of(released + bounded.finish()) == text


def test_loop_guard_sees_xml_calls(upstream, serve, settings):
    proxy = serve(with_settings(settings, loop_repeats=3))
    messages = [{"role": "system", "content": CLINE_PROMPT}, {"role": "user", "content": "go"}]
    for _ in range(3):
        messages += [{"role": "assistant", "content": TAG_CALL},
                     {"role": "user", "content": "[read_file for 'src/app.ts'] Result:\nsame"}]
    answer = proxy.post({"model": "m", "messages": messages}, headers=CLINE_UA).json()
    assert "loop guard" in answer["choices"][0]["message"]["content"] and not upstream.received


def test_access_policy_for_vtc_and_normal_clients(upstream, serve, settings):
    proxy = serve(with_settings(settings, deny_arguments=(r"rm\s+-rf\s+/",)))
    upstream.completion("<execute_command>\n<command>rm -rf /</command>\n<requires_approval>false"
                        "</requires_approval>\n</execute_command>")
    content = proxy.post(body(), headers=CLINE_UA).json()["choices"][0]["message"]["content"]
    assert "<execute_command>" not in content and "deny pattern" in content
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}}}}}]
    upstream.completion('<tool_call>{"name": "bash", "arguments": {"command": "rm -rf /"}}</tool_call>')
    choice = proxy.post({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": tools}).json()
    assert "tool_calls" not in choice["choices"][0]["message"]
    assert "deny pattern" in choice["choices"][0]["message"]["content"]


def test_allow_and_deny_lists(upstream, serve, settings):
    proxy = serve(with_settings(settings, allow_tools=("read_*",)))
    upstream.completion("<execute_command>\n<command>ls</command>\n<requires_approval>false</requires_approval>\n"
                        "</execute_command>")
    content = proxy.post(body(), headers=CLINE_UA).json()["choices"][0]["message"]["content"]
    assert "allow list" in content and "<execute_command>" not in content
    upstream.completion(TAG_CALL)
    assert proxy.post(body(), headers=CLINE_UA).json()["choices"][0]["message"]["content"] == TAG_CALL
    denied = serve(with_settings(settings, deny_tools=("read_file",)))
    assert "deny rule" in denied.post(body(), headers=CLINE_UA).json()["choices"][0]["message"]["content"]


def test_stream_native_deltas_become_xml(upstream, proxy):
    events = [{"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [
        {"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "t", "type": "function",
                                               "function": {"name": "read_file", "arguments": '{"pa'}}]},
         "finish_reason": None}]},
              {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [
                  {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": 'th": "b.py"}'}}]},
                   "finish_reason": "tool_calls"}]}]
    upstream.script = lambda request, wire: wire.send_events(events)
    assembled = accumulate(read_stream(proxy.post(body(stream=True), headers=CLINE_UA)))
    assert assembled["content"] == "<read_file>\n<path>b.py</path>\n</read_file>"
    assert assembled["tool_calls"] == [] and assembled["finish_reason"] == ["stop"]


FIXTURES = __import__("pathlib").Path(__file__).parent / "fixtures"


@pytest.mark.parametrize(("prompt_file", "agent"), [("cline_system_prompt.txt", "Cline/3.17.0"),
                                                    ("roo_system_prompt.txt", "RooCode/3.20.1")])
def test_native_bridge(upstream, serve, settings, prompt_file, agent):
    proxy = serve(with_settings(settings, vtc_native_bridge=True))
    prompt = (FIXTURES / prompt_file).read_text(encoding="utf-8")
    native = [{"id": "x", "type": "function", "function": {"name": "read_file",
                                                            "arguments": '{"path": "src/math.ts"}'}}]
    upstream.completion("Reading it.", finish_reason="tool_calls", tool_calls=native)
    messages = [{"role": "system", "content": prompt}, {"role": "user", "content": "fix src/math.ts"},
                {"role": "assistant", "content": "<read_file>\n<path>src/a.ts</path>\n</read_file>"},
                {"role": "user", "content": "[read_file for 'src/a.ts'] Result:\nexport const a = 1;"}]
    got = accumulate(read_stream(proxy.post({"model": "m", "messages": messages, "stream": True},
                                            headers={"User-Agent": agent})))
    assert got["content"].startswith("Reading it.\n\n<read_file>\n") and "src/math.ts" in got["content"]
    assert got["tool_calls"] == [] and got["finish_reason"] == ["stop"]
    sent = upstream.received[0].json()
    names = {tool["function"]["name"] for tool in sent["tools"]}
    assert {"read_file", "execute_command", "attempt_completion"} <= names
    assert sent["stream"] is False
    calls = [m for m in sent["messages"] if m.get("tool_calls")]
    results = [m for m in sent["messages"] if m["role"] == "tool"]
    assert calls and results and results[0]["tool_call_id"] == calls[0]["tool_calls"][0]["id"]
    assert "export const a = 1;" in results[0]["content"]


def test_native_bridge_falls_back_when_the_prompt_is_not_understood(upstream, serve, settings):
    proxy = serve(with_settings(settings, vtc_native_bridge=True))
    upstream.completion(HERMES_CALL)
    content = proxy.post(body("You are a helpful assistant with no tool list."),
                         headers=CLINE_UA).json()["choices"][0]["message"]["content"]
    assert content == HERMES_CALL  # no tools known: plain VTC, the text untouched
    assert "tools" not in upstream.received[0].json()


INVOKE_CALL = ('<function_calls>\n<invoke name="read_file">\n<parameter name="path">src/app.ts</parameter>\n'
               "</invoke>\n</function_calls>")


@pytest.mark.parametrize("written", [TAG_CALL, INVOKE_CALL, HERMES_CALL.split("\n", 1)[1],
                                     '<invoke name="default_api:read_file">\n<parameter name="path">src/app.ts'
                                     "</parameter>\n</invoke>"])
@pytest.mark.parametrize(("prompt", "expected"), [(CLINE_PROMPT, TAG_CALL), (INVOKE_PROMPT, INVOKE_CALL)])
def test_every_xml_form_in_both_directions(upstream, proxy, written, prompt, expected):
    upstream.completion(written)
    for stream in (False, True):
        response = proxy.post(body(prompt, stream=stream), headers=CLINE_UA)
        content = accumulate(read_stream(response))["content"] if stream else \
            response.json()["choices"][0]["message"]["content"]
        assert content == expected


def test_streamed_choices_are_scanned_apart(upstream, proxy):
    def chunk(index: int, content: str | None, finish: str | None = None) -> dict:
        delta = {"content": content} if content is not None else {}
        return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}

    events = [chunk(0, "Hello <"), chunk(1, "Bye"), chunk(0, "i>x"), chunk(1, " now"), chunk(0, None, "stop"),
              chunk(1, None, "stop")]
    upstream.script = lambda request, wire: wire.send_events(events)
    got = read_stream(proxy.post(body(stream=True, n=2), headers=CLINE_UA))
    texts: dict[int, str] = {0: "", 1: ""}
    for event in got[:-1]:
        for choice in event["choices"]:
            texts[choice["index"]] += choice["delta"].get("content") or ""
    assert texts == {0: "Hello <i>x", 1: "Bye now"}


def test_the_dashboard_lists_the_calls_of_vtc_answers(upstream, proxy):
    """The log line said `calls=read_file` while the dashboard listed none: both routes, streamed and whole."""
    stream_text(upstream, proxy, ["I'll read it.\n\n", TAG_CALL])
    upstream.completion(HERMES_CALL)
    proxy.post(body(), headers=CLINE_UA)
    rows = wait_for_records(proxy.url, 2)  # a record is written when its answer ends: either order
    streamed, whole = sorted(rows, key=lambda row: row["route"] != "vtc_stream")
    assert (streamed["route"], streamed["calls"]) == ("vtc_stream", ["read_file"])
    assert (whole["route"], whole["calls"]) == ("vtc", ["read_file"])
