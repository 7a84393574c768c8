"""The markup around one tool call, read off a chat template's own rendering of a known call: what opens it, how
the name and the arguments are written (a JSON object, one JSON object holding both, or one key and value per
parameter with the markup around each), what closes it. A marker spec for a form no dialect has; what cannot be
read is said, never guessed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

_DECODER = json.JSONDecoder()
_MAX_OBJECTS = 64  # `{` tried as the start of the arguments: a rendered call holds a handful


@dataclass(frozen=True, slots=True)
class MarkerSpec:
    """How the template writes a call; `{id}` stands where it writes the call's id. Concatenated in order
    (opener, name, name_end, arguments, closer) the pieces give back the template's rendering."""

    opener: str
    name_end: str
    arguments: str  # "json": an object after the name; "json_call": one object with both; "parameters"
    closer: str
    name_key: str = ""  # json_call: the keys of the name and of the arguments
    arguments_key: str = ""
    key_start: str = ""  # parameters: before each key
    string_value: tuple[str, str] = ("", "")  # parameters: between a key and a string value, and after the value
    other_value: tuple[str, str] = ("", "")  # the same for a value of another type (a number)
    separator: str = ""  # parameters: between one parameter and the next

    def as_dict(self) -> dict[str, Any]:
        """The pieces that apply to its kind of arguments, for a status page."""
        kept = {"opener", "name_end", "arguments", "closer"}
        kept |= {"json_call": {"name_key", "arguments_key"}, "parameters": {"key_start", "string_value",
                                                                            "other_value", "separator"}}.get(
            self.arguments, set())
        return {item.name: getattr(self, item.name) for item in fields(self) if item.name in kept}


@dataclass(frozen=True, slots=True)
class Probe:
    """The known call the template was asked to write."""

    name: str
    arguments: Mapping[str, Any]  # one string and one number, in that order
    call_id: str


def read_markup(markup: str, probe: Probe) -> tuple[MarkerSpec | None, list[str]]:
    """The spec of the call in `markup` (the template's rendering of `probe`), and what could not be read."""
    start = markup.find(probe.name)
    if start < 0:
        return None, ["the rendered call does not hold the tool's name (the template may write only an id)"]
    whole = _json_call(markup, probe) or _json_arguments(markup, start, probe) or _parameters(markup, start, probe)
    if whole is None:
        return None, ["how the arguments are written could not be read (neither a JSON object nor one key and "
                      "value per parameter)"]
    return _with_id(whole, probe.call_id), []


def _objects(markup: str, start: int) -> list[tuple[int, int, Any]]:
    """Every JSON object that starts at a `{` from `start` on: (start, end, value)."""
    found: list[tuple[int, int, Any]] = []
    position = markup.find("{", start)
    while position >= 0 and len(found) < _MAX_OBJECTS:
        try:
            value, end = _DECODER.raw_decode(markup, position)
            found.append((position, end, value))
        except ValueError:
            pass
        position = markup.find("{", position + 1)
    return found


def _json_call(markup: str, probe: Probe) -> MarkerSpec | None:
    for start, end, value in _objects(markup, 0):
        if not isinstance(value, dict):
            continue
        name_keys = [key for key, item in value.items() if item == probe.name]
        argument_keys = [key for key, item in value.items() if _same_arguments(item, probe.arguments)]
        if name_keys and argument_keys:
            return MarkerSpec(markup[:start], "", "json_call", markup[end:], name_key=name_keys[0],
                              arguments_key=argument_keys[0])
    return None


def _json_arguments(markup: str, name_start: int, probe: Probe) -> MarkerSpec | None:
    name_end = name_start + len(probe.name)
    for start, end, value in _objects(markup, name_end):
        if _same_arguments(value, probe.arguments):
            return MarkerSpec(markup[:name_start], markup[name_end:start], "json", markup[end:])
    return None


def _same_arguments(value: Any, arguments: Mapping[str, Any]) -> bool:
    if isinstance(value, str):  # written as a JSON string holding the object
        try:
            value = json.loads(value)
        except ValueError:
            return False
    return isinstance(value, dict) and value == dict(arguments)


