"""The dashboard in a real headless Chromium (Debian's package, driven by Playwright): it updates itself, shows
both sides of a transform, and model output full of markup stays inert text.

No skip when the browser is missing: `make test` installs it, and CI must fail rather than pass untested."""

from __future__ import annotations

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
