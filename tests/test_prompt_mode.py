"""Backends without native tools: tools taught in the system prompt, tool history written back as text, and
seed 004's complete cycles through the proxy."""

from __future__ import annotations

import json

from tests.conftest import make_body, make_tool, with_settings
from tests.sse_client import accumulate, read_stream
from toolproxy.transform.prompts import Demand, render_tool_prompt
from toolproxy.transform.request_transform import rewrite_history, short_id

SEED_READ = {"name": "read", "description": "Read a file from the filesystem with line numbers",
             "parameters": {"type": "object", "properties": {
                 "filePath": {"type": "string", "description": "Absolute path to the file"},
                 "offset": {"type": "number", "description": "Line number to start reading from"},
                 "limit": {"type": "number", "description": "Number of lines to read"}}, "required": ["filePath"]}}
SEED_BASH = {"name": "bash", "description": "Execute a bash command in a persistent shell session",
             "parameters": {"type": "object", "properties": {
                 "command": {"type": "string", "description": "The command to execute"},
                 "description": {"type": "string", "description": "Clear description of what this command does"},
                 "timeout": {"type": "number", "description": "Timeout in milliseconds"}},
                 "required": ["command", "description"]}}


def test_seed_004_direction_1_examples_1_and_2():
    prompt = render_tool_prompt("roo_xml", [SEED_READ, SEED_BASH])
    expected = [
        "## read", "Description: Read a file from the filesystem with line numbers", "Parameters:",
        "- filePath: (required) string - Absolute path to the file",
        "- offset: (optional) number - Line number to start reading from",
        "- limit: (optional) number - Number of lines to read", "", "Usage:", "<read>",
        "## bash", "Description: Execute a bash command in a persistent shell session", "Parameters:",
        "- command: (required) string - The command to execute",
        "- description: (required) string - Clear description of what this command does",
        "- timeout: (optional) number - Timeout in milliseconds", "Usage:", "<bash>", "</bash>"]
    lines = prompt.splitlines()
    positions = [lines.index(line, 0) for line in expected if line]
    assert all(line in lines for line in expected)
    assert positions.index(lines.index("## bash")) > positions.index(lines.index("## read"))
    assert "<filePath>" in prompt and "<timeout>10</timeout>" in prompt


def test_seed_004_direction_1_example_4_preamble():
    prompt = render_tool_prompt("roo_xml", [SEED_READ])
    assert prompt.startswith(
        "You have access to tools that help you accomplish tasks. Use tools by outputting XML-formatted tool calls."
        "\n\n## Tool Use Rules\n1. Use exactly one tool per message\n2. Format tool calls using XML with the tool "
        "name as the tag\n3. Include all required parameters within parameter tags\n\n## Tool Call Format\n"
        "<tool_name>\n<parameter1>value1</parameter1>\n<parameter2>value2</parameter2>\n</tool_name>\n\n"
        "## Available Tools\n\n## read\n")


def test_demands_are_stated():
    assert render_tool_prompt("hermes", [SEED_READ], Demand(required=True)).endswith(
        "you must call at least one of the tools.")
    assert "`read`" in render_tool_prompt("json", [SEED_READ], Demand(required=True, name="read"))


CYCLE_TOOLS = [{"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": {
    "type": "object", "properties": {"filePath": {"type": "string"}}, "required": ["filePath"]}}}]


def test_seed_004_cycle_1_through_the_proxy(upstream, serve, settings):
    proxy = serve(with_settings(settings, tool_mode="prompt", dialects=("roo_xml",)))
    question = {"role": "user", "content": "What's in the package.json file?"}
    upstream.completion("I'll read the package.json file.\n\n<read>\n<filePath>/home/user/package.json</filePath>\n"
                        "</read>")
    body = {"model": "qwen3-max", "messages": [question], "tools": CYCLE_TOOLS, "stream": True}
    step2 = accumulate(read_stream(proxy.post(body)))
    sent = upstream.received[0].json()
    assert "tools" not in sent and sent["stream"] is False
    assert sent["messages"][0]["role"] == "system" and "## read\nDescription: Read a file" in \
        sent["messages"][0]["content"]
    assert sent["messages"][1] == question
    assert step2["content"] == "I'll read the package.json file."
    [call] = step2["tool_calls"]
    assert (call["name"], json.loads(call["arguments"])) == ("read", {"filePath": "/home/user/package.json"})
    assert step2["finish_reason"] == ["tool_calls"]

    result = '{"dependencies":{"express":"^4.18.0","axios":"^1.4.0"}}'
    history = [question, {"role": "assistant", "content": "I'll read the package.json file.", "tool_calls": [
        {"id": call["id"], "type": "function", "function": {"name": "read", "arguments": call["arguments"]}}]},
        {"role": "tool", "tool_call_id": call["id"], "content": result}]
    final = ("The package.json file contains 2 dependencies: express version ^4.18.0 and axios version ^1.4.0.")
    upstream.completion(final)
    step4 = accumulate(read_stream(proxy.post({**body, "messages": history})))
    sent = upstream.received[1].json()
    assert sent["messages"][2] == {"role": "assistant", "content": "I'll read the package.json file.\n\n<read>\n"
                                   "<filePath>/home/user/package.json</filePath>\n</read>"}
    assert sent["messages"][3] == {"role": "user", "content": f"Tool Result from read:\n{result}"}
    assert step4 == {"content": final, "tool_calls": [], "finish_reason": ["stop"], "usage": None}


