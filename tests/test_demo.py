"""The built-in demo model through the proxy: safe (the user's words never become a command), one call then text,
every text form, and VTC clients answered in their own XML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import make_body, make_tool, with_settings
from tests.sse_client import accumulate, read_stream
from toolproxy.demo import reply_text

EXEC = make_tool("exec", {"command": {"type": "string"}}, ["command"])
READ = make_tool("read", {"path": {"type": "string"}, "offset": {"type": "integer"}}, ["path"])
CLINE_PROMPT = (Path(__file__).parent / "fixtures" / "cline_system_prompt.txt").read_text(encoding="utf-8")
OPENCLAW_CONTEXT = {"role": "user", "content": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nnone\n"
                                               "<<<END_OPENCLAW_INTERNAL_CONTEXT>>>"}


@pytest.fixture
def demo(serve, settings):
    return serve(with_settings(settings, upstream=None))


def calls_of(message: dict) -> list[tuple[str, dict]]:
    return [(call["function"]["name"], json.loads(call["function"]["arguments"]))
            for call in message.get("tool_calls") or []]


@pytest.mark.parametrize("prompt", ["hello", "run ls -la please", "rm -rf / now", "what is in the repo?"])
def test_no_file_named_means_text_never_a_command(demo, prompt):
    for stream in (False, True):
        reply = demo.post(make_body(prompt, [EXEC, READ], stream=stream))
        message = accumulate(read_stream(reply)) if stream else reply.json()["choices"][0]["message"]
        assert not message.get("tool_calls") and "demo model" in message["content"]


def test_a_named_file_is_read_with_the_read_tool_only(demo):
    for tools in ([EXEC, READ], [READ, EXEC]):
        message = demo.post(make_body("please read the file src/app.py and run it", tools)).json()["choices"][0]
        assert calls_of(message["message"]) == [("read", {"path": "src/app.py"})]
        assert message["finish_reason"] == "tool_calls"


@pytest.mark.parametrize(("name", "parameter"), [("read_file", "path"), ("Read", "file_path"), ("view", "path"),
                                                 ("readFile", "filePath")])
def test_read_like_tools_of_every_client(demo, name, parameter):
    tool = make_tool(name, {parameter: {"type": "string"}}, [parameter])
    message = demo.post(make_body("look at README.md", [EXEC, tool])).json()["choices"][0]["message"]
    assert calls_of(message) == [(name, {parameter: "README.md"})]


# Cline 3's `read_files` (the `cline` 3.0.65 CLI, @cline/core 0.0.86: zod's schema as JSON Schema): a list of files,
# each with its path and an optional line range.
_LINE = {"anyOf": [{"type": "integer", "exclusiveMinimum": 0}, {"type": "null"}]}
READ_FILES = {"type": "function", "function": {"name": "read_files", "parameters": {
    "type": "object", "required": ["files"], "properties": {"files": {"type": "array", "items": {
        "type": "object", "required": ["path"],
        "properties": {"path": {"type": "string"}, "start_line": _LINE, "end_line": _LINE}}}}}}}


def test_cline_3_reads_a_list_of_files(demo):
    """The Cline CLI recipe's prompt gets a call: the one file it names, as the only entry of `files`."""
    body = make_body("read README.md and summarize it", [EXEC, READ_FILES])
    streamed = accumulate(read_stream(demo.post({**body, "stream": True})))["tool_calls"]
    assert [(call["name"], json.loads(call["arguments"])) for call in streamed] == [
        ("read_files", {"files": [{"path": "README.md"}]})]
    assert calls_of(demo.post(body).json()["choices"][0]["message"]) == [
        ("read_files", {"files": [{"path": "README.md"}]})]


def test_without_a_read_tool_the_demo_answers_with_text(demo):
    message = demo.post(make_body("read src/app.py", [EXEC])).json()["choices"][0]["message"]
    assert "tool_calls" not in message and "demo model" in message["content"]
    needs_text = make_tool("read", {"path": {"type": "string"}, "reason": {"type": "string"}}, ["path", "reason"])
    message = demo.post(make_body("read src/app.py", [needs_text])).json()["choices"][0]["message"]
    assert "tool_calls" not in message


def test_after_a_tool_result_the_turn_ends_with_text_even_with_context_after_it(demo):
    """OpenClaw sends its internal context as a user message after the tool result: the demo must still stop."""
    call = {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": '{"path": "a.py"}'}}
    body = make_body("read a.py", [EXEC, READ], stream=True)
    body["messages"] += [{"role": "assistant", "content": "", "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": "call_1", "content": "print('hi')"}, OPENCLAW_CONTEXT]
    streamed = accumulate(read_stream(demo.post(body)))
    assert streamed["tool_calls"] == [] and streamed["finish_reason"] == ["stop"]
    assert "print('hi')" in streamed["content"]


@pytest.mark.parametrize(("word", "marker"), [("xml", "<read>"), ("json", '{"name": "read"'), ("", "<tools>")])
def test_every_text_form_is_shown_and_extracted(demo, word, marker):
    body = make_body(f"read a.py {word}".strip(), [READ])
    assert marker in reply_text(body)
    assert calls_of(demo.post(body).json()["choices"][0]["message"]) == [("read", {"path": "a.py"})]


def test_a_vtc_client_gets_the_call_in_its_own_xml_then_text(demo):
    messages = [{"role": "system", "content": CLINE_PROMPT}, {"role": "user", "content": "read src/app.ts"}]
    headers = {"User-Agent": "Cline/3.17.0"}
    first = demo.post({"model": "m", "messages": messages}, headers=headers).json()["choices"][0]
    assert "<read_file>\n<path>src/app.ts</path>\n</read_file>" in first["message"]["content"]
    assert first["finish_reason"] == "stop" and "tool_calls" not in first["message"]
    messages += [{"role": "assistant", "content": first["message"]["content"]},
                 {"role": "user", "content": "[read_file for 'src/app.ts'] Result:\nexport const x = 1;"}]
    second = demo.post({"model": "m", "messages": messages}, headers=headers).json()["choices"][0]
    assert "<read_file>" not in second["message"]["content"] and "export const x = 1;" in second["message"]["content"]
