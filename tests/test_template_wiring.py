"""A model's call format from its own chat template, through the proxy: the template a scripted llama.cpp serves
at `GET /props` (a real one, tests/fixtures/templates) or the per-model `chat_template` setting, derived in the
background, pinned for the model's replies, shown on `/v1/models` and the dashboard; configuration overrides it.
The upstream is configured as `llamacpp` (the conftest's `generic` serves no template, and a probe of the shared
scripted upstream's kind would race with the test)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import Gunicorn, ProxyServer, make_body, make_tool, with_settings
from tests.fake_upstream import FakeUpstream, Received, Wire, completion
from toolproxy.config.settings import ConfigError, ModelRule, Settings, load_settings
from toolproxy.routes import formats as formats_module
from toolproxy.routes.formats import Formats
from toolproxy.upstream import served_template
from toolproxy.upstream.backends import Backend
from toolproxy.upstream.probe import Backends
from toolproxy.upstream.served_template import ServedTemplate

TEMPLATES = Path(__file__).resolve().parent / "fixtures" / "templates"
QWEN3_CODER = (TEMPLATES / "qwen3_coder.jinja").read_text(encoding="utf-8")
READ = make_tool("read", {"path": {"type": "string"}}, ["path"])
# Python call syntax in prose: the pythonic dialect reads it as a call, Qwen3-Coder's own format does not.
PYTHONIC = '[read(path="a.py")]'
XML_CALL = "<tool_call>\n<function=read>\n<parameter=path>\na.py\n</parameter>\n</function>\n</tool_call>"


def serve_model(upstream: FakeUpstream, reply: str, props: dict[str, Any] | None) -> None:
    """The upstream as llama-server: its model list, its /props (None: a 404, as vLLM answers), `reply` to chats."""

    def answer(request: Received, wire: Wire) -> None:
        if request.path.startswith("/props"):
            wire.send_json(props if props is not None else {"detail": "Not Found"}, status=200 if props else 404)
        elif request.path.endswith("/models"):
            wire.send_json({"object": "list", "data": [{"id": "coder", "object": "model", "owned_by": "llamacpp"}]})
        else:
            wire.send_json(completion(reply))

    upstream.script = answer


def props_asked(upstream: FakeUpstream) -> list[str]:
    return [request.path for request in upstream.received if request.path.startswith("/props")]


@pytest.fixture
def llamacpp(settings: Settings) -> Settings:
    return with_settings(settings, backend="llamacpp")


@pytest.fixture
def proxy(serve: Callable[[Settings], ProxyServer], llamacpp: Settings) -> ProxyServer:
    return serve(llamacpp)


def model_entry(proxy: ProxyServer, **headers: str) -> dict[str, Any]:
    listed = requests.get(f"{proxy.url}/v1/models", timeout=30, headers=headers).json()["data"]
    return next(entry for entry in listed if entry["id"] == "coder")


def settled(proxy: ProxyServer, **headers: str) -> dict[str, Any]:
    """The model's `toolproxy` status once the background derivation is done (waited on with a generous
    deadline: a loaded machine may be slow to run it)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status: dict[str, Any] = model_entry(proxy, **headers)["toolproxy"]
        if status.get("chat_template", {}).get("state") not in (None, "deriving"):
            return status
        time.sleep(0.05)
    raise AssertionError("the chat template was not derived within 60 s")


def ask(proxy: ProxyServer) -> dict[str, Any]:
    body = make_body("read a.py", tools=[READ], model="coder")
    message: dict[str, Any] = proxy.post(body).json()["choices"][0]["message"]
    return message


def test_the_served_template_pins_its_dialect(upstream: FakeUpstream, proxy: ProxyServer):
    serve_model(upstream, PYTHONIC, {"chat_template": QWEN3_CODER, "bos_token": "", "eos_token": "<|im_end|>"})
    status = settled(proxy)
    assert status == {"dialects": ["qwen3_coder"], "from": "chat_template", "chat_template": {
        "source": "upstream (GET /props)", "state": "derived", "dialect": "qwen3_coder"}}
    assert props_asked(upstream) == ["/props?model=coder"]
    message = ask(proxy)  # read by Qwen3-Coder's format alone: Python syntax in its prose is no call
    assert message["content"] == PYTHONIC and not message.get("tool_calls")
    upstream.script = lambda request, wire: wire.send_json(completion(XML_CALL))
    message = ask(proxy)
    assert [call["function"]["name"] for call in message["tool_calls"]] == ["read"]
    assert len(props_asked(upstream)) == 1  # read once per worker


def test_without_a_served_template_every_dialect_reads_the_replies(upstream: FakeUpstream, proxy: ProxyServer):
    serve_model(upstream, PYTHONIC, None)
    status = settled(proxy)
    assert status == {"dialects": [], "from": "automatic", "chat_template": {
        "source": "upstream (GET /props)", "state": "GET /props answered 404"}}
    assert [call["function"]["name"] for call in ask(proxy)["tool_calls"]] == ["read"]


