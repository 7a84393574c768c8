"""What counts as markup around a call in a form no dialect knows: the grammar the name-anchored fallback
(`anchor.py`) reads a call's surroundings with.

A model's new format is new clothes on the same body: a declared tool's name and its arguments, with tags,
special tokens, bracketed words, `key=`/`key:` labels, quotes and indices around them. None of that is prose. So
the fallback never learns a format's markers; it asks only whether the characters between the name and the
arguments, and on the call's lines around them, are markup of these shapes. A word of prose there (`Now I will
call read_file {...}`) makes the stretch not markup, and the call is not made.

Every pattern is bounded and possessive, so a check costs at most the stretch it reads.
"""

from __future__ import annotations

import re

from toolproxy.dialects.tokens import TOKEN

_TOKEN = re.compile(TOKEN)

_TAG = r"<[^<>\n`]{1,160}>"  # `<tool_call>`, `</function>`, `<｜DSML｜invoke name="x">`, `<|im_end|>`
_BRACKETED = r"\[[^\[\]\n`]{1,64}\]"  # `[TOOL_CALLS]`, `[ARGS]`, `[/read_file]`
# A label of one or two words: `name="`, `"tool": "`, `call:`, `Action: `, `Action Input: `, `args=`, and a hash's
# `tool => "` (Ruby, Perl). `=` is written without spaces around it (`key = value` is code: `result = read_file(...)`).
_LABEL = r"[\w-]{1,32}(?:[ \t][\w-]{1,32})?[\"']?(?:[ \t]?:[ \t]?|=|[ \t]?=>[ \t]?)[\"']?"
# A word that names the markup it stands in: before a tag or token (`<|constrain|>json<|message|>`), before an
# attribute (`<|open|>argument key="`), or an index after a name (`functions.read:0`).
_TAG_WORD = r"\w{1,32}(?=[<\[]|[ \t][\w-]{1,32}=)"
_INDEX = r":\d{1,4}"
# Words that are markup, not prose: the roles and channels of chat templates, which a server that drops special
# tokens leaves as words (`assistant to=functions.x commentary json`, harmony stripped), and the words of a
# transcript line that says a call was made (`[Called function "x" with args: {..}]`). A sentence still has a word
# of its own (`I will call`, `Now calling`) and stays prose.
_WORD_MARKUP = (r"(?<![\w-])(?:assistant|commentary|analysis|final|json|(?i:call|called|calling|function|tool|"
                r"invoke|invoked|invoking|with))(?![\w-])")
# Punctuation between a name and its arguments, and between pairs: closers of the tag before (`">`) included. Before
# a name, a lone `>` or `)` is prose's (`>>> name`, a doctest), never a tag's end.
# Typographic quotes too (DeepSeek V4 writes `name=\u201cx\u201d`).
_BETWEEN = r"[ \t\r\n\[\](){}\"'\u201c\u201d\u2018\u2019|,;>:=]"
_BEFORE = r"[ \t\r\[({\"'\u201c\u2018|,/:]"  # and a slash command's `/`, Gemma 4's `<|tool_call>:name`
_ITEMS = rf"{TOKEN}|{_TAG}|{_BRACKETED}|{_LABEL}|{_TAG_WORD}|{_INDEX}|{_WORD_MARKUP}"  # longest first
_OPEN_TAG = r"<[^<>\n`]{0,160}"  # a tag still open where the name begins: `<function=`, `<invoke name="`
MARKUP = re.compile(rf"(?:{_ITEMS}|{_BETWEEN})*+(?:{_OPEN_TAG})?")
_MARKUP_BEFORE = re.compile(rf"(?:{_ITEMS}|{_BEFORE})*+(?:{_OPEN_TAG})?")
# A tag or token that closes something: `</function>`, `<tool_call|>`, `<|tool_call_end|>`, `<|call|>`, `[/x]`, a
# tag whose word says so (`<end_function_call>`, `<TOOL_CALL_END>`), and the bracket of a list or call the arguments
# stand in (`[f(a=1)]`, `{"name": .., "arguments": {..}}`). And a closing tag that lost its `<` and `/`, alone on its
# line (`function>`).
_CLOSER = re.compile(rf"</[^<>\n]{{0,160}}>|<[^<>\n|]{{1,160}}\|>|{TOKEN}|\[(?:/|END)[^\[\]\n]{{0,64}}\]|/>|[\])}}]"
                     r"|<(?:[\w-]{0,64}_)?(?i:end|close)(?:_[\w-]{0,64})?>"
                     r"|(?m:^[ \t]*/?[\w-]{1,64}>[ \t]*$)")
# What opens a call: a tag (not a closer) or a token that says so.
_OPENER = re.compile(r"<(?![/|])[^<>\n]{0,160}(?<!\|)(?:>|\Z)"
                     r"|<\|[^<>|\n]{0,48}(?:begin|start|open)[^<>|\n]{0,48}\|>")
