"""Codex CLI through the proxy's Responses front end (real gunicorn, loopback), set up with the Codex CLI recipe
of docs/clients.md, in front of a scripted model that writes its calls as text: one turn runs a shell command and
reports its output, one changes a file on disk through the freeform `apply_patch` tool. `make test-agents` only."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.agents.agents import Run, run_codex
from tests.agents.codex_model import FORMS, THOUGHT, CodexModel
from tests.agents.test_agents import ROUTE, TIMEOUT
from tests.fake_upstream import FakeUpstream

pytestmark = pytest.mark.agents


@pytest.fixture
def scripted_upstream():
    server = FakeUpstream().start()
    yield server
    server.stop()


def codex_turn(model: CodexModel, prompt: str, work: Path, home: Path, upstream: FakeUpstream, start_gunicorn: Any,
               strategy: str = "buffered") -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]], str]:
    upstream.script = model
    proxy = start_gunicorn({"TOOLPROXY_UPSTREAM": upstream.url, "TOOLPROXY_STREAM_STRATEGY": strategy}).wait_ready()
    result = run_codex(Run(work, home, f"{proxy.url}/v1", prompt, TIMEOUT))
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return result, events, proxy.output()


def completed(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event["item"] for event in events if event.get("type") == "item.completed"
            and event.get("item", {}).get("type") == kind]


@pytest.mark.parametrize(("form", "strategy"), [*((form, "buffered") for form in FORMS), ("hermes", "incremental")])
def test_codex_runs_a_shell_command_and_reports_its_output(form, strategy, tmp_path: Path, scripted_upstream,
                                                            start_gunicorn, agent_report):
    work, home, secret = tmp_path / "work", tmp_path / "home", f"MANGO-{uuid.uuid4().hex[:12]}"
    work.mkdir()
    home.mkdir()
    (work / "notes.txt").write_text(f"The note says {secret}\n")
    model = CodexModel(form, "shell", marker="Task 5120", result=secret, final=f"Done. The command printed: {secret}",
                       command="cat notes.txt")
    prompt = "Task 5120: run `cat notes.txt` in the shell and tell me what it printed."
    result, events, log = codex_turn(model, prompt, work, home, scripted_upstream, start_gunicorn, strategy)
    commands = completed(events, "command_execution")
    agent_report.append(summary(f"shell ({strategy})", form, result, model, log, commands))
    printed = diagnosis(model, result)
    assert any(secret in command["aggregated_output"] and command["exit_code"] == 0 for command in commands), printed
    assert model.final in [item["text"] for item in completed(events, "agent_message")], printed
    assert result.returncode == 0 and model.calls_made() == 1, printed
    assert completed(events, "reasoning") and not any(THOUGHT in json.dumps(body) for body in model.requests), printed


@pytest.mark.parametrize("form", FORMS)
def test_codex_changes_a_file_through_apply_patch(form, tmp_path: Path, scripted_upstream, start_gunicorn,
                                                  agent_report):
    work, home, secret = tmp_path / "work", tmp_path / "home", f"KIWI-{uuid.uuid4().hex[:12]}"
    work.mkdir()
    home.mkdir()
    (work / "greeting.txt").write_text("hello\nworld\n")
    patch = f"*** Begin Patch\n*** Update File: greeting.txt\n@@\n-hello\n+goodbye {secret}\n world\n*** End Patch"
    model = CodexModel(form, "patch", marker="Task 6221", result="greeting.txt", final="Done. The file is patched.",
                       patch=patch)
    prompt = "Task 6221: in greeting.txt, replace the word hello."
    result, events, log = codex_turn(model, prompt, work, home, scripted_upstream, start_gunicorn)
    changes = completed(events, "file_change")
    agent_report.append(summary("apply_patch", form, result, model, log, changes))
    printed = diagnosis(model, result)
    assert (work / "greeting.txt").read_text() == f"goodbye {secret}\nworld\n", printed
    assert [change["status"] for change in changes] == ["completed"], printed
    assert model.final in [item["text"] for item in completed(events, "agent_message")], printed
    assert result.returncode == 0 and model.calls_made() == 1, printed


def diagnosis(model: CodexModel, result: subprocess.CompletedProcess[str]) -> str:
    names = sorted({tool["function"]["name"] for body in model.requests for tool in body.get("tools") or []})
    return (f"tools offered: {names}\nanswers: {model.answers}\nexit {result.returncode}\n"
            f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}")


def summary(task: str, form: str, result: subprocess.CompletedProcess[str], model: CodexModel, log: str,
            items: list[dict[str, Any]]) -> str:
    routes = [f"{route}({status}, calls={calls}, {dialects})" for route, status, calls, dialects in ROUTE.findall(log)]
    tools = [len(body.get("tools") or []) for body in model.requests]
    passed = result.returncode == 0 and model.final in result.stdout
    return (f"codex {task} form={form}: {'PASS' if passed else 'FAIL'} exit={result.returncode} "
            f"upstream tools per request={tools} routes={routes} codex items={[item.get('status') for item in items]}")
