"""client_prompt: the tools in Cline's and Roo Code's system prompts, their XML history as native calls, and native
calls back as their XML."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolproxy.clients.history import history_to_native, native_to_xml
from toolproxy.clients.prompt import ClientTools, parse_client_tools, tool_names
from toolproxy.dialects.base import Call, parse
from toolproxy.dialects.registry import DIALECTS
from toolproxy.dialects.tag_xml import parse_elements

FIXTURES = Path(__file__).parent / "fixtures"
CLINE = (FIXTURES / "cline_system_prompt.txt").read_text()
ROO = (FIXTURES / "roo_system_prompt.txt").read_text()

# name -> (start of the description, required, every parameter in order)
CLINE_TOOLS: dict[str, tuple[str, list[str], list[str]]] = {
    "execute_command": ("Request to execute a CLI command", ["command", "requires_approval"],
                        ["command", "requires_approval", "task_progress"]),
    "read_file": ("Request to read the contents of a file", ["path"], ["path", "task_progress"]),
    "write_to_file": ("Request to write content to a file", ["path", "content"], ["path", "content", "task_progress"]),
    "replace_in_file": ("Request to replace sections of content", ["path", "diff"], ["path", "diff", "task_progress"]),
    "search_files": ("Request to perform a regex search", ["path", "regex"], ["path", "regex", "file_pattern"]),
    "list_files": ("Request to list files and directories", ["path"], ["path", "recursive"]),
    "list_code_definition_names": ("Request to list definition names", ["path"], ["path"]),
    "use_mcp_tool": ("Request to use a tool provided by a connected MCP server",
                     ["server_name", "tool_name", "arguments"], ["server_name", "tool_name", "arguments"]),
    "access_mcp_resource": ("Request to access a resource", ["server_name", "uri"], ["server_name", "uri"]),
    "ask_followup_question": ("Ask the user a question", ["question"], ["question", "options"]),
    "attempt_completion": ("After each tool use", ["result"], ["result", "command", "task_progress"]),
    "plan_mode_respond": ("Respond to the user's inquiry", ["response"], ["response", "needs_more_exploration"]),
    "load_mcp_documentation": ("Load documentation about creating MCP servers", [], []),
}

ROO_TOOLS: dict[str, tuple[str, list[str], list[str]]] = {
    "read_file": ("Request to read the contents of one or more files", ["args"], ["args"]),
    "fetch_instructions": ("Request to fetch instructions", ["task"], ["task"]),
    "search_files": ("Request to perform a regex search", ["path", "regex"], ["path", "regex", "file_pattern"]),
    "list_files": ("Request to list files and directories", ["path"], ["path", "recursive"]),
    "apply_diff": ("Request to apply PRECISE, TARGETED modifications", ["path", "diff"], ["path", "diff"]),
    "write_to_file": ("Request to write content to a file", ["path", "content", "line_count"],
                      ["path", "content", "line_count"]),
    "insert_content": ("Use this tool specifically for adding new lines", ["path", "line", "content"],
                       ["path", "line", "content"]),
    "search_and_replace": ("Use this tool to find and replace", ["path", "search", "replace"],
                           ["path", "search", "replace", "start_line", "end_line", "use_regex", "ignore_case"]),
    "execute_command": ("Request to execute a CLI command", ["command"], ["command", "cwd"]),
    "use_mcp_tool": ("Request to use a tool provided by a connected MCP server",
                     ["server_name", "tool_name", "arguments"], ["server_name", "tool_name", "arguments"]),
    "access_mcp_resource": ("Request to access a resource", ["server_name", "uri"], ["server_name", "uri"]),
    "ask_followup_question": ("Ask the user a question", ["question", "follow_up"], ["question", "follow_up"]),
    "attempt_completion": ("After each tool use", ["result"], ["result"]),
    "switch_mode": ("Request to switch to a different mode", ["mode_slug"], ["mode_slug", "reason"]),
    "new_task": ("This will let you create a new task", ["mode", "message"], ["mode", "message"]),
    "update_todo_list": ("Replace the entire TODO list", ["todos"], ["todos"]),
}


def functions(tools: ClientTools) -> dict[str, dict[str, Any]]:
    return {tool["function"]["name"]: tool["function"] for tool in tools.tools}


def properties(tools: ClientTools, name: str) -> dict[str, Any]:
    return functions(tools)[name]["parameters"]["properties"]  # type: ignore[no-any-return]


# --- the system prompt -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("prompt", "expected", "style"), [(CLINE, CLINE_TOOLS, "cline"), (ROO, ROO_TOOLS, "roo")],
                         ids=["cline", "roo"])
def test_every_tool_of_the_fixture(prompt: str, expected: dict[str, tuple[str, list[str], list[str]]],
                                   style: str) -> None:
    parsed = parse_client_tools(prompt)
    assert parsed.problem is None
    assert parsed.style == style
    assert list(functions(parsed)) == list(expected)  # in prompt order, nothing extra (`## Purpose`, servers)
    for name, (description, required, names) in expected.items():
        function = functions(parsed)[name]
        assert function["description"].startswith(description), name
        assert function["parameters"]["type"] == "object"
        assert function["parameters"]["required"] == required, name
        assert list(function["parameters"]["properties"]) == names, name
    assert tool_names(prompt) == frozenset(expected)


@pytest.mark.parametrize("prompt", [CLINE, ROO], ids=["cline", "roo"])
def test_wire_shape(prompt: str) -> None:
    for tool in parse_client_tools(prompt).tools:
        assert tool["type"] == "function"
        assert set(tool["function"]) <= {"name", "description", "parameters"}
        json.dumps(tool)  # plain JSON, ready to send as `tools`


def test_parameter_descriptions_keep_their_continuation_lines() -> None:
    diff = properties(parse_client_tools(CLINE), "replace_in_file")["diff"]["description"]
    assert diff.startswith("One or more SEARCH/REPLACE blocks following this exact format:\n```\n------- SEARCH")
    assert "\n   * Match character-for-character" in diff  # relative indentation kept
    line = properties(parse_client_tools(ROO), "insert_content")["line"]["description"]
    assert line == ("Line number where content will be inserted (1-based)\nUse 0 to append at end of file\n"
                    "Use any positive number to insert before that line")


def test_prose_after_the_parameters_describes_the_tool() -> None:
    roo = functions(parse_client_tools(ROO))
    assert "Diff format:\n```\n<<<<<<< SEARCH" in roo["apply_diff"]["description"]
    assert "\nNotes:\n- When use_regex is true" in roo["search_and_replace"]["description"]
    assert "**Checklist Format:**" in roo["update_todo_list"]["description"]
    assert "Usage" not in roo["update_todo_list"]["description"]


def test_types_only_where_the_prompt_is_unmistakable() -> None:
    cline, roo = parse_client_tools(CLINE), parse_client_tools(ROO)
    assert properties(cline, "execute_command")["requires_approval"]["type"] == "boolean"  # "A boolean ..."
    assert properties(cline, "list_files")["recursive"]["type"] == "boolean"  # `true or false` placeholder
    assert properties(roo, "write_to_file")["line_count"]["type"] == "integer"  # "number" + an integer example
    assert properties(roo, "insert_content")["line"]["type"] == "integer"
    # JSON text stays text: the client decodes it itself.
    assert properties(cline, "use_mcp_tool")["arguments"]["type"] == "string"
    assert properties(roo, "use_mcp_tool")["arguments"]["type"] == "string"
    assert properties(cline, "ask_followup_question")["options"]["type"] == "string"
    for name in ("start_line", "use_regex"):  # no example, no type word: a string
        assert properties(roo, "search_and_replace")[name]["type"] == "string"
    assert properties(roo, "write_to_file")["content"]["type"] == "string"


def test_nested_usage_examples_become_objects_and_arrays() -> None:
    roo = parse_client_tools(ROO)
    follow_up = properties(roo, "ask_followup_question")["follow_up"]
    assert follow_up["type"] == "object"
    assert follow_up["properties"]["suggest"] == {"type": "array", "items": {"type": "string"}}
    assert follow_up["required"] == ["suggest"]
    args = properties(roo, "read_file")["args"]
    assert args["type"] == "object" and args["required"] == ["file"]
    file = args["properties"]["file"]
    assert file["type"] == "array"
    item = file["items"]
    assert item["type"] == "object" and item["required"] == ["path"]
    assert item["properties"]["path"]["type"] == "string"
    assert item["properties"]["path"]["description"].startswith("File path")
    assert item["properties"]["line_range"]["type"] == "array"


UNUSUAL = """You are a helpful agent.