def test_configuration_overrides_the_templates_dialect(upstream: FakeUpstream, llamacpp: Settings,
                                                        serve: Callable[[Settings], ProxyServer]):
    serve_model(upstream, PYTHONIC, {"chat_template": QWEN3_CODER})
    proxy = serve(with_settings(llamacpp, models=(ModelRule("coder", {"dialects": ("pythonic",)}),)))
    status = settled(proxy)
    assert status["dialects"] == ["pythonic"] and status["from"] == "configuration"
    assert status["chat_template"]["dialect"] == "qwen3_coder"  # what the template says, shown all the same
    assert [call["function"]["name"] for call in ask(proxy)["tool_calls"]] == ["read"]


def test_prompt_mode_reads_what_it_taught(upstream: FakeUpstream, llamacpp: Settings,
                                          serve: Callable[[Settings], ProxyServer]):
    serve_model(upstream, "", {"chat_template": QWEN3_CODER})
    proxy = serve(with_settings(llamacpp, tool_mode="prompt"))
    status = settled(proxy)
    assert status["dialects"] == [] and status["from"] == "prompt mode"


def test_a_configured_template_is_derived_at_start_up(upstream: FakeUpstream, settings: Settings, tmp_path: Path,
                                                       serve: Callable[[Settings], ProxyServer]):
    path = tmp_path / "model.jinja"
    path.write_text(QWEN3_CODER, encoding="utf-8")
    loaded = load_settings({"TOOLPROXY_CONFIG": str(write_config(tmp_path, f"""
models:
  - match: coder
    upstream: {upstream.url}
    backend: llamacpp
    chat_template: {path}
""")), "TOOLPROXY_DATA_DIR": str(tmp_path / "data")})
    assert loaded.for_model("coder").chat_template == QWEN3_CODER
    serve_model(upstream, PYTHONIC, None)
    proxy = serve(loaded)
    status = settled(proxy)
    assert status == {"dialects": ["qwen3_coder"], "from": "chat_template", "chat_template": {
        "source": "configuration (chat_template)", "state": "derived", "dialect": "qwen3_coder"}}
    assert props_asked(upstream) == []  # a configured template is not asked for
    assert ask(proxy)["content"] == PYTHONIC


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "toolproxy.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("value", "problem"), [
    ("/nonexistent/model.jinja", "cannot read the chat template '/nonexistent/model.jinja'"),
    ("'{{ x }}" + "x" * 300_000 + "'", "longer than 256 Ki characters"),
])
def test_a_chat_template_setting_that_cannot_be_used_is_one_sentence(tmp_path: Path, value: str, problem: str):
    config = write_config(tmp_path, f"models:\n  - match: coder\n    chat_template: {value}\n")
    with pytest.raises(ConfigError) as refused:
        load_settings({"TOOLPROXY_CONFIG": str(config)})
    assert problem in str(refused.value)


# A made-up form no model writes (no dialect reads it): `<<call NAME>>{json}<</call>>`. Synthetic on purpose: every
# real template in tests/fixtures/templates has a dialect now (DeepSeek V3.2's DSML has had one since issue 20).
MADE_UP = ("{%- for m in messages -%}{%- if m.role == 'assistant' and m.tool_calls -%}{%- for c in m.tool_calls -%}"
           "<<call {{ c.function.name }}>>{{ c.function.arguments | tojson }}<</call>>{%- endfor -%}"
           "{%- else -%}{{ m.role }}: {{ m.content }}\n{%- endif -%}{%- endfor -%}")


def test_a_form_no_dialect_reads_shows_its_markers(upstream: FakeUpstream, proxy: ProxyServer):
    serve_model(upstream, PYTHONIC, {"chat_template": MADE_UP})
    status = settled(proxy)
    assert status["dialects"] == [] and status["from"] == "automatic"
    derived = status["chat_template"]
    assert derived["dialect"] is None and derived["markers"]["opener"].startswith("<<call ")
    page = requests.get(f"{proxy.url}/dashboard/", timeout=30).text
    assert "no dialect reads it" in page and "&lt;&lt;call " in page  # escaped


def test_the_dashboard_shows_the_derived_dialect(upstream: FakeUpstream, proxy: ProxyServer):
    serve_model(upstream, PYTHONIC, {"chat_template": QWEN3_CODER})
    settled(proxy)
    page = requests.get(f"{proxy.url}/dashboard/", timeout=30).text
    assert "Call formats from chat templates" in page and "<code>coder</code>" in page and "qwen3_coder" in page


