"""The text of a live stream as it may go out now: as written (`VerbatimWriter`), or as the buffered answer's
content will read (`ContentWriter`, the live side of `Extraction.content`). Pure, no I/O."""

from __future__ import annotations


class VerbatimWriter:
    """Text exactly as the model wrote it, nothing held: for a client that gets the calls back inside the text
    (VTC), where the text around a call keeps its place and its blank lines."""

    has_calls = False

    def text(self, text: str) -> str:
        return text

    def boundary(self, call: bool) -> None:
        return None

    def markup(self) -> None:
        return None

    def finish(self) -> str:
        return ""


class ContentWriter:
    """Text as it may go out now, so that the whole stream equals `Extraction.content()` of the whole answer:
    leading whitespace kept, unless a call or markup set aside (`markup`) came before the first character; around
    calls each piece trimmed and pieces joined by a blank line; without calls the text untouched. Only a run of
    whitespace is ever held, since only its fate waits on a call. `keeps_lead`: False for reasoning, whose
    leading whitespace always follows its opener."""

    def __init__(self, keeps_lead: bool = True) -> None:
        self.has_calls = False
        self._started = False
        self._keeps_lead = keeps_lead
        self._pending = ""  # whitespace since the last character sent
        self._boundary = False  # a call (or a refusal written in its place) since the last character sent

    def text(self, text: str) -> str:
        core = text.strip()
        if not core:
            self._pending += text
            return ""
        lead = text[: len(text) - len(text.lstrip())]
        if not self._started:
            gap = self._pending + lead if self._keeps_lead and not self._boundary else ""
        elif self._boundary and self.has_calls:
            gap = "\n\n"
        else:
            gap = self._pending + lead
        self._started, self._boundary = True, False
        self._pending = text[len(text.rstrip()) :]
        return gap + core

    def boundary(self, call: bool) -> None:
        self._boundary = True
        self.has_calls = self.has_calls or call

    def markup(self) -> None:
        """Markup set aside (a reasoning span, an answer token) came: whitespace before the first character is
        layout from now on."""
        self._keeps_lead = False

    def finish(self) -> str:
        pending, self._pending = self._pending, ""
        return "" if self.has_calls or not self._started else pending
