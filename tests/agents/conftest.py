"""Collects one line per agent run and prints them at the end of the session: what each agent sent."""

from __future__ import annotations

import pytest

REPORT: list[str] = []


@pytest.fixture
def agent_report() -> list[str]:
    return REPORT


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if REPORT:
        terminalreporter.section("agents through the proxy")
        for line in REPORT:
            terminalreporter.write_line(line)
