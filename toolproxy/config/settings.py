"""Settings: built once at start-up from `TOOLPROXY_*` variables and an optional YAML file, validated with a
clear message for each mistake. Nothing reads `os.environ` after this.

This module imports only the standard library and PyYAML: gunicorn's master process loads it before the
workers monkey-patch, and must not import `ssl` or `requests` early."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from toolproxy.config.datadir import default_data_dir
from toolproxy.config.values import PARSERS, closest

DEFAULT_BIND = "127.0.0.1:8003"
MiB = 1024 * 1024


class ConfigError(ValueError):
    """Every problem found in the configuration, one per line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(f"- {problem}" for problem in problems))
        self.problems = problems


@dataclass(frozen=True, slots=True)
class ModelRule:
    """One entry of the YAML `models:` list: a glob on the request's model and the settings it overrides."""

    match: str
    overrides: dict[str, Any] = field(default_factory=dict, repr=False)

    def matches(self, model: str) -> bool:
        return fnmatch.fnmatchcase(model, self.match)


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """What applies to one request's model: the globals with the first matching rule laid over them."""

    upstream: str | None = None
    upstream_api_key: str | None = field(default=None, repr=False)
    upstream_model: str | None = None
    tool_mode: str = "native"
    dialects: tuple[str, ...] = ()
    unknown_tools: str = "text"
    invalid_arguments: str = "pass"
    reasoning: str = "move"
    repair_rounds: int = 0
    drop_params: tuple[str, ...] = ()
    id_style: str = "openai"
    tool_result_limit: int | None = None
    allow_tools: tuple[str, ...] = ()
    deny_tools: tuple[str, ...] = ()
    deny_arguments: tuple[str, ...] = ()
    vtc_native_bridge: bool = False
    stream_strategy: str = "buffered"  # or "incremental": live text with tools (routes/incremental.py)
    reasoning_switch: str = "none"  # how the upstream takes a client's reasoning effort (request_transform.py)


@dataclass(frozen=True, slots=True)
class Settings:
    upstream: str | None = None
    upstream_api_key: str | None = field(default=None, repr=False)
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    allow_open: bool = False
    allowed_hosts: tuple[str, ...] = ()  # Host names answered besides loopback names, the bound name, IP literals
    cors_origins: tuple[str, ...] = ()  # origins whose pages may call the API (none: no CORS header ever)
    bind: str = DEFAULT_BIND
    workers: int = 1
    tool_mode: str = "native"
    dialects: tuple[str, ...] = ()
    unknown_tools: str = "text"
    invalid_arguments: str = "pass"
    reasoning: str = "move"
    repair_rounds: int = 0
    drop_params: tuple[str, ...] = ()
    id_style: str = "openai"
    tool_result_limit: int | None = None
    allow_tools: tuple[str, ...] = ()
    deny_tools: tuple[str, ...] = ()
    deny_arguments: tuple[str, ...] = ()
    vtc_native_bridge: bool = False
    stream_strategy: str = "buffered"
    reasoning_switch: str = "none"
    vtc_client_patterns: tuple[str, ...] = ("cline", "kilo", "roo")
    vtc_newlines: int = 2
    max_buffer_bytes: int = 64 * 1024
    data_dir: str = ""  # load_settings fills in the per-user state directory (config/datadir.py) when unset
    log_records: int = 2000
    log_field_chars: int = 64 * 1024
    models: tuple[ModelRule, ...] = ()
    max_body_bytes: int = 16 * MiB
    max_upstream_bytes: int = 32 * MiB
    connect_timeout: float = 5.0
    read_timeout: float = 600.0
    request_timeout: float = 1800.0
    commit_after: float = 1.0
    heartbeat_interval: float = 5.0
    loop_repeats: int = 4
    loop_max_tool_messages: int = 500
    max_json_depth: int = 64
    log_format: str = "text"
    log_level: str = "INFO"
    max_json_containers: int = 100_000
    body_timeout: float = 60.0
    models_timeout: float = 5.0
    # Per worker: above a vLLM/SGLang server's hundreds of sequences; a llama.cpp server wants its slot count here.
    max_in_flight: int = 512
    queue_size: int = 128
    queue_timeout: float = 10.0
    worker_connections: int = 1000
    debug_routes: bool = False

    @property
    def is_demo(self) -> bool:
        """No upstream anywhere: the built-in demo model answers."""
        return self.upstream is None and all(rule.overrides.get("upstream") is None for rule in self.models)

    def for_model(self, model: str) -> ModelSettings:
        return self.for_model_rule(next((rule for rule in self.models if rule.matches(model)), None))

    def for_model_rule(self, rule: ModelRule | None) -> ModelSettings:
        """The globals with `rule` laid over them (the globals alone for None)."""
        base = ModelSettings(**{name: getattr(self, name) for name in _MODEL_DEFAULTS})
        return base if rule is None else replace(base, **rule.overrides)


