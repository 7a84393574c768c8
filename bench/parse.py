"""Parsing speed per dialect on a 1 MB reply, and on adversarial input, with the 4n/n time ratio that shows
linear behaviour. Targets (issue 3): every 1 MB input under 200 ms, time at 4n under 5x time at n.

The adversarial rows run through automatic detection, so every dialect of the chain is measured on each: among
them, each dialect's own opener repeated without ever completing, and all of those openers interleaved.

    .venv/bin/python bench/parse.py
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolproxy.dialects import deepseek
from toolproxy.dialects.registry import DIALECTS
from toolproxy.meaning.extraction import extract

MB = 1 << 20
TOOLS = {"exec": {"type": "object", "properties": {"command": {"type": "string"}}},
         "read": {"type": "object", "properties": {"path": {"type": "string"}}},
         "tool_a": {"type": "object", "properties": {"a": {"type": "string"}}}}


def reply(name: str, size: int) -> str:
    """Prose with one call of the dialect every ~2 KB, the way a long agent answer looks."""
    dialect = DIALECTS[name]
    render = getattr(dialect, "render_call", None)
    call = render("exec", {"command": "ls -la /srv"}) if render else ""
    unit = ("The build failed in step three; the log says the linker could not find libfoo. " * 24) + "\n" + call
    return (unit * (size // len(unit) + 1))[:size]


# Each dialect's own opener, as its calls begin, with nothing after it that could complete a call.
OPENERS: dict[str, str] = {
    "deepseek": deepseek.CALLS_BEGIN + deepseek.CALL_BEGIN,
    "dsml": '<｜DSML｜tool_calls><｜DSML｜invoke name="tool_a">',
    "harmony": "<|start|>assistant<|channel|>",
    "mistral": "[TOOL_CALLS]",
    "llama3": "<|python_tag|>",
    "command_r": "<|START_ACTION|>",
    "granite": "<|tool_call|>",
    "internlm": "<|action_start|><|plugin|>",
    "gemma4": "<|tool_call>call:",
    "function_gemma": "<start_function_call>call:",
    "inkling": "tool_a<|content_invoke_tool_json|>{",
    "lfm2": "<|tool_call_start|>[",
    "llama4": "<|python_start|>[tool_a(",
    "apertus": "<|tools_prefix|>[",
    "phi4_mini": "functools",
    "granite_fc": "<function_call> {",
    "gigachat3": "<|message_sep|>\n\nfunction call<|role_sep|>\n{",
    "gigachat31": "<|function_call|>{",
    "kimi_k2": "<|tool_calls_section_begin|><|tool_call_begin|>",
    "kimi_k3": '<|open|>tools<|sep|><|open|>call tool="tool_a" index="0"<|sep|>',
    "minimax": "<minimax:tool_call>",
    "seed_oss": "<seed:tool_call><function=",
    "qwen3_coder": "<tool_call><function=",
    "functionary_v31": "<function=tool_a>",
    "glm": "<tool_call>",
    "olmo3": "<function_calls>\ntool_a(",
    "invoke_xml": '<function_calls><invoke name="tool_a">',
    "nemotron": "<TOOLCALL>[",
    "nemotron_mini": "<toolcall> {",
    "apriel": "<tool_calls>\n{",
    "hermes": "<tool_call>\n{",
    "longcat": "<longcat_tool_call>{",
    "qwen_tools": "<tools>[",
    "roo_xml": "<tool_a>",
    "functionary_v3": ">>>tool_a\n",
    "bracketed_name": "[tool_a]\n{",
    "called_function": '[Called function "tool_a" with args: {',
    "tool_code": "```tool_code\ntool_a(",
    "said_call": "[tool_call: tool_a for a 'x' and ",
    "pythonic": "\n[tool_a(a=",
    "json": "\n{",
}


def flood(unit: str) -> Callable[[int], str]:
    """`unit` repeated to `size` characters."""
    return lambda size: (unit * (size // len(unit) + 1))[:size]


ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "unclosed openers": lambda size: ("<tool_call><tools>{" * (size // 19 + 1))[:size],
    "deep brackets": lambda size: "[" * size,
    "no closing marker": lambda size: ("<tool_call>\n{\"name\": \"exec\", \"arguments\": {\"command\": \""
                                       + "x" * size)[:size],
    "tags without end": lambda size: ("<exec><command>" + "y" * size)[:size],
    "arg=val pairs": lambda size: ("[exec(" + "a=1, " * size)[:size],
    # The worst known for extraction (issue 24; bench/workload.adversarial_calls): calls opened, never closed.
    "almost-JSON calls": flood('{"name": "read", "arguments": {'),
    # The name-anchored fallback (meaning/anchor.py): declared names in markup whose arguments never come whole.
    "names in markup, nothing after": flood("<x>tool_a\n"),
    "names then JSON never closed": flood('<x>tool_a{"a": '),
    "names then keys never closed": flood("<x>tool_a\n<a>"),
    "names then almost-JSON never closed": flood("<|x|>tool_a{a:'"),
    **{f"{name} openers": flood(opener) for name, opener in OPENERS.items()},
    "openers interleaved": flood("".join(OPENERS.values())),
}


def seconds(parse: Callable[[], object], repeats: int = 5) -> float:
    """Best of five: on a shared, noisy machine the minimum is the figure that repeats."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        parse()
        times.append(time.perf_counter() - started)
    return min(times)


def row(label: str, make: Callable[[int], str], dialects: tuple[str, ...]) -> tuple[float, float]:
    small, large = make(MB // 4), make(MB)
    t_small = seconds(lambda: extract(small, TOOLS, dialects))
    t_large = seconds(lambda: extract(large, TOOLS, dialects))
    verdict = "ok" if t_large < 0.2 and t_large < 5 * t_small else "SLOW"
    print(f"{label:34} {len(large) / MB / t_large:8.1f} {t_large * 1000:8.1f} {t_large / t_small:6.2f}  {verdict}")
    return t_large, t_large / t_small


def main() -> None:
    print(f"{'input (1 MB)':34} {'MB/s':>8} {'ms':>8} {'4n/n':>6}")
    for name in DIALECTS:
        row(f"{name} reply", functools.partial(reply, name), (name,))
    row("all dialects, automatic", lambda size: reply("hermes", size), ())
    for label, make in ADVERSARIAL.items():
        row(f"adversarial: {label}", make, ())


if __name__ == "__main__":
    main()
