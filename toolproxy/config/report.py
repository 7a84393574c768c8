"""What toolproxy says about a configuration that loaded: the resolved settings with secrets masked (for
`toolproxy check-config`), and what looks like a mistake although it is valid (said at start-up too)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any
from urllib.parse import urlsplit

from toolproxy.config.catalog import DECLARED, Declared, MiB, Settings
from toolproxy.config.values import without_password

SECRET_FIELDS = frozenset(item.name for item in DECLARED if item.is_secret)
# Shown without their password (the rest of a URL is no secret, and says where the proxy goes).
URL_FIELDS = frozenset(item.name for item in DECLARED if item.kind in ("url", "database_url"))
# Where docs/configuration.md (or another page, or the README) keeps the table `settings_table` writes.
TABLE_START = "<!-- settings table: written by toolproxy.config.report.settings_table -->"
TABLE_END = "<!-- end of settings table -->"


def masked(settings: Settings) -> dict[str, Any]:
    """Every setting by name, as it resolved: keys replaced by how many there are, passwords out of URLs."""
    return {item.name: _shown(item.name, getattr(settings, item.name)) for item in fields(settings)}


def _shown(name: str, value: Any) -> Any:
    if name in URL_FIELDS and isinstance(value, str):
        return without_password(value)
    if name in SECRET_FIELDS:
        if not value:
            return "(none)"
        if isinstance(value, tuple):
            return f"(set: {len(value)} key{'s' if len(value) > 1 else ''})"
        return "(set)"
    if name == "models":
        return "; ".join(f"{rule.match!r}: " + ", ".join(f"{key}={_shown(key, item)}"
                                                         for key, item in rule.overrides.items())
                         for rule in value) or "(none)"
    if name == "chat_template" and isinstance(value, str):
        return f"(a template of {len(value)} characters)"
    if isinstance(value, tuple):
        return ", ".join(map(str, value)) or "(none)"
    return "(none)" if value is None else value


def warnings_for(settings: Settings) -> list[str]:
    """Valid, but probably not what was meant."""
    upstreams = [("TOOLPROXY_UPSTREAM", settings.upstream)]
    upstreams += [(f"models[{index}].upstream", rule.overrides.get("upstream"))
                  for index, rule in enumerate(settings.models)]
    return [_no_path(label, url) for label, url in upstreams if url and urlsplit(url).path in ("", "/")]


def _no_path(label: str, url: str) -> str:
    shown = without_password(url)
    return (f"{label} {shown} has no path: chat requests will go to {shown}/chat/completions. OpenAI-compatible "
            f"servers (vLLM, llama.cpp, Ollama, SGLang) answer under /v1: did you mean {shown}/v1?")


def settings_table() -> str:
    """The Markdown table of every setting, as declared: variable, YAML key, per model or not, default, help."""
    rows = ["| variable | YAML key | per model | default | meaning |", "| --- | --- | --- | --- | --- |"]
    for item in DECLARED:
        variable = f"`{item.variable}`" if item.variable else "(YAML only)"
        where = "yes" if item.per_model else ""
        key = f"`{item.name}`" if item.is_global else f"`{item.name}` (in `models:` only)"
        rows.append(f"| {variable} | {key} | {where} | {_default_shown(item)} | {item.help} |")
    return "\n".join(rows)


def _default_shown(item: Declared) -> str:
    if item.shown is not None:
        return item.shown
    value = item.default
    if value is None or value == ():
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return f"`{','.join(map(str, value))}`"
    if isinstance(value, str):
        return f"`{value}`"
    if item.kind == "seconds":
        return f"{value:g} s"
    if item.name.endswith("_bytes"):
        return f"{value // MiB} MiB" if value % MiB == 0 else f"{value // 1024} KiB"
    return f"{value:,}"
