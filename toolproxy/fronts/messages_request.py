"""An Anthropic Messages request as the core's chat request: the system prompt (the top-level `system` and every
`role: system` message, folded in order into one leading system message), content blocks as chat messages and
parts, tools and tool_choice, sampling fields and `thinking`. What a chat upstream cannot take (server tools,
thinking from the history, documents) is left out with a note for the record, never refused. Pure, no I/O.

Errors name Anthropic's fields (`messages.2.content.0.type`), checked before the chat request is built, so that
the client never reads a chat field's name for its own mistake.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolproxy.config.settings import Settings
from toolproxy.errors import InvalidRequest
from toolproxy.routes import models
from toolproxy.transform.chat_request import TOOL_NAME, ChatRequest, chat_request
from toolproxy.transform.request_transform import with_reasoning_effort
from toolproxy.wire import jsonwire

SAMPLING = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k"}
TOOL_CHOICES = {"auto": "auto", "any": "required", "none": "none"}
THINKING_ON = ("enabled", "adaptive")
EFFORTS = ("low", "medium", "high")
BUDGETS = (("low", 4096), ("medium", 16384))  # budget_tokens up to these: that effort; more: high


@dataclass(frozen=True, slots=True)
class MessagesRequest:
    """The chat request the core answers, and what the answer must say in Anthropic's terms."""

    chat: ChatRequest
    model: str  # as the client named it (an alias is the proxy's business): the answer names it so
    thinking: bool  # the client asked to see the model's thinking: reasoning goes out as thinking blocks
    notes: tuple[str, ...]  # what was left out of the upstream request, for the record


def decode(data: bytes, settings: Settings) -> MessagesRequest:
    if not data.strip():
        raise InvalidRequest("the request body is empty; send a JSON object", code="invalid_json")
    try:
        body = jsonwire.loads(data, settings.max_json_depth, settings.max_json_containers)
    except jsonwire.JsonWireError as error:
        raise InvalidRequest(f"could not parse the request: {error}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", code="invalid_json")
    return messages_request(body, settings)


def messages_request(body: dict[str, Any], settings: Settings) -> MessagesRequest:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("model: a non-empty string is required", param="model")
    notes: list[str] = []
    chat: dict[str, Any] = {"model": models.alias(settings, model),
                            "messages": _messages(body.get("system"), body.get("messages"), notes)}
    _add_tools(chat, body, notes)
    _add_options(chat, body)
    effort, shown = _thinking(body.get("thinking"), body.get("output_config"))
    chat = with_reasoning_effort(chat, effort, settings.for_model(chat["model"]).reasoning_switch)
    return MessagesRequest(chat_request(chat), model, shown, tuple(notes))


# --- messages ----------------------------------------------------------------------------------------------


def _messages(system: Any, messages: Any, notes: list[str]) -> list[dict[str, Any]]:
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
        return [{"type": "text", "text": _string(block, "text", at)}]
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
    call_id = _string(block, "tool_use_id", at)
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
            texts.append(_string(block, "text", at))
        elif kind == "tool_use":
            arguments = block.get("input") if isinstance(block.get("input"), dict) else {}
            calls.append({"id": _string(block, "id", at), "type": "function",
                          "function": {"name": _string(block, "name", at),
                                       "arguments": jsonwire.dumps_text(arguments)}})
        elif kind not in ("thinking", "redacted_thinking"):
            notes.append(f"{at}: a {kind} block was left out (a chat upstream cannot read it)")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if calls:
        message["tool_calls"] = calls
    return message


