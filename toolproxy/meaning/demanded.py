"""The call a request demands, written as its arguments alone.

With `tool_choice` naming a tool (or `required` with one tool offered), clients such as pydantic-ai and instructor
use a tool as the answer's schema; a model that does not call it often writes the arguments object itself as its
whole answer (Qwen2.5 72B on Ollama, pydantic-ai's evals). The request has said which tool that object is for, so
it becomes the call, when it is the whole answer (perhaps in one json fence) and validates; otherwise it stays text.
"""

from __future__ import annotations

from toolproxy.dialects.base import Call

DIALECT = "demanded"
_FENCE = "```"


def demanded_call(answer: str, name: str) -> Call | None:
    """The answer as the arguments of the demanded tool `name`, unjudged: its JSON text, decoded (or refused) as
    every call's arguments are (`arguments.arguments_object`); None when it does not begin as an object."""
    body = _unfenced(answer.strip())
    return Call(name, body, answer, DIALECT) if body.startswith("{") else None


def _unfenced(text: str) -> str:
    """The body of one fenced block that is the whole text (```json ... ```), or the text."""
    if not (text.startswith(_FENCE) and text.endswith(_FENCE) and len(text) > 2 * len(_FENCE)):
        return text
    first_line_end = text.find("\n")
    return text[first_line_end + 1 : -len(_FENCE)].strip() if first_line_end >= 0 else text
