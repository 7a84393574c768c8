"""A call said in words inside brackets, the form Gemini CLI's system prompt teaches by example:
`[tool_call: glob for pattern '**/app.config']`, `[tool_call: run_shell_command for 'node server.js &' because it
must run in the background]`.

Gemini CLI and its forks for open models (Qwen Code, iFlow CLI, easy-llm-cli) send that prompt, and the models they
drive copy its examples as their action instead of calling the tool (QwenLM/qwen-code#31,
ConardLi/easy-llm-cli#57). The tool's name, `for`, then quoted values, each after its argument's name (`and` or `,`
between pairs); a value without a name fills the one argument a bare text can (`base.text_property`); a reason may
close it (`because ...`). Values are strings, typed later by the schema like every XML value; `extraction.py` validates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from toolproxy.dialects.base import Markup, ToolIndex, declared_name, text_property
from toolproxy.dialects.cursor import marker, until, word
from toolproxy.dialects.token_block import Found, Script, TokenBlockScanner

OPENER = "[tool_call: "
_NAME = re.compile(r"[\w.:-]+")
_KEY = re.compile(r"[A-Za-z_][\w.-]*")
_AFTER_VALUE = ("]", ", ", " and ", " because ")
# Bounds that keep a whole call within the scanner's rewind reach (cursor.REWIND_LIMIT), so that the lookahead
# below may judge it whole: the form holds short values (paths, patterns, a command), a few of them.
_WORD_LIMIT = 64
_VALUE_LIMIT = 200
_PAIRS = 3
_REASON_LIMIT = 96
_PAIR = (rf"(?:[A-Za-z_][\w.-]{{0,{_WORD_LIMIT - 1}}}+ )?"
         rf"""(?:'[^'\n]{{0,{_VALUE_LIMIT}}}+'|"[^"\n]{{0,{_VALUE_LIMIT}}}+")""")
# The whole call as the steps read it, or the text ending within reach (a stream waits there): a flood of openers,
# or of calls broken after their first value, is then skipped at C speed. Possessive and bounded: no backtracking.
_CALL_AFTER_NAME = (rf" for {_PAIR}(?:(?:, | and ){_PAIR}){{0,{_PAIRS - 1}}}+"
                    rf"(?: because [^\]\n]{{0,{_REASON_LIMIT}}}+)?\]")


@dataclass(frozen=True, slots=True)
class SaidCallDialect:
    name: str = "said_call"

    holds_only_markers = True

    @property
    def markup(self) -> Markup:
        # The opener also stands in front of names no tool has (agents' history placeholders, `[tool_call: x]`):
        # not a failed call, so not a literal that only ever starts one.
        return Markup()

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return (OPENER,) if tools else ()  # a request without tools: no call to open

    def scanner(self, tools: ToolIndex) -> SaidCallScanner:
        return SaidCallScanner(self.name, tools)

    # No `render_call`: the form writes strings only, and is read, never written to a model.


class SaidCallScanner(TokenBlockScanner):
    def __init__(self, dialect: str, tools: ToolIndex) -> None:
        super().__init__(dialect, (OPENER,), {OPENER: _follow(tools)})
        self._tools = tools

    def _hold(self) -> int:
        return super()._hold() if self._tools else 0  # a request without tools: nothing can open a block

    def _read(self, opener: str) -> Script:
        cursor = self._cursor
        written = yield from word(cursor, _NAME, _WORD_LIMIT)
        name = declared_name(written, self._tools) if written else None
        if name is None or (yield from marker(cursor, " for ")) is None:
            return None
        arguments: dict[str, str] = {}
        while True:
            key = yield from word(cursor, _KEY, _WORD_LIMIT)
            if key is not None and (yield from marker(cursor, " ")) is None:
                return None
            key = key or text_property(self._tools[name]) or None
            quote = yield from marker(cursor, "'", '"')
            value = (yield from until(cursor, quote, _VALUE_LIMIT)) if quote else None
            if key is None or key in arguments or value is None or "\n" in value:
                return None
            arguments[key] = value
            after = yield from marker(cursor, *_AFTER_VALUE)
            if after == " because ":
                reason = yield from until(cursor, "]", _REASON_LIMIT)
                after = "]" if reason is not None and "\n" not in reason else None
            if after is None or (after != "]" and len(arguments) == _PAIRS):
                return None
            if after == "]":
                return [Found(name, arguments, cursor.offset())]


def _follow(tools: ToolIndex) -> str:
    """What must follow the opener: a declared name as `declared_name` reads it (a namespace before it, `-` and `_`
    alike), then the whole call, or the text ending within reach (a stream waits there)."""
    names = "|".join(re.sub(r"\\-|_", "[-_]", re.escape(name)) for name in sorted(tools, key=len, reverse=True))
    return rf"(?:(?:[\w.:-]{{0,{_WORD_LIMIT}}}:)?(?:{names}){_CALL_AFTER_NAME}|[^\n]{{0,1000}}+\Z)"