_FENCE = r"```[\w-]{0,16}"  # a code fence the arguments stand in (```json ... ```), never before the name
_FENCE_AT_START = re.compile(r"[ \t]*```")
_SKIPPABLE = re.compile(rf"{TOKEN}|{_TAG}|{_BRACKETED}|{_FENCE}|/>|[ \t\r\n\"',;>]++")
_GAP = re.compile(rf"(?:{_ITEMS}|{_FENCE}|{_BETWEEN})*+(?:{_OPEN_TAG})?")
# Markup that opens a call after a sentence: a tag, a token or a bracketed word (a lone `[` or quote does not).
_OPENING = re.compile(rf"{TOKEN}|{_TAG}|{_BRACKETED}|{_OPEN_TAG}")
# A namespace before a name (`functions.`, `default_api.`), written with no space: taken off first, so that a
# numbered list's `1. ` is not one.
_NAMESPACE = re.compile(r"(?:[A-Za-z_][\w-]{0,31}\.)+\Z")
# Markup after a call on its last line: closers, tokens, brackets, quotes, separators.
_AFTER = re.compile(rf"(?:{TOKEN}|{_TAG}|{_BRACKETED}|```|/>|[ \t\r\])}}\"'>,;])*+")  # longest first
# A whole line of nothing but tags, tokens and brackets (a wrapper's opener or closer on its own line; a closer
# that lost its `<` and `/`, `function>`).
# One word in its own tags is a field of the call's markup too (`<server>filesystem</server>` before `<tool>read_file
# </tool>`, as an MCP desktop app's prompt format has it); words with spaces between them are prose.
_FIELD = r"<([\w-]{1,32})>[\w.:/-]{1,64}</\1>"
_LINE_ITEMS = rf"{TOKEN}|{_FIELD}|{_TAG}|{_BRACKETED}|/?[\w-]{{1,64}}>"
_MARKUP_LINE = re.compile(rf"[ \t\r]*+(?:(?:{_LINE_ITEMS})[ \t\r]*+)++")
# Before a call, the same but for a tag that closes itself (`<goal status="completed"/>`): a whole element, a
# statement of its own, not an opener of the call; and a label of one or two words alone on its line (`Action:`,
# as smolagents' ToolCallingAgent and ReAct prompts have the model write it before the call's JSON).
_LABEL_ALONE = r"[\w-]{1,32}(?:[ \t][\w-]{1,32})?:"
_OPENER_LINE = re.compile(rf"[ \t\r]*+(?:(?!<[^<>\n]*/>)(?:{_LINE_ITEMS}|{_LABEL_ALONE})[ \t\r]*+)++")
_FENCED_LINE = re.compile(rf"[ \t\r]*+(?:(?:{_LINE_ITEMS}|```)[ \t\r]*+)++")  # and a code fence's closing line
_CLOSING_LINE = re.compile(r"[ \t]*(?:</|\[/|<\|/)")  # a line that closes (`[/read_file]`): no next call
LINE_REACH = 256  # how far along its line a name's neighbours are read


def is_markup(text: str, start: int, end: int) -> bool:
    """Whether `text[start:end]` is markup only (MARKUP): no prose, no inline code."""
    return MARKUP.fullmatch(text, start, end) is not None


def is_tags(text: str) -> bool:
    """Whether `text` is nothing but tags, tokens and brackets (and the space between them)."""
    return _MARKUP_LINE.fullmatch(text) is not None


def is_gap(text: str, start: int, end: int) -> bool:
    """Whether `text[start:end]`, between a name and its arguments, is markup only; a code fence may open there
    (`name` then ```` ```json ````, as DeepSeek V3 writes)."""
    return _GAP.fullmatch(text, start, end) is not None


def opens(text: str, start: int, end: int) -> bool:
    """Whether the markup `text[start:end]` before a name opens something that must close (a tag, a `begin`
    token): a call so opened that runs to the end of the answer with no closer was cut short."""
    return _OPENER.search(text, start, end) is not None


def closes(text: str, position: int, names: re.Pattern[str] | None = None) -> bool:
    """Whether a closer follows `position` with nothing but markup before it (across lines, within reach), or,
    given the declared `names`, the next call does (`<function_calls>f(a=1)\ng(b=2)`: the call before it was not
    cut short)."""
    end = min(len(text), position + 4 * LINE_REACH)
    while position < end:
        closer = _CLOSER.match(text, position, end)
        if closer is not None:
            return True
        item = _SKIPPABLE.match(text, position, end)
        if item is None:
            return names is not None and _call_follows(text, position, names)
        position = item.end()
    return False


def _call_follows(text: str, position: int, names: re.Pattern[str]) -> bool:
    """Whether a declared name follows `position` with nothing but markup before it (its opener, a label)."""
    following = names.search(text, position, min(len(text), position + 160))
    if following is None:
        return False
    namespace = _NAMESPACE.search(text, position, following.start())
    return MARKUP.fullmatch(text, position, namespace.start() if namespace else following.start()) is not None


