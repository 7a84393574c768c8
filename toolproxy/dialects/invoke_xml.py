"""The invoke family: a block of calls, each a tag naming the tool, holding one tag per argument.

    <function_calls><invoke name="NAME"><parameter name="P">v</parameter></invoke></function_calls>

Cline, Kilo Code and Roo Code carry Anthropic-style calls this way (seed 000), MiniMax-M2 inside
`<minimax:tool_call>`, DeepSeek V3.2/V4 as DSML (`<｜DSML｜tool_calls>`, `<｜DSML｜invoke name=..>`, V4.1
`<｜DSML｜ calls>`), MiniMax-M3 inside `<tool_call>` with its namespace token `]<]minimax[>[` before every tag
and each argument a tag of its own name (`<command>ls</command>`, objects and arrays as nested tags), and Kimi K3
in XTML, the same tree written with special tokens for brackets (`<|open|>call tool="f"<|sep|>`). They differ
only in data, so each is one `InvokeXmlDialect`: its wrappers, the token its tags must carry, the tag spelling,
the tag and attribute names.

What the whole family tolerates: a namespace or special token inside any tag (`<ns:invoke>`, `</|DSML|invoke>`),
special tokens between tags (MiniMax-M3's, and unknown ones of the same shapes, `tokens.py`), extra attributes,
a JSON object as the whole body of an invoke (V4.1), and a namespaced tool name (`default_api:read_file`) unless
the request declares it so. Values are typed by an attribute when the schema does not say string: DSML's
`string="false"` and K3's `type="number"` hold JSON. Everything else is `schema.py`'s, as for every dialect.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolproxy.dialects.base import Markup, ToolIndex
from toolproxy.dialects.block import BlockScanner, pad_newlines, render_value
from toolproxy.dialects.cursor import literal
from toolproxy.dialects.invoke_reader import InvokeReader
from toolproxy.dialects.invoke_tags import ANGLE, MAX_TAG, NAMESPACE, TagSyntax, token_prefix
from toolproxy.dialects.tokens import TOKEN


@dataclass(frozen=True, slots=True)
class InvokeXmlDialect:
    name: str
    wrappers: tuple[str, ...]  # tag names of the block around the calls; a prefixed `ns:function_calls` counts too
    bare: bool  # whether an invoke without a wrapper is a call
    token: str = ""  # a word every tag's special-token prefix must hold (`DSML`); "" for any prefix or none
    syntax: TagSyntax = ANGLE
    invoke: str = "invoke"  # the call's tag, and its attribute that names the tool
    tool_attribute: str = "name"
    parameter: str = "parameter"  # an argument's tag, and its attribute that names the key
    key_attribute: str = "name"
    tagged: bool = False  # an argument may also be a tag of its own name (MiniMax-M3), anchored by the schema
    # Whether its chat template writes a line break around each value, or none (MiniMax-M2, DeepSeek V3.2's DSML):
    # then a line break on one side only is the value's own (`base.trim_value`).
    layout: bool = True
    lead: tuple[str, ...] = ()  # markup that may stand right before the block (any of it, repeated) and goes with it
    trail: tuple[str, ...] = ()  # markup that may follow the block's end and goes with it
    openers: tuple[str, ...] = ()  # literals only its calls begin with, when not `<wrapper>`

    # It holds back any unfinished tag (`<di` may yet be `<di:invoke`), not only the start of a marker.
    holds_only_markers = False

    @property
    def prefix(self) -> str:
        return token_prefix(self.token) if self.token else NAMESPACE

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        # Every call holds the token, or, as a tag name, a wrapper (prefix and all) or the invoke.
        if self.token:
            return (self.token,)
        if self.syntax != ANGLE:
            return (self.syntax.open,)
        return (*self.wrappers, self.invoke) if self.bare else self.wrappers

    @property
    def markup(self) -> Markup:
        syntax = self.syntax
        openers = self.openers or (*(f"{syntax.open}{wrapper}{syntax.end}" for wrapper in self.wrappers),
                                   *((f"{syntax.open}{self.invoke} ",) if self.bare else ()))
        closers = (*(f"{syntax.close}{wrapper}{syntax.end}" for wrapper in self.wrappers),
                   f"{syntax.close}{self.invoke}{syntax.end}", f"{syntax.close}{self.parameter}{syntax.end}")
        wrappers = () if self.openers else tuple((f"{syntax.open}{wrapper}{syntax.end}",
                                                  f"{syntax.close}{wrapper}{syntax.end}") for wrapper in self.wrappers)
        return Markup(openers, closers if not self.openers else (), wrappers)

    def scanner(self, tools: ToolIndex) -> BlockScanner:
        return BlockScanner(self.name, hint(self), MAX_TAG, lambda: InvokeReader(self, tools))

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """One call inside this dialect's first wrapper, as Cline's prompt and MiniMax-M2's chat template write
        it (with this dialect's tag spelling and names)."""
        o, c, e = self.syntax.open, self.syntax.close, self.syntax.end
        token = f"｜{self.token}｜" if self.token else ""
        parameters = "".join(f'{o}{token}{self.parameter} {self.key_attribute}="{key}"{e}'
                             f"{pad_newlines(render_value(value), not self.layout)}{c}{token}{self.parameter}{e}\n"
                             for key, value in arguments.items())
        wrapper = self.wrappers[0]
        return (f'{o}{token}{wrapper}{e}\n{o}{token}{self.invoke} {self.tool_attribute}="{name}"{e}\n{parameters}'
                f"{c}{token}{self.invoke}{e}\n{c}{token}{wrapper}{e}")


@functools.cache
def hint(dialect: InvokeXmlDialect) -> re.Pattern[str]:
    """Where a block may open. An opener is skipped in C, by the regex, only when the text already shows the
    reader refusing it: a wrapper closed at once whose next tag (past white space and tokens) is not an invoke,
    or whose first tag is another opener, or is an invoke and then an opener; or such a bare invoke. Floods of
    openers cost no Python step each; anything less certain is left to the reader, so streaming and one-shot
    parsing still agree."""
    o, c, e = (re.escape(marker) for marker in (dialect.syntax.open, dialect.syntax.close, dialect.syntax.end))
    prefix = dialect.prefix
    wrappers = "|".join(re.escape(wrapper) for wrapper in sorted(dialect.wrappers, key=len, reverse=True))
    invoke = re.escape(dialect.invoke)
    names = f"(?:{wrappers}|{invoke})" if dialect.bare else f"(?:{wrappers})"
    after_name = rf"(?=\s|{literal(dialect.syntax.end)}|\Z)"
    opener = rf"\s*{o}[ \t]{{0,4}}{prefix}{names}(?:\s|{e})"
    head = rf'\s+{re.escape(dialect.tool_attribute)}="[^"<>]{{0,64}}"[^<>]{{0,64}}?{e}'
    another_wrapper = rf"\s*{o}[ \t]{{0,4}}{prefix}(?:{wrappers})(?:\s|{e})"
    # White space and special tokens (not the tag spelling's own) may stand between tags; the reader reads them.
    gap = rf"(?:\s|(?!{o}|{c}|{e}){TOKEN})*+"
    # A wrapper closed at once must be followed by an invoke, unless the text ends before that shows.
    arriving = r"(?s:.){0,72}+\Z"
    argument = r"[A-Za-z_]" if dialect.tagged else re.escape(dialect.parameter)
    tag_start = rf"(?:{c}[ \t]{{0,4}}{prefix}{invoke}|{o}[ \t]{{0,4}}{prefix}{argument})"
    # What an invoke's head must be followed by: a tag of the dialect's spelling (an argument or the invoke's end),
    # a JSON body, or the text's end.
    body = rf"(?:(?={head}{gap}(?:{tag_start}|\{{|{arriving}))|(?!{head}))"
    invoke_next = rf"{e}{gap}(?:{o}[ \t]{{0,4}}{prefix}{invoke}{after_name}{body}|{arriving})"
    wrapper_rule = (rf"(?:{wrappers}){after_name}(?:(?={invoke_next})|(?!{e}))(?!{e}(?:{another_wrapper}|\s*{o}"
                    rf"[ \t]{{0,4}}{prefix}{invoke}{head}{opener}))")
    invoke_rule = rf"{invoke}{after_name}{body}(?!{head}{opener})"
    rules = [wrapper_rule, invoke_rule] if dialect.bare else [wrapper_rule]
    # Markup that may lead the block (Kimi K3's response channel closing right before its tools) opens it too.
    # Every alternative begins with `<`, which stays outside the group: the scanner looks for it first.
    leads = "|".join(re.escape(marker[1:]) for marker in dialect.lead if marker.startswith("<"))
    lead = rf"(?:(?:{leads})\s*<)*+" if leads else ""
    return re.compile(rf"<{lead}{o[1:] if o.startswith('<') else o}[ \t]{{0,4}}{prefix}(?:{'|'.join(rules)})")
