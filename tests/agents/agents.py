"""How each real agent CLI is set up and run headless against the proxy: the configuration a user would write
(the README's recipes are these), a temporary HOME, and one command line. Installed by `make test-agents`
into .agents/ (tests/agents/package.json pins them)."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT

AGENTS = ROOT / ".agents"
BIN = AGENTS / "clis" / "node_modules" / ".bin"
NODE_BIN = AGENTS / "node" / "node_modules" / ".bin"  # Node.js 26, for OpenClaw (the machine's is 20)
PROVIDER, MODEL, KEY = "toolproxy", "scripted-model", "sk-agent-test"


@dataclass(frozen=True, slots=True)
class Run:
    """One agent turn: where it works, where it lives, and the proxy's base URL (with /v1)."""

    work: Path
    home: Path
    base_url: str
    prompt: str
    timeout: int

    def env(self, **extra: str) -> dict[str, str]:
        keep = {key: os.environ[key] for key in ("PATH", "LANG", "TERM") if key in os.environ}
        return {**keep, "HOME": str(self.home), "PWD": str(self.work), "NO_COLOR": "1", "CI": "1", **extra}

    def run(self, command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, cwd=self.work, env=env, capture_output=True, text=True,
                              timeout=self.timeout + 60, stdin=subprocess.DEVNULL, check=False)


def opencode_config(run: Run) -> dict[str, object]:
    """OpenCode's and Kilo's provider entry: the AI SDK's openai-compatible provider pointed at the proxy."""
    return {"$schema": "https://opencode.ai/config.json",
            "provider": {PROVIDER: {"npm": "@ai-sdk/openai-compatible", "name": "toolproxy",
                                    "options": {"baseURL": run.base_url, "apiKey": KEY},
                                    "models": {MODEL: {"name": "Scripted model via toolproxy", "tool_call": True}}}}}


def run_opencode(run: Run, binary: str = "opencode") -> subprocess.CompletedProcess[str]:
    (run.work / "opencode.json").write_text(json.dumps(opencode_config(run), indent=2))
    quiet = {f"{prefix}_{name}": "1" for prefix in ("OPENCODE", "KILO")
             for name in ("DISABLE_MODELS_FETCH", "DISABLE_AUTOUPDATE")}
    return run.run([str(BIN / binary), "run", "--format", "json", "-m", f"{PROVIDER}/{MODEL}", run.prompt],
                   run.env(**quiet))


def run_kilo(run: Run) -> subprocess.CompletedProcess[str]:
    return run_opencode(run, "kilo")


def run_cline(run: Run) -> subprocess.CompletedProcess[str]:
    data, config = run.home / "cline-data", run.home / "cline-config"
    where = ["--data-dir", str(data), "--config", str(config)]
    auth = run.run([str(BIN / "cline"), "auth", "-p", "openai", "-k", KEY, "-m", MODEL, "-b", run.base_url, *where],
                   run.env())
    if auth.returncode != 0:
        return auth
    return run.run([str(BIN / "cline"), "--json", *where, "-c", str(run.work), "-t", str(run.timeout), run.prompt],
                   run.env())


def openclaw_config(run: Run) -> dict[str, object]:
    model = {"id": MODEL, "name": "Scripted model via toolproxy", "contextWindow": 32768, "maxTokens": 4096}
    return {"models": {"providers": {PROVIDER: {"baseUrl": run.base_url, "apiKey": KEY,
                                                "api": "openai-completions", "models": [model]}}},
            "agents": {"defaults": {"model": {"primary": f"{PROVIDER}/{MODEL}"}}}}


def run_openclaw(run: Run) -> subprocess.CompletedProcess[str]:
    config = run.home / "openclaw.json"
    config.write_text(json.dumps(openclaw_config(run), indent=2))
    env = run.env(OPENCLAW_STATE_DIR=str(run.home / "openclaw-state"),
                  PATH=f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return run.run([str(BIN / "openclaw"), "agent", "exec", "--config", str(config), "--model", f"{PROVIDER}/{MODEL}",
                    "--cwd", str(run.work), "--json", "--timeout", str(run.timeout), run.prompt], env)


RUNNERS = {"opencode": run_opencode, "kilo": run_kilo, "cline": run_cline, "openclaw": run_openclaw}