def test_under_gunicorn_the_template_is_derived_off_the_loop(upstream: FakeUpstream,
                                                             start_gunicorn: Callable[..., Gunicorn]):
    """The real thing: a gevent worker derives the template in its thread pool and pins the dialect."""
    serve_model(upstream, PYTHONIC, {"chat_template": QWEN3_CODER})
    server = start_gunicorn({"TOOLPROXY_UPSTREAM": upstream.url, "TOOLPROXY_BACKEND": "llamacpp"}).wait_ready()
    status = settled(ProxyServer(server.url))
    assert status["dialects"] == ["qwen3_coder"] and status["chat_template"]["state"] == "derived"
    assert ask(ProxyServer(server.url))["content"] == PYTHONIC


def test_the_served_template_is_read_within_bounds(upstream: FakeUpstream):
    """One GET, no redirect followed, at most a megabyte, within its deadline; each failure one phrase."""
    serve_model(upstream, "", None)
    served = served_template.fetch(upstream.url, "sk-key", "coder")
    assert served.template is None and served.reason == "GET /props answered 404"
    assert upstream.received[0].headers["authorization"] == "Bearer sk-key"
    props = {"chat_template": "default", "chat_template_tool_use": "{{ tools }}", "bos_token": "<s>",
             "eos_token": "</s>", "total_slots": 1}
    upstream.script = lambda request, wire: wire.send_json(props)
    assert served_template.fetch(upstream.url, None) == ServedTemplate("{{ tools }}", "<s>", "</s>")
    cases: dict[str, Callable[[Received, Wire], Any]] = {
        "GET /props answered 302": lambda request, wire: wire.send_raw(b"", 302, {"Location": "http://10.0.0.1/"}),
        f"GET /props sent more than {served_template.MAX_BODY} bytes, or not in time":
            lambda request, wire: wire.send_raw(b'{"chat_template": "' + b"x" * served_template.MAX_BODY + b'"}'),
        "GET /props is not JSON": lambda request, wire: wire.send_raw(b"<html>", 200),
        "GET /props holds no chat_template": lambda request, wire: wire.send_json({"chat_template": ""}),
        "GET /props failed (no answer, or not in time)": lambda request, wire: wire.wait_for_close(30),
    }
    for reason, script in cases.items():
        upstream.script = script
        served = served_template.fetch(upstream.url, None, seconds=1.0)
        assert (served.template, served.reason) == (None, reason)
    assert [request.path for request in upstream.received] == ["/props?model=coder", *["/props"] * 6]


def test_the_backend_probes_props_serve_and_other_kinds_serve_none():
    """Where the backend room's probe kept llama.cpp's /props, the template is read from it without a request of
    its own; a server the probe found to be another kind is not asked."""
    def fetch(url: str, key: str | None, model: str | None) -> ServedTemplate:
        raise AssertionError("no GET /props of its own")

    found = {"http://127.0.0.1:9/v1": Backend("llamacpp", source="detected", props={"chat_template": QWEN3_CODER}),
             "http://127.0.0.1:10/v1": Backend("vllm", "0.11.0", source="detected")}
    backends = Backends(detector=lambda url, key: found[url])
    formats = Formats(backends, fetch=fetch, start=lambda work: work())
    for url in found:
        backends.of(url, "auto")
    deadline = time.monotonic() + 60
    while any(backends.of(url, "auto").source == "unknown" for url in found) and time.monotonic() < deadline:
        time.sleep(0.01)  # the probes run in threads of their own
    llama, vllm = (Settings(upstream=url).for_model("coder") for url in found)
    assert formats.status("coder", llama, None)["chat_template"] == {
        "source": "upstream (GET /props)", "state": "derived", "dialect": "qwen3_coder"}
    assert formats.status("coder", vllm, None)["chat_template"] == {
        "source": "upstream (GET /props)", "state": "a vllm server serves no chat template"}


def test_formats_are_kept_for_a_bounded_number_of_models(monkeypatch: pytest.MonkeyPatch):
    """Model names come from clients: past MAX_MODELS, no more templates are fetched; a fetch that failed is
    tried again once RETRY_SECONDS have passed, a 404 never."""
    asked: list[str | None] = []

    def fetch(url: str, key: str | None, model: str | None) -> ServedTemplate:
        asked.append(model)
        return ServedTemplate(None, reason="GET /props failed (no answer, or not in time)" if model == "down"
                              else "GET /props answered 404")

    formats = Formats(fetch=fetch, start=lambda work: work())
    target = Settings(upstream="http://127.0.0.1:9/v1", backend="llamacpp").for_model("any")
    for index in range(formats_module.MAX_MODELS + 5):
        formats.known(f"model-{index}", target, None)
    assert len(asked) == formats_module.MAX_MODELS
    assert formats.known("one-more", target, None) is None
    formats = Formats(fetch=fetch, start=lambda work: work())
    for _ in range(2):
        formats.known("down", target, None)
        formats.known("gone", target, None)
    assert asked[-2:] == ["down", "gone"]  # not yet due
    monkeypatch.setattr(formats_module, "RETRY_SECONDS", 0.0)
    formats.known("down", target, None)
    formats.known("gone", target, None)
    assert asked[-3:] == ["down", "gone", "down"]
