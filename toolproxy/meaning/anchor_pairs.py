"""Arguments written as key and value pairs in a form no dialect knows, read by the tool's own parameter names.

Whatever a format calls its tags (`<parameter=path>`, `<｜DSML｜parameter name="path" string="true">`, `<path>`,
`<arg_key>path</arg_key><arg_value>`, `<|open|>argument key="path"<|sep|>`, `parameter=path` with its brackets
lost, `path="x"`, `path: x`), the key is one of the names the tool's schema declares, standing in markup. A value
written between tags ends at its closer: a closing tag or token whose word is the key, a word of the key's own
markup, or one of the words formats use for values (`</parameter>`, `</｜DSML｜parameter>`, `/parameter` alone on a
line, `</arg_value>`, `<|close|>`); a value after `=` or `:` ends with its line, or with its quotes.

Readers only move forward and every search is bounded, so a call costs at most the text it walks over.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from toolproxy.dialects.base import trim_value
from toolproxy.dialects.tokens import TOKEN
from toolproxy.meaning.anchor_markup import is_markup
from toolproxy.meaning.anchor_object import opens_quote, quoted

MAX_PAIRS = 64
_KEY_REACH = 256  # how far after the name (or the last value) the next key is looked for
_VALUE_REACH = 32768  # how far a value's closer is looked for (a failed read costs this much, `anchor.MAX_TRIED` times)
_CLOSERS_LOOKED_AT = 64  # closers of other words (`</div>` in a value of HTML) passed over before giving up
# After a key: attributes (their values in straight or typographic quotes) and the tag's end, or a closing tag and
# the value's opening tag (GLM's `<arg_value>`), or a token (a value between tags: `block`); or `=` / `:` (a value
# on the rest of the line: `inline`); or a line break (a tag whose brackets were lost: `block`).
_BLOCK_AFTER_KEY = re.compile(
    rf"[\"'\u201d\u2019]?(?:[ \t]+[\w:-]{{1,32}}=(?:\"[^\"\n]{{0,64}}\"|'[^'\n]{{0,64}}'"
    rf"|\u201c[^\u201d\n]{{0,64}}\u201d|[\w-]{{1,32}}))*+"
    rf"[ \t]*(?:>|{TOKEN})"
    r"|[\"']?>?[ \t]*</[^<>\n]{1,64}>[ \t\r\n]*<[^<>\n/]{0,48}(?i:value)[^<>\n]{0,16}>"
    r"|>?[ \t]*\n")
_INLINE_AFTER_KEY = re.compile(r"[\"']?[ \t]?[=:][ \t]?")
_OPENING_TAG = re.compile(r"[ \t]*<[A-Za-z][\w:|-]{0,47}>")
# A closer: a closing tag, its word the last one in it (`</｜DSML｜parameter>`, `</steptml:parameter>`), a special
# token, or a closing word alone on its line with its brackets lost (`/parameter`, `parameter>`).
_CLOSER = re.compile(rf"</[^<>\n]{{0,32}}?(\w{{1,64}})[ \t]*>|{TOKEN}"
                     r"|(?m:^[ \t]*(?:/([\w-]{1,64})>?|([\w-]{1,64})>)[ \t]*$)")
_TAG_AFTER_TOKEN = re.compile(rf"(?:[ \t]*+{TOKEN})*+[ \t]*+</[^<>\n]{{0,32}}?(\w{{1,64}})[ \t]*>")
_VALUE_WORDS = frozenset({"parameter", "param", "parameters", "argument", "arg", "arg_value", "value", "arguments",
                          "args"})
_WORD = re.compile(r"[A-Za-z_]\w{0,31}")
_INLINE_STOP = re.compile(rf"[\n\r]|</|{TOKEN}")  # a value on the rest of its line ends at a closer or token


@dataclass(frozen=True, slots=True)
class Pairs:
    values: dict[str, str]
    end: int  # just past the last value's closer, or the end of its line


@lru_cache(maxsize=256)
def _key_pattern(keys: frozenset[str]) -> re.Pattern[str]:
    names = sorted(keys, key=len, reverse=True)
    return re.compile(r"(?<![\w-])(?:" + "|".join(re.escape(name) for name in names) + r")(?![\w-])")


def names_a_key(text: str, start: int, end: int, keys: frozenset[str]) -> bool:
    """Whether one of `keys` stands as a word in `text[start:end]`."""
    return bool(keys) and _key_pattern(keys).search(text, start, end) is not None


def read_pairs(text: str, start: int, keys: frozenset[str], calls: re.Pattern[str]) -> Pairs | None:
    """The pairs from `start` on, each key one of `keys` with only markup before it, up to a key that repeats or
    markup that names a tool (`calls`: the next call begins); None when there is none, or a value has no end."""
    if not keys:
        return None
    pattern = _key_pattern(keys)
    values: dict[str, str] = {}
    position = start
    while len(values) < MAX_PAIRS:
        key = pattern.search(text, position, min(len(text), position + _KEY_REACH))
        if key is None or key.group() in values or not is_markup(text, position, key.start()):
            break
        if values and calls.search(text, position, key.start()):
            break
        read = _value(text, key, text[position : key.start()], pattern)
        if read is None:
            return None
        values[key.group()], position = read
    return Pairs(values, position) if values else None


def _value(text: str, key: re.Match[str], head: str, keys: re.Pattern[str]) -> tuple[str, int] | None:
    block = _BLOCK_AFTER_KEY.match(text, key.end())
    if block is not None:
        words = (key.group(), *_WORD.findall(head[-64:]), *_VALUE_WORDS)
        return _block_value(text, _past_repeated_tag(text, block.end(), head), words)
    inline = _INLINE_AFTER_KEY.match(text, key.end())
    return _inline_value(text, inline.end(), keys) if inline is not None else None


def _past_repeated_tag(text: str, start: int, head: str) -> int:
    """`start` moved past an opening tag that also stands in the markup before the key: a server that lost GLM's
    `<arg_key>` and `<arg_value>` left the call's own tag in their places (`<tool_call>Bash\n<tool_call>command\n
    <tool_call>ls</arg_value>`), and the tag opens the value, it is not in it."""
    tag = _OPENING_TAG.match(text, start)
    return tag.end() if tag is not None and tag.group().strip() in head else start


def _block_value(text: str, start: int, words: tuple[str, ...]) -> tuple[str, int] | None:
    """The value up to its closer, without layout (`trim_value`), and where the closer ends."""
    closers = _CLOSER.finditer(text, start, min(len(text), start + _VALUE_REACH))
    for _, closer in zip(range(_CLOSERS_LOOKED_AT), closers, strict=False):
        word = closer.group(1) or closer.group(2) or closer.group(3)
        if word is None:  # a token; the value's closing tag may follow it (`x]<]minimax[>[</path>`)
            tag = _TAG_AFTER_TOKEN.match(text, closer.end())
            end = tag.end() if tag is not None and tag.group(1).endswith(words) else closer.end()
            return trim_value(text[start : closer.start()]), end
        if word.endswith(words):  # `</longcat_arg_value>` is an `arg_value`
            return trim_value(text[start : closer.start()]), closer.end()
    return None  # no closer: cut short, or not a value


def _inline_value(text: str, start: int, keys: re.Pattern[str]) -> tuple[str, int] | None:
    """A quoted value (`anchor_object.quoted`), or the rest of its line up to a closer, a token or the
    next key written `key=` or `key:` (`path=a.txt limit=5`), without trailing separators."""
    if opens_quote(text, start):
        return quoted(text, start, min(len(text), start + _VALUE_REACH))
    stop = _INLINE_STOP.search(text, start, min(len(text), start + _VALUE_REACH))
    end = stop.start() if stop else len(text)
    for key in keys.finditer(text, start, end):
        if text[key.start() - 1] in " \t" and _INLINE_AFTER_KEY.match(text, key.end()):
            end = key.start()
            break
    value = text[start:end].rstrip(" \t,;")
    return (value, start + len(value)) if value.strip() else None
