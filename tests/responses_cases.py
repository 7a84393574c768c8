"""What the Responses tests share: a function tool and Codex-style freeform tool, the upstream's answer calling
both in several forms (calls written as text in three dialects, and native calls), and the official `openai`
client pointed at the proxy."""

from __future__ import annotations

import json
from typing import Any

import openai

from tests.fake_upstream import Received, Script, Wire, as_chunks, completion

# A patch as Codex's apply_patch takes it: quotes and a backslash that JSON must escape, several lines.
PATCH = '*** Begin Patch\n*** Update File: app.py\n@@\n-print("hi")\n+print("bye\\n")\n*** End Patch'
GRAMMAR = 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\nend_patch: "*** End Patch" LF?\n'
WEATHER = {"type": "function", "name": "get_weather", "description": "the weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                          "required": ["city"]}}
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "Edit files with a patch.",
               "format": {"type": "grammar", "syntax": "lark", "definition": GRAMMAR}}
TOOLS = [WEATHER, APPLY_PATCH]
NATIVE_CALLS = [{"id": "call_up1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 3}'}},
                {"id": "call_up2", "type": "function",
                 "function": {"name": "apply_patch", "arguments": json.dumps({"input": PATCH})}}]
# form -> (the upstream's content, other message fields, the text the client gets)
FORMS: dict[str, tuple[str | None, dict[str, Any], str]] = {
    "hermes": ('Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}\n</tool_call>'
               f"\n<tool_call>\n{json.dumps({'name': 'apply_patch', 'arguments': {'input': PATCH}})}\n</tool_call>",
               {}, "Sure."),
    "qwen3_coder": ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
                    "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=apply_patch>\n<parameter=input>\n"
                    f"{PATCH}\n</parameter>\n</function>\n</tool_call>", {}, ""),
    "gemma4": ('<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>'
               f'<|tool_call>call:apply_patch{{input:<|"|>{PATCH}<|"|>}}<tool_call|>', {}, ""),
    "native": (None, {"tool_calls": NATIVE_CALLS}, ""),
}


def answering(content: str | None, finish_reason: str = "stop", **message: Any) -> Script:
    """An upstream that answers every request with this message, whole or streamed as asked, and with the usage
    last in a stream when the request asks for it (as vLLM, llama.cpp and Ollama do)."""
    payload = completion(content, finish_reason, **message)

    def answer(request: Received, wire: Wire) -> None:
        body = request.json()
        if not body.get("stream"):
            wire.send_json(payload)
            return
        chunks = as_chunks(payload)
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({**chunks[0], "choices": [], "usage": payload["usage"]})
        wire.send_events(chunks)

    return answer


def client_for(proxy: Any, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-anything", max_retries=0, **options)


def plain(response: Any) -> dict[str, Any]:
    """A response as data, without what two requests never share (ids, time) nor what the SDK adds by parsing."""
    data = response if isinstance(response, dict) else response.to_dict()
    output = [{key: value for key, value in item.items() if key not in ("id", "call_id", "parsed_arguments")}
              for item in data["output"]]
    for item in output:
        if "content" in item:
            item["content"] = [{key: value for key, value in part.items() if key != "parsed"}
                               for part in item["content"]]
    return {**{key: value for key, value in data.items() if key not in ("id", "created_at")}, "output": output}
