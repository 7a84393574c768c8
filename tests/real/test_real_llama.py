"""toolproxy in front of a real llama-cpp-python server, through the `openai` SDK, whole and streamed, native and
prompt mode. SmolLM2-135M is too small to call tools well: this proves the protocol, not the quality. Beside each
real check, the three things this server showed that the scripted upstreams never did (each has a scripted
regression test in tests/test_backends.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest
import requests
from openai import OpenAI

from tests.conftest import ROOT
from tests.test_dashboard import wait_for_records

pytestmark = pytest.mark.real

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
           "required": ["city", "days"]}
TIME = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
TOOLS = [{"type": "function", "function": {"name": name, "description": f"{name.replace('_', ' ')} in a city",
                                           "parameters": schema}} for name, schema in SCHEMAS.items()]
ASK = [{"role": "user", "content": "What will the weather be in Paris over the next 3 days?"}]
FORCED = {"type": "function", "function": {"name": "get_weather"}}


@pytest.fixture(scope="module")
def sdk(real_proxy):
    with OpenAI(base_url=f"{real_proxy.url}/v1", api_key="unused", max_retries=0, timeout=600) as client:
        yield client


def check_calls(calls: list[tuple[str, str]], finish_reason: str) -> None:
    """finish_reason agrees with the calls; every call names a declared tool with arguments that fit it."""
    assert (finish_reason == "tool_calls") == bool(calls), (finish_reason, calls)
    for name, arguments in calls:
        assert name in SCHEMAS
        jsonschema.validate(json.loads(arguments), SCHEMAS[name])


@pytest.mark.parametrize("model", ["smollm2", "smollm2-prompt"])
def test_whole_answers(real_proxy, sdk, model):
    answer = sdk.chat.completions.create(model=model, messages=ASK, tools=TOOLS, temperature=0,
                                                         max_tokens=96)
    choice = answer.choices[0]
    assert answer.model == model and answer.usage is not None and answer.usage.prompt_tokens > 0
    check_calls([(call.function.name, call.function.arguments) for call in choice.message.tool_calls or []],
                choice.finish_reason)
    print(f"{model} whole: finish={choice.finish_reason} content={choice.message.content!r} "
          f"calls={[(c.function.name, c.function.arguments) for c in choice.message.tool_calls or []]}")


@pytest.mark.parametrize("model", ["smollm2", "smollm2-prompt", "smollm2-live"])
def test_streamed_answers(real_proxy, sdk, model):
    stream = sdk.chat.completions.create(model=model, messages=ASK, tools=TOOLS, temperature=0,
                                                         max_tokens=96, stream=True,
                                                         stream_options={"include_usage": True})
    content, calls, finish, usage = "", {}, [], None
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:
                slot = calls.setdefault(call.index, ["", ""])
                slot[0] += call.function.name or ""
                slot[1] += call.function.arguments or ""
            finish += [choice.finish_reason] if choice.finish_reason else []
    assert len(finish) == 1 and usage is not None and usage.prompt_tokens > 0
    check_calls([tuple(slot) for slot in calls.values()], finish[0])
    with requests.post(f"{real_proxy.url}/v1/chat/completions", json={
            "model": model, "messages": ASK, "tools": TOOLS, "max_tokens": 32, "stream": True}, stream=True,
            timeout=600) as raw:
        lines = [line for line in raw.iter_lines(decode_unicode=True) if line.startswith("data: ")]
    assert raw.status_code == 200 and lines[-1] == "data: [DONE]"
    print(f"{model} streamed: finish={finish[0]} content={content!r} calls={list(calls.values())}")


@pytest.mark.parametrize("model", ["smollm2", "smollm2-prompt"])
def test_one_call_forced_with_tool_choice(real_proxy, sdk, model):
    answer = sdk.chat.completions.create(model=model, messages=ASK, tools=TOOLS, temperature=0,
                                                         max_tokens=96, tool_choice=FORCED)
    choice = answer.choices[0]
    calls = [(call.function.name, call.function.arguments) for call in choice.message.tool_calls or []]
    check_calls(calls, choice.finish_reason)
    if model == "smollm2":  # the server's grammar writes it
        assert [name for name, _ in calls] == ["get_weather"]
    else:  # the model's own try, and one corrective round: a valid call, or its text with finish_reason stop
        assert [name for name, _ in calls] in (["get_weather"], [])
    print(f"{model} forced: finish={choice.finish_reason} calls={calls} content={choice.message.content!r}")


def test_the_backend_kind_is_found(real_proxy):
    upstreams = requests.get(f"{real_proxy.url}/health?detail=1", timeout=10).json()["upstreams"]
    assert [(item["backend"], item["found"]) for item in upstreams] == [("llama-cpp-python", "detected")]


def test_what_this_server_showed(real_proxy, sdk):
    """1. tools without tool_choice: `auto` is sent, else the server ignores the tools; 2. incremental with
    tools falls back to buffered for this kind (its stream breaks after the 200); 3. an empty answer is an issue
    and counted."""
    answer = sdk.chat.completions.create(model="smollm2", messages=ASK, tools=TOOLS, temperature=0,
                                                         max_tokens=96)
    choice = answer.choices[0]
    row = wait_for_records(real_proxy.url, 1, params={"model": "smollm2"})[0]
    assert row["backend"] == "llama-cpp-python"
    if not choice.message.content and not choice.message.tool_calls:
        page = requests.get(f"{real_proxy.url}/dashboard/record/{row['id']}", timeout=10).text
        assert "empty answer: the upstream returned neither text nor a tool call" in page
        metrics = requests.get(f"{real_proxy.url}/metrics", timeout=10).text
        assert 'toolproxy_empty_answers_total{model="other"}' in metrics
    stream = sdk.chat.completions.create(model="smollm2-live", messages=ASK, tools=TOOLS,
                                                         max_tokens=32, stream=True)
    assert sum(1 for chunk in stream for choice in chunk.choices if choice.finish_reason) == 1
    row = wait_for_records(real_proxy.url, 1, params={"model": "smollm2-live"})[0]
    page = requests.get(f"{real_proxy.url}/dashboard/record/{row['id']}", timeout=10).text
    assert row["strategy"] == "buffered" and "llama-cpp-python cannot stream an answer with tools" in page


@pytest.mark.timeout(1200)
def test_doctor_report(llama):
    result = subprocess.run([sys.executable, "-m", "toolproxy", "doctor", "--upstream", llama.url, "--model",
                             "smollm2"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    print(result.stdout)
    assert result.returncode == 0 and "llama-cpp-python" in result.stdout and "models:" in result.stdout
