"""The tool-call format a model's own chat template states: the template is rendered (in the sandbox) with a short
conversation whose assistant turn is a known call, and again with a plain answer in its place; what differs is
the call's markup as the model writes it. The dialect is the one whose parser, pinned alone, reads exactly that
call back through the proxy's own extraction; the markup's spec (template_markup.py) says what opens and closes
it and how its arguments are written, for a form no dialect reads. What could not be derived is said."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolproxy.dialects.registry import AUTO_ORDER
from toolproxy.meaning.extraction import extract
from toolproxy.meaning.template_markup import MarkerSpec, Probe, read_markup
from toolproxy.meaning.template_sandbox import SandboxedTemplate, TemplateError

# Nine letters and digits: Mistral's templates refuse any other id.
PROBE = Probe("probe_tool", {"probe_text": "PROBE VALUE", "probe_count": 42}, "pr0be0001")
PROBE_SCHEMA = {"type": "object", "properties": {"probe_text": {"type": "string", "description": "Some text."},
                                                 "probe_count": {"type": "integer", "description": "A count."}},
                "required": ["probe_text", "probe_count"]}
TOOLS = [{"type": "function", "function": {"name": PROBE.name, "description": "A probe of the call format.",
                                           "parameters": PROBE_SCHEMA}}]
REPLY = "Probe reply."  # the plain answer rendered in the call's place; begins with no markup's first character
# Special tokens left beside a call (an end-of-call token the dialect leaves as text, Gemma 4's <|tool_response>).
_TOKEN = re.compile(r"<[|\uff5c][^<>\s]{0,64}>|<[^<>\s]{1,64}[|\uff5c]>|\[[A-Z_]{1,32}\]")


@dataclass(frozen=True, slots=True)
class TemplateFormat:
    dialect: str | None  # the registry's dialect that reads the template's own call exactly, if one does
    markers: MarkerSpec | None  # the markup around the call, as far as it could be read
    sample: str  # the template's rendering of the probe call
    problems: tuple[str, ...] = ()  # what could not be derived

    def as_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {"dialect": self.dialect}
        if self.dialect is None and self.markers is not None:
            status["markers"] = self.markers.as_dict()
        if self.problems:
            status["problems"] = list(self.problems)
        return status


@dataclass(frozen=True, slots=True)
class _Variant:
    label: str
    system: bool  # whether the conversation opens with a system message (some templates refuse one)
    string_arguments: bool  # arguments as the JSON string of the OpenAI wire, not an object (older templates)


_VARIANTS = (_Variant("with a system message", True, False), _Variant("without a system message", False, False),
             _Variant("arguments as a JSON string", True, True),
             _Variant("arguments as a JSON string, without a system message", False, True))


def derive(template: str, bos_token: str = "", eos_token: str = "") -> TemplateFormat:
    """The call format `template` states. Pure and bounded (template_sandbox.py): at most eight renderings."""
    try:
        compiled = SandboxedTemplate(template)
    except TemplateError as error:
        return TemplateFormat(None, None, "", (str(error),))
    problems: list[str] = []
    unread: TemplateFormat | None = None
    for variant in _VARIANTS:
        try:
            markup = written_call(compiled, PROBE, TOOLS, variant.system, variant.string_arguments,
                                  {"bos_token": bos_token, "eos_token": eos_token})
        except TemplateError as error:
            if error.at_limit:  # stopped at a limit: no other conversation would fare better
                return TemplateFormat(None, None, "", (str(error),))
            problems.append(f"{variant.label}: {error}")
            continue
        if PROBE.name not in markup:
            problems.append(f"{variant.label}: " + ("the template writes no tool call" if not markup else
                                                     "the rendered call does not hold the tool's name"))
            continue
        spec, unreadable = read_markup(markup, PROBE)
        dialect = match_dialect(markup)
        if dialect is not None:
            return TemplateFormat(dialect, spec, markup, tuple(unreadable))
        unread = unread or TemplateFormat(None, spec, markup, (
            *unreadable, "no dialect of the proxy reads the template's call exactly: the markers are its spec"))
    return unread or TemplateFormat(None, None, "", tuple(problems))


def written_call(compiled: SandboxedTemplate, call: Probe, tools: list[dict[str, Any]], system: bool = True,
                 string_arguments: bool = False, tokens: Mapping[str, str] | None = None) -> str:
    """The assistant turn's `call` as the template writes it: the rendering with the call, less what it shares
    with the rendering with a plain answer instead (the conversation before it, the end-of-turn token after)."""
    arguments = json.dumps(call.arguments) if string_arguments else dict(call.arguments)
    calling = {"role": "assistant", "content": "", "tool_calls": [
        {"id": call.call_id, "type": "function", "function": {"name": call.name, "arguments": arguments}}]}
    tokens = {"bos_token": "", "eos_token": "", **(tokens or {})}  # templates add them: undefined, they fail
    with_call = compiled.render(_variables(system, calling, tools, tokens))
    with_answer = compiled.render(_variables(system, {"role": "assistant", "content": REPLY}, tools, tokens))
    start, end = _differing(with_call, with_answer)
    return with_call[start:end].strip()


def _variables(system: bool, last: dict[str, Any], tools: list[dict[str, Any]],
               tokens: Mapping[str, str]) -> dict[str, Any]:
    """A fresh conversation each time (the sandbox lets templates change what they are given)."""
    messages = [{"role": "system", "content": "You are a helpful assistant."}] if system else []
    messages += [{"role": "user", "content": "Use the tool."}, last]
    return {"messages": messages, "tools": copy.deepcopy(tools), "add_generation_prompt": False, **tokens}


def _differing(left: str, right: str) -> tuple[int, int]:
    """Where `left` differs from `right` (start, end), widened to whole tags: two renderings that end in
    `<|call|>` and `<|return|>` share `|>`, which belongs to the call's closing token all the same."""
    start = 0
    limit = min(len(left), len(right))
    while start < limit and left[start] == right[start]:
        start += 1
    shared_end = 0
    while shared_end < limit - start and left[-1 - shared_end] == right[-1 - shared_end]:
        shared_end += 1
    end = len(left) - shared_end
    for opening, closing in (("<", ">"), ("[", "]")):
        if left.rfind(opening, 0, start) > left.rfind(closing, 0, start):
            start = left.rfind(opening, 0, start)
        if left.rfind(opening, start, end) > left.rfind(closing, start, end):
            close = left.find(closing, end)
            end = close + 1 if close >= 0 else end
    return start, end


def match_dialect(markup: str) -> str | None:
    """The first dialect, in the automatic order, that pinned alone reads exactly the probe call from `markup`
    through the proxy's extraction: that call, no recovery, no refusal, nothing left but special tokens."""
    return next((name for name in AUTO_ORDER if reads_probe(markup, name)), None)


def reads_probe(markup: str, dialect: str) -> bool:
    tools = {PROBE.name: PROBE_SCHEMA}
    extraction = extract(markup, tools, (dialect,))
    calls = extraction.calls
    if len(calls) != 1 or extraction.failures or any(issue.startswith("recovered:") for issue in extraction.issues):
        return False
    call = calls[0]
    if call.dialect != dialect or call.name != PROBE.name or call.arguments != dict(PROBE.arguments):
        return False
    return only_tokens(extraction.content() or "")


def only_tokens(text: str) -> bool:
    """Whether `text` holds nothing but special tokens and whitespace."""
    return not _TOKEN.sub("", text).strip()