def _string(block: dict[str, Any], key: str, at: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise InvalidRequest(f"{at}.{key}: a string is required", param=f"{at}.{key}")
    return value


# --- tools, options, thinking ------------------------------------------------------------------------------


def _add_tools(chat: dict[str, Any], body: dict[str, Any], notes: list[str]) -> None:
    tools = body.get("tools")
    if tools is None:
        return
    if not isinstance(tools, list):
        raise InvalidRequest("tools: an array of tools is required", param="tools")
    functions = [function for position, tool in enumerate(tools)
                 if (function := _function(tool, f"tools.{position}", notes)) is not None]
    if not functions:
        return
    chat["tools"] = functions
    choice = body.get("tool_choice")
    if choice is not None:
        _add_tool_choice(chat, choice)


def _function(tool: Any, where: str, notes: list[str]) -> dict[str, Any] | None:
    """A client tool as a chat function; a server tool (web search, code execution, Anthropic's own bash and
    editor schemas) has no schema a local model could follow: left out, with a note."""
    if not isinstance(tool, dict):
        raise InvalidRequest(f"{where}: each tool must be an object", param=where)
    name = tool.get("name")
    if tool.get("type") not in (None, "custom") or "input_schema" not in tool:
        notes.append(f"{where}: the {tool.get('type') or 'schema-less'} tool {name!r} was left out: "
                     "the upstream cannot run it")
        return None
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        raise InvalidRequest(f"{where}.name: 1 to 64 letters, digits, _ or -; got {name!r}", param=f"{where}.name")
    function: dict[str, Any] = {"name": name, "parameters": tool["input_schema"]}
    if isinstance(tool.get("description"), str):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def _add_tool_choice(chat: dict[str, Any], choice: Any) -> None:
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "tool":
        chat["tool_choice"] = {"type": "function", "function": {"name": _string(choice, "name", "tool_choice")}}
    elif kind in TOOL_CHOICES:
        chat["tool_choice"] = TOOL_CHOICES[kind]
    else:
        raise InvalidRequest('tool_choice: {"type": "auto" | "any" | "tool" | "none"} is required',
                             param="tool_choice")
    if choice.get("disable_parallel_tool_use") is True:
        chat["parallel_tool_calls"] = False


def _add_options(chat: dict[str, Any], body: dict[str, Any]) -> None:
    """Sampling fields go on as chat names them; the rest of what Anthropic's API takes (metadata, betas,
    context_management, output_config, service_tier) means nothing to a chat upstream and is not sent."""
    max_tokens = body.get("max_tokens")
    if max_tokens is not None:
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise InvalidRequest("max_tokens: a whole number of at least 1 is required", param="max_tokens")
        chat["max_tokens"] = max_tokens
    for name, chat_name in SAMPLING.items():
        value = body.get(name)
        if value is not None:
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise InvalidRequest(f"{name}: a number is required", param=name)
            chat[chat_name] = value
    stops = body.get("stop_sequences")
    if stops:
        if not isinstance(stops, list) or not all(isinstance(stop, str) for stop in stops):
            raise InvalidRequest("stop_sequences: an array of strings is required", param="stop_sequences")
        chat["stop"] = stops
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise InvalidRequest("stream: true or false is required", param="stream")
    if stream:
        # The usage ends the stream: message_delta carries the real counts (message_start had to estimate).
        chat["stream"], chat["stream_options"] = True, {"include_usage": True}


def _thinking(thinking: Any, output: Any) -> tuple[str | None, bool]:
    """(the reasoning effort asked for, whether the thinking is to be shown); no effort when the client did not
    say (the model's default). Claude Code sends `adaptive` with `output_config.effort`, the SDKs `enabled` with
    `budget_tokens`; the model's `reasoning_switch` says how the upstream takes the effort."""
    if thinking is None:
        return None, False
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind not in (*THINKING_ON, "disabled"):
        raise InvalidRequest('thinking: {"type": "enabled" | "adaptive" | "disabled"} is required', param="thinking")
    if kind == "disabled":
        return "none", False
    effort = output.get("effort") if isinstance(output, dict) else None
    if effort not in EFFORTS:
        budget = thinking.get("budget_tokens")
        effort = next((name for name, most in BUDGETS if isinstance(budget, int) and budget <= most), "high") \
            if budget is not None else "medium"
    return effort, thinking.get("display") != "omitted"
