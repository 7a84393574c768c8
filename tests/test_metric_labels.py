"""Every label of /metrics takes its values from a bounded set: a client sending a thousand random model names,
User-Agents and markup cannot grow the series (nor the memory that holds them)."""

from __future__ import annotations

import itertools
import random
import string
from collections.abc import Iterable

import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import make_body, make_tool, with_settings
from toolproxy.clients.families import NAMES, family
from toolproxy.config.catalog import ModelRule
from toolproxy.observe.metrics import DIALECT_NAMES, status_label

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])
CALLS = ['<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>',
         '<function=read><parameter=path>a</parameter></function>', "[read(path='a')]", "no call at all"]


def series(url: str) -> dict[str, set[frozenset[tuple[str, str]]]]:
    text = requests.get(f"{url}/metrics", timeout=10).text
    found: dict[str, set[frozenset[tuple[str, str]]]] = {}
    for metric in text_string_to_metric_families(text):
        for sample in metric.samples:
            found.setdefault(sample.name, set()).add(frozenset(sample.labels.items()))
    return found


def noise(rng: random.Random, size: int) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits + "-_./:") for _ in range(size))


def test_a_thousand_random_model_names_add_no_series(upstream, serve, settings):
    proxy = serve(with_settings(settings, models=(ModelRule("qwen*"),)))
    rng = random.Random(22)
    session = requests.Session()

    def send(kinds: Iterable[tuple[str, str, bool, bool, str]]) -> None:
        """One request per kind: a model (a random name unless `qwen`), a User-Agent (random unless named), tools
        or not, a stream or not, and what the model answers."""
        for model, agent, tools, stream, answer in kinds:
            upstream.completion(answer)
            body = make_body("x", [READ] if tools else None, stream=stream,
                             model="qwen3-coder" if model == "qwen" else noise(rng, rng.randint(1, 60)))
            headers = {"User-Agent": noise(rng, 40) if agent == "random" else agent}
            assert session.post(f"{proxy.url}/v1/chat/completions", json=body, headers=headers, timeout=30).ok

    kinds = list(itertools.product(["qwen", "random"], ["OpenAI/Python 3.51.0", "curl/8.5.0", "random"],
                                   [True, False], [True, False], CALLS))
    send(kinds)  # every kind of request once: each series that can exist now does
    before = series(proxy.url)
    send(rng.choice(kinds) for _ in range(1000))  # a thousand random model names, most with a random agent
    after = series(proxy.url)
    assert {name: len(found) for name, found in after.items()} == {name: len(found) for name, found in before.items()}
    labels = [dict(labelset) for found in after.values() for labelset in found]
    assert {item["model"] for item in labels if "model" in item} == {"qwen*", "other"}
    assert {item["client"] for item in labels if "client" in item} == {"openai-python", "curl", "other"}
    assert {item["dialect"] for item in labels if "dialect" in item} <= DIALECT_NAMES


def test_client_families_and_statuses_are_a_closed_set():
    assert family("claude-cli/2.0.14 (external, cli)") == "claude-code"
    assert family("codex_cli_rs/0.46.0 (Debian 12; x86_64) xterm") == "codex"
    assert family("OpenAI/JS 6.3.0") == "openai-node" and family("OpenAI/Python 3.51.0") == "openai-python"
    assert family("Kilo-Code/7.7.7") == "kilo-code" and family("") == "none"
    assert family("x" * 100_000 + "curl/8") == "other"  # read so far only: a long agent costs no more
    assert {family(noise(random.Random(seed), 30)) for seed in range(200)} <= set(NAMES)
    assert status_label(502) == "502" and status_label("client_disconnected") == "client_disconnected"
    assert status_label(True) == "other" and status_label(999) == "other" and status_label("<x>") == "other"