def test_seed_004_cycle_2_bash(upstream, serve, settings):
    proxy = serve(with_settings(settings, tool_mode="prompt", dialects=("roo_xml",)))
    tools = [{"type": "function", "function": SEED_BASH}]
    upstream.completion("I'll install lodash using npm.\n\n<bash>\n<command>npm install lodash</command>\n"
                        "<description>Install lodash utility library</description>\n</bash>")
    answer = proxy.post({"model": "m", "messages": [{"role": "user", "content": "Install the lodash package"}],
                         "tools": tools}).json()["choices"][0]["message"]
    [call] = answer["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"command": "npm install lodash",
                                                         "description": "Install lodash utility library"}
    history = [{"role": "user", "content": "Install the lodash package"},
               {"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": call["id"], "content": "added 1 package in 2.3s"}]
    upstream.completion("Successfully installed lodash version 4.17.21.")
    final = proxy.post({"model": "m", "messages": history, "tools": tools}).json()["choices"][0]
    assert final["message"]["content"] == "Successfully installed lodash version 4.17.21."
    sent = upstream.received[1].json()["messages"]
    assert sent[-1] == {"role": "user", "content": "Tool Result from bash:\nadded 1 package in 2.3s"}
    assert sent[-2]["content"].startswith("<bash>\n<command>npm install lodash</command>\n")


def test_hermes_history_uses_tool_response_and_merges_results():
    messages = [{"role": "user", "content": "both"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "a", "function": {"name": "read", "arguments": '{"path": "x"}'}},
                    {"id": "b", "function": {"name": "read", "arguments": '{"path": "y"}'}}]},
                {"role": "tool", "tool_call_id": "a", "content": "X"},
                {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "Y"}]}]
    rewritten = rewrite_history(messages, "hermes", None)
    assert rewritten[1]["content"] == ('<tool_call>\n{"name": "read", "arguments": {"path": "x"}}\n</tool_call>\n\n'
                                       '<tool_call>\n{"name": "read", "arguments": {"path": "y"}}\n</tool_call>')
    assert rewritten[2:] == [{"role": "user", "content": "<tool_response>\nX\n</tool_response>\n\n"
                                                         "<tool_response>\nY\n</tool_response>"}]


def test_long_results_are_kept_whole_unless_limited():
    messages = [{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "t", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "a", "content": "x" * 100_000}]
    assert len(rewrite_history(messages, "json", None)[1]["content"]) > 100_000
    cut = rewrite_history(messages, "json", 1000)[1]["content"]
    assert len(cut) < 1100 and "99000 more characters cut by toolproxy" in cut


def test_system_prompt_is_appended_to_the_clients_own(upstream, serve, settings):
    proxy = serve(with_settings(settings, tool_mode="prompt"))
    upstream.completion("ok")
    body = make_body("hi", [make_tool("read", {"path": {"type": "string"}})])
    body["messages"].insert(0, {"role": "system", "content": "You are terse."})
    proxy.post(body)
    [system, user] = upstream.received[0].json()["messages"]
    assert system["content"].startswith("You are terse.\n\n# Tools\n") and "<tool_call>" in system["content"]
    assert user["role"] == "user"


def test_twenty_sequential_tool_calls(upstream, serve, settings):
    """Seed 001 SC-008: a 20-turn conversation of sequential calls stays consistent in prompt mode."""
    proxy = serve(with_settings(settings, tool_mode="prompt"))
    tools = [make_tool("read", {"path": {"type": "string"}}, ["path"])]
    messages = [{"role": "user", "content": "read files 0 to 19, one at a time"}]
    for turn in range(21):
        text = (f'<tool_call>\n{{"name": "read", "arguments": {{"path": "/f{turn}"}}}}\n</tool_call>'
                if turn < 20 else "All 20 files read.")
        upstream.completion(text)
        answer = accumulate(read_stream(proxy.post({"model": "m", "messages": messages, "tools": tools,
                                                    "stream": True})))
        sent = upstream.received[-1].json()
        assert "tools" not in sent and sum(m["role"] == "system" for m in sent["messages"]) == 1
        assert sum("<tool_response>" in str(m["content"]) for m in sent["messages"]) == turn
        if turn == 20:
            assert answer["content"] == "All 20 files read." and answer["tool_calls"] == []
            break
        [call] = answer["tool_calls"]
        assert json.loads(call["arguments"]) == {"path": f"/f{turn}"}
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": call["id"], "type": "function", "function": {"name": "read", "arguments": call["arguments"]}}]},
            {"role": "tool", "tool_call_id": call["id"], "content": f"contents of /f{turn}"}]
    assert len(upstream.received) == 21


def test_short_ids_are_stable_and_mistral_shaped():
    assert short_id("call_abcdefghijklmnopqrstuvwx") == short_id("call_abcdefghijklmnopqrstuvwx")
    assert len(short_id("chatcmpl-tool-1")) == 9 and short_id("chatcmpl-tool-1").isalnum()
    assert short_id("abcDEF123") == "abcDEF123"


def test_tool_history_is_text_even_on_a_turn_without_tools(upstream, serve, settings):
    proxy = serve(with_settings(settings, tool_mode="prompt"))
    upstream.completion("Done.")
    history = [{"role": "user", "content": "x"},
               {"role": "assistant", "tool_calls": [{"id": "a", "type": "function",
                                                     "function": {"name": "read", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "a", "content": "r"}]
    assert proxy.post({"model": "m", "messages": history}).json()["choices"][0]["message"]["content"] == "Done."
    sent = upstream.received[0].json()["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"] and "tool_calls" not in sent[1]
