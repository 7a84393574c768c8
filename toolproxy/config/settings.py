"""Settings: built once at start-up from `TOOLPROXY_*` variables and an optional YAML file, validated with a
clear message for each mistake. Nothing reads `os.environ` after this. Each setting is declared once, in
config/catalog.py; this module reads what the catalog declares (and offers its types where they were always
imported from).

This module imports only the standard library and PyYAML: gunicorn's master process loads it before the
workers monkey-patch, and must not import `ssl` or `requests` early.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from toolproxy.config.catalog import DECLARED, PREFIX, ConfigError, Declared, ModelRule, ModelSettings, Settings
from toolproxy.config.datadir import default_data_dir
from toolproxy.config.values import PARSERS, closest

# What the rest of the code has always imported from here.
__all__ = ["ConfigError", "ModelRule", "ModelSettings", "Settings", "load_settings"]

_GLOBAL = tuple(item for item in DECLARED if item.is_global)
_VARIABLES = {item.variable: item for item in _GLOBAL if item.variable}
_YAML_KEYS = [item.name for item in _GLOBAL]
_RULE_SETTINGS = {item.name: item for item in DECLARED if item.per_model}
# `dialect: x` reads better than `dialects: [x]` in a `models:` entry that pins one.
_RULE_ALIASES = {"dialect": "dialects"}
_RULE_KEYS = ("match", *(key for name in _RULE_SETTINGS
                          for key in (*(alias for alias, to in _RULE_ALIASES.items() if to == name), name)))
# Variables that are not settings of their own.
_OTHER_VARIABLES = ("TOOLPROXY_CONFIG",)


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from the YAML file named by TOOLPROXY_CONFIG (if any), overridden by TOOLPROXY_* variables."""
    environ = os.environ if environ is None else environ
    problems: list[str] = []
    raw: dict[str, Any] = {"data_dir": default_data_dir(environ)}
    problems += _unknown_variables(environ)
    path = environ.get("TOOLPROXY_CONFIG")
    if path:
        raw |= _read_yaml(path, problems)
    for variable, item in _VARIABLES.items():
        if environ.get(variable, "") != "":
            raw[item.name] = environ[variable]
    settings = _build(raw, problems, source=path)
    if problems:
        raise ConfigError(problems)
    return settings


def _unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """A `TOOLPROXY_*` variable that is no setting is a typo that would otherwise be ignored without a word."""
    known = [*_VARIABLES, *_OTHER_VARIABLES]
    problems = []
    for name in sorted(environ):
        if name.startswith(PREFIX) and name not in known:
            # Compared without the prefix that every name shares, which would make anything look close.
            hint = closest(name.removeprefix(PREFIX), [item.removeprefix(PREFIX) for item in known])
            hint = hint.replace("`", f"`{PREFIX}", 1) if hint else " (docs/configuration.md lists the settings)"
            problems.append(f"{name}: unknown variable{hint}")
    return problems


def _read_yaml(path: str, problems: list[str]) -> dict[str, Any]:
    import yaml  # here, not at the top: without a YAML file a worker is 0.9 MiB smaller

    try:
        with open(path, encoding="utf-8") as file:
            loaded = yaml.safe_load(file)
    except OSError as error:
        problems.append(f"TOOLPROXY_CONFIG: cannot read {path!r}: {error.strerror}")
        return {}
    except yaml.YAMLError as error:
        problems.append(f"TOOLPROXY_CONFIG: {path!r} is not valid YAML: {error}")
        return {}
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        problems.append(f"TOOLPROXY_CONFIG: {path!r} must hold a mapping of settings, not {type(loaded).__name__}")
        return {}
    for key in loaded:
        if key not in _YAML_KEYS:
            hint = closest(str(key), _YAML_KEYS) or f"; known settings: {', '.join(sorted(_YAML_KEYS))}"
            problems.append(f"{path}: unknown setting {key!r}{hint}")
    return {key: value for key, value in loaded.items() if key in _YAML_KEYS and value is not None}


def _build(raw: dict[str, Any], problems: list[str], source: str | None) -> Settings:
    values: dict[str, Any] = {}
    for item in _GLOBAL:
        if item.kind == "rules" or raw.get(item.name) is None:
            continue
        label = item.variable or item.name
        parsed = _parse(item, raw[item.name], f"{label} ({source}: {item.name})" if source else label, problems)
        if parsed is not None:
            values[item.name] = parsed
    values["models"] = _parse_rules(raw.get("models"), source or "models", problems)
    return Settings(**values)


def _parse(item: Declared, value: Any, label: str, problems: list[str]) -> Any:
    try:
        return PARSERS[item.kind](value)
    except (TypeError, ValueError) as error:
        problems.append(f"{label}: {error}")
        return None


def _parse_rules(value: Any, source: str, problems: list[str]) -> tuple[ModelRule, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.append(f"{source}: models must be a list of entries, each with a `match:` glob")
        return ()
    rules = (_parse_rule(entry, f"{source}: models[{index}]", problems) for index, entry in enumerate(value))
    return tuple(rule for rule in rules if rule is not None)


def _parse_rule(entry: Any, label: str, problems: list[str]) -> ModelRule | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("match"), str) or not entry["match"]:
        problems.append(f"{label}: each entry needs `match:` with a glob on the model name, e.g. \"qwen2.5*\"")
        return None
    for key in sorted(set(map(str, entry)) - set(_RULE_KEYS)):
        hint = closest(key, _RULE_KEYS) or f"; known: {', '.join(_RULE_KEYS)}"
        problems.append(f"{label}: unknown key {key!r}{hint}")
    overrides: dict[str, Any] = {}
    for key in _RULE_KEYS[1:]:
        if entry.get(key) is not None:
            name = _RULE_ALIASES.get(key, key)
            parsed = _parse(_RULE_SETTINGS[name], entry[key], f"{label}.{key}", problems)
            if parsed is not None:
                overrides[name] = parsed
    return ModelRule(entry["match"], overrides)