def markup_start(text: str, line_start: int, name_start: int) -> int | None:
    """Where the markup before a name at `name_start` begins: the line's start when nothing but markup stands
    there (after any namespace), or the first markup that opens the call after a sentence (`Checking.
    <|tool_call_begin|>functions.x`: a call may end a sentence, as `lookalike` has it; prose on both sides of it is
    refused after the arguments, `after_markup`). None when a word of prose comes right before the name."""
    namespace = _NAMESPACE.search(text, max(line_start, name_start - 160), name_start)
    end = namespace.start() if namespace else name_start
    fence = _FENCE_AT_START.match(text, line_start, end)  # the closing fence of the call before (DeepSeek V3)
    if _MARKUP_BEFORE.fullmatch(text, fence.end() if fence else line_start, end):
        return line_start
    if "`" in text[fence.end() if fence else line_start : end]:
        return None  # inline code: an example
    opener = _OPENING.search(text, line_start, end)
    return opener.start() if opener is not None and _MARKUP_BEFORE.fullmatch(text, opener.start(), end) else None


def after_markup(text: str, position: int, names: re.Pattern[str]) -> int | None:
    """Where a call that ends at `position` ends with the markup after it: the end of its line, past the line
    break, when nothing but markup follows on it; or the start of the next call on the same line (`<|tool_call_end|>
    <|tool_call_begin|>functions.next`, `};{"name": "next"`: markup, then what may stand before a name, and a
    declared name). Else None: the call is followed by prose on its line."""
    found = _AFTER.match(text, position, min(len(text), position + LINE_REACH))
    assert found is not None  # the pattern matches the empty string
    end = found.end()
    if end == len(text):
        return end
    if text[end] == "\n":
        return end + 1
    following = names.search(text, end, min(len(text), end + 160))
    if following is None:
        return None
    namespace = _NAMESPACE.search(text, end, following.start())
    return end if _MARKUP_BEFORE.fullmatch(text, end, namespace.start() if namespace else following.start()) else None


def token_closed(text: str, start: int, name_start: int, position: int) -> int | None:
    """Where a call whose markup opens with a special token before its name ends, when a token also closes it
    right after its arguments (`Sure. <|python_start|>[f(a=1)]<|python_end|> And then...`): such a call is the
    model's own markup wherever it stands on its line (as `lookalike` has it), so prose may follow. None else."""
    if _TOKEN.search(text, start, name_start) is None:
        return None
    found = _AFTER.match(text, position, min(len(text), position + LINE_REACH))
    assert found is not None
    ends = [token.end() for token in _TOKEN.finditer(text, position, found.end())]
    return ends[-1] if ends else None


def markup_lines_after(text: str, position: int, names: re.Pattern[str], fenced: bool, limit: int = 8) -> int:
    """`position` moved past the lines after it that are nothing but tags, tokens and brackets (closers), up to
    one that names a tool (the next call's opener); `fenced`: the call's arguments stand in a code fence, whose
    closing line is the call's too."""
    line = _FENCED_LINE if fenced else _MARKUP_LINE
    for _ in range(limit):
        line_end = text.find("\n", position, position + LINE_REACH)
        stop = len(text) if line_end < 0 and len(text) - position <= LINE_REACH else line_end
        if stop < 0 or line.fullmatch(text, position, stop) is None:
            break
        if names.search(text, position, stop) and not _CLOSING_LINE.match(text, position, stop):
            break
        position = stop if stop == len(text) else stop + 1
    return position


def markup_lines_before(text: str, line_start: int, floor: int, limit: int = 8) -> int:
    """`line_start` moved back over the lines before it that are nothing but tags, tokens and brackets (openers),
    never before `floor`."""
    for _ in range(limit):
        if line_start <= floor or text[line_start - 1] != "\n":
            break
        previous = text.rfind("\n", max(floor, line_start - 1 - LINE_REACH), line_start - 1) + 1
        start = max(previous, floor)
        if (previous == 0 and line_start - 1 - LINE_REACH > floor) or start == line_start - 1:
            break
        if _OPENER_LINE.fullmatch(text, start, line_start - 1) is None:
            break
        line_start = start
    return line_start


_FENCE_OPENER = re.compile(r"[ \t]*```[\w-]{0,16}[ \t]*\n\Z")
_FENCE_CLOSER = re.compile(r"[ \t]*```[ \t]*(?:\n|\Z)")


def fence_around(text: str, start: int, end: int, floor: int) -> tuple[int, int] | None:
    """The start and end of a code fence that holds nothing but the lines `text[start:end]` (a bare call fenced
    alone: the fence is its markup, as `extraction.absorb_wrappers` has it for every call), or None."""
    opener = _FENCE_OPENER.search(text, max(floor, start - 24), start)
    closer = _FENCE_CLOSER.match(text, end)
    if opener is None or closer is None or (not text.endswith("\n", 0, end) and end != len(text)):
        return None
    return opener.start(), closer.end()


def line_start(text: str, position: int, floor: int) -> int | None:
    """Where the line `position` is on begins (never before `floor`), or None when it is too far back."""
    start = text.rfind("\n", max(floor, position - LINE_REACH), position) + 1
    if start == 0 and position - LINE_REACH > floor:
        return None
    return max(start, floor)
