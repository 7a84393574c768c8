"""The dashboard in a real headless Chromium (Debian's package, driven by Playwright): it updates itself, shows
both sides of a transform, and model output full of markup stays inert text.

No skip when the browser is missing: `make test` installs it, and CI must fail rather than pass untested."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from pathlib import Path

import pytest
import requests
from playwright.sync_api import sync_playwright

from tests.conftest import make_tool

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
READ = make_tool("read", {"path": {"type": "string"}}, ["path"])


class Sentinel:
    """A listener that counts connections: any request from the page to it means a payload ran."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            conn.close()


@pytest.fixture
def browser_page():
    assert Path(CHROMIUM).exists(), "Debian's chromium is required: `make test` installs it"
    with sync_playwright() as playwright:
        # Playwright gives the browser a fresh empty profile of its own.
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.dialogs = dialogs  # type: ignore[attr-defined]
        yield page
        browser.close()


def payloads(port: int) -> list[str]:
    return ["<script>alert(1)</script>", f'<img src=x onerror="fetch(\'http://127.0.0.1:{port}/img\')">',
            f"\"'><svg onload=alert(2)><a href=\"javascript:fetch('http://127.0.0.1:{port}/a')\">x</a>",
            f"</script><script src=http://127.0.0.1:{port}/s.js></script>", "{{7*7}} ${7*7}"]


def test_dashboard_in_a_real_browser(upstream, start_gunicorn, browser_page, tmp_path):
    sentinel = Sentinel()
    server = start_gunicorn({"TOOLPROXY_UPSTREAM": upstream.url, "TOOLPROXY_DATA_DIR": str(tmp_path)}).wait_ready()
    evil = "\n".join(payloads(sentinel.port))
    upstream.completion(evil + '\n<tool_call>{"name": "read", "arguments": {"path": "' +
                        '<img src=x onerror=alert(3)>"}}</tool_call>')
    body = {"model": "<script>alert(4)</script>", "messages": [{"role": "user", "content": "x"}], "tools": [READ]}
    headers = {"User-Agent": "<img src=x onerror=alert(5)>"}
    assert requests.post(f"{server.url}/v1/chat/completions", json=body, headers=headers, timeout=10).ok
    time.sleep(0.5)  # the log is written off the request path

    page = browser_page
    page.goto(f"{server.url}/dashboard/")
    rows = page.locator("#records tbody tr")
    assert rows.count() == 1
    assert "<script>alert(4)</script>" in rows.first.inner_text()

    upstream.completion("a second answer")
    requests.post(f"{server.url}/v1/chat/completions", json={**body, "model": "second-model"}, timeout=10)
    rows.nth(1).wait_for(timeout=8000)  # (the strict CSP forbids Playwright's string evaluation)
    assert "second-model" in rows.first.inner_text(), "the new transform appeared without a reload"

    page.locator("#records tbody tr").nth(1).locator("a").click()
    page.wait_for_selector("#raw")
    raw, client = page.locator("#raw").inner_text(), page.locator("#client").inner_text()
    assert "<script>alert(1)</script>" in raw and "<script>alert(1)</script>" in client
    assert page.locator("#raw mark").count() == 1, "the extracted call is highlighted in the model's text"
    page.wait_for_timeout(500)
    assert page.dialogs == [] and sentinel.hits == 0  # type: ignore[attr-defined]
    assert page.locator("script:not([src])").count() == 0
    page.screenshot(path=str(tmp_path / "dashboard.png"))


ATTACKER_PAGE = b"<!doctype html><title>elsewhere</title><p>a page on another origin</p>"


def serve_attacker_page() -> str:
    """A page on another origin (another loopback port): what any web site the user visits can do."""
    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(ATTACKER_PAGE)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}/"


CROSS_ORIGIN_POSTS = """async (url) => {
  const body = JSON.stringify({model: "m", messages: [{role: "user", content: "from a page"}]});
  const results = {};
  for (const [name, init] of Object.entries({
      text_plain: {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body},
      no_type: {method: "POST", mode: "no-cors", body: new Blob([body])},
      json: {method: "POST", headers: {"Content-Type": "application/json"}, body}})) {
    try { const r = await fetch(url, init); results[name] = r.type + " " + r.status; }
    catch (error) { results[name] = "blocked"; }
  }
  return results;
}"""


def test_a_page_on_another_origin_cannot_use_the_api(upstream, proxy, browser_page):
    """Reliability #35 in a real browser: simple cross-origin posts are answered 415 and never reach the
    upstream; a JSON post needs a preflight, which gets no CORS header, so the browser never sends it."""
    upstream.completion("should never be asked")
    page = browser_page
    page.goto(serve_attacker_page())
    results = page.evaluate(CROSS_ORIGIN_POSTS, f"{proxy.url}/v1/chat/completions")
    assert results == {"text_plain": "opaque 0", "no_type": "opaque 0", "json": "blocked"}, results
    assert upstream.received == []


def test_dns_rebinding_in_a_real_browser(upstream, proxy):
    """A name the attacker controls, resolved to 127.0.0.1 (Chromium's resolver rules play the attacker's DNS):
    the browser reaches the proxy, which answers 403 to that name."""
    port = proxy.url.rsplit(":", 1)[1]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=[
            *FLAGS, "--host-resolver-rules=MAP evil.example 127.0.0.1"])
        page = browser.new_page()
        answer = page.goto(f"http://evil.example:{port}/v1/models")
        assert answer is not None and answer.status == 403
        assert '"host_not_allowed"' in page.content()
        browser.close()
    assert upstream.received == []
