"""The `openai` npm package's Responses API (`responses.create`, `responses.stream`) through the proxy under
gunicorn, in front of a scripted upstream that calls a function tool and a freeform tool in several forms: the
calls come back as the package types them, and the streamed response it finishes with equals the whole one."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.conftest import Gunicorn
from tests.fake_upstream import FakeUpstream, Received, Wire
from tests.responses_cases import FORMS, PATCH, TOOLS, answering, plain
from tests.test_node_clients import NODE_DIR, node_binary


def answer_by_model(request: Received, wire: Wire) -> None:
    content, message, _ = FORMS[request.json()["model"]]
    answering(content, **message)(request, wire)


@pytest.fixture(scope="module")
def results(_upstream_server: FakeUpstream, gunicorn_proxy: Gunicorn) -> dict[str, dict[str, Any]]:
    _upstream_server.reset_state()
    _upstream_server.script = answer_by_model
    cases = [{"model": form, "input": "Weather in Paris, then fix app.py", "tools": TOOLS} for form in FORMS]
    request = {"baseURL": f"{gunicorn_proxy.url}/v1", "apiKey": "sk-unused", "cases": cases}
    done = subprocess.run([node_binary(), "responses.mjs"], cwd=NODE_DIR, input=json.dumps(request), text=True,
                          capture_output=True, timeout=100, check=False)
    _upstream_server.reset_state()
    assert done.returncode == 0, done.stderr
    return {result["model"]: result for result in json.loads(done.stdout)["results"]}


def comparable(response: dict[str, Any]) -> dict[str, Any]:
    """What the package adds as conveniences (output_text, parsed output) left out, as `plain` leaves out ids."""
    return {key: value for key, value in plain(response).items() if key not in ("output_text", "output_parsed")}


@pytest.mark.parametrize("form", FORMS)
def test_the_npm_package_gets_a_function_call_and_a_custom_tool_call(results, form):
    result = results[form]
    assert result["errors"] == []
    calls = [item for item in result["whole"]["output"] if item["type"] != "message"]
    assert [(call["type"], call["name"]) for call in calls] == [("function_call", "get_weather"),
                                                                 ("custom_tool_call", "apply_patch")]
    assert json.loads(calls[0]["arguments"]) == {"city": "Paris", "days": 3} and calls[1]["input"] == PATCH
    assert result["whole"]["output_text"] == FORMS[form][2]


@pytest.mark.parametrize("form", FORMS)
def test_the_npm_packages_streamed_response_equals_the_whole_one(results, form):
    result = results[form]
    assert comparable(result["final"]) == comparable(result["whole"])
    events = result["events"]
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    added = [event["item_id"] for event in events if event["type"] == "response.output_item.added"]
    done = [event["item_id"] for event in events if event["type"] == "response.output_item.done"]
    assert added == done == [item["id"] for item in result["final"]["output"]]
    assert events[-1]["type"] == "response.completed"