# Tools

## count_lines
Description: Count the lines of a file.
Parameters:
- path: (required) string The file
- limit: (optional) number Stop after this many lines
- strict: (optional) boolean Fail on binary files
Usage:
<count_lines>
<path>file.txt</path>
</count_lines>

## ping
Description: Checks that the tool host is alive.
Parameters: None

## tag
**Description:**
Tag some files.

**Usage Example:**
<tag>
<label>urgent</label>
<files>
<item>a.txt</item>
<item>b.txt</item>
</files>
</tag>

<tag>
<label>later</label>
</tag>

## notes
Just a heading with prose, not a tool.

## write_note
Description: Writes a note.
Parameters:
- text: (required) The note
Usage:
<write_note>
<text>
```
## not_a_tool
====
```
</text>
</write_note>
"""


def test_unusual_sections() -> None:
    parsed = parse_client_tools(UNUSUAL)
    assert list(functions(parsed)) == ["count_lines", "ping", "tag", "write_note"]
    assert parsed.style == "unknown"
    count = properties(parsed, "count_lines")
    assert [count[name]["type"] for name in ("path", "limit", "strict")] == ["string", "integer", "boolean"]
    assert functions(parsed)["ping"]["parameters"] == {"type": "object", "properties": {}, "required": []}
    tag = functions(parsed)["tag"]["parameters"]
    assert tag["properties"]["files"] == {"type": "array", "items": {"type": "string"}}
    assert tag["required"] == ["label"]  # `files` is missing from one example
    # A heading and a separator inside a usage example do not end the section.
    assert functions(parsed)["write_note"]["parameters"]["required"] == ["text"]


@pytest.mark.parametrize(("prompt", "problem"), [
    ("", "empty system prompt"),
    ("You are a helpful assistant. Answer briefly.", "no tool sections found (no '## tool_name' headings)"),
    ("# Rules\n\n## style\nBe terse.\n", "no tool sections found"),
])
def test_no_tools(prompt: str, problem: str) -> None:
    parsed = parse_client_tools(prompt)
    assert parsed.tools == ()
    assert parsed.problem is not None and parsed.problem.startswith(problem)
    assert tool_names(prompt) == frozenset()


def test_a_200_kb_prompt_is_read_whole() -> None:
    """Its time is measured in bench/hostile.py, not here: a test must not assert wall-clock time."""
    filler = "".join(f"## rule_{n}\n- keep: things tidy\n```\ncode =======\n```\n[log] {n}\n" for n in range(2500))
    generated = "".join(f"## tool_{n}\nDescription: Tool {n}.\nParameters:\n- path: (required) A path\nUsage:\n"
                        f"<tool_{n}>\n<path>p</path>\n</tool_{n}>\n\n" for n in range(800))
    prompt = ROO + generated + "\n====\n\nUSER'S CUSTOM INSTRUCTIONS\n\n" + filler
    assert len(prompt) > 200_000
    parsed = parse_client_tools(prompt)
    assert len(parsed.tools) == len(ROO_TOOLS) + 800


def test_a_heading_spam_prompt_is_read() -> None:
    """Linear time is checked in bench/hostile.py; here pytest-timeout still catches a runaway."""
    for prompt in ("## t\n<t>\n" * 20_000, "## t\n```\n" * 20_000, "## t\nUsage:\n<t>" + "<a>" * 60_000 + "</t>"):
        assert {tool["function"]["name"] for tool in parse_client_tools(prompt).tools} <= {"t"}


# --- history ---------------------------------------------------------------------------------------------------


def load_history() -> list[dict[str, Any]]:
    return json.loads((FIXTURES / "cline_history.json").read_text())  # type: ignore[no-any-return]


def text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content)
    return content or ""


def squash(text: str) -> str:
    return "".join(text.split())


def test_history_fixture() -> None:
    history = load_history()
    native = history_to_native(history, parse_client_tools(CLINE))
    assert [message["role"] for message in native] == ["user", "assistant", "tool", "user", "assistant", "tool",
                                                       "user"]
    assert native[0] is history[0]  # untouched
    first, second = native[1]["tool_calls"], native[4]["tool_calls"]
    assert [call["function"]["name"] for call in first + second] == ["read_file", "replace_in_file"]
    assert json.loads(first[0]["function"]["arguments"]) == {"path": "src/math.ts"}
    diff = json.loads(second[0]["function"]["arguments"])["diff"]
    assert diff.startswith("------- SEARCH\nexport function add") and diff.endswith("+++++++ REPLACE")
    assert native[2]["tool_call_id"] == first[0]["id"] and native[5]["tool_call_id"] == second[0]["id"]
    assert first[0]["id"] != second[0]["id"]
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", call["id"]) for call in first + second)
    assert native[1]["content"] == ("<thinking>\nThe failing test is for add(), so I should look at the implementation "
                                    "in src/math.ts first.\n</thinking>")
    assert native[2]["content"].startswith("export function add(a: number, b: number): number {\n  return a - b;")
    assert native[3]["content"][0]["text"].startswith("<environment_details>")
    assert history_to_native(load_history(), parse_client_tools(CLINE)) == native  # the same ids every time


def test_history_loses_no_text() -> None:
    """Every character outside the tool XML and the result headers is still there, in order."""
    history = load_history()
    native = history_to_native(history, parse_client_tools(CLINE))
    blocks = re.compile(r"<(read_file|replace_in_file)>.*?</\1>", re.S)
    headers = re.compile(r"\[\w+ for '[^']*'\] Result:")
    before = "".join(headers.sub("", blocks.sub("", text_of(message["content"]))) for message in history)
    after = "".join(text_of(message["content"]) for message in native)
    assert squash(after) == squash(before)
    # ...and the XML's text is in the arguments.
    xml = "".join(match.group() for message in history for match in blocks.finditer(text_of(message["content"])))
    values = "".join(value for message in native for call in message.get("tool_calls", [])
                     for value in json.loads(call["function"]["arguments"]).values())
    assert squash(re.sub(r"</?\w+>", "", xml)) == squash(values)


def exchange(assistant: str, user: Any) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": assistant}, {"role": "user", "content": user}]


def test_string_results_and_user_text_after_them() -> None:
    messages = exchange("Listing.\n\n<list_files>\n<path>src</path>\n<recursive>true</recursive>\n</list_files>",
                        "[list_files for 'src'] Result:\nsrc/a.ts\nsrc/b.ts\n\n<environment_details>\n"
                        "# Current Mode\nACT MODE\n</environment_details>")
    native = history_to_native(messages, parse_client_tools(CLINE))
    assert [message["role"] for message in native] == ["assistant", "tool", "user"]
    assert json.loads(native[0]["tool_calls"][0]["function"]["arguments"]) == {"path": "src", "recursive": True}
    assert native[1]["content"] == "src/a.ts\nsrc/b.ts"
    assert native[2]["content"] == "<environment_details>\n# Current Mode\nACT MODE\n</environment_details>"


def test_two_calls_one_run_one_skipped() -> None:
    messages = exchange(
        "<read_file>\n<path>a.ts</path>\n</read_file>\n\n<read_file>\n<path>b.ts</path>\n</read_file>",
        [{"type": "text", "text": "[read_file for 'a.ts'] Result:"}, {"type": "text", "text": "A"},
         {"type": "text", "text": "Tool [read_file] was not executed because a tool has already been used in this "
                                  "message. Only one tool may be used per message."},
         {"type": "text", "text": "The user approved and added: hurry up"}])
    native = history_to_native(messages, parse_client_tools(CLINE))
    assert [message["role"] for message in native] == ["assistant", "tool", "tool", "user"]
    assert native[0]["content"] is None
    assert native[1]["content"] == "A"
    assert native[2]["content"].startswith("Tool [read_file] was not executed")
    assert native[3]["content"] == [{"type": "text", "text": "The user approved and added: hurry up"}]


def test_a_call_without_a_result_stays_text() -> None:
    messages = exchange("Hm.\n<read_file>\n<path>a.ts</path>\n</read_file>",
                        [{"type": "text", "text": "[TASK RESUMPTION] This task was interrupted."}])
    assert history_to_native(messages, parse_client_tools(CLINE)) == messages
    messages = exchange("<read_file>\n<path>a.ts</path>\n</read_file>\n<list_files>\n<path>.</path>\n</list_files>",
                        "[read_file for 'a.ts'] Result:\nA")
    native = history_to_native(messages, parse_client_tools(CLINE))
    assert [call["function"]["name"] for call in native[0]["tool_calls"]] == ["read_file"]
    assert native[0]["content"] == "<list_files>\n<path>.</path>\n</list_files>"


def test_roo_nested_arguments_and_invoke_form() -> None:
    roo = parse_client_tools(ROO)
    messages = exchange(
        "<ask_followup_question>\n<question>Which file?</question>\n<follow_up>\n<suggest>a.ts</suggest>\n"
        "<suggest>b.ts</suggest>\n</follow_up>\n</ask_followup_question>",
        [{"type": "text", "text": "[ask_followup_question for 'Which file?'] Result:"},
         {"type": "text", "text": "<answer>\na.ts\n</answer>"}])
    native = history_to_native(messages, roo)
    assert json.loads(native[0]["tool_calls"][0]["function"]["arguments"]) == {
        "question": "Which file?", "follow_up": {"suggest": ["a.ts", "b.ts"]}}
    assert native[1]["content"] == "<answer>\na.ts\n</answer>"
    # An attribute cannot be held by the schema: the value stays text rather than losing it.
    messages[0]["content"] = messages[0]["content"].replace("<suggest>b.ts", '<suggest mode="code">b.ts')
    arguments = json.loads(history_to_native(messages, roo)[0]["tool_calls"][0]["function"]["arguments"])
    assert arguments["follow_up"] == '<suggest>a.ts</suggest>\n<suggest mode="code">b.ts</suggest>'
    invoke = exchange('<function_calls>\n<invoke name="write_to_file">\n<parameter name="path">x.txt</parameter>\n'
                      '<parameter name="content">hi</parameter>\n<parameter name="line_count">1</parameter>\n'
                      "</invoke>\n</function_calls>", "[write_to_file for 'x.txt'] Result:\nsaved")
    call = history_to_native(invoke, roo)[0]["tool_calls"][0]["function"]
    assert (call["name"], json.loads(call["arguments"])) == ("write_to_file",
                                                              {"path": "x.txt", "content": "hi", "line_count": 1})


def test_history_without_tools_is_unchanged() -> None:
    history = load_history()
    assert history_to_native(history, parse_client_tools("no tools here")) == history


# --- native calls back as XML -----------------------------------------------------------------------------------

ROUND_TRIP_SCHEMA = {"type": "object", "properties": {
    "path": {"type": "string"}, "content": {"type": "string"},
    "paths": {"type": "array", "items": {"type": "string"}},
    "options": {"type": "object", "properties": {"mode": {"type": "string"}, "depth": {"type": "string"}}}}}


@pytest.mark.parametrize("arguments", [
    {"path": "src/app.ts"},
    {"path": "a b", "content": "line 1\n  line 2\n"},
    {"content": "\nstarts and ends with breaks\n\n"},
    {"paths": ["a.ts", "b.ts"], "options": {"mode": "fast", "depth": "2"}},
    {"content": "if a < b and c > d: </path> <x>"},
])
@pytest.mark.parametrize("style", ["cline", "roo", "unknown"])
def test_native_to_xml_round_trips_through_parse_elements(arguments: dict[str, Any], style: str) -> None:
    xml = native_to_xml([("tool", arguments)], style)
    assert xml.startswith("<tool>\n") and xml.endswith("\n</tool>")
    assert parse_elements(xml[len("<tool>") : -len("</tool>")], ROUND_TRIP_SCHEMA) == arguments
    segments = parse(DIALECTS["roo_xml"], "Sure.\n\n" + xml, {"tool": ROUND_TRIP_SCHEMA})
    assert [(s.name, s.arguments) for s in segments if isinstance(s, Call)] == [("tool", arguments)]


def test_native_to_xml_in_the_clients_shapes() -> None:
    roo = parse_client_tools(ROO)
    xml = native_to_xml([("ask_followup_question", {"question": "Which?", "follow_up": {"suggest": ["a", "b"]}}),
                         ("use_mcp_tool", {"server_name": "w", "tool_name": "f", "arguments": {"city": "Oslo"}}),
                         ("write_to_file", {"path": "n.txt", "content": "one\ntwo", "line_count": 2})], "roo", roo)
    assert xml == ("<ask_followup_question>\n<question>Which?</question>\n<follow_up>\n<suggest>a</suggest>\n"
                   "<suggest>b</suggest>\n</follow_up>\n</ask_followup_question>\n\n"
                   '<use_mcp_tool>\n<server_name>w</server_name>\n<tool_name>f</tool_name>\n<arguments>\n{\n  "city": '
                   '"Oslo"\n}\n</arguments>\n</use_mcp_tool>\n\n'
                   "<write_to_file>\n<path>n.txt</path>\n<content>\none\ntwo\n</content>\n<line_count>2</line_count>\n"
                   "</write_to_file>")
    assert native_to_xml([("execute_command", {"command": "ls", "requires_approval": False, "task_progress": None})],
                         "cline") == ("<execute_command>\n<command>ls</command>\n<requires_approval>false"
                                      "</requires_approval>\n</execute_command>")
    assert native_to_xml([("read_file", {"path": "a"}), ("read_file", {"path": "b"})], "invoke") == (
        '<function_calls>\n<invoke name="read_file">\n<parameter name="path">a</parameter>\n</invoke>\n'
        '<invoke name="read_file">\n<parameter name="path">b</parameter>\n</invoke>\n</function_calls>')


def test_native_to_xml_and_back_through_the_history() -> None:
    """What the model called natively, written as the client's XML and sent back as history, is the same call."""
    roo = parse_client_tools(ROO)
    files = [{"path": "a.ts", "line_range": ["1-5", "9-9"]}, {"path": "b.ts"}]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"args": {"file": files}}),
        ("ask_followup_question", {"question": "Go?", "follow_up": {"suggest": ["yes", "no"]}}),
        ("insert_content", {"path": "x.ts", "line": 0, "content": "// end\n"})]
    for name, arguments in calls:
        messages = exchange(native_to_xml([(name, arguments)], "roo", roo), f"[{name}] Result:\nok")
        call = history_to_native(messages, roo)[0]["tool_calls"][0]["function"]
        assert (call["name"], json.loads(call["arguments"])) == (name, arguments)


