"""The content of an Anthropic Messages request as chat messages: the system prompt (the top-level `system` and
every `role: system` message, folded in order into one leading system message), text and image blocks as parts,
tool_use blocks as calls and tool_result blocks as `tool` messages right after them; thinking from the history
and blocks a chat upstream cannot read are left out, with a note. Errors name Anthropic's fields. Pure, no I/O.
"""

from __future__ import annotations

from typing import Any

from toolproxy.errors import InvalidRequest
from toolproxy.wire import jsonwire


def chat_messages(system: Any, messages: Any, notes: list[str]) -> list[dict[str, Any]]:
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("messages: a non-empty array of messages is required", param="messages")
    prompt = [_text(system, "system")] if system is not None else []
    chat: list[dict[str, Any]] = []
    called: set[str] = set()  # the ids of the calls made so far: a result must answer one
    for index, message in enumerate(messages):
        where = f"messages.{index}"
        if not isinstance(message, dict):
            raise InvalidRequest(f"{where}: each message must be an object with role and content", param=where)
        role, content = message.get("role"), message.get("content")
        if role == "system":  # Claude Code sends one after the first user turn: Qwen's templates refuse it there
            prompt.append(_text(content, f"{where}.content"))
        elif role == "user":
            chat += _user(_blocks(content, f"{where}.content"), f"{where}.content", called, notes)
        elif role == "assistant":
            chat.append(_assistant(_blocks(content, f"{where}.content"), f"{where}.content", notes))
            called.update(call["id"] for call in chat[-1].get("tool_calls") or [])
        else:
            raise InvalidRequest(f"{where}.role: must be user or assistant (or system); got {role!r}",
                                 param=f"{where}.role")
    texts = [text for text in prompt if text]
    return [{"role": "system", "content": "\n\n".join(texts)}, *chat] if texts else chat


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    """Content as blocks; `where` names the content field."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not all(isinstance(block, dict) for block in content):
        raise InvalidRequest(f"{where}: a string or an array of content blocks is required", param=where)
    return content


def _text(content: Any, where: str) -> str:
    """A system prompt: a string, or text blocks (their cache_control is Anthropic's business)."""
    if isinstance(content, str):
        return content
    blocks = _blocks(content, where)
    for position, block in enumerate(blocks):
        if block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise InvalidRequest(f"{where}.{position}: only text blocks may make a system prompt",
                                 param=f"{where}.{position}")
    return "\n\n".join(block["text"] for block in blocks)


def _user(blocks: list[dict[str, Any]], where: str, called: set[str], notes: list[str]) -> list[dict[str, Any]]:
    """Tool results first, as chat `tool` messages right after the calls they answer; the rest (text, images,
    the results' own images) in one user message after them."""
    results: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for position, block in enumerate(blocks):
        at = f"{where}.{position}"
        if block.get("type") == "tool_result":
            result, images = _tool_result(block, at, notes)
            if result["tool_call_id"] not in called:
                raise InvalidRequest(f"{at}.tool_use_id: {result['tool_call_id']!r} answers no earlier tool_use "
                                     "block", param=f"{at}.tool_use_id")
            results.append(result)
            parts += images
        else:
            parts += _part(block, at, notes)
    if not parts:
        return results
    # Text alone goes as one string: every chat template reads that, not all read a list of parts.
    texts = [part["text"] for part in parts if part["type"] == "text"]
    content: Any = "\n\n".join(texts) if len(texts) == len(parts) else parts
    return [*results, {"role": "user", "content": content}]


def _part(block: dict[str, Any], at: str, notes: list[str]) -> list[dict[str, Any]]:
    kind = block.get("type")
    if kind == "text":
        return [{"type": "text", "text": string(block, "text", at)}]
    if kind == "image":
        return _image(block, at, notes)
    if kind == "document" and isinstance(block.get("source"), dict) and block["source"].get("type") == "text":
        return [{"type": "text", "text": str(block["source"].get("data") or "")}]
    if kind == "tool_reference":  # a tool ToolSearch loaded: the upstream was offered every tool already
        return [{"type": "text", "text": f"Tool loaded: {block.get('tool_name')}"}]
    notes.append(f"{at}: a {kind} block was left out (a chat upstream cannot read it)")
    return []


def _image(block: dict[str, Any], at: str, notes: list[str]) -> list[dict[str, Any]]:
    source: dict[str, Any] = block["source"] if isinstance(block.get("source"), dict) else {}
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        url = f"data:{source.get('media_type') or 'image/png'};base64,{source['data']}"
    elif source.get("type") == "url" and isinstance(source.get("url"), str):
        url = source["url"]
    else:
        notes.append(f"{at}: an image from a {source.get('type')} source was left out")
        return []
    return [{"type": "image_url", "image_url": {"url": url}}]


def _tool_result(block: dict[str, Any], at: str, notes: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    call_id = string(block, "tool_use_id", at)
    content = block.get("content")
    parts = _part({"type": "text", "text": content}, at, notes) if isinstance(content, str) else [
        part for position, item in enumerate(_blocks(content or [], f"{at}.content"))
        for part in _part(item, f"{at}.content.{position}", notes)]
    text = "\n".join(part["text"] for part in parts if part["type"] == "text")
    if block.get("is_error") is True and text[:5].lower() != "error":
        text = f"Error: {text}"  # chat results carry no error flag: the model reads it in the text
    return {"role": "tool", "tool_call_id": call_id, "content": text}, \
        [part for part in parts if part["type"] != "text"]


def _assistant(blocks: list[dict[str, Any]], where: str, notes: list[str]) -> dict[str, Any]:
    """Text and calls; thinking from the history never goes to a chat upstream (backends that do not know
    the block refuse the request: BerriAI/litellm#22997)."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for position, block in enumerate(blocks):
        at, kind = f"{where}.{position}", block.get("type")
        if kind == "text":
            texts.append(string(block, "text", at))
        elif kind == "tool_use":
            arguments = block.get("input") if isinstance(block.get("input"), dict) else {}
            calls.append({"id": string(block, "id", at), "type": "function",
                          "function": {"name": string(block, "name", at),
                                       "arguments": jsonwire.dumps_text(arguments)}})
        elif kind not in ("thinking", "redacted_thinking"):
            notes.append(f"{at}: a {kind} block was left out (a chat upstream cannot read it)")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if calls:
        message["tool_calls"] = calls
    return message


def string(block: dict[str, Any], key: str, at: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise InvalidRequest(f"{at}.{key}: a string is required", param=f"{at}.{key}")
    return value
