"""An invoke-family argument's value (`invoke_reader.py`): the closing tag that ends it, whether its attributes say
it holds JSON, the attribute that holds it when its tag closes itself, and the value typed as the attributes and the
tool's schema say. Pure, as the whole package.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from toolproxy.dialects.base import decode_json, trim_value
from toolproxy.dialects.invoke_tags import NAMESPACE, TagSyntax
from toolproxy.dialects.tag_xml import element_value
from toolproxy.dialects.tokens import TOKEN, remove_tokens, strip_trailing_token

_TOKEN = re.compile(TOKEN)
_TEXT_TYPES = frozenset({"string", "str", "text"})


@functools.lru_cache(maxsize=256)
def closer(syntax: TagSyntax, prefix: str, local: str) -> re.Pattern[str]:
    """An argument's closing tag, with or without its prefix, spaced or not; where the dialect's tags carry a
    token, the token alone closes it too (`</｜DSML｜>`, as DeepSeek V4 sometimes writes)."""
    name = rf"(?:(?:{prefix})?{re.escape(local)}|{prefix})" if prefix != NAMESPACE else rf"{prefix}{re.escape(local)}"
    return re.compile(rf"{re.escape(syntax.close)}[ \t]{{0,4}}{name}[ \t]{{0,4}}{re.escape(syntax.end)}")


def is_json_typed(attributes: Mapping[str, str]) -> bool:
    """Whether an argument's attributes say its value is JSON: DSML's `string="false"`, K3's `type="number"`."""
    return attributes.get("string") == "false" or attributes.get("type", "string").lower() not in _TEXT_TYPES


def attribute_value(attributes: Mapping[str, str], key_attribute: str) -> str | None:
    """The value of a self-closing argument: its `value` attribute, else its one attribute besides the key and the
    typing ones (DSML's `string="true"`, K3's `type`); None when there is no single one."""
    if "value" in attributes:
        return attributes["value"]
    rest = [value for name, value in attributes.items()
            if name not in (key_attribute, "type") and not (name == "string" and value in ("true", "false"))]
    return rest[0] if len(rest) == 1 else None


def _types(schema: Any) -> set[str]:
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    if isinstance(kind, list):
        return {str(item) for item in kind}
    return {kind} if isinstance(kind, str) else set()


# A declared tool's name right inside a wrapper, then its arguments as JSON, perhaps in a code fence:
# `<｜DSML｜toolcall>read_file` + "```json" + `{"path": "a.py"}` + "```".
_NAMED_HEAD = re.compile(r"([A-Za-z_][\w.\-]{0,63})[ \t]*(?:\n[ \t]*)?(```[\w-]{0,16}[ \t]*\n[ \t]*)?")
_FENCE_SO_FAR = re.compile(r"`{1,3}[\w-]{0,16}[ \t]*\Z")


def named_json_head(text: str, start: int, tools: Mapping[str, Any]) -> tuple[str, int, bool] | bool | None:
    """(the tool's name, where its JSON object begins, whether a fence opened) at `start`; True while the text
    so far may still become one, None when it cannot."""
    head = _NAMED_HEAD.match(text, start)
    if head is None:
        return None
    if head.end() == len(text) or (head.group(2) is None and _FENCE_SO_FAR.match(text, head.end())):
        return True
    if head.group(1) not in tools or text[head.end()] != "{":
        return None
    return head.group(1), head.end(), head.group(2) is not None


def typed_value(raw: str, schema: Any, json_typed: bool, tokens: bool, paired: bool = False) -> Any:
    """The value as written, or the JSON it holds when its attributes say so (`json_typed`) and the schema does not
    declare a string; nested tags where the schema says object or array (or special tokens mark them, `tokens`:
    MiniMax-M3); `paired`: the family's template writes no layout around values (`base.trim_value`)."""
    types = _types(schema)
    if json_typed and "string" not in types:
        try:
            return decode_json(raw.strip())
        except ValueError:
            pass
    value = strip_trailing_token(raw) if tokens else raw
    if tokens and _TOKEN.search(value) is not None:
        value = remove_tokens(value)
        if not types:
            schema = {"type": "array" if value.strip().startswith("<item>") else "object"}
    return element_value(value, schema, paired) if schema else trim_value(value, paired)