def test_inline_backticks_do_not_hide_the_next_tools() -> None:
    prompt = ("## format_code\nDescription: Formats code; wrap snippets in ``` fences.\nParameters:\n"
              "- path: (required) The file\n\n## lint\nDescription: Lints.\nParameters:\n- path: (required) The file\n"
              "\n# Notes\n```\nunclosed")
    assert list(functions(parse_client_tools(prompt))) == ["format_code", "lint"]


PROMPT_TOKENS = ["## t\n", "## u\n", "<t>", "</t>", "<u>\n", "</u>", "Description: x\n", "Parameters:\n",
                 "Required Parameters:\n", "- a: (required) x\n", "  - b: (optional) number y\n", "- c: z\n",
                 "```\n", "\n```", "====\n", "# H\n", "Usage:\n", "<a>1</a>", "<b>", "</b>", "<item>", "</item>",
                 '<s m="1">', "</s>", "true or false", "\n", "\t", "word "]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PROMPT_TOKENS), max_size=60))
def test_any_prompt_gives_well_formed_tools(tokens: list[str]) -> None:
    parsed = parse_client_tools("".join(tokens))
    assert (parsed.problem is None) == bool(parsed.tools)
    for tool in parsed.tools:
        parameters = tool["function"]["parameters"]
        assert set(parameters["required"]) <= set(parameters["properties"])
        json.dumps(tool)


