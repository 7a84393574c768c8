"""Limits that bound the work one request can cause, through a real HTTP server."""

from __future__ import annotations

import json

from tests.conftest import make_body, with_settings


def test_a_body_of_many_tiny_arrays_is_refused_before_decoding(serve, settings, upstream):
    proxy = serve(with_settings(settings, max_json_containers=1000))
    upstream.completion("ok")
    flood = {"model": "m", "messages": [{"role": "user", "content": "x", "extra": [[] for _ in range(2000)]}]}
    response = proxy.post(flood)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_json"
    assert "1000 arrays and objects" in response.json()["error"]["message"]
    assert not upstream.received
    # Brackets inside strings are text, not containers: code full of them passes.
    code = "def f(a=[{}]): return [[{}]]\n" * 1000
    assert proxy.post(make_body(code)).status_code == 200
    assert json.loads(upstream.received[0].body)["messages"][-1]["content"] == code