# The settings a `models:` entry may override (besides upstream_model, which only a rule sets), and their kinds.
_MODEL_DEFAULTS = tuple(item.name for item in fields(ModelSettings) if item.name != "upstream_model")


# Each setting: environment variable, YAML key, kind. The kind names a parser below.
_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("TOOLPROXY_UPSTREAM", "upstream", "url"),
    ("TOOLPROXY_UPSTREAM_API_KEY", "upstream_api_key", "text"),
    ("TOOLPROXY_API_KEYS", "api_keys", "keys"),
    ("TOOLPROXY_ALLOW_OPEN", "allow_open", "flag"),
    ("TOOLPROXY_ALLOWED_HOSTS", "allowed_hosts", "names"),
    ("TOOLPROXY_CORS_ORIGINS", "cors_origins", "names"),
    ("TOOLPROXY_BIND", "bind", "bind"),
    ("TOOLPROXY_WORKERS", "workers", "count"),
    ("TOOLPROXY_TOOL_MODE", "tool_mode", "tool_mode"),
    ("TOOLPROXY_DIALECTS", "dialects", "dialects"),
    ("TOOLPROXY_UNKNOWN_TOOLS", "unknown_tools", "unknown_tools"),
    ("TOOLPROXY_INVALID_ARGUMENTS", "invalid_arguments", "invalid_arguments"),
    ("TOOLPROXY_REASONING", "reasoning", "reasoning"),
    ("TOOLPROXY_REPAIR_ROUNDS", "repair_rounds", "rounds"),
    ("TOOLPROXY_DROP_PARAMS", "drop_params", "names"),
    ("TOOLPROXY_ID_STYLE", "id_style", "id_style"),
    ("TOOLPROXY_TOOL_RESULT_LIMIT", "tool_result_limit", "count"),
    ("TOOLPROXY_ALLOW_TOOLS", "allow_tools", "names"),
    ("TOOLPROXY_DENY_TOOLS", "deny_tools", "names"),
    ("TOOLPROXY_DENY_ARGUMENTS", "deny_arguments", "patterns"),
    ("TOOLPROXY_VTC_NATIVE_BRIDGE", "vtc_native_bridge", "flag"),
    ("TOOLPROXY_STREAM_STRATEGY", "stream_strategy", "stream_strategy"),
    ("TOOLPROXY_REASONING_SWITCH", "reasoning_switch", "reasoning_switch"),
    ("TOOLPROXY_VTC_CLIENT_PATTERNS", "vtc_client_patterns", "patterns_or_none"),
    ("TOOLPROXY_VTC_NEWLINES", "vtc_newlines", "newlines"),
    ("TOOLPROXY_MAX_BUFFER_BYTES", "max_buffer_bytes", "count"),
    ("TOOLPROXY_DATA_DIR", "data_dir", "directory"),
    ("TOOLPROXY_LOG_RECORDS", "log_records", "count"),
    ("TOOLPROXY_LOG_FIELD_CHARS", "log_field_chars", "count"),
    ("TOOLPROXY_MAX_BODY_BYTES", "max_body_bytes", "count"),
    ("TOOLPROXY_MAX_UPSTREAM_BYTES", "max_upstream_bytes", "count"),
    ("TOOLPROXY_CONNECT_TIMEOUT", "connect_timeout", "seconds"),
    ("TOOLPROXY_READ_TIMEOUT", "read_timeout", "seconds"),
    ("TOOLPROXY_REQUEST_TIMEOUT", "request_timeout", "seconds"),
    ("TOOLPROXY_COMMIT_AFTER", "commit_after", "seconds"),
    ("TOOLPROXY_HEARTBEAT_INTERVAL", "heartbeat_interval", "seconds"),
    ("TOOLPROXY_LOOP_REPEATS", "loop_repeats", "count"),
    ("TOOLPROXY_LOOP_MAX_TOOL_MESSAGES", "loop_max_tool_messages", "count"),
    ("TOOLPROXY_MAX_JSON_DEPTH", "max_json_depth", "count"),
    ("TOOLPROXY_LOG_FORMAT", "log_format", "log_format"),
    ("TOOLPROXY_LOG_LEVEL", "log_level", "log_level"),
    ("TOOLPROXY_MAX_JSON_CONTAINERS", "max_json_containers", "count"),
    ("TOOLPROXY_BODY_TIMEOUT", "body_timeout", "seconds"),
    ("TOOLPROXY_MODELS_TIMEOUT", "models_timeout", "seconds"),
    ("TOOLPROXY_MAX_IN_FLIGHT", "max_in_flight", "count"),
    ("TOOLPROXY_QUEUE_SIZE", "queue_size", "count"),
    ("TOOLPROXY_QUEUE_TIMEOUT", "queue_timeout", "seconds"),
    ("TOOLPROXY_WORKER_CONNECTIONS", "worker_connections", "count"),
    ("TOOLPROXY_DEBUG_ROUTES", "debug_routes", "flag"),
)
_RULE_KINDS = {"upstream": "url", "upstream_api_key": "text", "upstream_model": "text", "tool_mode": "tool_mode",
               "dialect": "dialects", "dialects": "dialects", "unknown_tools": "unknown_tools",
               "invalid_arguments": "invalid_arguments", "reasoning": "reasoning", "repair_rounds": "rounds",
               "drop_params": "names", "id_style": "id_style", "tool_result_limit": "count", "allow_tools": "names",
               "deny_tools": "names", "deny_arguments": "patterns", "vtc_native_bridge": "flag",
               "stream_strategy": "stream_strategy", "reasoning_switch": "reasoning_switch"}
