"""The official `@anthropic-ai/sdk` npm package (pinned in tests/node) against the proxy under gunicorn, in front
of the scripted upstream of tests/test_messages_sdk.py (calls written as hermes, qwen3_coder and gemma4 text, or
native): `messages.create` gets the calls as tool_use blocks, and the message `messages.stream` accumulates (its
`finalMessage`) is the whole message; `messages.countTokens` answers."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.conftest import Gunicorn
from tests.fake_upstream import FakeUpstream
from tests.test_messages_sdk import ASK, CASES, TOOLS, answer_by_model
from tests.test_node_clients import NODE_DIR, node_binary


@pytest.fixture(scope="module")
def results(_upstream_server: FakeUpstream, gunicorn_proxy: Gunicorn) -> dict[str, dict[str, Any]]:
    """One node process runs every case; the tests below read its printout case by case."""
    _upstream_server.reset_state()
    _upstream_server.script = answer_by_model
    cases = [{"model": model, "max_tokens": 256, "messages": ASK, "tools": TOOLS} for model in CASES]
    request = {"client": "anthropic", "baseURL": gunicorn_proxy.url, "apiKey": "sk-unused", "cases": cases}
    try:
        done = subprocess.run([node_binary(), "clients.mjs"], cwd=NODE_DIR, input=json.dumps(request), text=True,
                              capture_output=True, timeout=100, check=False)
    finally:
        _upstream_server.reset_state()
    assert done.returncode == 0, done.stderr
    return {result["model"]: result for result in json.loads(done.stdout)["results"]}


def without_ids(message: dict[str, Any]) -> dict[str, Any]:
    """The message without its ids (two requests, two ids) and the field the SDK's stream helper adds for
    structured outputs (`parsed_output`, null: the wire never carried it)."""
    content = [{key: value for key, value in block.items() if key != "parsed_output"} for block in message["content"]]
    return {**{key: value for key, value in message.items() if key != "parsed_output"}, "id": None,
            "content": [{**block, "id": None} if block["type"] == "tool_use" else block for block in content]}


@pytest.mark.parametrize("model", list(CASES))
def test_create_returns_the_calls_as_tool_use_blocks(results, model):
    _, _, text, calls = CASES[model]
    whole = results[model]["whole"]
    assert whole["errors"] == []
    assert whole["content"] == text
    assert [(call["name"], call["arguments"]) for call in whole["calls"]] == calls
    assert whole["finish"] == ("tool_use" if calls else "end_turn")
    assert all(call["id"].startswith("toolu_") for call in whole["calls"])


@pytest.mark.parametrize("model", list(CASES))
def test_the_final_message_of_the_stream_is_the_whole_message(results, model):
    whole, stream = results[model]["whole"], results[model]["stream"]
    assert stream["errors"] == []
    assert without_ids(stream["message"]) == without_ids(whole["message"])
    assert stream["streamedText"] == (whole["content"] or "")
    assert stream["counted"] > 0
