"""Backend-only fields removed so strict OpenAI clients accept the answer (the list from seed 003)."""

from __future__ import annotations

from typing import Any

TOP_LEVEL = ("prompt_logprobs", "prompt_token_ids", "kv_transfer_params", "service_tier", "system_fingerprint")
CHOICE = ("stop_reason", "token_ids")
MESSAGE = ("refusal", "annotations", "audio", "function_call")
# Servers name reasoning differently (vLLM's newer `reasoning`, DeepSeek's `reasoning_content`): clients get
# `reasoning_content`, or nothing when the model's setting says drop (what seed 003's OpenClaw proxy did).
REASONING = ("reasoning", "reasoning_content")
USAGE = ("prompt_tokens_details",)


def clean_completion(completion: dict[str, Any], reasoning: str = "move") -> dict[str, Any]:
    return _clean(completion, "message", reasoning)


def clean_chunk(chunk: dict[str, Any], reasoning: str = "move") -> dict[str, Any]:
    """The chunk without backend-only fields; the chunk itself when it has none (most events of a stream, which
    are then not copied three levels deep for nothing)."""
    if _is_clean(chunk):
        return chunk
    return _clean(chunk, "delta", reasoning)


_TOP_LEVEL, _USAGE, _CHOICE = frozenset(TOP_LEVEL), frozenset(USAGE), frozenset(CHOICE)
_DELTA = frozenset(MESSAGE + REASONING)


def _is_clean(chunk: dict[str, Any]) -> bool:
    """True when `_clean` would change nothing: checked without copying anything."""
    usage = chunk.get("usage")
    if not _TOP_LEVEL.isdisjoint(chunk) or (isinstance(usage, dict) and not _USAGE.isdisjoint(usage)):
        return False
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        if not _CHOICE.isdisjoint(choice) or (isinstance(delta, dict) and (
                not _DELTA.isdisjoint(delta) or ("tool_calls" in delta and delta["tool_calls"] in ([], None)))):
            return False
    return True


def _clean(body: dict[str, Any], message_key: str, reasoning: str) -> dict[str, Any]:
    cleaned = _without(body, TOP_LEVEL)
    if isinstance(cleaned.get("usage"), dict):
        cleaned["usage"] = _without(cleaned["usage"], USAGE)
    if isinstance(cleaned.get("choices"), list):
        cleaned["choices"] = [_clean_choice(choice, message_key, reasoning) for choice in cleaned["choices"]]
    return cleaned


def _clean_choice(choice: Any, message_key: str, reasoning: str) -> Any:
    if not isinstance(choice, dict):
        return choice
    cleaned = _without(choice, CHOICE)
    message = cleaned.get(message_key)
    if isinstance(message, dict):
        thought = message.get("reasoning_content") or message.get("reasoning")
        message = _without(message, MESSAGE + REASONING)
        if thought and reasoning != "drop":
            message["reasoning_content"] = thought
        # An empty `tool_calls: []` hangs some clients (anomalyco/opencode#4255): absent is what they expect.
        if message.get("tool_calls") == [] or ("tool_calls" in message and message["tool_calls"] is None):
            del message["tool_calls"]
        cleaned[message_key] = message
    return cleaned


def _without(mapping: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: value for key, value in mapping.items() if key not in keys}
