"""The agent recipes of docs/clients.md hang together: each configuration parses, points at the proxy, and names
the model its command line asks for. `make test-agents` runs them against the real CLIs; this keeps them sound in CI."""

from __future__ import annotations

import json
import shlex
import tomllib

import yaml

from tests.readme import PLACEHOLDER_URL, code_block, recipe
from toolproxy.config.settings import load_settings
from toolproxy.routes import models


def argv_of(title: str, program: str) -> list[str]:
    lines = [shlex.split(line, comments=True) for line in code_block(title, "sh").splitlines()]
    return next(argv for argv in lines if argv and argv[0] == program)


def test_opencode_and_kilo_recipe():
    config = json.loads(code_block("OpenCode and Kilo CLI", "json"))
    (name, provider), = config["provider"].items()
    assert provider["npm"] == "@ai-sdk/openai-compatible"
    assert provider["options"]["baseURL"] == PLACEHOLDER_URL
    models = [f"{name}/{model}" for model, entry in provider["models"].items() if entry["tool_call"]]
    for program in ("opencode", "kilo"):
        argv = argv_of("OpenCode and Kilo CLI", program)
        assert argv[1] == "run" and argv[argv.index("-m") + 1] in models


def test_cline_recipe():
    auth = argv_of("Cline CLI", "cline")
    assert auth[1:2] == ["auth"] and auth[auth.index("-b") + 1] == PLACEHOLDER_URL
    assert auth[auth.index("-p") + 1] == "openai"


def test_openclaw_recipe():
    config = json.loads(code_block("OpenClaw", "json"))
    (name, provider), = config["models"]["providers"].items()
    assert provider["baseUrl"] == PLACEHOLDER_URL and provider["api"] == "openai-completions"
    ids = {model["id"] for model in provider["models"]}
    assert config["agents"]["defaults"]["model"]["primary"] in {f"{name}/{model}" for model in ids}
    assert argv_of("OpenClaw", "openclaw")[1:3] == ["agent", "exec"]


def test_codex_recipe():
    config = tomllib.loads(code_block("Codex CLI", "toml"))
    provider = config["model_providers"][config["model_provider"]]
    assert provider["base_url"] == PLACEHOLDER_URL and provider["wire_api"] == "responses"
    assert config["analytics"] == {"enabled": False} and config["features"] == {"plugins": False}
    catalog = json.loads(code_block("Codex CLI", "json"))
    (model,) = catalog["models"]
    assert model["slug"] == config["model"] and model["apply_patch_tool_type"] == "freeform"
    assert config["model_catalog_json"] in recipe("Codex CLI")  # the recipe says where the catalog goes
    argv = argv_of("Codex CLI", "codex")
    assert argv[1] == "exec" and "--skip-git-repo-check" in argv
    assert f"export {provider['env_key']}=" in code_block("Codex CLI", "sh")


def test_claude_code_recipe(tmp_path):
    """Claude Code's base URL is the proxy's without /v1 (it appends /v1/messages), and the proxy's configuration
    maps Claude's names to the model ANTHROPIC_MODEL names."""
    lines = [shlex.split(line, comments=True) for line in code_block("Claude Code", "sh").splitlines()]
    exports = dict(argv[1].split("=", 1) for argv in lines if argv[:1] == ["export"])
    assert exports["ANTHROPIC_BASE_URL"] == PLACEHOLDER_URL.removesuffix("/v1")
    assert exports["ANTHROPIC_API_KEY"] and exports["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert argv_of("Claude Code", "claude")[1] == "-p"
    path = tmp_path / "toolproxy.yaml"
    path.write_text(code_block("Claude Code", "yaml"))
    settings = load_settings({"TOOLPROXY_CONFIG": str(path)})
    assert yaml.safe_load(path.read_text())["upstream"] == settings.upstream
    assert models.alias(settings, "claude-haiku-4-5-20251001") == exports["ANTHROPIC_MODEL"]
