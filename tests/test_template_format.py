"""The call format read from a model's own chat template (meaning/template_format.py): real templates of 18 models,
copied exactly from llama.cpp with their source, each yielding its dialect; the call a template writes read back
by the proxy's extraction; the markers of a form no dialect reads; the sandbox's limits."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from toolproxy.meaning.extraction import extract
from toolproxy.meaning.template_format import PROBE, derive, written_call
from toolproxy.meaning.template_markup import MarkerSpec, Probe
from toolproxy.meaning.template_sandbox import MAX_STEPS, MAX_TEMPLATE_CHARS, SandboxedTemplate, TemplateError, render

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "templates"
SOURCES = json.loads((FIXTURES / "sources.json").read_text(encoding="utf-8"))["templates"]
# What each template states (the markers are derived too, dialect or not: test_dsml_markers).
EXPECTED = {"qwen3": "hermes", "qwen3_coder": "qwen3_coder", "qwen3_5": "qwen3_coder", "glm_4_7": "glm",
            "glm_4_6": "glm", "kimi_k2": "kimi_k2", "kimi_k2_thinking": "kimi_k2", "deepseek_v3_1": "deepseek",
            "deepseek_v3_2": "dsml", "minimax_m2": "minimax", "mistral_small_3_2": "mistral",
            "devstral_small": "mistral", "llama_3_1": "json", "hermes_3": "hermes", "gpt_oss": "harmony",
            "gemma4": "gemma4", "nemotron_3_nano": "qwen3_coder", "seed_oss": "seed_oss"}
WITH_DIALECT = sorted(name for name, dialect in EXPECTED.items() if dialect)


def template(name: str) -> str:
    return (FIXTURES / f"{name}.jinja").read_text(encoding="utf-8")


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's object id


def test_every_template_is_an_exact_copy_of_its_source():
    assert sorted(entry["file"] for entry in SOURCES) == sorted(path.name for path in FIXTURES.glob("*.jinja"))
    assert sorted(EXPECTED) == sorted(entry["file"].removesuffix(".jinja") for entry in SOURCES)
    for entry in SOURCES:
        assert entry["repository"] and entry["path"].endswith(".jinja") and len(entry["commit"]) == 40
        assert git_blob((FIXTURES / entry["file"]).read_bytes()) == entry["git_blob"], entry["file"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_template_yields_its_dialect(name: str):
    derived = derive(template(name))
    assert derived.dialect == EXPECTED[name], derived
    assert PROBE.name in derived.sample
    if derived.dialect:
        assert derived.problems == ()


WRITE = Probe("write_file", {"path": "src/app.py", "content": 'print("hi")\nvalues = {"a": [1, 2]}',
                             "overwrite": True}, "c4llw0001")
WRITE_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"},
                                                 "overwrite": {"type": "boolean"}},
                "required": ["path", "content"]}
WRITE_TOOLS = [{"type": "function", "function": {"name": "write_file", "description": "Write a file.",
                                                 "parameters": WRITE_SCHEMA}}]


@pytest.mark.parametrize("name", WITH_DIALECT)
def test_the_call_a_template_writes_is_read_back_as_that_call(name: str):
    """A call other than the probe (code with quotes, braces and line breaks, a boolean), written by the template,
    read by the proxy's extraction: automatically, and with the derived dialect pinned."""
    written = written_call(SandboxedTemplate(template(name)), WRITE, WRITE_TOOLS)
    for dialects in ((), (EXPECTED[name],)):
        extraction = extract(written, {"write_file": WRITE_SCHEMA}, dialects)
        assert [(call.name, call.arguments) for call in extraction.calls] == [("write_file", WRITE.arguments)], \
            (dialects, written)
        assert not extraction.failures


# Values whose own first or last character is a line break: the XML families' templates write them between the
# tags with a line break of layout on each side (Qwen3-Coder, Qwen3.5, Nemotron 3) or none (GLM, MiniMax-M2,
# Seed-OSS, DeepSeek V3.2's DSML); either way the value must come back as it was.
EDGES = Probe("write_file", {"path": "src/app.py", "content": "x = 1\n", "header": "\n# notes"}, "c4llw0002")
EDGES_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"},
                                                 "header": {"type": "string"}}}


@pytest.mark.parametrize("name", WITH_DIALECT)
def test_a_values_own_line_breaks_come_back_as_the_template_wrote_them(name: str):
    tools = [{"type": "function", "function": {"name": "write_file", "description": "Write a file.",
                                                "parameters": EDGES_SCHEMA}}]
    written = written_call(SandboxedTemplate(template(name)), EDGES, tools)
    for dialects in ((), (EXPECTED[name],)):
        extraction = extract(written, {"write_file": EDGES_SCHEMA}, dialects)
        assert [(call.name, call.arguments) for call in extraction.calls] == [("write_file", EDGES.arguments)], \
            (dialects, written)


