"""The dashboard's pages read right for requests that never reached a model (issue 24, the operator's first
week): a loop-guard stop, a rejected request, a request without a model."""

from __future__ import annotations

import html
import re

import requests

from tests.conftest import make_body, make_tool, with_settings
from tests.test_dashboard import wait_for_records
from tests.test_loopguard import conversation, turn

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])


def section(page: str, element_id: str) -> str:
    """The text of the element with this id (tags dropped, entities decoded)."""
    match = re.search(rf'id="{element_id}"[^>]*>(.*?)</(?:p|pre|ul|div)>', page, re.S)
    assert match, f"no #{element_id} on the page"
    return html.unescape(re.sub(r"<[^>]+>", "\n", match.group(1))).strip()


def record_page(url: str, record_id: int) -> str:
    page = requests.get(f"{url}/dashboard/record/{record_id}", timeout=10)
    assert page.status_code == 200
    return page.text


def test_a_loop_guard_record_shows_what_the_client_got_and_says_it_once(upstream, serve, settings):
    proxy = serve(with_settings(settings, loop_repeats=3))
    body = make_body("go", [READ])
    body["messages"] = conversation(turn("/a"), turn("/a"), turn("/a"))
    sentence = proxy.post(body).json()["choices"][0]["message"]["content"]
    [row] = wait_for_records(proxy.url, 1)
    page = record_page(proxy.url, row["id"])
    assert section(page, "client") == sentence, "the client received the guard's answer"
    assert section(page, "issues").count(sentence) == 1
    assert "the upstream was not asked" in page


def test_a_rejected_record_names_what_it_has(upstream, proxy):
    proxy.post({"model": "m"})  # no messages: rejected with a 400
    [row] = wait_for_records(proxy.url, 1)
    facts = section(record_page(proxy.url, row["id"]), "facts")
    assert facts.startswith("chat · rejected · status 400\n  · client"), facts  # its model was never read
    assert "None" not in facts and "· ·" not in facts


def test_requests_without_a_model_are_listed_as_none(upstream, proxy):
    for _ in range(2):
        proxy.post({"messages": [{"role": "user", "content": "hi"}]})
    proxy.post(make_body())
    wait_for_records(proxy.url, 3)
    page = requests.get(f"{proxy.url}/dashboard/", timeout=10).text
    by_model = section(page, "by-model").splitlines()
    assert "(none): 2" in by_model and "test-model: 1" in by_model, by_model
    assert not [line for line in by_model if line.startswith(":")]
