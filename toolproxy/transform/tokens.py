"""How many tokens a chat request's prompt holds, estimated without a tokenizer: for a client that must be told a
count (Anthropic's `count_tokens`, `message_start`) when the upstream has no tokenizer to ask. Pure, no I/O.

The estimate is one token per three characters of the text the model reads (message texts, the calls in the
history, the tools' JSON), four tokens per message for the template's markers, and a flat 1,600 per image (what
a picture of about a megapixel costs Claude and Qwen-VL alike). Real tokenizers give 3.5 to 4 characters a token
on English and code, fewer on JSON and other scripts: the estimate errs high, so that a client which compacts its
context by this count compacts early rather than too late.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CHARS_PER_TOKEN = 3
MESSAGE_TOKENS = 4
IMAGE_TOKENS = 1600


def estimate(body: Mapping[str, Any]) -> int:
    """Tokens of the prompt of a chat-completions body (its messages and tools), at least 1."""
    chars = len(str(body.get("tools") or ""))
    tokens = 0
    for message in body.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        tokens += MESSAGE_TOKENS
        text, images = _content(message.get("content"))
        chars += text + len(str(message.get("tool_calls") or ""))
        tokens += images * IMAGE_TOKENS
    return max(1, tokens + -(-chars // CHARS_PER_TOKEN))


def estimate_written(chars: int) -> int:
    """Tokens of the characters the model wrote (an answer's, when the upstream did not count them), at least 1."""
    return max(1, -(-chars // CHARS_PER_TOKEN))


def _content(content: Any) -> tuple[int, int]:
    """Characters of text, and the number of images, in a message's content."""
    if isinstance(content, str):
        return len(content), 0
    chars = images = 0
    for part in content if isinstance(content, list) else ():
        if isinstance(part, Mapping) and part.get("type") == "image_url":
            images += 1
        elif isinstance(part, Mapping):
            chars += len(str(part.get("text") or ""))
    return chars, images


def tokenize_body(upstream: Mapping[str, Any]) -> dict[str, Any]:
    """What a server's `/tokenize` counts an upstream body's prompt from: vLLM reads the chat (`messages` and
    `tools`, through its chat template), llama.cpp the text in `content` (every text the model reads, without
    its template's few markers); each ignores the other's fields."""
    body: dict[str, Any] = {"model": upstream.get("model"), "messages": upstream.get("messages") or [],
                            "add_generation_prompt": True, "content": _all_text(upstream)}
    if upstream.get("tools"):
        body["tools"] = upstream["tools"]
    return body


def counted(answer: Mapping[str, Any]) -> int | None:
    """The count in a `/tokenize` answer (vLLM's `count`, or llama.cpp's `tokens`); None when it holds none."""
    count = answer.get("count")
    if isinstance(count, int) and not isinstance(count, bool) and count > 0:
        return count
    tokens = answer.get("tokens")
    return len(tokens) if isinstance(tokens, list) and tokens else None


def _all_text(body: Mapping[str, Any]) -> str:
    texts = [str(body["tools"])] if body.get("tools") else []
    for message in body.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [str(part.get("text")) for part in content if isinstance(part, Mapping) and part.get("text")]
        if message.get("tool_calls"):
            texts.append(str(message["tool_calls"]))
    return "\n".join(texts)
