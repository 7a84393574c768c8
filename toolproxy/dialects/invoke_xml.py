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
from toolproxy.dialects.invoke_tags import ANGLE, MAX_TAG, InvokeGrammar
from toolproxy.dialects.tokens import TOKEN


@dataclass(frozen=True, slots=True)
class InvokeXmlDialect(InvokeGrammar):
    # It holds back any unfinished tag (`<di` may yet be `<di:invoke`), not only the start of a marker.
    holds_only_markers = False

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        # Every call holds the token, or, as a tag name, a wrapper (prefix and all) or the invoke.
        if self.token:
            return (self.token,)
        if self.syntax != ANGLE:
            return (self.syntax.open,)
        return (*self.wrappers, self.invoke) if self.bare else self.wrappers

    def may_hold_call(self, text: str) -> bool:
        """Where a wrapper is the marker, every call still holds its invoke tag (a tag named after the tool,
        `named`, and a token-marked dialect aside): the wrapper alone may be another dialect's (`<tool_call>`)."""
        if self.token or self.named or self.bare or self.syntax != ANGLE:
            return True
        return self.invoke in text

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
        names = tuple(sorted(name for name in tools if _TOOL_TAG.fullmatch(name))) if self.named else ()
        return BlockScanner(self.name, hint(self, names), MAX_TAG, lambda: InvokeReader(self, tools))

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


_TOOL_TAG = re.compile(r"[A-Za-z_][\w.\-]{0,63}")  # a tool name a tag can carry (`invoke_tags._NAME`)


@functools.lru_cache(maxsize=64)  # per dialect, and per the tools' names where calls may be tags named after them
def hint(dialect: InvokeXmlDialect, names: tuple[str, ...] = ()) -> re.Pattern[str]:
    """Where a block may open. An opener is skipped in C, by the regex, only when the text already shows the
    reader refusing it: a wrapper closed at once whose next tag (past white space and tokens) is not an invoke,
    or whose first tag is another opener, or is an invoke and then an opener; or such a bare invoke. Floods of
    openers cost no Python step each; anything less certain is left to the reader, so streaming and one-shot
    parsing still agree."""
    o, c, e = (re.escape(marker) for marker in (dialect.syntax.open, dialect.syntax.close, dialect.syntax.end))
    prefix = dialect.prefix
    wrappers = "|".join(re.escape(wrapper) for wrapper in sorted(dialect.wrappers, key=len, reverse=True))
    invoke = re.escape(dialect.invoke)
    tags = f"(?:{wrappers}|{invoke})" if dialect.bare else f"(?:{wrappers})"
    after_name = rf"(?=\s|{literal(dialect.syntax.end)}|\Z)"
    # The rest of a self-closing tag (`<parameter name="cmd" value="ls"/>`), for what follows it to be free.
    empty = rf"[^<>]{{0,128}}?/\s*{e}"
    opener = rf"\s*{o}[ \t]{{0,4}}{prefix}{tags}(?:{e}|\s(?!{empty}|[^<>]{{0,128}}+\Z))"
    head = rf'\s+{re.escape(dialect.tool_attribute)}="[^"<>]{{0,64}}"[^<>]{{0,64}}?{e}'
    another_wrapper = rf"\s*{o}[ \t]{{0,4}}{prefix}(?:{wrappers})(?:\s|{e})"
    # White space and special tokens (not the tag spelling's own, where it is written with tokens: XTML) may stand
    # between tags; the reader reads them.
    own = "|".join(re.escape(marker) for marker in (dialect.syntax.open, dialect.syntax.close, dialect.syntax.end)
                   if len(marker) > 2)
    gap = rf"(?:\s|(?!{own}){TOKEN})*+" if own else rf"(?:\s|{TOKEN})*+"
    # A wrapper closed at once must be followed by an invoke, unless the text ends before that shows.
    arriving = r"(?s:.){0,72}+\Z"
    argument = r"[A-Za-z_]" if dialect.tagged else re.escape(dialect.parameter)
    tag_start = (rf"(?:{c}[ \t]{{0,4}}{prefix}{invoke}|{o}[ \t]{{0,4}}{prefix}{argument}|"
                 rf"{o}[ \t]{{0,4}}{prefix}{invoke}\s{empty})")
    # What an invoke's head must be followed by: a tag of the dialect's spelling (an argument or the invoke's end),
    # a JSON body, or the text's end; nothing, when the invoke closes itself.
    self_closing = rf"\s+{re.escape(dialect.tool_attribute)}=\S{empty}"
    body = rf"(?:(?={self_closing})|(?={head}{gap}(?:{tag_start}|\{{|{arriving}))|(?!{head}))"
    open_head = rf"(?!{self_closing}){head}"  # an invoke that does not close itself: a body must follow
    # `named` dialects: a tag named after a declared tool, with nothing but its name in it; or, inside the wrapper,
    # the name itself and its JSON arguments.
    tool = rf"(?:{'|'.join(re.escape(name) for name in sorted(names, key=len, reverse=True))})"
    named = rf"{tool}\s*{e}"
    named_next = rf"|{o}[ \t]{{0,4}}{prefix}{named}|{tool}[ \t]*(?:\n|`|\{{)" if names else ""
    invoke_next = rf"{e}{gap}(?:{o}[ \t]{{0,4}}{prefix}{invoke}{after_name}{body}{named_next}|{arriving})"
    wrapper_rule = (rf"(?:{wrappers}){after_name}(?:(?={invoke_next})|(?!{e}))(?!{e}(?:{another_wrapper}|\s*{o}"
                    rf"[ \t]{{0,4}}{prefix}{invoke}{open_head}{opener}))")
    invoke_rule = rf"{invoke}{after_name}{body}(?!{open_head}{opener})"
    rules = [wrapper_rule, invoke_rule] if dialect.bare else [wrapper_rule]
    if names:
        rules.append(named)
    # Markup that may lead the block (Kimi K3's response channel closing right before its tools) opens it too.
    # Every alternative begins with `<`, which stays outside the group: the scanner looks for it first.
    leads = "|".join(re.escape(marker[1:]) for marker in dialect.lead if marker.startswith("<"))
    lead = rf"(?:(?:{leads})\s*<)*+" if leads else ""
    return re.compile(rf"<{lead}{o[1:] if o.startswith('<') else o}[ \t]{{0,4}}{prefix}(?:{'|'.join(rules)})")
