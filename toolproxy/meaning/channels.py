"""Channels and recipients as servers leak them into text. gpt-oss harmony: the analysis channel is reasoning, never
content, and channel headers are markup; a message addressed to a recipient (`to=functions.NAME`) is left whole
for the harmony dialect, which owns the calls, and so is a built-in tool's (`to=python`). Functionary v3.2:
`>>>all\n`, the header of a message to the user, is markup (its `>>>NAME` calls belong to functionary_v3).

With special tokens kept: `<|channel|>analysis<|message|>...<|end|>` is reasoning; for `final` and a `commentary`
preamble the header (`<|start|>assistant<|channel|>final<|message|>`) and the end token are markup, the body is
content. With them stripped the reply reads `analysis...assistantfinal...` or `analysis...assistantcommentary
to=functions.NAME json{...}`: the same split, recognised only when the reply opens with `analysis` and a later
`assistant` header names a channel, since an answer may well begin with the word "analysis". Linear: each token is
found once, every message header is bounded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from toolproxy.dialects.markers import markers_in

CHANNEL, START = "<|channel|>", "<|start|>"
TO_ALL = ">>>all\n"
# Tokens around the answer, markup wherever they stand, the text between them content. Kimi K3 answers in an XTML
# `response` channel and closes the message with a run of its own; with the channel's opener in the prompt (the
# generation prefix), a reply holds only its closer (its `tools` channel is the kimi_k3 dialect's, its `think`
# channel reasoning.MARKERS'). Command R7B answers between `<|START_RESPONSE|>` and `<|END_RESPONSE|>`, Cohere2MoE
# between `<|START_TEXT|>` and `<|END_TEXT|>`, Command R+ after `<|CHATBOT_TOKEN|>` up to `<|END_OF_TURN_TOKEN|>`
# (llama.cpp's tests/test-chat.cpp).
ANSWER_MARKUP = ("<|open|>response<|sep|>", "<|close|>response<|sep|>", "<|close|>message<|sep|>",
                 "<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>", "<|CHATBOT_TOKEN|>",
                 "<|END_OF_TURN_TOKEN|>")
_TOKENS = (CHANNEL, TO_ALL, *ANSWER_MARKUP)
_KINDS = ("analysis", "final", "commentary")
_HEADER_LIMIT = 256
_ROLE_LIMIT = 64
# A channel header: no token inside it, bounded, so each channel token costs a bounded look in C; a final channel
# may hold `<|constrain|>` (`final <|constrain|>json`, an answer in a format the request asked for). A call's
# header with it (`commentary to=functions.NAME <|constrain|>json`) is the dialect's, and is not visited at all.
_FINAL_CONSTRAINED = rf"\s{{0,8}}+final[^<]{{0,{_ROLE_LIMIT}}}+<\|constrain\|>[^<]{{0,{_ROLE_LIMIT}}}+"
_HEAD = re.compile(rf"<\|channel\|>({_FINAL_CONSTRAINED}|[^<]{{0,{_HEADER_LIMIT}}}+)<\|message\|>")
# A header that never got its message (`<|channel|>commentary to=assistant` before the real channel, llama.cpp's
# tests/test-chat.cpp): markup, as white space between messages is.
_DANGLING_HEAD = re.compile(rf"\s*+(?:<\|start\|>\w{{0,32}}+)?<\|channel\|>[^<]{{0,{_HEADER_LIMIT}}}+")
# A recipient in the role part with `<|start|>assistant` in the prompt (` to=functions.NAME<|channel|>analysis`):
# the message is a call, left whole for the harmony dialect.
# (`to=assistant` is the model addressing itself, never a call.)
_ROLE_RECIPIENT = re.compile(r"\bto=(?!assistant\b)[^\s<]{1,128}+\s{0,8}+\Z")
# What ends a message body: its end token, or the next message's start (the token is not consumed then).
_BODY_END = re.compile(r"<\|(?:end|return|call)\|>|<\|(?:start|channel)\|>")
_STRIPPED_ANALYSIS = re.compile(r"\s*analysis")
_STRIPPED_HEADER = re.compile(r"assistant(analysis|commentary|final)")


@dataclass(slots=True)
class Channels:
    answer: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    markup: list[str] = field(default_factory=list)


def split_channels(text: str) -> Channels:
    """The reply's answer, reasoning and markup pieces; the answer joined is the text itself when no channels."""
    # Both tokens looked for in one pass (two `in` over a 256 KB reply cost 150 us, their letters being common).
    present = markers_in(text, _TOKENS)
    if not present.isdisjoint(ANSWER_MARKUP):
        return _split_markup(text, ANSWER_MARKUP)
    if CHANNEL in present:
        return _split_tokens(text)
    if TO_ALL in present:
        pieces = text.split(TO_ALL)
        return Channels(pieces, [], [TO_ALL] * (len(pieces) - 1))
    opening = _STRIPPED_ANALYSIS.match(text)
    if opening is not None and _STRIPPED_HEADER.search(text, opening.end()):
        return _split_stripped(text, opening.end())
    return Channels([text])


