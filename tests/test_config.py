"""Settings from environment variables and the YAML file: values, precedence, and one message per mistake."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from toolproxy.config.catalog import DECLARED, ModelSettings
from toolproxy.config.exposure import exposure_problem
from toolproxy.config.report import TABLE_END, TABLE_START, masked, settings_table, warnings_for
from toolproxy.config.settings import ConfigError, Settings, load_settings


def test_defaults_are_safe_and_demo():
    settings = load_settings({})
    assert settings.bind == "127.0.0.1:8003" and settings.workers == 1
    assert settings.is_demo and settings.api_keys == ()
    assert settings.max_body_bytes == 16 * 1024 * 1024


def test_environment_values():
    settings = load_settings({"TOOLPROXY_UPSTREAM": "http://10.0.0.5:8000/v1/", "TOOLPROXY_API_KEYS": "a, b ,",
                              "TOOLPROXY_WORKERS": "2", "TOOLPROXY_UPSTREAM_API_KEY": "sk-up",
                              "TOOLPROXY_DIALECTS": "qwen_tools,json", "TOOLPROXY_LOOP_REPEATS": "3"})
    assert settings.upstream == "http://10.0.0.5:8000/v1"
    assert settings.api_keys == ("a", "b") and settings.workers == 2
    assert settings.dialects == ("qwen_tools", "json") and settings.loop_repeats == 3
    assert "sk-up" not in repr(settings) and "'a'" not in repr(settings)


def test_yaml_file_with_model_rules_first_match_wins(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "upstream: http://127.0.0.1:8000/v1\n"
        "max_body_bytes: 1000\n"
        "models:\n"
        "  - match: 'qwen2.5-coder*'\n"
        "    upstream: http://10.0.0.5:8000/v1\n"
        "    upstream_model: Qwen/Qwen2.5-Coder-32B-Instruct-AWQ\n"
        "    tool_mode: prompt\n"
        "    dialect: roo_xml\n"
        "  - match: 'qwen*'\n"
        "    dialects: [qwen_tools, json]\n")
    settings = load_settings({"TOOLPROXY_CONFIG": str(path), "TOOLPROXY_MAX_BODY_BYTES": "2000"})
    assert settings.max_body_bytes == 2000, "the environment overrides the file"
    coder = settings.for_model("qwen2.5-coder-32b")
    assert coder.upstream == "http://10.0.0.5:8000/v1" and coder.tool_mode == "prompt"
    assert coder.upstream_model == "Qwen/Qwen2.5-Coder-32B-Instruct-AWQ" and coder.dialects == ("roo_xml",)
    other = settings.for_model("qwen3")
    assert other.upstream == "http://127.0.0.1:8000/v1" and other.dialects == ("qwen_tools", "json")
    assert settings.for_model("llama").upstream_model is None


@pytest.mark.parametrize(("environ", "fragment"), [
    ({"TOOLPROXY_UPSTREAM": "localhost:8000"}, "not an http(s) URL"),
    ({"TOOLPROXY_BIND": "8003"}, "not HOST:PORT"),
    ({"TOOLPROXY_WORKERS": "0"}, "at least 1"),
    ({"TOOLPROXY_ALLOW_OPEN": "maybe"}, "yes/no"),
    ({"TOOLPROXY_READ_TIMEOUT": "-3"}, "more than 0"),
    ({"TOOLPROXY_DIALECTS": "klingon"}, "unknown dialect 'klingon'"),
    ({"TOOLPROXY_TOOL_MODE": "magic"}, "not a tool mode"),
    ({"TOOLPROXY_API_KEYS": " , "}, "no key given"),
    ({"TOOLPROXY_CONFIG": "/nonexistent/toolproxy.yaml"}, "cannot read"),
])
def test_each_mistake_has_a_clear_message(environ, fragment):
    with pytest.raises(ConfigError) as caught:
        load_settings(environ)
    assert fragment in str(caught.value)


def test_all_mistakes_are_reported_at_once(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("upstrem: http://x\nmodels:\n  - upstream: http://y\n  - match: a\n    colour: red\n")
    with pytest.raises(ConfigError) as caught:
        load_settings({"TOOLPROXY_CONFIG": str(path), "TOOLPROXY_WORKERS": "many"})
    problems = caught.value.problems
    assert len(problems) == 4
    assert any("unknown setting 'upstrem'" in p for p in problems)
    assert any("models[0]" in p and "match" in p for p in problems)
    assert any("models[1]" in p and "'colour'" in p for p in problems)


def test_yaml_that_is_not_a_mapping(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_settings({"TOOLPROXY_CONFIG": str(path)})
    path.write_text("upstream: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings({"TOOLPROXY_CONFIG": str(path)})


@pytest.mark.parametrize(("hosts", "settings", "refused"), [
    (["127.0.0.1"], Settings(), False),
    (["localhost", "::1"], Settings(), False),
    (["0.0.0.0"], Settings(), True),
    (["192.168.1.5"], Settings(), True),
    (["0.0.0.0"], Settings(api_keys=("k",)), False),
    (["0.0.0.0"], Settings(allow_open=True), False),
])
def test_exposure(hosts, settings, refused):
    assert (exposure_problem(hosts, settings) is not None) is refused


def test_a_mistyped_name_gets_the_closest_known_one(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("upstrem: http://x/v1\nmodels:\n  - match: a\n    tool_mod: prompt\n")
    with pytest.raises(ConfigError) as caught:
        load_settings({"TOOLPROXY_CONFIG": str(path), "TOOLPROXY_UPSTREAM_APIKEY": "k", "TOOLPROXY_ZZZ": "1"})
    problems = "\n".join(caught.value.problems)
    assert "unknown setting 'upstrem'; did you mean `upstream`?" in problems
    assert "models[0]: unknown key 'tool_mod'; did you mean `tool_mode`?" in problems
    assert "TOOLPROXY_UPSTREAM_APIKEY: unknown variable; did you mean `TOOLPROXY_UPSTREAM_API_KEY`?" in problems
    assert "TOOLPROXY_ZZZ: unknown variable (docs/configuration.md lists" in problems


@pytest.mark.parametrize(("environ", "message"), [
    ({"TOOLPROXY_VTC_NEWLINES": "7"}, "'7' is not a number of line breaks before the XML from 0 to 3"),
    ({"TOOLPROXY_REPAIR_ROUNDS": "7"}, "'7' is not a number of repair rounds from 0 to 3"),
    ({"TOOLPROXY_LOG_FORMAT": "xml"}, "'xml' is not one of text, json"),
    ({"TOOLPROXY_LOG_LEVEL": "loud"}, "'LOUD' is not one of DEBUG, INFO, WARNING, ERROR"),
])
def test_a_value_error_names_the_value_s_own_kind(environ, message):
    with pytest.raises(ConfigError) as caught:
        load_settings(environ)
    (problem,) = caught.value.problems
    assert problem.startswith(f"{next(iter(environ))}: {message}")


def test_log_settings():
    assert (Settings().log_format, Settings().log_level) == ("text", "INFO")
    settings = load_settings({"TOOLPROXY_LOG_FORMAT": "json", "TOOLPROXY_LOG_LEVEL": "debug"})
    assert (settings.log_format, settings.log_level) == ("json", "DEBUG")


def test_resolved_settings_are_shown_with_secrets_masked():
    settings = load_settings({"TOOLPROXY_API_KEYS": "sk-one1,sk-two2", "TOOLPROXY_UPSTREAM_API_KEY": "sk-up",
                              "TOOLPROXY_UPSTREAM": "http://me:hunter2@10.0.0.5:8000/v1"})
    shown = masked(settings)
    assert shown["api_keys"] == "(set: 2 keys)" and shown["upstream_api_key"] == "(set)"
    assert shown["upstream"] == "http://me:***@10.0.0.5:8000/v1" and shown["workers"] == 1
    assert not any(secret in str(shown) for secret in ("sk-one1", "sk-two2", "sk-up", "hunter2"))


def test_an_upstream_without_a_path_is_reported_with_the_url_called():
    assert warnings_for(load_settings({"TOOLPROXY_UPSTREAM": "http://127.0.0.1:8000/v1"})) == []
    (warning,) = warnings_for(load_settings({"TOOLPROXY_UPSTREAM": "http://127.0.0.1:8000/"}))
    assert "http://127.0.0.1:8000/chat/completions" in warning and "http://127.0.0.1:8000/v1?" in warning


def test_model_settings_is_the_typed_view_of_the_per_model_declarations():
    """ModelSettings repeats the per-model fields of Settings for mypy: same names, order and types."""
    declared = {item.name: item for item in fields(Settings)}
    per_model = [item.name for item in fields(Settings) if item.metadata["per_model"]]
    view = [item for item in fields(ModelSettings) if not item.metadata]
    assert [item.name for item in view] == per_model
    assert all(item.type == declared[item.name].type and item.repr == declared[item.name].repr for item in view)
    only_in_rules = [item.name for item in DECLARED if not item.is_global]
    assert only_in_rules == ["upstream_model", "chat_template"]


def test_every_declared_setting_is_read_from_its_variable_and_yaml_key(tmp_path):
    """Derived from the declarations, each setting reaches Settings (or a rule) by each way it may be written."""
    samples = {"url": "http://10.1.2.3:9/v1", "text": "x", "keys": "k1", "flag": "1", "bind": "0.0.0.0:1",
               "count": "7", "seconds": "2.5", "tool_mode": "prompt", "dialects": "json", "names": "a",
               "patterns": "a+", "patterns_or_none": "none", "newlines": "3", "rounds": "2",
               "template": "{{ messages }}", "aliases": "claude-*=qwen3",
               "database_url": "postgresql://u:p@db:5432/log", "instance": "box-7"}
    for item in DECLARED:
        value = samples.get(item.kind) or _another_choice(item)
        if item.variable:
            loaded = load_settings({item.variable: value})
            assert getattr(loaded, item.name) != item.default, item.name
        if item.per_model:
            path = tmp_path / "c.yaml"
            path.write_text(f"models:\n  - match: m\n    {item.name}: {value!r}\n")
            chosen = getattr(load_settings({"TOOLPROXY_CONFIG": str(path)}).for_model("m"), item.name)
            assert chosen != item.default, item.name


def _another_choice(item):
    from toolproxy.config.values import PARSERS

    for candidate in ("json", "keep", "text", "incremental", "mistral", "DEBUG", "prompt", "pass", "off", "vllm",
                      "thinking"):
        try:
            if PARSERS[item.kind](candidate) != item.default:
                return candidate
        except (ValueError, KeyError):
            continue
    return None


def test_the_readme_table_is_the_declared_one():
    """The settings table in the docs is written from the declarations; rewrite it with settings_table()."""
    root = Path(__file__).resolve().parent.parent
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    texts = [page.read_text(encoding="utf-8") for page in pages]
    (text,) = [text for text in texts if TABLE_START in text]
    written = text[text.index(TABLE_START) + len(TABLE_START):text.index(TABLE_END)].strip()
    assert written == settings_table(), ("paste the output of `.venv/bin/python -c 'from toolproxy.config.report "
                                         "import settings_table; print(settings_table())'` between the markers")
    assert all(f"`{item.variable}`" in settings_table() for item in DECLARED if item.variable)
