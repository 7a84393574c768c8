"""Backend-only fields removed so strict OpenAI clients accept the answer (the list from seed 003)."""

from __future__ import annotations

from typing import Any

TOP_LEVEL = ("prompt_logprobs", "prompt_token_ids", "kv_transfer_params", "service_tier", "system_fingerprint")
CHOICE = ("stop_reason", "token_ids")
MESSAGE = ("reasoning", "reasoning_content", "refusal", "annotations", "audio", "function_call")
USAGE = ("prompt_tokens_details",)


def clean_completion(completion: dict[str, Any]) -> dict[str, Any]:
    return _clean(completion, "message")


def clean_chunk(chunk: dict[str, Any]) -> dict[str, Any]:
    return _clean(chunk, "delta")


def _clean(body: dict[str, Any], message_key: str) -> dict[str, Any]:
    cleaned = _without(body, TOP_LEVEL)
    if isinstance(cleaned.get("usage"), dict):
        cleaned["usage"] = _without(cleaned["usage"], USAGE)
    if isinstance(cleaned.get("choices"), list):
        cleaned["choices"] = [_clean_choice(choice, message_key) for choice in cleaned["choices"]]
    return cleaned


def _clean_choice(choice: Any, message_key: str) -> Any:
    if not isinstance(choice, dict):
        return choice
    cleaned = _without(choice, CHOICE)
    message = cleaned.get(message_key)
    if isinstance(message, dict):
        message = _without(message, MESSAGE)
        # An empty `tool_calls: []` hangs some clients (anomalyco/opencode#4255): absent is what they expect.
        if message.get("tool_calls") == [] or ("tool_calls" in message and message["tool_calls"] is None):
            del message["tool_calls"]
        cleaned[message_key] = message
    return cleaned


def _without(mapping: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: value for key, value in mapping.items() if key not in keys}
