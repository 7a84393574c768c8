"""The upstream client reads the environment once, not per request, and still honours proxy variables."""

from __future__ import annotations

import pytest
import requests

from tests.conftest import make_body
from tests.fake_upstream import completion


def test_proxy_variables_still_route_the_upstream_request(upstream, serve, settings,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # The scripted upstream plays the HTTP proxy: a request through a proxy names the whole URL in its path.
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", upstream.url.rsplit("/v1", 1)[0])
    upstream.script = lambda request, wire: wire.send_json(completion("hello"))
    proxy = serve(settings)
    client = requests.Session()
    client.trust_env = False  # the test's own request goes straight to the proxy
    for _ in range(2):  # the second request reuses what the first worked out
        response = client.post(f"{proxy.url}/v1/chat/completions", json=make_body("hi"), timeout=30)
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["message"]["content"] == "hello"
    # Through a proxy the request line carries the absolute URL; sent directly it would be the path alone.
    assert [r.path for r in upstream.received] == [f"{settings.upstream}/chat/completions"] * 2
