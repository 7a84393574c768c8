"""`POST /v1/messages/count_tokens` (Claude Code's `/context` and its compaction read it): the upstream's own
tokenizer where it serves `/tokenize` (vLLM counts the chat through its template, llama.cpp the text), under the
caps of every upstream call (size, no redirects, a deadline); else the documented estimate; never an error."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import requests

from tests.conftest import with_settings
from tests.fake_upstream import FakeUpstream, Received, Wire
from tests.test_messages_sdk import ASK, TOOLS, client_of
from toolproxy.config.settings import ModelRule
from toolproxy.transform import tokens

SYSTEM = "You are terse."


def count(url: str, **body: Any) -> int:
    response = requests.post(f"{url}/v1/messages/count_tokens?beta=true", timeout=30,
                             json={"model": "m", "messages": ASK, **body})  # `model` in `body` wins
    assert response.status_code == 200, response.text
    assert set(response.json()) == {"input_tokens"}
    value: int = response.json()["input_tokens"]
    return value


def tokenizer(answer: dict[str, Any], status: int = 200) -> Any:
    def script(request: Received, wire: Wire) -> None:
        assert request.path == "/tokenize", request.path  # beside /v1, where vLLM and llama.cpp serve it
        wire.send_json(answer, status=status)

    return script


def test_vllm_counts_the_chat_through_its_template(upstream, proxy):
    upstream.script = tokenizer({"count": 1234, "max_model_len": 32768, "tokens": [1] * 1234})
    message = client_of(proxy.url).messages.count_tokens(model="m", system=SYSTEM, tools=TOOLS, messages=ASK)
    assert message.input_tokens == 1234
    sent = upstream.received[0].json()
    assert sent["messages"] == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ASK[0]["content"]}]
    assert [tool["function"]["name"] for tool in sent["tools"]] == ["read", "bash"]
    assert sent["add_generation_prompt"] is True and sent["model"] == "m"
    assert SYSTEM in sent["content"] and ASK[0]["content"] in sent["content"]  # for llama.cpp, which reads this


def test_llama_cpp_counts_the_text(upstream, proxy):
    upstream.script = tokenizer({"tokens": [101, 2023, 2003, 1037, 3231]})
    assert count(proxy.url) == 5


def test_prompt_mode_counts_the_tools_where_the_upstream_reads_them(upstream, serve, settings):
    upstream.script = tokenizer({"count": 99})
    assert count(serve(with_settings(settings, tool_mode="prompt")).url, tools=TOOLS) == 99
    sent = upstream.received[0].json()
    assert "tools" not in sent and "read" in sent["messages"][0]["content"]


@pytest.mark.parametrize("answer", [
    tokenizer({"detail": "Not Found"}, status=404),  # Ollama, LM Studio, SGLang: no tokenizer endpoint
    tokenizer({"count": 0, "tokens": []}),  # a server that counted nothing (sgl-project/sglang#20678's zero)
    tokenizer({"unexpected": True}),
    lambda request, wire: wire.send_raw(b"<html>no</html>", headers={"Content-Type": "text/html"}),
])
def test_without_a_tokenizer_the_estimate_answers(answer, upstream, proxy):
    upstream.script = answer
    assert count(proxy.url, system=SYSTEM) == estimated(SYSTEM)


def test_the_tokenizer_is_not_followed_through_a_redirect(upstream, proxy):
    elsewhere = FakeUpstream().start()
    try:
        upstream.script = lambda request, wire: wire.send_raw(b"", status=307,
                                                              headers={"Location": f"{elsewhere.url}/tokenize"})
        assert count(proxy.url, system=SYSTEM) == estimated(SYSTEM)
        assert elsewhere.received == []
    finally:
        elsewhere.stop()


def test_an_oversized_tokenizer_answer_is_not_read_whole(upstream, serve, settings):
    upstream.script = tokenizer({"count": 7, "tokens": list(range(5000))})
    assert count(serve(with_settings(settings, max_upstream_bytes=2000)).url, system=SYSTEM) == estimated(SYSTEM)


def test_a_silent_tokenizer_is_given_up_at_its_deadline(upstream, serve, settings):
    released = threading.Event()
    upstream.script = lambda request, wire: released.wait(60)
    try:
        assert count(serve(with_settings(settings, models_timeout=0.5)).url, system=SYSTEM) == estimated(SYSTEM)
    finally:
        released.set()


def test_the_demo_model_is_estimated(serve, settings):
    assert count(serve(with_settings(settings, upstream=None)).url, system=SYSTEM) == estimated(SYSTEM)


def test_a_model_no_route_serves_is_estimated_not_refused(upstream, serve, settings):
    rules = (ModelRule("qwen3", {"upstream": upstream.url}),)
    proxy = serve(with_settings(settings, upstream=None, models=rules))
    assert count(proxy.url, model="claude-haiku-4-5", system=SYSTEM) == estimated(SYSTEM)
    assert upstream.received == []


def estimated(system: str) -> int:
    """What the estimate gives the chat body that SYSTEM and ASK become."""
    return tokens.estimate({"messages": [{"role": "system", "content": system}, ASK[0]]})


def test_the_estimate_errs_high_and_grows_with_the_prompt():
    prose = "The quick brown fox jumps over the lazy dog. " * 100  # 4,500 characters, ~1,000 tokens in BPE
    body = {"messages": [{"role": "user", "content": prose}]}
    assert 1000 < tokens.estimate(body) < 1700
    with_image = {"messages": [{"role": "user", "content": [{"type": "text", "text": prose}, {
        "type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}
    assert tokens.estimate(with_image) == tokens.estimate(body) + tokens.IMAGE_TOKENS
    assert tokens.estimate({"messages": []}) == 1
    assert tokens.estimate({**body, "tools": TOOLS}) > tokens.estimate(body)