@dataclass(frozen=True, slots=True)
class _Parameter:
    key_start: int
    key_end: int
    value_start: int
    value_end: int
    is_string: bool


def _parameters(markup: str, name_start: int, probe: Probe) -> MarkerSpec | None:
    name_end = name_start + len(probe.name)
    found = [_parameter(markup, name_end, key, value) for key, value in probe.arguments.items()]
    if len(found) != 2 or None in found:
        return None
    first, second = sorted((item for item in found if item is not None), key=lambda item: item.key_start)
    if first.value_end > second.key_start or first.is_string == second.is_string:
        return None
    key_start = _whole_tokens_from_start(_common_suffix(markup[name_end:first.key_start],
                                                        markup[first.value_end:second.key_start]))
    between = markup[first.value_end:second.key_start - len(key_start)]  # after the first value, separator
    after_last = markup[second.value_end:]  # after the second value, closer
    string, other = (first, second) if first.is_string else (second, first)
    string_before, other_before = (markup[string.key_end:string.value_start],
                                   markup[other.key_end:other.value_start])
    # A quote around string values (Gemma 4's <|"|>): the string's lead-in is the other's plus the quote, and
    # the same quote follows the string value.
    quote = string_before[len(other_before):] if string_before.startswith(other_before) else ""
    first_rest, last_rest = between, after_last
    if quote and first.is_string and between.startswith(quote):
        first_rest = between[len(quote):]
    elif quote and second.is_string and after_last.startswith(quote):
        last_rest = after_last[len(quote):]
    elif quote:
        return None
    value_end = _whole_tokens_to_end(_common_prefix(first_rest, last_rest))
    return MarkerSpec(markup[:name_start], markup[name_end:first.key_start - len(key_start)], "parameters",
                      last_rest[len(value_end):], key_start=key_start,
                      string_value=(string_before, quote + value_end), other_value=(other_before, value_end),
                      separator=first_rest[len(value_end):])


def _parameter(markup: str, start: int, key: str, value: Any) -> _Parameter | None:
    key_start = markup.find(key, start)
    if key_start < 0:
        return None
    written = value if isinstance(value, str) else json.dumps(value)
    value_start = markup.find(written, key_start + len(key))
    if value_start < 0:
        return None
    return _Parameter(key_start, key_start + len(key), value_start, value_start + len(written),
                      isinstance(value, str))


def _common_suffix(left: str, right: str) -> str:
    length = 0
    while length < min(len(left), len(right)) and left[-1 - length] == right[-1 - length]:
        length += 1
    return left[len(left) - length:]


def _common_prefix(left: str, right: str) -> str:
    length = 0
    while length < min(len(left), len(right)) and left[length] == right[length]:
        length += 1
    return left[:length]


_PAIRS = (("<", ">"), ("[", "]"))


def _whole_tokens_from_start(text: str) -> str:
    """`text` without a leading piece that ends a tag begun before it (`>\\n<parameter name="` -> `\\n<parameter
    name="`): a marker is a whole tag."""
    for opening, closing in _PAIRS:
        close = text.find(closing)
        if close >= 0 and (text.find(opening) < 0 or close < text.find(opening)):
            text = text[close + 1:]
    return text


def _whole_tokens_to_end(text: str) -> str:
    """`text` without a trailing piece that begins a tag ended after it."""
    for opening, closing in _PAIRS:
        if text.rfind(opening) > text.rfind(closing):
            text = text[:text.rfind(opening)]
    return text


def _with_id(spec: MarkerSpec, call_id: str) -> MarkerSpec:
    """The call's id, where the template writes it, as `{id}`: it is the call's, not the format's."""
    def placeholder(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(call_id, "{id}")
        if isinstance(value, tuple):
            return tuple(placeholder(item) for item in value)
        return value

    return MarkerSpec(**{item.name: placeholder(getattr(spec, item.name)) for item in fields(spec)})
