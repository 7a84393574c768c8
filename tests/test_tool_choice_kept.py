"""tool_choice kept whatever the backend does: against a scripted server of every kind (Ollama and LM Studio
ignore tool_choice), in both tool modes, whole and streamed, `required` and a named function end in a valid call
or an honest answer (text, finish_reason stop, an issue on the record), never a made-up call; `none` in no call."""

from __future__ import annotations

import json

import pytest

from tests.backend_servers import server
from tests.conftest import make_body, make_tool, with_settings
from tests.sse_client import accumulate, read_stream
from tests.test_dashboard import wait_for_records
from toolproxy.config.values import BACKEND_KINDS

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])
LIST = make_tool("list_dir", {"path": {"type": "string"}}, ["path"])
CALL_READ = '<tool_call>\n{"name": "read", "arguments": {"path": "/a"}}\n</tool_call>'
CALL_LIST = '<tool_call>\n{"name": "list_dir", "arguments": {"path": "/"}}\n</tool_call>'
CHOICES = {"required": "required", "named": {"type": "function", "function": {"name": "read"}}}
# The kinds whose own grammar makes the call tool_choice asks for, when the tools go to it natively.
ENFORCING = ("vllm", "sglang", "llamacpp")


def ask(proxy, stream: bool, choice) -> dict:
    body = make_body("read /a", [READ, LIST], stream=stream, tool_choice=choice, model="any-name")
    if stream:
        got = accumulate(read_stream(proxy.post(body)))
        return {"content": got["content"] or None, "calls": [(c["name"], json.loads(c["arguments"]))
                                                             for c in got["tool_calls"]],
                "finish": got["finish_reason"][0]}
    choice_ = proxy.post(body).json()["choices"][0]
    return {"content": choice_["message"]["content"], "finish": choice_["finish_reason"],
            "calls": [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                      for c in choice_["message"].get("tool_calls", [])]}


def _answers(*texts: str):
    items = iter(texts)
    last = [texts[-1]]

    def answer(body):
        last[0] = next(items, last[0])
        return {"content": last[0]}

    return answer


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("choice", list(CHOICES))
@pytest.mark.parametrize("mode", ["native", "prompt"])
@pytest.mark.parametrize("kind", BACKEND_KINDS)
def test_a_demanded_call_comes_or_the_answer_is_honest(kind, mode, choice, stream, upstream, serve, settings):
    chats: list = []
    upstream.script = server(kind, answers=_answers("I would rather chat.", CALL_LIST, CALL_READ), chats=chats)
    proxy = serve(with_settings(settings, backend=kind, tool_mode=mode))
    got = ask(proxy, stream, CHOICES[choice])
    forced = kind in ENFORCING and mode == "native"
    if forced or (kind == "llama-cpp-python" and mode == "native" and choice == "named"):
        assert got["calls"] == [("read", {"path": "/forced"})] and len(chats) == 1
        return
    # Ignored: a first answer without the call gets the corrective round, with the reason; the second answer
    # calls another tool, which a named choice refuses; with `required` it is a valid call.
    correction = chats[1]["messages"][-1]["content"]
    if choice == "required":
        assert got == {"content": None, "calls": [("list_dir", {"path": "/"})], "finish": "tool_calls"}
        assert correction == "You must call one of the tools in this answer. Answer again, with the tool call."
        return
    assert "You must call the tool `read`" in correction
    assert got == {"content": CALL_LIST, "calls": [], "finish": "stop"} and len(chats) == 2
    row = wait_for_records(proxy.url, 1)[0]
    page = proxy_page(proxy, row["id"])
    assert "tool_choice asked for a call to &#39;read&#39;; the upstream answered without it, 2 time(s)" in page


def proxy_page(proxy, record_id: int) -> str:
    import requests

    return requests.get(f"{proxy.url}/dashboard/record/{record_id}", timeout=10).text


@pytest.mark.parametrize("mode", ["native", "prompt"])
@pytest.mark.parametrize("kind", ["ollama", "lmstudio"])
def test_the_corrective_round_fixes_what_the_first_answer_missed(kind, mode, upstream, serve, settings):
    chats: list = []
    upstream.script = server(kind, answers=_answers("Sure, reading it.", CALL_READ), chats=chats)
    proxy = serve(with_settings(settings, backend=kind, tool_mode=mode, repair_rounds=0))
    got = ask(proxy, False, CHOICES["named"])
    assert got == {"content": None, "calls": [("read", {"path": "/a"})], "finish": "tool_calls"}
    assert chats[1]["stream"] is False and chats[1]["messages"][-2] == {"role": "assistant",
                                                                          "content": "Sure, reading it."}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("mode", ["native", "prompt"])
@pytest.mark.parametrize("kind", BACKEND_KINDS)
def test_none_returns_no_call_even_when_the_model_writes_one(kind, mode, stream, upstream, serve, settings):
    upstream.script = server(kind, answers=_answers(CALL_READ))
    proxy = serve(with_settings(settings, backend=kind, tool_mode=mode))
    got = ask(proxy, stream, "none")
    assert got == {"content": CALL_READ, "calls": [], "finish": "stop"}
    # One chat request (a llama.cpp upstream is also asked for its chat template, in the background: a GET).
    assert len([request for request in upstream.received if request.method == "POST"]) == 1
