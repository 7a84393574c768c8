"""The dashboard's charts in a real headless Chromium (Debian's, as tests/test_browser.py drives it), under the
strict Content-Security-Policy: drawn from a scripted run of every kind of outcome, updated live as requests come,
the table's live rows the same as the server's, and the page still whole without JavaScript. The run's screenshots
of the dashboard and of a record page go to $TOOLPROXY_SCREENSHOTS when set (docs/make_screenshot.py sets it to
docs/, whose pictures the README shows)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from playwright.sync_api import Page, sync_playwright

from tests.conftest import make_body, make_tool
from tests.fake_upstream import FakeUpstream, completion
from tests.test_browser import CHROMIUM, FLAGS
from tests.test_loopguard import conversation, turn
from toolproxy.observe.charts import CHARTS, OUTCOMES
from toolproxy.web.columns import COLUMNS

READ = make_tool("read_file", {"path": {"type": "string"}}, ["path"])
BASH = make_tool("bash", {"command": {"type": "string"}}, ["command"])
CALL = '<tool_call>{"name": "read_file", "arguments": {"path": "src/app.py"}}</tool_call>'
WRONG = '<tool_call>{"name": "delete_everything", "arguments": {}}</tool_call>'
QWEN_CALL = "<function=bash><parameter=command>ls -la</parameter></function>"
AGENT = {"User-Agent": "openclaw/2026.11"}


def scripted_run(upstream: FakeUpstream, url: str, rounds: int = 1) -> None:
    """Requests of every outcome: calls made, repaired and failed, a stream, an upstream error, a loop stopped,
    a request refused."""
    def post(body: dict[str, Any], **headers: str) -> int:
        return requests.post(f"{url}/v1/chat/completions", json=body, headers={**AGENT, **headers},
                             timeout=30).status_code

    for _ in range(rounds):
        upstream.completion(f"Reading it. {CALL}")
        assert post(make_body("read src/app.py", [READ, BASH], model="qwen2.5-coder")) == 200
        assert post(make_body("read src/app.py", [READ, BASH], model="qwen2.5-coder", stream=True)) == 200
        upstream.completion(QWEN_CALL)
        assert post(make_body("list the files", [READ, BASH], model="qwen3-coder", stream=True)) == 200
        upstream.completion(WRONG)
        assert post(make_body("clean up", [READ, BASH], model="qwen3-coder")) == 200
        answers = iter([completion(WRONG), completion(CALL)])
        upstream.script = lambda request, wire, answers=answers: wire.send_json(next(answers))
        assert post(make_body("read it", [READ], model="fixer-7b")) == 200  # asked again, then right
        looping = make_body("go on", [READ], model="qwen2.5-coder")
        looping["messages"] = conversation(turn("/a"), turn("/a"), turn("/a"))
        assert post(looping) == 200
        upstream.script = lambda request, wire: wire.send_json({"error": {"message": "loading"}}, 503)
        assert post(make_body("hello", model="llama3.1")) == 503
        upstream.completion("Hello! How can I help?")
        assert post(make_body("hello", model="llama3.1", stream=True)) == 200
        assert post({"model": "qwen2.5-coder", "messages": "not a list"}) == 400


def attribute_becomes(page: Page, selector: str, name: str, done: Callable[[str], bool], timeout: float = 30) -> str:
    """Polled from here: the strict CSP forbids the page string evaluation Playwright's waits would use."""
    deadline = time.monotonic() + timeout
    value = ""
    while time.monotonic() < deadline:
        value = page.locator(selector).get_attribute(name) or ""
        if done(value):
            return value
        page.wait_for_timeout(200)
    raise AssertionError(f"{selector}[{name}] stayed {value!r}")


def cells(page: Page, record_id: str) -> list[str]:
    return [text.strip() for text in page.locator(f'#records tr[data-id="{record_id}"] td').all_inner_texts()]


def test_charts_render_update_live_and_the_page_works_without_them(upstream, start_gunicorn, tmp_path):
    (tmp_path / "models.yaml").write_text("models:\n  - match: 'fixer*'\n    repair_rounds: 1\n")
    server = start_gunicorn({"TOOLPROXY_UPSTREAM": upstream.url, "TOOLPROXY_CONFIG": str(tmp_path / "models.yaml"),
                             "TOOLPROXY_LOOP_REPEATS": "3"}).wait_ready()
    scripted_run(upstream, server.url, rounds=2)
    shots = Path(os.environ.get("TOOLPROXY_SCREENSHOTS") or tmp_path)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("console", lambda message: errors.append(message.text) if message.type == "error"
                and not message.text.startswith("Failed to load resource") else None)  # the responses are below
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("response", lambda response: errors.append(f"{response.status} {response.url}")
                if response.status >= 400 and not response.url.endswith("/favicon.ico") else None)
        page.goto(f"{server.url}/dashboard/?window=300")

        for chart in CHARTS:  # every chart drawn, with data
            attribute_becomes(page, f"#chart-{chart.key}", "data-total", lambda value: float(value or 0) > 0)
        assert page.locator("#charts canvas").count() >= len(CHARTS)
        assert page.locator("#chart-outcomes").get_attribute("data-series") == str(len(OUTCOMES))
        legend = page.locator("#chart-outcomes .u-legend").inner_text()
        assert all(outcome in legend for outcome in OUTCOMES)
        assert "qwen3-coder · qwen3_coder" in page.locator("#chart-failed_share .u-legend").inner_text()

        before = float(page.locator("#chart-outcomes").get_attribute("data-total") or 0)
        upstream.completion(f"Once more. {CALL}")
        for _ in range(3):
            assert requests.post(f"{server.url}/v1/chat/completions", headers=AGENT, timeout=30,
                                 json=make_body("again", [READ], model="qwen2.5-coder")).ok
        attribute_becomes(page, "#chart-outcomes", "data-total", lambda value: float(value or 0) > before)

        newest = attribute_becomes(page, "#records tbody tr:first-child", "data-id",
                                   lambda value: int(value or 0) >= 21)
        live = cells(page, newest)  # written by the script from the declared columns
        page.screenshot(path=str(shots / "dashboard.png"), full_page=True)
        page.reload()
        assert cells(page, newest) == live and len(live) == len(COLUMNS)  # as the server writes it
        page.locator(f'#records tr[data-id="{newest}"] a').click()
        page.wait_for_selector("#raw")
        page.screenshot(path=str(shots / "record.png"), full_page=True)
        assert errors == [], errors  # no CSP refusal, no script error

        bare = browser.new_context(java_script_enabled=False).new_page()
        bare.goto(f"{server.url}/dashboard/?window=300")
        assert bare.locator("#records tbody tr").count() >= 21 and bare.locator("#charts canvas").count() == 0
        bare.fill("input[name=model]", "llama3.1")
        bare.locator("form.filters button", has_text="Filter").click()
        bare.wait_for_url("**model=llama3.1**")
        assert set(bare.locator("#records tbody tr td:nth-child(3)").all_inner_texts()) == {"llama3.1"}
        browser.close()
