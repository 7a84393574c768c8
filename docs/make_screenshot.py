"""Takes the dashboard screenshot of docs/dashboard.md: the demo model, a few transforms, headless Chromium.

    .venv/bin/python docs/make_screenshot.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import requests
from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import Gunicorn, make_tool
from tests.test_browser import CHROMIUM, FLAGS

READ = make_tool("read_file", {"path": {"type": "string"}}, ["path"])
BASH = make_tool("bash", {"command": {"type": "string"}, "timeout": {"type": "integer"}}, ["command"])
PROMPTS = [("read the file src/app.py", [READ, BASH], False), ("run bash ls -la as xml", [READ, BASH], True),
           ("read config.json, answer in json", [READ], False), ("hello there", None, True),
           ("read the file README.md", [READ], True)]


def main() -> None:
    with tempfile.TemporaryDirectory() as data:
        server = Gunicorn({"TOOLPROXY_DATA_DIR": data}).wait_ready()
        try:
            for prompt, tools, stream in PROMPTS:
                body = {"model": "qwen2.5-coder", "stream": stream,
                        "messages": [{"role": "user", "content": prompt}], **({"tools": tools} if tools else {})}
                requests.post(f"{server.url}/v1/chat/completions", json=body, timeout=10,
                              headers={"User-Agent": "openclaw/2026.11"}).raise_for_status()
            requests.post(f"{server.url}/v1/chat/completions", json={"model": "x"}, timeout=10)
            time.sleep(1)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(f"{server.url}/dashboard/")
                page.screenshot(path=str(Path(__file__).parent / "dashboard.png"), full_page=True)
                browser.close()
        finally:
            server.close()


if __name__ == "__main__":
    main()
