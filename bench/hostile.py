"""Hostile input that must stay cheap (reliability #20, #23, #29): a client's catastrophic regex in a tool schema
validated against model output, the prompt-mode request transform on long conversations, and defusing markup in
a long tool result. Prints milliseconds and the time ratio per doubling of size (linear: about 2).

Targets: the row-20 schema (`(a+)+$`, 30-character argument) under 100 ms; the transform's ratio per doubling
under 2.5. Also argument repair on a megabyte of adversarial almost-JSON (under 1 s) and client system prompts
full of heading spam (under 500 ms): their tests no longer time them, since a test must not assert wall-clock time.
Last, each hostile request through real gunicorn, and the longest its worker's event loop ran without switching
(on the loop thread's CPU clock, observe/blocking.py): the rule is 100 ms.

    .venv/bin/python bench/hostile.py
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import workload
from bench.processes import start_gunicorn, start_upstream
from toolproxy.clients.prompt import parse_client_tools
from toolproxy.meaning import schema
from toolproxy.meaning.json_repair import repair_arguments
from toolproxy.transform.markup import defuse
from toolproxy.transform.request_transform import to_prompt_mode

MB = 1 << 20
TOOL = {"type": "function", "function": {"name": "read", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}}}}


def best_ms(work: Callable[[], object], repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times) * 1000


def schemas() -> None:
    cases = {
        "pattern (a+)+$": ({"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}},
                           {"s": "a" * 30 + "!"}),
        "patternProperties (a+)+$": ({"type": "object", "patternProperties": {"^(a+)+$": {"type": "integer"}},
                                      "additionalProperties": False}, {"a" * 30 + "!": 1}),
        "propertyNames (a+)+$": ({"type": "object", "propertyNames": {"pattern": "^(a+)+$"}}, {"a" * 30 + "!": 1}),
    }
    for label, (parameters, arguments) in cases.items():
        schema.validate(arguments, parameters)  # the validator is built once per schema: time the checks
        elapsed = best_ms(lambda parameters=parameters, arguments=arguments: schema.validate(arguments, parameters))
        print(f"{'schema: ' + label:44} {elapsed:9.3f} ms   {'ok' if elapsed < 100 else 'OVER 100 ms'}")


REPAIR_INPUTS = {
    "unclosed objects": '{"a":[' * 175_000,
    "quotes": "'" * 1_000_000,
    "unterminated string": '{"a": "' + "x" * 1_000_000,
    "trailing comma": '{"a": "' + "x" * 1_000_000 + '",}',
    "escaped newlines": '{"a": "' + "\\n" * 500_000 + '",}',
    "escaped single quotes": "{'a': '" + "\\'" * 500_000 + "'}",
    "backslashes": "{'a': '" + "\\" * 1_000_000,
    "escaped double quotes": '{"a": "' + '\\"' * 500_000,
}
PROMPTS = {
    "headings with tags": "## t\n<t>\n" * 20_000,
    "headings with fences": "## t\n```\n" * 20_000,
    "usage with 60,000 tags": "## t\nUsage:\n<t>" + "<a>" * 60_000 + "</t>",
}


def repairs_and_prompts() -> None:
    for label, text in REPAIR_INPUTS.items():
        elapsed = best_ms(lambda text=text: repair_arguments(text))
        print(f"{'repair: ' + label:44} {elapsed:9.1f} ms   {'ok' if elapsed < 1000 else 'OVER 1000 ms'}")
    for label, prompt in PROMPTS.items():
        elapsed = best_ms(lambda prompt=prompt: parse_client_tools(prompt))
        print(f"{'client prompt: ' + label:44} {elapsed:9.1f} ms   {'ok' if elapsed < 500 else 'OVER 500 ms'}")


def conversation(size: int) -> dict:
    """A prompt-mode request whose tool results and user turns add up to `size` characters, markup included."""
    result = ("line of a file with <tool_call> and </tool_response> in it and a < b [TOOL_CALLS] here\n" * 64)
    messages: list[dict] = []
    index = 0
    while sum(len(str(message.get("content") or "")) for message in messages) < size:
        call_id = f"c{index}"
        messages += [{"role": "user", "content": "next " + result[:200]},
                     {"role": "assistant", "content": "", "tool_calls": [
                         {"id": call_id, "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": call_id, "content": result}]
        index += 1
    return {"model": "m", "messages": messages, "tools": [TOOL]}


def doubling(label: str, make: Callable[[int], object], run: Callable[[object], object]) -> None:
    previous = None
    for megabytes in (1, 2, 4, 8):
        data = make(megabytes * MB)
        elapsed = best_ms(lambda data=data: run(data))
        ratio = f"{elapsed / previous:5.2f}" if previous else "    -"
        print(f"{label + f' {megabytes} MB':44} {elapsed:9.1f} ms   x{ratio} per doubling")
        previous = elapsed


def wide_tool(name: str, properties: int) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {
        f"p{index}": {"type": "string", "description": "a field " * 8} for index in range(properties)}}}}


def blocking_inputs() -> list[tuple[str, bytes]]:
    """(what, request body) for each hostile request within the configured limits."""
    def body(model: str, tools: list[Any], **extra: Any) -> bytes:
        return workload.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}], "tools": tools,
                               **extra})

    turns = [{"role": "user" if index % 2 == 0 else "assistant", "content": "word " * 2000} for index in range(1500)]
    return [
        ("7 MiB tool schema (70,000 properties): 400", body("bench-small", [wide_tool("huge", 70_000)])),
        ("4,999-property schema, first time: checked", body("bench-small", [wide_tool("wide", 4_998)])),
        ("two 4,999-property schemas, first time", body("bench-small", [wide_tool("a", 4_998), wide_tool("b", 4_998)])),
        ("8 MB answer with a call", body("bench-8mb", workload.TOOLS)),
        ("1 MB of adversarial almost-JSON calls", body("bench-adversarial", workload.TOOLS)),
        ("15 MiB transcript", workload.dumps({"model": "bench-small", "messages": turns})),
    ]


def loop_blocking() -> None:
    """Each hostile request, then the worker's longest stretch on its event loop without switching."""
    upstream = start_upstream()
    with tempfile.TemporaryDirectory() as data:
        proxy = start_gunicorn("toolproxy", "app:app", upstream.port, data, workers=1, settings={
            "TOOLPROXY_DEBUG_ROUTES": "1", "TOOLPROXY_STREAM_STRATEGY": "incremental"})
        url = f"http://127.0.0.1:{proxy.port}"
        try:
            for title, data_bytes in [("warm-up", workload.request_body("bench-small", tools=True)),
                                      *blocking_inputs()]:
                worst_blocked(url)
                status = post(url, data_bytes)
                print(f"{title:52} status {status}   worst loop stretch {worst_blocked(url):6.1f} ms")
        finally:
            proxy.stop()
            upstream.stop()


def post(url: str, body: bytes) -> int:
    request = urllib.request.Request(f"{url}/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def worst_blocked(url: str) -> float:
    with urllib.request.urlopen(f"{url}/debug/runtime", timeout=60) as response:
        return float(json.loads(response.read())["worst_blocked_ms"])


def main() -> None:
    schemas()
    repairs_and_prompts()
    doubling("prompt-mode transform", conversation, lambda body: to_prompt_mode(dict(body), "hermes"))  # type: ignore[arg-type]
    line = "see <tool_call>{} </tool_call> and <|im_start|> or a < b\n"
    doubling("defuse tool result", lambda size: (line * (size // len(line) + 1))[:size],
             lambda text: defuse(text, ("read",)))  # type: ignore[arg-type]
    loop_blocking()


if __name__ == "__main__":
    main()
