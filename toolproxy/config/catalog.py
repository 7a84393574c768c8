"""The catalog of settings: every setting declared once, as a field of `Settings` (name, type, default, kind,
per-model or not, one line of help); the environment variables, YAML keys, `models:` keys, `check-config`'s
report and the settings table of docs/configuration.md derive from it. config/settings.py reads them.

This module imports only the standard library: gunicorn's master process loads it before the workers
monkey-patch, and must not import `ssl` or `requests` early.
"""

from __future__ import annotations

import fnmatch
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

DEFAULT_BIND = "127.0.0.1:8003"
MiB = 1024 * 1024
PREFIX = "TOOLPROXY_"


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


def setting(default: Any, kind: str, help: str, *, per_model: bool = False, secret: bool = False,
            shown: str | None = None, variable: bool = True) -> Any:
    """Declare a setting: `kind` names its parser (config/values.py), `per_model` lets a `models:` entry override
    it, `shown` is the default as the docs say it, `variable=False` makes it YAML only."""
    meta = {"kind": kind, "help": help, "per_model": per_model, "shown": shown, "variable": variable}
    return field(default=default, repr=not secret, metadata=meta)


@dataclass(frozen=True, slots=True)
class Settings:
    upstream: str | None = setting(None, "url", "base URL of the OpenAI-compatible server, including `/v1`",
                                   per_model=True, shown="none (demo model)")
    upstream_api_key: str | None = setting(
        None, "text", "sent upstream as a Bearer token. When unset and the proxy has no keys of its own, the "
        "client's key is passed on", per_model=True, secret=True)
    bind: str = setting(DEFAULT_BIND, "bind", "where gunicorn listens; `gunicorn -b HOST:PORT` or `toolproxy serve "
                        "--host H --port P` overrides it")
    workers: int = setting(1, "count", "gunicorn gevent workers")
    api_keys: tuple[str, ...] = setting(
        (), "keys", "comma-separated keys clients must send as Bearer tokens. Binding a non-loopback address "
        "without keys refuses to start unless `TOOLPROXY_ALLOW_OPEN=1`", secret=True, shown="none (open)")
    allow_open: bool = setting(False, "flag", "`1`: start on a non-loopback address without `TOOLPROXY_API_KEYS` "
                               "(an open proxy)")
    allowed_hosts: tuple[str, ...] = setting(
        (), "names", "dotted `Host` names to answer to besides loopback names, the bound one and IP literals "
        "(`*`: any); see [Browsers](running.md#browsers)")
    cors_origins: tuple[str, ...] = setting(
        (), "names", "origins whose web pages may call the API (e.g. `http://localhost:5173`); none: no CORS "
        "header is ever sent")
    tool_mode: str = setting("native", "tool_mode", "`native` or `prompt`: see [Backends without native tool "
                             "calling](prompt-mode.md)", per_model=True)
    dialects: tuple[str, ...] = setting((), "dialects", "pin dialects, e.g. `qwen_tools,json` (YAML `models:` "
                                        "entries also take `dialect:`)", per_model=True, shown="all, automatic")
    unknown_tools: str = setting("text", "unknown_tools", "`text`: a call to an undeclared tool stays text; "
                                 "`pass`: returned anyway; see [Model formats](formats.md#meaning-types-and-"
                                 "validation)", per_model=True)
    invalid_arguments: str = setting("pass", "invalid_arguments", "`pass`: a call whose arguments fail the "
                                     "schema is returned; `text`: kept as text", per_model=True)
    reasoning: str = setting("move", "reasoning", "`move` reasoning to `reasoning_content`, `keep` it in "
                             "content, or `drop` it", per_model=True)
    repair_rounds: int = setting(0, "rounds", "0 to 3: rounds that ask again when a call fails (1 recommended); "
                                 "see [Backends without native tool calling](prompt-mode.md)", per_model=True)
    drop_params: tuple[str, ...] = setting((), "names", "comma-separated request parameters to remove",
                                           per_model=True)
    id_style: str = setting("openai", "id_style", "`openai` or `mistral` (9 letters and digits) call ids",
                            per_model=True)
    tool_result_limit: int | None = setting(None, "count", "characters of a tool result to keep", per_model=True)
    allow_tools: tuple[str, ...] = setting((), "names", "access policy: globs on the only tools a call may name",
                                           per_model=True, shown="all")
    deny_tools: tuple[str, ...] = setting((), "names", "access policy: globs on tools a call may not name",
                                          per_model=True)
    deny_arguments: tuple[str, ...] = setting(
        (), "patterns", "access policy: regular expressions (in the environment one per line) searched in every "
        "string argument", per_model=True)
    vtc_native_bridge: bool = setting(False, "flag", "virtual tool calling: ask the backend with native "
                                      "tools and turn its answer back into the client's XML", per_model=True)
    stream_strategy: str = setting("buffered", "stream_strategy", "`buffered` or `incremental` (live text with "
                                   "tools); see [Live text with tools](streaming.md)", per_model=True)
    reasoning_switch: str = setting(
        "none", "reasoning_switch", "how the upstream takes a client's reasoning effort (Responses' "
        "`reasoning.effort`, Codex's `model_reasoning_effort`, a Messages request's `thinking`): `none` leaves it "
        "out, `reasoning_effort` sends chat's `reasoning_effort` as given, `enable_thinking` / `thinking` set that "
        "`chat_template_kwargs` switch (Qwen3 and GLM read `enable_thinking`, DeepSeek V3.1 `thinking`)",
        per_model=True)
    backend: str = setting("auto", "backend", "the upstream's server: `auto` (found from what it serves) or one of "
                           "`vllm`, `sglang`, `llamacpp`, `llama-cpp-python`, `ollama`, `lmstudio`, `mlx`, `generic`",
                           per_model=True)
    constrain: str = setting("auto", "constrain", "`auto`: tools go with `strict: true` where the server's grammar "
                             "takes their schema (vLLM, SGLang); `off`: never", per_model=True)
    vtc_client_patterns: tuple[str, ...] = setting(
        ("cline", "kilo", "roo"), "patterns_or_none", "virtual tool calling: clients recognised by these words in "
        "their User-Agent (`none` switches detection off)")
    vtc_newlines: int = setting(2, "newlines", "virtual tool calling: line breaks before the XML, 0 to 3")
    max_buffer_bytes: int = setting(64 * 1024, "count", "virtual tool calling: most text held back")
    max_body_bytes: int = setting(16 * MiB, "count", "largest request body accepted (413 beyond)")
    max_upstream_bytes: int = setting(32 * MiB, "count", "largest upstream answer accepted (502 beyond)")
    connect_timeout: float = setting(5.0, "seconds", "time to connect to the upstream")
    read_timeout: float = setting(600.0, "seconds", "longest silence from the upstream")
    request_timeout: float = setting(1800.0, "seconds", "whole request, however the upstream trickles")
    commit_after: float = setting(1.0, "seconds", "a buffered stream's upstream error within this time gets its "
                                  "real status; after it, the stream is committed ([the streaming route]"
                                  "(formats.md#the-four-routes))")
    heartbeat_interval: float = setting(5.0, "seconds", "`: keep-alive` lines while a committed stream waits")
    loop_repeats: int = setting(4, "count", "loop guard: the same call this many times in a row stops the loop")
    loop_max_tool_messages: int = setting(500, "count", "loop guard: most tool results in a conversation")
    max_json_depth: int = setting(64, "count", "deepest nesting accepted in a body")
    max_json_containers: int = setting(100_000, "count", "most arrays and objects accepted in a body")
    body_timeout: float = setting(60.0, "seconds", "time to receive a request body (408 beyond)")
    models_timeout: float = setting(5.0, "seconds", "time for the upstream's `/v1/models` (and for the dashboard's "
                                   "check of it)")
    # Per worker. High enough for a vLLM/SGLang server's hundreds of concurrent sequences (500 slow streams on
    # two workers must all complete); a llama.cpp server with few slots wants its slot count here.
    max_in_flight: int = setting(512, "count", "per worker: upstream requests at once; beyond that requests wait")
    queue_size: int = setting(128, "count", "per worker: requests waiting for a slot; beyond that 503")
    queue_timeout: float = setting(10.0, "seconds", "per worker: longest wait for a slot; beyond that 503")
    worker_connections: int = setting(1000, "count", "client connections per gunicorn worker (idle and slow ones "
                                      "included)")
    debug_routes: bool = setting(False, "flag", "`GET /debug/runtime` (pid, live greenlets) for `bench/soak.py`; "
                                 "loopback clients only")
    # load_settings fills in the per-user state directory (config/datadir.py) when unset.
    data_dir: str = setting("", "directory", "the transform log and the metrics files, one instance per directory "
                            "([Where data goes](running.md#install-and-run))",
                            shown="`$XDG_STATE_HOME/toolproxy` or `~/.local/state/toolproxy`")
    log_records: int = setting(2000, "count", "the transform log keeps this many records (in PostgreSQL, of the "
                               "whole fleet)")
    log_field_chars: int = setting(64 * 1024, "count", "the transform log cuts each text field at this many "
                                   "characters", shown="64 KiB")
    log_max_age: float | None = setting(None, "seconds", "the transform log also drops records older than this many "
                                        "seconds (604800: a week)", shown="none (by count only)")
    log_url: str | None = setting(
        None, "database_url", "the transform log in PostgreSQL, `postgresql://USER:PASSWORD@HOST:PORT/DATABASE`: every "
        "instance given the same URL writes to the same tables and shows the whole fleet on its dashboard; the "
        "password is masked wherever the URL is shown ([Several instances](fleet.md))", secret=True,
        shown="none (SQLite under the data directory)")
    instance: str = setting("", "instance", "this instance's name on its records and on the dashboard, where a "
                            "fleet's records can be filtered by it", shown="the host name")
    log_format: str = setting("text", "log_format", "`text`, or `json`: one JSON object per line")
    log_level: str = setting("INFO", "log_level", "`DEBUG`, `INFO`, `WARNING` or `ERROR`")
    model_aliases: tuple[tuple[str, str], ...] = setting(
        (), "aliases", "`GLOB=MODEL` pairs, comma-separated (in YAML a mapping), first match wins: the model a "
        "client's name stands for, such as `claude-*=qwen3-coder` for Claude Code's background calls; see "
        "[Claude Code](clients.md#claude-code)", shown="none")
    otel: str = setting("auto", "otel", "OpenTelemetry traces: `on`, `off`, or `auto`: on when "
                        "`OTEL_EXPORTER_OTLP_ENDPOINT` is set ([Traces](dashboard.md#traces))")
    otel_content: bool = setting(False, "flag", "`1`: the prompt sent upstream and the answer on each upstream "
                                 "call's span (`gen_ai.input.messages`, `gen_ai.output.messages`), redacted and cut "
                                 "as the transform log's fields")
    models: tuple[ModelRule, ...] = setting((), "rules", "per-model entries, first match wins ([below]"
                                            "(#per-model-settings))",
                                            variable=False)

    @property
    def instance_name(self) -> str:
        """`instance`, or this host's name when it is not set."""
        return self.instance or socket.gethostname()

    @property
    def is_demo(self) -> bool:
        """No upstream anywhere: the built-in demo model answers."""
        return self.upstream is None and all(rule.overrides.get("upstream") is None for rule in self.models)

    def for_model(self, model: str) -> ModelSettings:
        return self.for_model_rule(next((rule for rule in self.models if rule.matches(model)), None))

    def for_model_rule(self, rule: ModelRule | None) -> ModelSettings:
        """The globals with `rule` laid over them (the globals alone for None)."""
        base = ModelSettings(**{item.name: getattr(self, item.name) for item in _PER_MODEL})
        return base if rule is None else replace(base, **rule.overrides)


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """What applies to one request's model: the globals with the first matching rule laid over them. A typed view
    of the per-model settings declared in `Settings` (tests/test_config.py holds the two equal), plus the
    settings only a `models:` entry has."""

    upstream: str | None
    upstream_api_key: str | None = field(repr=False)
    tool_mode: str
    dialects: tuple[str, ...]
    unknown_tools: str
    invalid_arguments: str
    reasoning: str
    repair_rounds: int
    drop_params: tuple[str, ...]
    id_style: str
    tool_result_limit: int | None
    allow_tools: tuple[str, ...]
    deny_tools: tuple[str, ...]
    deny_arguments: tuple[str, ...]
    vtc_native_bridge: bool
    stream_strategy: str
    reasoning_switch: str
    backend: str
    constrain: str
    upstream_model: str | None = setting(None, "text", "the model name sent upstream (clients still see theirs)",
                                         per_model=True)
    chat_template: str | None = setting(None, "template", "the model's chat template, a path or the text: the call "
                                        "format it states is pinned ([Model formats](formats.md#dialects)); without "
                                        "it, the one llama.cpp serves is read", per_model=True)


@dataclass(frozen=True, slots=True)
class Declared:
    """One setting as declared: what the loader, `check-config` and the docs' table read."""

    name: str
    kind: str
    default: Any
    help: str
    per_model: bool  # a `models:` entry may set it
    is_global: bool  # the YAML file's top level (and the environment, where `variable` is set) may set it
    is_secret: bool  # masked wherever settings are shown, left out of repr
    shown: str | None
    variable: str | None  # TOOLPROXY_NAME, or None


def _declared(item: Any, is_global: bool) -> Declared:
    meta: Mapping[str, Any] = item.metadata
    variable = PREFIX + item.name.upper() if is_global and meta["variable"] else None
    return Declared(item.name, meta["kind"], item.default, meta["help"], meta["per_model"], is_global,
                    not item.repr, meta["shown"], variable)


_PER_MODEL = tuple(item for item in fields(Settings) if item.metadata["per_model"])
# Every setting, in the order of the docs' table; `upstream_model` and `chat_template` (a `models:` entry's only) last.
DECLARED: tuple[Declared, ...] = (
    *(_declared(item, True) for item in fields(Settings)),
    *(_declared(item, False) for item in fields(ModelSettings) if item.metadata),
)

