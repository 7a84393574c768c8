"""Requests a browser can be made to send (reliability #35; issue 12 failure 12).

DNS rebinding: a page on evil.example whose name is made to resolve to 127.0.0.1 reaches the proxy with
`Host: evil.example`; it is refused (403, OpenAI-shaped) unless that name is allowed. IP literals always pass
and so do names without a dot (a rebinding attack needs a public DNS name, and none is dotless), the name the
proxy is bound to and the names in `allowed_hosts`.
Cross-origin posts: a page may POST `text/plain` (or a body with no type) without a preflight; the API accepts
only `application/json` (415 otherwise) so such a post never reaches the upstream. No CORS header is ever sent
unless the origin is configured."""

from __future__ import annotations

import json

import pytest
import requests

from tests.conftest import make_body, with_settings
from tests.test_errors import assert_error
from toolproxy.config.settings import load_settings

PATHS = [("post", "/v1/chat/completions"), ("get", "/v1/models"), ("get", "/dashboard/"),
         ("get", "/dashboard/records.json"), ("get", "/"), ("get", "/metrics"), ("get", "/health")]


def call(proxy, method: str, path: str, headers: dict) -> requests.Response:
    if method == "post":
        return requests.post(proxy.url + path, json=make_body(), headers=headers, timeout=10)
    return requests.get(proxy.url + path, headers=headers, timeout=10)


@pytest.mark.parametrize(("method", "path"), PATHS)
@pytest.mark.parametrize("host", ["evil.example", "evil.example:8003", "localhost.evil.example", "127.0.0.1.nip.io"])
def test_unknown_host_names_are_refused_everywhere(proxy, upstream, method, path, host):
    upstream.completion("ok")
    response = call(proxy, method, path, {"Host": host})
    assert_error(response, 403, "host_not_allowed")
    assert "Access-Control-Allow-Origin" not in response.headers
    assert not upstream.received


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8003", "localhost", "LOCALHOST:1", "[::1]:8003", "[::1]",
                                  "10.1.2.3:8003", "[fe80::1]", "models.internal", "models.internal:443",
                                  "gpu-box", "gpu-box:8003", "x"])
def test_loopback_names_ip_literals_and_allowed_names_pass(upstream, serve, settings, host):
    proxy = serve(with_settings(settings, allowed_hosts=("models.internal",)))
    upstream.completion("ok")
    assert requests.post(f"{proxy.url}/v1/chat/completions", json=make_body(), headers={"Host": host},
                         timeout=10).status_code == 200


def test_the_bound_name_passes_and_a_star_allows_any(upstream, serve, settings):
    upstream.completion("ok")
    bound = serve(with_settings(settings, bind="gpu-box.lan:8003"))
    assert requests.get(f"{bound.url}/v1/models", headers={"Host": "gpu-box.lan:8003"}, timeout=10).status_code == 200
    assert requests.get(f"{bound.url}/v1/models", headers={"Host": "evil.example"}, timeout=10).status_code == 403
    anything = serve(with_settings(settings, allowed_hosts=("*",)))
    assert requests.get(f"{anything.url}/v1/models", headers={"Host": "evil.example"}, timeout=10).status_code == 200


def test_allowed_hosts_from_environment_and_yaml(tmp_path):
    assert load_settings({"TOOLPROXY_ALLOWED_HOSTS": "a.lan, b.lan"}).allowed_hosts == ("a.lan", "b.lan")
    config = tmp_path / "toolproxy.yaml"
    config.write_text("allowed_hosts: [c.lan]\ncors_origins: ['http://localhost:5173']\n")
    loaded = load_settings({"TOOLPROXY_CONFIG": str(config)})
    assert loaded.allowed_hosts == ("c.lan",) and loaded.cors_origins == ("http://localhost:5173",)


@pytest.mark.parametrize("content_type", [None, "text/plain", "text/plain;charset=UTF-8",
                                          "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                                          "application/jsonx", "text/json"])
def test_the_api_takes_only_json(proxy, upstream, content_type):
    upstream.completion("ok")
    headers = {"Content-Type": content_type} if content_type else {}
    response = requests.post(f"{proxy.url}/v1/chat/completions", data=json.dumps(make_body()).encode(),
                             headers=headers, timeout=10)
    error = assert_error(response, 415, "unsupported_media_type")
    assert "application/json" in error["message"]
    assert not upstream.received


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8",
                                          "Application/JSON"])
def test_json_with_parameters_or_any_case_is_accepted(proxy, upstream, content_type):
    upstream.completion("ok")
    response = requests.post(f"{proxy.url}/v1/chat/completions", data=json.dumps(make_body()).encode(),
                             headers={"Content-Type": content_type}, timeout=10)
    assert response.status_code == 200, response.text


def test_no_cors_headers_for_a_cross_origin_request(proxy, upstream):
    upstream.completion("ok")
    origin = {"Origin": "http://evil.example"}
    preflight = requests.options(f"{proxy.url}/v1/chat/completions", timeout=10, headers={
        **origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
    answers = [preflight, requests.post(f"{proxy.url}/v1/chat/completions", json=make_body(), headers=origin,
                                        timeout=10),
               requests.get(f"{proxy.url}/dashboard/records.json", headers=origin, timeout=10)]
    for answer in answers:
        assert not [name for name in answer.headers if name.lower().startswith("access-control-")]


def test_configured_origins_get_cors_and_others_do_not(upstream, serve, settings):
    proxy = serve(with_settings(settings, cors_origins=("http://localhost:5173",)))
    upstream.completion("ok")
    url = f"{proxy.url}/v1/chat/completions"
    ask = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}
    preflight = requests.options(url, headers={"Origin": "http://localhost:5173", **ask}, timeout=10)
    assert preflight.status_code in (200, 204)
    assert preflight.headers["Access-Control-Allow-Origin"] == "http://localhost:5173"
    assert "POST" in preflight.headers["Access-Control-Allow-Methods"]
    assert "authorization" in preflight.headers["Access-Control-Allow-Headers"].lower()
    allowed = requests.post(url, json=make_body(), headers={"Origin": "http://localhost:5173"}, timeout=10)
    assert allowed.headers["Access-Control-Allow-Origin"] == "http://localhost:5173"
    assert "Origin" in allowed.headers["Vary"]
    other = requests.post(url, json=make_body(), headers={"Origin": "http://evil.example"}, timeout=10)
    assert "Access-Control-Allow-Origin" not in other.headers
    dashboard = requests.get(f"{proxy.url}/dashboard/", headers={"Origin": "http://localhost:5173"}, timeout=10)
    assert "Access-Control-Allow-Origin" not in dashboard.headers  # the pages are never shared cross-origin
