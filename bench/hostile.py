"""Hostile input that must stay cheap (reliability #20, #23, #29): a client's catastrophic regex in a tool schema
validated against model output, the prompt-mode request transform on long conversations, and defusing markup in
a long tool result. Prints milliseconds and the time ratio per doubling of size (linear: about 2).

Targets: the row-20 schema (`(a+)+$`, 30-character argument) under 100 ms; the transform's ratio per doubling
under 2.5.

    .venv/bin/python bench/hostile.py
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolproxy.meaning import schema
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


def main() -> None:
    schemas()
    doubling("prompt-mode transform", conversation, lambda body: to_prompt_mode(dict(body), "hermes"))  # type: ignore[arg-type]
    line = "see <tool_call>{} </tool_call> and <|im_start|> or a < b\n"
    doubling("defuse tool result", lambda size: (line * (size // len(line) + 1))[:size],
             lambda text: defuse(text, ("read",)))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
