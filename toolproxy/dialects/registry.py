"""Every dialect by name, and the order in which they are tried when none is pinned for a model.

Special tokens first (they collide with nothing), then the XML formats, whose values hold raw multi-line code
where another format's markup is likeliest to appear (a call found early protects its values from later
dialects), then JSON between markers, tag-per-tool XML (only declared tool names count), and bare JSON last.
Dialects that share a marker tell their blocks apart by what follows it (each opener's lookahead): Qwen3-Coder's
`<function=NAME>` needs `<parameter=`, Functionary's `{`; `<function_calls>` holds `<invoke>` for Cline and
Python calls for OLMo 3.

A family's members differ only in data (a wrapper, a token spelling, tag and attribute names), so a new wrapper is
one line here. The literals every room that looks for call markup without parsing it uses (`CALL_MARKERS` for the
leftover check, `WRAPPERS` for recovery, `CLOSERS` for defusing prompts) are gathered from the dialects' own
`markup` declarations below, never listed again elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from toolproxy.dialects.bare_json import BareJsonDialect
from toolproxy.dialects.base import Dialect
from toolproxy.dialects.command_r import CommandRDialect
from toolproxy.dialects.deepseek import DeepSeekDialect
from toolproxy.dialects.functionary import FunctionaryV3Dialect, FunctionaryV31Dialect
from toolproxy.dialects.gemma4 import Gemma4Dialect
from toolproxy.dialects.glm_xml import GlmTags, GlmXmlDialect
from toolproxy.dialects.harmony import HarmonyDialect
from toolproxy.dialects.inkling import InklingDialect
from toolproxy.dialects.invoke_tags import XTML
from toolproxy.dialects.invoke_xml import InvokeXmlDialect
from toolproxy.dialects.kimi_tokens import KimiDialect
from toolproxy.dialects.llama3 import Llama3Dialect
from toolproxy.dialects.marked_json import MarkedJsonDialect
from toolproxy.dialects.mistral import MistralDialect
from toolproxy.dialects.named_json import NamedJsonDialect
from toolproxy.dialects.prefixed_json import PrefixedJsonDialect
from toolproxy.dialects.pythonic import PythonicDialect
from toolproxy.dialects.qwen3_xml import Qwen3XmlDialect
from toolproxy.dialects.said_call import SaidCallDialect
from toolproxy.dialects.tag_xml import TagXmlDialect
from toolproxy.dialects.wrapped_calls import WrappedCallsDialect

T = TypeVar("T")

DIALECTS: dict[str, Dialect] = {
    "deepseek": DeepSeekDialect(),
    # DeepSeek V3.2/V4 DSML: the invoke family behind `<｜DSML｜` (full-width, ASCII or double bars; V4.1 spaced;
    # the wrapper misspelled as V4-Flash does, vllm-project/vllm#56141; a call also as a tag named after the tool, or
    # as the tool's name and JSON inside the wrapper).
    "dsml": InvokeXmlDialect("dsml", ("tool_calls", "function_calls", "calls", "tool_use", "toolcalls", "toolcall",
                                      "tool"), bare=True, token="DSML", named=True, layout=False,
                             openers=("<｜DSML｜", "<|DSML|", "<‖DSML‖", "<｜｜DSML")),
    "harmony": HarmonyDialect(),
    "mistral": MistralDialect(),
    "llama3": Llama3Dialect(),
    "command_r": CommandRDialect(),
    "granite": PrefixedJsonDialect("granite", "<|tool_call|>"),
    "internlm": MarkedJsonDialect("internlm", "<|action_start|><|plugin|>", "<|action_end|>"),
    "gemma4": Gemma4Dialect(),
    # FunctionGemma: Gemma 4's calls between its own markers, `<escape>` around strings.
    "function_gemma": Gemma4Dialect("function_gemma", "<start_function_call>",
                                    ("<end_function_call>", "</end_function_call>"), "<escape>", stripped=False),
    "inkling": InklingDialect(),
    "lfm2": WrappedCallsDialect("lfm2", "<|tool_call_start|>", "<|tool_call_end|>"),
    "llama4": WrappedCallsDialect("llama4", "<|python_start|>", "<|python_end|>"),
    "apertus": MarkedJsonDialect("apertus", "<|tools_prefix|>", "<|tools_suffix|>", named=True),
    # `functools` is an ordinary word: last of the special-token dialects (it needs a JSON list of calls).
    "phi4_mini": PrefixedJsonDialect("phi4_mini", "functools"),
    "granite_fc": PrefixedJsonDialect("granite_fc", "<function_call>", single=True),
    # GigaChat 3 writes a call as a message of its own: the separator token, the role `function call`, JSON;
    # GigaChat 3.1 puts one token before the JSON instead.
    "gigachat3": PrefixedJsonDialect("gigachat3", "<|message_sep|>\n\nfunction call<|role_sep|>", single=True),
    "gigachat31": PrefixedJsonDialect("gigachat31", "<|function_call|>", single=True),
    "kimi_k2": KimiDialect(),
    # Kimi K3's XTML: the invoke family with special tokens for brackets, `call`/`tool` and `argument`/`key`.
    "kimi_k3": InvokeXmlDialect("kimi_k3", ("tools",), bare=True, syntax=XTML, invoke="call",
                                tool_attribute="tool", parameter="argument", key_attribute="key",
                                lead=("<|open|>response<|sep|>", "<|close|>response<|sep|>"),
                                trail=("<|close|>message<|sep|>",)),
    # Before invoke_xml, which would take the bare <invoke> inside a MiniMax block and leave the wrapper. MiniMax-M3
    # writes `<tool_call>` (its namespace token before every tag, arguments as tags of their own names).
    "minimax": InvokeXmlDialect("minimax", ("minimax:tool_call", "tool_call"), bare=False, tagged=True, layout=False),
    # Before qwen3_coder, which would take the bare <function=...> inside and leave the wrapper.
    "seed_oss": Qwen3XmlDialect("seed_oss", "<seed:tool_call>", bare=False, layout=False),
    "qwen3_coder": Qwen3XmlDialect(),
    "functionary_v31": FunctionaryV31Dialect(),
    "glm": GlmXmlDialect(),
    # K2 Horizon: GLM's tags behind an `ifm|` prefix (a type tag before a value allowed), or Hermes JSON in its own
    # call tags; `<ifm|tool_calls>` around them (vLLM's k2_horizon parser).
    "k2_horizon": GlmXmlDialect("k2_horizon", GlmTags("ifm|", wrapper="tool_calls")),
    "k2_horizon_json": MarkedJsonDialect("k2_horizon_json", "<ifm|tool_call>", "</ifm|tool_call>",
                                         around=("<ifm|tool_calls>", "</ifm|tool_calls>")),
    "olmo3": WrappedCallsDialect("olmo3", "<function_calls>", "</function_calls>", lines=True),
    # dots.llm's wrapper around Cline's invokes; before invoke_xml, which would take the bare invoke inside and
    # leave the wrapper.
    "dots": InvokeXmlDialect("dots", ("dots_function_call",), bare=False, layout=False),
    "invoke_xml": InvokeXmlDialect("invoke_xml", ("function_calls",), bare=True),
    "nemotron": MarkedJsonDialect("nemotron", "<TOOLCALL>", "</TOOLCALL>"),
    "nemotron_mini": MarkedJsonDialect("nemotron_mini", "<toolcall>", "</toolcall>"),
    "apriel": MarkedJsonDialect("apriel", "<tool_calls>", "</tool_calls>"),
    "hermes": MarkedJsonDialect("hermes", "<tool_call>", "</tool_call>"),
    "longcat": MarkedJsonDialect("longcat", "<longcat_tool_call>", "</longcat_tool_call>"),
    "qwen_tools": MarkedJsonDialect("qwen_tools", "<tools>", "</tools>"),
    "roo_xml": TagXmlDialect(),
    # `>>>` starts quotes and prompts in prose: late, and only with a name, a line break and an object after it.
    "functionary_v3": FunctionaryV3Dialect(),
    # A declared tool's name between markers, then its JSON arguments and a closer: Qwen2.5-Coder drifting in LM
    # Studio (`[read]` ... `[/read]` or LM Studio's `[END_TOOL_REQUEST]`), the transcript line agents keep past
    # calls in, written as a call (Gemini 3.5 Flash behind ClawRouter).
    "bracketed_name": NamedJsonDialect("bracketed_name", "[", "]", ("[/{name}]", "[END_TOOL_REQUEST]")),
    "called_function": NamedJsonDialect("called_function", '[Called function "', '" with args:', ("]",)),
    # Gemini CLI's prompt examples, copied by the open models its forks drive (`[tool_call: glob for pattern 'x']`).
    "said_call": SaidCallDialect(),
    # Gemma 3's documented form, and Gemma 4's when it drifts (waybarrios/vllm-mlx#622): Python calls, one a line.
    "tool_code": WrappedCallsDialect("tool_code", "```tool_code", "```", lines=True),
    # Both start at a line-leading `[`, but pythonic needs a declared name and `(`, json a `{`.
    "pythonic": PythonicDialect(),
    "json": BareJsonDialect(),
}
DIALECT_NAMES = tuple(DIALECTS)
AUTO_ORDER = DIALECT_NAMES


def _gathered(items: Iterable[T]) -> tuple[T, ...]:
    return tuple(dict.fromkeys(items))


CALL_MARKERS: tuple[str, ...] = _gathered(marker for dialect in DIALECTS.values() for marker in dialect.markup.openers)
CLOSERS: tuple[str, ...] = _gathered(marker for dialect in DIALECTS.values() for marker in dialect.markup.closers)
WRAPPERS: tuple[tuple[str, str], ...] = _gathered(
    pair for dialect in DIALECTS.values() for pair in dialect.markup.wrappers)
