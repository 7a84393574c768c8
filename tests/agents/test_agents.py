"""One headless turn of each real agent CLI through the proxy (real gunicorn, loopback) in front of a scripted
model that writes its call as text: the agent must run the read tool on a file in its work dir, send the file's
content back, and end its turn with the model's text. `make test-agents` only (marker `agents`): it installs
the pinned CLIs first, and a run takes tens of seconds."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.agents.agents import PROXY_SETTINGS, RUNNERS, Run
from tests.agents.scripted_model import FORMS, INTRO, ScriptedModel
from tests.fake_upstream import FakeUpstream

pytestmark = pytest.mark.agents
TIMEOUT = 240  # seconds for one agent turn: CLIs start slowly on a loaded machine
# toolproxy's one line per request: `request request_id=... model=... client=... route=... status=... calls=...`
ACCESS = re.compile(r' client=("(?:[^"\\]|\\.)*"|\S+)')
ROUTE = re.compile(r" route=(\S+) status=(\d+)(?: calls=(\S+))?(?: dialects=(\S+))?")


@pytest.fixture
def scripted_upstream():
    server = FakeUpstream().start()
    yield server
    server.stop()


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("agent", list(RUNNERS))
def test_agent_reads_a_file_and_finishes(agent, form, tmp_path: Path, scripted_upstream, start_gunicorn,
                                         agent_report):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    secret = f"PAPAYA-{uuid.uuid4().hex[:12]}"
    (work / "notes.txt").write_text(f"The note says {secret}\n")
    model = ScriptedModel(form=form, path=str(work / "notes.txt"), marker="Task 4417", secret=secret)
    scripted_upstream.script = model
    extra = PROXY_SETTINGS[agent](work) if agent in PROXY_SETTINGS else {}
    proxy = start_gunicorn({"TOOLPROXY_UPSTREAM": scripted_upstream.url, **extra}).wait_ready()
    prompt = "Task 4417: read the file notes.txt in the current directory and tell me what it says."
    result = RUNNERS[agent](Run(work, home, f"{proxy.url}/v1", prompt, TIMEOUT))
    log = proxy.output()
    agent_report.append(summary(agent, form, result.returncode, model, log, result.stdout))
    printed = diagnosis(model, result)
    assert any(model.has_result(body.get("messages") or []) for body in model.requests), \
        f"the file's content never reached the model\n{printed}"
    assert f"Done. The file says: {secret}" in result.stdout, f"the agent did not finish with text\n{printed}"
    assert result.returncode == 0, printed
    calls = [answer for answer in model.answers if answer.startswith(INTRO)]
    assert 1 <= len(calls) <= 2, f"the agent looped\n{printed}"
    if agent == "claude":
        assert_every_stream_answered_well(log, model, result.stdout, printed)


def assert_every_stream_answered_well(log: str, model: ScriptedModel, stdout: str, printed: str) -> None:
    """Claude Code asks again without streaming when a stream fails (its non-streaming fallback): that must never
    be what saves a turn. Every request it made streamed (tools: the buffered stream route) and ended 200, every
    upstream call named the model the recipe maps Claude's names to, and the turn ended without an error."""
    assert json.loads(stdout)["is_error"] is False, printed
    routes = ROUTE.findall(log)
    assert routes and all(route in ("tools_stream", "stream") and status == "200"
                          for route, status, _, _ in routes), f"a request did not stream well: {routes}\n{printed}"
    assert {body.get("model") for body in model.requests} == {"qwen2.5-coder"}, printed


def diagnosis(model: ScriptedModel, result: subprocess.CompletedProcess[str]) -> str:
    names = sorted({tool["function"]["name"] for body in model.requests for tool in body.get("tools") or []})
    return (f"tools offered: {names}\nanswers: {model.answers}\nexit {result.returncode}\n"
            f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}")


def summary(agent: str, form: str, returncode: int, model: ScriptedModel, log: str, stdout: str) -> str:
    """What the lead needs per run: the client's User-Agent, native tools or not, the routes the proxy took."""
    agents = sorted({json.loads(agent) if agent.startswith('"') else agent for agent in ACCESS.findall(log)})
    routes = [f"{route}({status}, calls={calls}, {dialects})" for route, status, calls, dialects in ROUTE.findall(log)]
    tools = [len(body.get("tools") or []) for body in model.requests]
    last = ",".join(str(m.get("role"))[0] for m in model.requests[-1].get("messages") or []) if model.requests else ""
    passed = returncode == 0 and f"Done. The file says: {model.secret}" in stdout
    return (f"{agent} form={form}: {'PASS' if passed else 'FAIL'} exit={returncode} user-agent={agents} "
            f"upstream tools per request={tools} routes={routes} last request's roles={last}")
