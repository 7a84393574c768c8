"""Nothing a client or a model sends can break a page (reliability #24, #34; issue 12 failure 9): a lone surrogate
(legal as a JSON escape, not encodable as UTF-8), NUL, bidi overrides or bytes that are not UTF-8 in the model
name, the messages, the User-Agent, the tools, the model's answer or the query string, and every page still
answers 200 with what it has: the dashboard, the record view, both JSON downloads, the start page, metrics."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import requests

from tests.conftest import make_tool
from tests.test_dashboard import wait_for_records

LONE = "\ud83d"
ODD = LONE + "\x00\u202e\u2028\udfff"  # a lone high and a lone low surrogate, NUL, RTL override, line separator


def raw_body(**fields: object) -> bytes:
    """JSON with `\\ud83d` escapes as a client may send them (json.dumps writes lone surrogates that way)."""
    return json.dumps(fields).encode()


def send_odd_request(proxy, upstream) -> None:
    tool = make_tool("read", {"path": {"type": "string", "description": ODD}}, ["path"])
    upstream.completion("answer " + ODD + '\n<tool_call>{"name": "read", "arguments": {"path": "' + ODD + '"}}'
                        "</tool_call>")
    response = requests.post(f"{proxy.url}/v1/chat/completions", timeout=30,
                             data=raw_body(model="m" + ODD, messages=[{"role": "user", "content": ODD}],
                                           tools=[tool]),
                             headers={"Content-Type": "application/json", "User-Agent": "agent\xff\x01"})
    assert response.status_code == 200, response.text


def test_odd_text_everywhere_never_breaks_a_page(proxy, upstream):
    send_odd_request(proxy, upstream)
    requests.post(f"{proxy.url}/v1/chat/completions", data=raw_body(model=ODD, messages="no"), timeout=10,
                  headers={"Content-Type": "application/json"})  # rejected, still recorded
    rows = wait_for_records(proxy.url, 2)
    pages = ["/dashboard/", "/dashboard/records.json", "/", "/metrics",
             "/dashboard/?model=%ED%A0%BD&client=%FF&status=%00",
             "/dashboard/records.json?model=%ED%A0%BD&status=%C2%B2"]
    for row in rows:
        pages += [f"/dashboard/record/{row['id']}", f"/dashboard/record/{row['id']}/testcase.json"]
    for page in pages:
        response = requests.get(proxy.url + page, timeout=10)
        assert response.status_code == 200, (page, response.text[:500])
        response.content.decode("utf-8")  # strict: what a page sends is always valid UTF-8
    listing = requests.get(f"{proxy.url}/dashboard/", timeout=10).text
    assert "\ufffd" in listing  # the odd model name is shown, its unencodable part replaced


def test_filtering_by_an_odd_model_finds_its_record(proxy, upstream):
    send_odd_request(proxy, upstream)
    wait_for_records(proxy.url, 1)
    [row] = requests.get(f"{proxy.url}/dashboard/records.json", timeout=10).json()["records"]
    found = requests.get(f"{proxy.url}/dashboard/records.json", params={"model": row["model"]},
                         timeout=10).json()["records"]
    assert [record["id"] for record in found] == [row["id"]]


def test_a_record_stored_before_the_fix_still_renders(proxy, upstream, settings):
    """A store written by an older version may hold `\\ud83d` escapes in its JSON: the pages replace them."""
    upstream.completion("fine")
    requests.post(f"{proxy.url}/v1/chat/completions", json={"model": "plain", "messages": [
        {"role": "user", "content": "x"}]}, timeout=10)
    [row] = wait_for_records(proxy.url, 1)
    with contextlib.closing(sqlite3.connect(Path(settings.data_dir) / "translog.sqlite3")) as connection:
        for column in ("summary", "record"):
            connection.execute(f"UPDATE records SET {column} = replace({column}, '\"plain\"', '\"pl\\ud83dain\"')")
        connection.commit()
    for page in ("/dashboard/", f"/dashboard/record/{row['id']}"):
        response = requests.get(proxy.url + page, timeout=10)
        assert response.status_code == 200 and "pl\ufffdain" in response.text