def _split_markup(text: str, markers: tuple[str, ...]) -> Channels:
    """`text` with each of `markers` set aside as markup; linear: one search per marker from where the last ended."""
    out = Channels()
    position = 0
    found = {marker: text.find(marker) for marker in markers}
    while (present := [(index, marker) for marker, index in found.items() if index >= 0]):
        index, marker = min(present)
        out.answer.append(text[position:index])
        out.markup.append(marker)
        position = index + len(marker)
        for other, at in found.items():
            if 0 <= at < position:
                found[other] = text.find(other, position)
    out.answer.append(text[position:])
    return out


def _split_tokens(text: str) -> Channels:
    out = Channels()
    position = 0
    # Only well-formed headers are visited: channel tokens without one are skipped in C (a flood of them is cheap).
    for head in _HEAD.finditer(text):
        if head.start() < position:
            continue  # inside a message already taken
        header = head.group(1)
        start = _role_start(text, position, head.start())
        role = text[start + len(START) : head.start()] if start < head.start() else _bare_role(text, position, start)
        kind = header.split(maxsplit=1)[0] if header.strip() else ""
        if "to=" in header or "to=" in role or kind not in _KINDS:
            continue  # a call or a built-in tool's message: left whole for the dialects
        found = _BODY_END.search(text, head.end())
        stop = found.start() if found else len(text)
        after = found.end() if found and not found.group().endswith(("start|>", "channel|>")) else stop
        _between(out, text[position:start])
        if kind == "analysis":
            out.reasoning.append(text[head.end() : stop])
            out.markup.append(text[start:after])
        else:
            out.markup.append(text[start : head.end()])
            out.answer.append(text[head.end() : stop])
            out.markup.append(text[stop:after])
        position = after
    _between(out, text[position:])
    return out


def _between(out: Channels, piece: str) -> None:
    """Text between messages: white space there is layout, and so is a header without its message; anything else
    stays in the answer."""
    (out.markup if not piece.strip() or _DANGLING_HEAD.fullmatch(piece) else out.answer).append(piece)


def _bare_role(text: str, floor: int, channel: int) -> str:
    """The recipient written right before a channel token with no `<|start|>` (its role was in the prompt)."""
    found = _ROLE_RECIPIENT.search(text, max(floor, channel - 2 * _ROLE_LIMIT), channel)
    return found.group() if found else ""



def _role_start(text: str, floor: int, channel: int) -> int:
    """Where the message whose channel token is at `channel` starts: at its `<|start|>` when one opens its role
    header just before, else at the channel token."""
    start = text.rfind(START, max(floor, channel - _ROLE_LIMIT), channel)
    if start < 0 or "<|" in text[start + len(START) : channel]:
        return channel
    return start


def _split_stripped(text: str, body: int) -> Channels:
    """`analysis` has been read up to `body`; each later `assistantCHANNEL` header starts a message."""
    out = Channels([], [], [text[:body]])
    kind = "analysis"
    while True:
        found = _STRIPPED_HEADER.search(text, body)
        stop = found.start() if found else len(text)
        if kind == "analysis":
            out.reasoning.append(text[body:stop])
            out.markup.append(text[body:stop])
        else:
            out.answer.append(text[body:stop])
        if found is None:
            return out
        kind = found.group(1)
        if kind == "commentary" and text.startswith(" to=", found.end()):
            out.markup.append("assistant")  # the dialect reads `commentary to=functions.NAME ...` as the call
            body = found.start() + len("assistant")
            kind = "call"
        else:
            out.markup.append(found.group())
            body = found.end()
