"""How each real agent CLI is set up and run headless against the proxy: with the recipes of docs/clients.md (their
configuration blocks and command lines, only the address changed), a temporary HOME, and the flags a test needs
to read the result (JSON output, a deadline). Installed by `make test-agents` into .agents/ (tests/agents/
package.json pins them)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.conftest import ROOT
from tests.readme import PLACEHOLDER_URL, code_block

AGENTS = ROOT / ".agents"
BIN = AGENTS / "clis" / "node_modules" / ".bin"
NODE_BIN = AGENTS / "node" / "node_modules" / ".bin"  # Node.js 26, for OpenClaw (the machine's is 20)


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

    def run(self, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        command = [str(BIN / argv[0]), *argv[1:]]
        return subprocess.run(command, cwd=self.work, env=env, capture_output=True, text=True,
                              timeout=self.timeout + 60, stdin=subprocess.DEVNULL, check=False)

    def recipe(self, title: str, language: str, index: int = 0) -> str:
        return code_block(title, language, index).replace(PLACEHOLDER_URL, self.base_url)


def commands(run: Run, title: str) -> dict[str, list[str]]:
    """The recipe's command lines by program name (`kilo` for `kilo run ...`), comments dropped."""
    lines = [shlex.split(line, comments=True) for line in run.recipe(title, "sh").splitlines()]
    return {argv[0] if argv[0] != "cline" or argv[1] != "auth" else "cline auth": argv for argv in lines if argv}


def run_opencode(run: Run, binary: str = "opencode") -> subprocess.CompletedProcess[str]:
    title = "OpenCode and Kilo CLI"
    (run.work / "opencode.json").write_text(run.recipe(title, "json"))
    quiet = {f"{prefix}_{name}": "1" for prefix in ("OPENCODE", "KILO")
             for name in ("DISABLE_MODELS_FETCH", "DISABLE_AUTOUPDATE")}
    argv = commands(run, title)[binary]
    return run.run([*argv[:-1], "--format", "json", run.prompt], run.env(**quiet))


def run_kilo(run: Run) -> subprocess.CompletedProcess[str]:
    return run_opencode(run, "kilo")


def run_cline(run: Run) -> subprocess.CompletedProcess[str]:
    recipe = commands(run, "Cline CLI")
    auth = run.run(recipe["cline auth"], run.env())
    if auth.returncode != 0:
        return auth
    return run.run([*recipe["cline"][:-1], "--json", "-c", str(run.work), "-t", str(run.timeout), run.prompt],
                   run.env())


def run_openclaw(run: Run) -> subprocess.CompletedProcess[str]:
    title = "OpenClaw"
    config = run.home / ".openclaw" / "openclaw.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps(json.loads(run.recipe(title, "json")), indent=2))
    argv = commands(run, title)["openclaw"]
    env = run.env(PATH=f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return run.run([*argv[:-1], "--json", "--timeout", str(run.timeout), run.prompt], env)


def run_codex(run: Run) -> subprocess.CompletedProcess[str]:
    """Codex with the recipe's config.toml and model catalog in its home, stdin closed, JSON events out."""
    title, codex_home = "Codex CLI", run.home / ".codex"
    codex_home.mkdir(parents=True)
    (codex_home / "config.toml").write_text(run.recipe(title, "toml"))
    (codex_home / "toolproxy-models.json").write_text(run.recipe(title, "json"))
    argv = commands(run, title)["codex"]
    env = run.env(CODEX_HOME=str(codex_home), PROXY_API_KEY="sk-anything")
    return run.run([*argv[:-1], "--json", run.prompt], env)


CLAUDE = "Claude Code"


def run_claude(run: Run) -> subprocess.CompletedProcess[str]:
    """Claude Code with the recipe's variables (its base URL has no /v1) and its command line."""
    root = run.base_url.removesuffix("/v1")
    exports: dict[str, str] = {}
    argv: list[str] = []
    for line in code_block(CLAUDE, "sh").replace(PLACEHOLDER_URL.removesuffix("/v1"), root).splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["export"]:
            name, _, value = words[1].partition("=")
            exports[name] = value
        elif words:
            argv = words
    return run.run([*argv[:-1], "--output-format", "json", run.prompt], run.env(**exports))


def claude_proxy(work: Path) -> dict[str, str]:
    """The proxy's side of the Claude Code recipe: its configuration's aliases (the upstream is the test's)."""
    config = yaml.safe_load(code_block(CLAUDE, "yaml"))
    path = work.parent / "toolproxy.yaml"
    path.write_text(yaml.safe_dump({"model_aliases": config["model_aliases"]}))
    return {"TOOLPROXY_CONFIG": str(path)}


RUNNERS = {"opencode": run_opencode, "kilo": run_kilo, "cline": run_cline, "openclaw": run_openclaw,
           "claude": run_claude}
# What each agent needs of the proxy besides its upstream (the recipe's side of the configuration).
PROXY_SETTINGS = {"claude": claude_proxy}
