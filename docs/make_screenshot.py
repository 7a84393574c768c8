"""Takes the screenshots of the README and docs/dashboard.md: the dashboard and a record page after a scripted run
of every kind of outcome, in headless Chromium. They are the ones tests/test_browser_charts.py takes, written here
instead of into the test's temporary directory.

    .venv/bin/python docs/make_screenshot.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent


def main() -> None:
    test = "tests/test_browser_charts.py::test_charts_render_update_live_and_the_page_works_without_them"
    environ = {**os.environ, "TOOLPROXY_SCREENSHOTS": str(DOCS)}
    sys.exit(subprocess.call([sys.executable, "-m", "pytest", "-q", test], cwd=DOCS.parent, env=environ))


if __name__ == "__main__":
    main()
