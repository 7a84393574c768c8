"""Tags as the invoke family writes them, in either spelling: angle brackets (`<invoke name="f">`, `</invoke>`) or
Kimi K3's XTML, where three special tokens stand for the brackets (`<|open|>call tool="f"<|sep|>`,
`<|close|>call<|sep|>`).

A tag name may carry a prefix: an XML namespace (`<minimax:tool_call>`, `<ns:invoke>`), or, in a dialect that
says so, a special token written inside the bracket, as DeepSeek's DSML does with full-width or ASCII bars and, in
V4.1, a space
(`<｜DSML｜invoke`, `</|DSML|parameter>`, `<｜DSML｜ invoke`). Every piece is bounded, so reading a tag costs at most
`MAX_TAG` characters.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from toolproxy.dialects.block import Outcome

MAX_TAG = 1024  # longest tag, attributes included; a longer one is not markup of ours
# One or two bars, full-width, ASCII or double; a space beside each is tolerated (`< | DSML | invoke`, as some
# clients and servers space special tokens out).
_BARS_OPEN, _BARS_CLOSE = r"(?:[|｜‖][ \t]?){1,2}", r"(?:[ \t]?[|｜‖]){1,2}"
# A namespace (`<ns:invoke>`); a dialect whose tags carry a special token has `token_prefix` instead.
NAMESPACE = r"(?:[A-Za-z_][\w.\-]{0,31}+:)?"
# Either, with any word between the bars: what a tag may carry at most (the readers' superset, for tests).
PREFIX = rf"(?:[A-Za-z_][\w.\-]{{0,31}}:|{_BARS_OPEN}[A-Za-z_]\w{{0,31}}{_BARS_CLOSE}[ \t]?)?"
_NAME = r"[A-Za-z_][\w.\-]{0,63}"
# A value in double, single or typographic quotes (DeepSeek V4 writes `name=“get_pages”`,
# syt2/paper-chat-for-zotero#28), or bare.
_ATTRIBUTE = re.compile(r"""\s+([\w.:\-]{1,64})\s*=\s*(?:"([^"]*)"|'([^']*)'|“([^“”<>]*)”|([^\s"'“”=<>`]+))""")
_TAG_TAIL = re.compile(r"\s*\Z")
_SELF_CLOSING = re.compile(r"\s*/\s*\Z")
_PARTIAL_PREFIX = re.compile(rf"[ \t]{{0,4}}(?:{_BARS_OPEN}(?:[A-Za-z_]\w{{0,31}}(?:{_BARS_CLOSE}[ \t]?)?)?)?[ \t]?\Z")
_ENTITIES = (("&quot;", '"'), ("&apos;", "'"), ("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))


@dataclass(frozen=True, slots=True)
class TagSyntax:
    """How a tag opens, how a closing tag opens, and how either ends."""

    open: str
    close: str
    end: str


ANGLE = TagSyntax("<", "</", ">")
XTML = TagSyntax("<|open|>", "<|close|>", "<|sep|>")


def token_prefix(word: str) -> str:
    """The prefix of a dialect whose every tag carries the special token `word` (`｜DSML｜`, `|DSML|`)."""
    return rf"(?:{_BARS_OPEN}{re.escape(word)}{_BARS_CLOSE}[ \t]?)"


@dataclass(frozen=True, slots=True)
class Tag:
    closing: bool
    qualified: str  # as written, prefix included
    local: str  # without the prefix
    attributes: dict[str, str]
    end: int
    empty: bool = False  # self-closing: `<parameter name="cmd" value="ls"/>`


@functools.cache
def _head(syntax: TagSyntax, prefix: str) -> re.Pattern[str]:
    """The start of a tag up to its name: (closing marker, prefix, name)."""
    return re.compile(rf"(?:({re.escape(syntax.close)})|{re.escape(syntax.open)})[ \t]{{0,4}}({prefix})({_NAME})")


@functools.cache
def _stops(syntax: TagSyntax) -> re.Pattern[str]:
    """What matters inside a tag after its name: a quote (skipped to its pair), its end, or a `<` that is not."""
    return re.compile(rf"""{re.escape(syntax.end)}|["'<>]""")


def read_tag(text: str, position: int, syntax: TagSyntax = ANGLE, prefix: str = NAMESPACE) -> Tag | Outcome:
    """The tag at `position`, with its attributes; a tag end inside a quoted attribute value does not end it."""
    head = _head(syntax, prefix).match(text, position)
    if head is None:
        return Outcome.MORE if _may_come(text, position, syntax) else Outcome.BAD
    end = _tag_end(text, head.end(), position + MAX_TAG, syntax)
    if isinstance(end, Outcome):
        return end
    inside = text[head.end() : end - len(syntax.end)]
    empty = _SELF_CLOSING.search(inside)
    attributes = attributes_of(inside[: empty.start()] if empty else inside)
    closing, prefix_text, local = head.groups()
    if attributes is None or (empty and closing):
        return Outcome.BAD
    return Tag(bool(closing), prefix_text + local, local, attributes, end, empty is not None)


def _may_come(text: str, position: int, syntax: TagSyntax) -> bool:
    """Whether the rest of the text, too short to be a tag's head, begins one (`<`, `<|op`, `<｜DSML｜`)."""
    if len(text) - position > 80:  # (checked before slicing: a slice to the end of a long reply is not free)
        return False
    rest = text[position:]
    for marker in (syntax.close, syntax.open):
        if marker.startswith(rest) or (rest.startswith(marker) and _PARTIAL_PREFIX.match(rest, len(marker))):
            return True
    return False


def _tag_end(text: str, position: int, limit: int, syntax: TagSyntax) -> int | Outcome:
    """Index just past the end of the tag whose name ends at `position`."""
    stops = _stops(syntax)
    while (stop := stops.search(text, position, limit)) is not None:
        found = stop.group()
        if found == syntax.end:
            return stop.end()
        if found in "<>":
            # Only the beginning of the tag's end, cut off by the end of the text so far, may still become it.
            arriving = syntax.end.startswith(text[stop.start() : limit]) and limit >= len(text)
            return Outcome.MORE if arriving and found == syntax.end[0] else Outcome.BAD
        quote = text.find(found, stop.end(), limit)
        if quote < 0:
            break
        position = quote + 1
    return Outcome.MORE if len(text) < limit else Outcome.BAD


def attributes_of(inside: str) -> dict[str, str] | None:
    """`name="x" type='y'` as a dict, entities decoded; None when anything else is there."""
    attributes: dict[str, str] = {}
    position = 0
    while not _TAG_TAIL.match(inside, position):
        found = _ATTRIBUTE.match(inside, position)
        if found is None:
            return None
        key, *values = found.groups()
        value = next(value for value in values if value is not None)
        if "&" in value:
            for entity, character in _ENTITIES:
                value = value.replace(entity, character)
        attributes[key] = value
        position = found.end()
    return attributes


@dataclass(frozen=True, slots=True)
class InvokeGrammar:
    """An invoke-family dialect's variant as data (`invoke_xml.InvokeXmlDialect` is one): what `invoke_reader`
    reads and `invoke_xml` finds blocks by."""

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
    named: bool = False  # a call may also be a tag named after a declared tool, its arguments tags of their names
    # Whether its chat template writes a line break around each value, or none (MiniMax-M2, DeepSeek V3.2's DSML):
    # then a line break on one side only is the value's own (`base.trim_value`).
    layout: bool = True
    lead: tuple[str, ...] = ()  # markup that may stand right before the block (any of it, repeated) and goes with it
    trail: tuple[str, ...] = ()  # markup that may follow the block's end and goes with it
    openers: tuple[str, ...] = ()  # literals only its calls begin with, when not `<wrapper>`

    @property
    def prefix(self) -> str:
        return token_prefix(self.token) if self.token else NAMESPACE
