"""The seam between the core and the wire protocols: every request's record names its protocol and the dashboard
filters by it; the VTC stream is the incremental pipeline with calls written as XML, and gives a VTC client the
same calls and text as the whole answer over every golden case."""

from __future__ import annotations

import pytest
import requests

from tests.conftest import make_body
from tests.sse_client import accumulate, read_stream
from tests.test_dashboard import wait_for_records
from tests.test_golden import CASES, load
from tests.test_vtc import CLINE_UA
from toolproxy.meaning.extraction import extract

VTC_ON = {**CLINE_UA, "X-Toolproxy-VTC": "on"}


def test_every_record_names_its_protocol_and_the_dashboard_filters_by_it(upstream, proxy):
    upstream.completion("hello")
    proxy.post(make_body("hi"))
    proxy.post({"model": "m"})  # rejected before routing: still a record, still of its protocol
    rows = wait_for_records(proxy.url, 2)
    assert [row["protocol"] for row in rows] == ["chat", "chat"]
    chat = requests.get(f"{proxy.url}/dashboard/records.json", params={"protocol": "chat"}, timeout=5).json()
    other = requests.get(f"{proxy.url}/dashboard/records.json", params={"protocol": "messages"}, timeout=5).json()
    assert len(chat["records"]) == 2 and other["records"] == []
    page = requests.get(f"{proxy.url}/dashboard/", params={"protocol": "chat"}, timeout=5).text
    assert 'name="protocol"' in page and "<td>chat</td>" in page
    rejected = next(row for row in rows if row["route"] == "rejected")  # records land in either order
    detail = requests.get(f"{proxy.url}/dashboard/record/{rejected['id']}", timeout=5).text
    assert ">chat · rejected · status 400" in detail  # the facts line: protocol, route, status


def as_client_reads_it(content: str | None, tools: dict[str, dict]) -> tuple[str, list[tuple[str, object]]]:
    """What a VTC client takes from its content: the calls written in it, and the text around them."""
    extraction = extract(content or "", tools)
    return " ".join((extraction.content() or "").split()), [(call.name, call.arguments) for call in extraction.calls]


@pytest.mark.parametrize("path", CASES, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_a_vtc_stream_gives_the_same_calls_and_text_as_the_whole_answer(path, upstream, proxy):
    """A stream writes each call where the model wrote it, a whole answer after its text (a stream cannot hold
    back what follows a call): the client reads the same calls, in the same order, and the same text."""
    text, expected, tools = load(path)
    upstream.completion(text)
    body = make_body("do it", expected["tools"])
    whole = proxy.post(body, headers=VTC_ON).json()["choices"][0]
    streamed = accumulate(read_stream(proxy.post({**body, "stream": True}, headers=VTC_ON)))
    assert whole["finish_reason"] == "stop" and streamed["finish_reason"] == ["stop"]
    assert "tool_calls" not in whole["message"] and streamed["tool_calls"] == []
    assert as_client_reads_it(streamed["content"], tools) == as_client_reads_it(whole["message"]["content"], tools)
    # Every call is there (nested values come back from XML as text where the schema does not type them).
    names = [name for name, _ in as_client_reads_it(whole["message"]["content"], tools)[1]]
    assert names == [call["name"] for call in expected["tool_calls"]]
