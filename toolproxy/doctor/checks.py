"""What the doctor asks the upstream, and how it reads each answer: the probe tool and questions, a streamed answer
put back together, and the verdict on the calls an answer made. Pure: doctor/run.py does the asking."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from toolproxy.meaning import schema
from toolproxy.meaning.extraction import Policy, extract

# A read tool, the one every agent has (and the demo model answers), with an integer to check the types.
PARAMETERS = {"type": "object", "properties": {"path": {"type": "string", "description": "the file to read"},
                                               "max_lines": {"type": "integer", "description": "lines to read"}},
              "required": ["path"], "additionalProperties": False}
FUNCTION: dict[str, Any] = {"name": "read_file", "description": "Read a text file", "parameters": PARAMETERS}
TOOL = {"type": "function", "function": FUNCTION}
TOOLS = {"read_file": PARAMETERS}
ASK_CALL = "Read the first 20 lines of the file README.md with the read_file tool."
ASK_NOTHING = "Say hello in five words."
STRICT = Policy(invalid_arguments="text")  # a call counts only when its arguments fit the schema
# A call left in content means the server's parser is off: what each kind needs to parse it.
PARSER_FLAGS = {
    "vllm": "--enable-auto-tool-choice --tool-call-parser {parser}",
    "sglang": "--tool-call-parser {parser}",
    "llamacpp": "--jinja (and a chat template with tools)",
    "llama-cpp-python": "--chat_format chatml-function-calling (or a format with tools for this model)",
    "ollama": "a Modelfile TEMPLATE with a tools section",
    "lmstudio": "a model with tool support in LM Studio (the hammer badge)",
}
# vLLM's and SGLang's parser names for the dialects toolproxy reads.
PARSER_NAMES = {"hermes": "hermes", "qwen_tools": "hermes", "mistral": "mistral", "llama3": "llama3_json",
                "pythonic": "pythonic", "qwen3_coder": "qwen3_coder", "glm": "glm45", "kimi": "kimi_k2",
                "deepseek": "deepseek_v3", "harmony": "openai", "gemma4": "gemma4"}


@dataclass(slots=True)
class Verdict:
    """What one answer did with the probe tool."""

    calls: list[tuple[str, Any]] = field(default_factory=list)  # (name, arguments as decoded, or the raw text)
    valid: int = 0  # calls to read_file whose arguments are JSON of the right types
    problems: list[str] = field(default_factory=list)
    content: str = ""
    content_dialect: str | None = None  # a dialect toolproxy finds a valid call of in the content
    snippet: str = ""  # that call as the model wrote it

    @property
    def summary(self) -> str:
        if not self.calls:
            return "no tool_calls"
        shown = ", ".join(f"{name}({json.dumps(arguments)[:60]})" for name, arguments in self.calls)
        return f"tool_calls {shown}" + (f"; {'; '.join(self.problems)}" if self.problems else "")


def body(model: str, question: str, stream: bool = False, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": question}], "tools": [TOOL],
            "temperature": 0, "max_tokens": 256, "stream": stream, **extra}


def judge(message: dict[str, Any]) -> Verdict:
    """The native calls of one answer's message, and any call left in its content."""
    verdict = Verdict(content=str(message.get("content") or ""))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        name, raw = str(function.get("name") or ""), function.get("arguments")
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            verdict.calls.append((name, raw))
            verdict.problems.append(f"arguments are not JSON: {str(raw)[:60]!r}")
            continue
        verdict.calls.append((name, arguments))
        problems = ["not a declared tool"] if name not in TOOLS else schema.validate(arguments, TOOLS[name])
        verdict.problems.extend(f"{name}: {problem}" for problem in problems)
        verdict.valid += not problems
    found = extract(verdict.content, TOOLS, policy=STRICT)
    if found.calls:
        verdict.content_dialect, verdict.snippet = found.calls[0].dialect, found.calls[0].source.strip()[:200]
    return verdict


def prompt_verdict(content: str, dialect: str) -> Verdict:
    """A prompt-mode answer: the calls toolproxy reads in it with the dialect pinned."""
    verdict = Verdict(content=content)
    found = extract(content, TOOLS, (dialect,), STRICT)
    verdict.calls = [(call.name, call.arguments) for call in found.calls]
    verdict.problems = list(found.failures)
    verdict.valid = len(found.calls)
    if found.calls:
        verdict.content_dialect, verdict.snippet = dialect, found.calls[0].source.strip()[:200]
    return verdict


def assemble(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """A streamed answer's message, as a client puts it together from the deltas."""
    content = ""
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            content += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(call.get("index", 0), {"function": {"name": "", "arguments": ""}})
                function = call.get("function") or {}
                slot["function"]["name"] += function.get("name") or ""
                slot["function"]["arguments"] += function.get("arguments") or ""
    return {"content": content, "tool_calls": [calls[index] for index in sorted(calls)]}


def carries_output(chunk: dict[str, Any]) -> bool:
    """Whether a chunk brings content or a call (the first one is the time to first token)."""
    return any((choice.get("delta") or {}).get("content") or (choice.get("delta") or {}).get("tool_calls")
               for choice in chunk.get("choices") or [])


def parser_flag(kind: str, dialect: str) -> str:
    flag = PARSER_FLAGS.get(kind, "the server's tool-call parser")
    return flag.format(parser=PARSER_NAMES.get(dialect, dialect))