_RULE_KEYS = ("match", *_RULE_KINDS)
_OTHER_VARIABLES = ("TOOLPROXY_CONFIG",)  # variables that are not settings of their own
_PREFIX = "TOOLPROXY_"


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from the YAML file named by TOOLPROXY_CONFIG (if any), overridden by TOOLPROXY_* variables."""
    environ = os.environ if environ is None else environ
    problems: list[str] = []
    raw: dict[str, Any] = {"data_dir": default_data_dir(environ)}
    problems += _unknown_variables(environ)
    path = environ.get("TOOLPROXY_CONFIG")
    if path:
        raw |= _read_yaml(path, problems)
    for variable, key, _kind in _FIELDS:
        if environ.get(variable, "") != "":
            raw[key] = environ[variable]
    settings = _build(raw, problems, source=path)
    if problems:
        raise ConfigError(problems)
    return settings


def _unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """A `TOOLPROXY_*` variable that is no setting is a typo that would otherwise be ignored without a word."""
    known = [variable for variable, _, _ in _FIELDS] + list(_OTHER_VARIABLES)
    problems = []
    for name in sorted(environ):
        if name.startswith(_PREFIX) and name not in known:
            # Compared without the prefix that every name shares, which would make anything look close.
            hint = closest(name.removeprefix(_PREFIX), [item.removeprefix(_PREFIX) for item in known])
            hint = hint.replace("`", f"`{_PREFIX}", 1) if hint else " (docs/configuration.md lists the settings)"
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
    known = [key for _, key, _ in _FIELDS] + ["models"]
    for key in loaded:
        if key not in known:
            hint = closest(str(key), known) or f"; known settings: {', '.join(sorted(known))}"
            problems.append(f"{path}: unknown setting {key!r}{hint}")
    return {key: value for key, value in loaded.items() if key in known and value is not None}


def _build(raw: dict[str, Any], problems: list[str], source: str | None) -> Settings:
    values: dict[str, Any] = {}
    for variable, key, kind in _FIELDS:
        if key in raw and raw[key] is not None:
            label = f"{variable} ({source}: {key})" if source else variable
            parsed = _parse(kind, raw[key], label, problems)
            if parsed is not None:
                values[key] = parsed
    values["models"] = _parse_rules(raw.get("models"), source or "models", problems)
    return Settings(**values)


def _parse(kind: str, value: Any, label: str, problems: list[str]) -> Any:
    parser = PARSERS[kind]
    try:
        return parser(value)
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
    for key, kind in _RULE_KINDS.items():
        if entry.get(key) is not None:
            parsed = _parse(kind, entry[key], f"{label}.{key}", problems)
            if parsed is not None:
                overrides["dialects" if key == "dialect" else key] = parsed
    return ModelRule(entry["match"], overrides)