def put_together(spec: MarkerSpec, probe: Probe) -> str:
    """The call from its markers, in the order the template wrote them (string first where it did)."""
    if spec.arguments == "json_call":
        call = {spec.name_key: probe.name, spec.arguments_key: dict(probe.arguments)}
        return spec.opener + json.dumps(call) + spec.closer
    text = spec.opener + probe.name + spec.name_end
    if spec.arguments == "json":
        return text + json.dumps(dict(probe.arguments)) + spec.closer
    pieces = []
    for key, value in probe.arguments.items():
        before, after = spec.string_value if isinstance(value, str) else spec.other_value
        pieces.append((key, spec.key_start + key + before + (value if isinstance(value, str) else json.dumps(value))
                       + after))
    return text + spec.separator.join(piece for _, piece in pieces) + spec.closer


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_markers_put_back_together_give_the_templates_own_rendering(name: str):
    derived = derive(template(name))
    assert derived.markers is not None
    spec = derived.markers.as_dict()
    assert spec["arguments"] in ("json", "json_call", "parameters")
    renderings = {put_together(derived.markers, PROBE),
                  put_together(derived.markers, Probe(PROBE.name, dict(reversed(PROBE.arguments.items())), ""))}
    assert derived.sample.replace(PROBE.call_id, "{id}") in renderings


def test_dsml_markers():
    """DeepSeek V3.2's DSML: the dsml dialect reads it (the invoke family's DSML wrapper, issue 20), and the spec
    says how it is written, typed values included."""
    derived = derive(template("deepseek_v3_2"))
    assert derived.dialect == "dsml" and derived.markers is not None
    dsml = "<\uff5cDSML\uff5c"  # DeepSeek's full-width bars
    assert derived.markers.as_dict() == {
        "opener": f'{dsml}function_calls>\n{dsml}invoke name="', "name_end": '">', "arguments": "parameters",
        "key_start": f'\n{dsml}parameter name="', "string_value": ('" string="true">', f"</{dsml[1:]}parameter>"),
        "other_value": ('" string="false">', f"</{dsml[1:]}parameter>"), "separator": "",
        "closer": f"\n</{dsml[1:]}invoke>\n</{dsml[1:]}function_calls>"}
    assert derived.as_status().get("problems", []) == []


def test_gemma4_quotes_strings_and_mistral_writes_the_id():
    gemma = derive(template("gemma4")).markers
    assert gemma is not None and gemma.string_value == (':<|"|>', '<|"|>') and gemma.other_value == (":", "")
    mistral = derive(template("mistral_small_3_2")).markers
    assert mistral is not None and mistral.name_end == "[CALL_ID]{id}[ARGS]"


CHATML = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"


@pytest.mark.parametrize(("text", "problem"), [
    (CHATML, "the template writes no tool call"),
    ("{{ raise_exception('Tools are not supported') }}", "refused the conversation: Tools are not supported"),
    ("{% for %}", "not valid Jinja"),
    ("{% for m in messages %}{{ m.tool_calls[0].id if m.tool_calls else m.content }}{% endfor %}",
     "does not hold the tool's name"),
])
def test_what_cannot_be_derived_is_said(text: str, problem: str):
    derived = derive(text)
    assert derived.dialect is None and derived.markers is None
    assert derived.problems and all(problem in item for item in derived.problems), derived.problems


HOSTILE = {
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}": f"past {MAX_STEPS} steps",
    "{{ 'x' * 100000000 }}": "a value of more than",
    "{{ 'x'|center(1000000000) }}": "passed 1000000000 to a call or filter",
    "{{ 'x'.ljust(1000000000) }}": "passed 1000000000 to a call or filter",
    "{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}":
        "a value of more than",
    "{% set l = [1] %}{% for i in range(40) %}{% do l.extend(l) %}{% endfor %}": "a value of more than",
    "{{ '%999999999d' % 1 }}": "a million characters wide",
    "{{ '{:>999999999}'.format(1) }}": "a million characters wide",
    "{{ ('a' * 1000)|replace('a', 'b' * 100000) }}": "replaced its way",
    "{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}": "output passed",
    "{{ ''.__class__.__mro__ }}": "unsafe",
    "{{ cycler.__init__.__globals__ }}": "unsafe",
    "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}": "RecursionError",
    "{{ 2 ** 100000 }}": "power past 64",
}


@pytest.mark.parametrize("text", sorted(HOSTILE))
def test_the_sandbox_stops_a_template_at_its_limits(text: str):
    with pytest.raises(TemplateError) as refused:
        render(text, {})
    assert HOSTILE[text] in str(refused.value)
    assert derive(text).problems  # said, never raised


def test_the_sandbox_refuses_a_template_past_its_size():
    with pytest.raises(TemplateError, match=f"more than {MAX_TEMPLATE_CHARS}"):
        SandboxedTemplate("x" * (MAX_TEMPLATE_CHARS + 1))


def test_the_helpers_real_templates_use():
    variables: dict[str, Any] = {"value": {"a": "<b>", "é": 1}}
    assert render("{{ value|tojson }}|{{ strftime_now('%Y-%m-%d') }}", variables) == '{"a": "<b>", "é": 1}|2026-01-01'
    assert render("{% for i in range(5) %}{% if i == 2 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}) == "01"
    assert render("{% generation %}kept{% endgeneration %}", {}) == "kept"
    assert render("{% set l = [] %}{% do l.append(1) %}{{ l }}", {}) == "[1]"
    assert render("{{ x }}", {}) == ""  # undefined is empty, as in Hugging Face's environment