RESULT_PARTS = ["[read_file for 'a.ts'] Result:", "file text", "Tool [read_file] was not executed.", "words",
                "<environment_details>\nE\n</environment_details>", "[list_files for '.'] Result:", "", "  "]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(RESULT_PARTS), max_size=8), st.booleans(), st.sampled_from(["", "Reading.\n", "ok"]))
def test_history_loses_no_text_whatever_the_user_turn_holds(parts: list[str], as_string: bool, before: str) -> None:
    call = "<read_file>\n<path>a.ts</path>\n</read_file>"
    content: Any = "\n".join(parts) if as_string else [{"type": "text", "text": part} for part in parts]
    messages = exchange(before + call, content)
    native = history_to_native(messages, parse_client_tools(CLINE))
    if len(native) == len(messages) and "tool_calls" not in native[0]:
        assert native == messages  # nothing reported for the call: untouched
        return
    assert native[1]["role"] == "tool" and native[1]["tool_call_id"] == native[0]["tool_calls"][0]["id"]
    header = "[read_file for 'a.ts'] Result:"
    user = text_of(content)
    out = "".join(text_of(message["content"]) for message in native)
    dropped = user.count(header) - out.count(header)  # the one header that became the tool message
    assert dropped in (0, 1)
    assert Counter(squash(out)) == Counter(squash(before + user.replace(header, "", dropped)))
