"""The documentation's examples are real and its lists whole: each one-line dialect example of docs/formats.md
is a call to `read` in its own dialect; the README's curl request and the Python snippet of docs/clients.md run
against the demo model as written; every server recipe of docs/servers.md gives a URL the proxy accepts; and
docs/configuration.md lists every variable."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from urllib.parse import urlsplit

import pytest

from tests.readme import README, code_block, page, recipe
from toolproxy.config import settings as config
from toolproxy.config.catalog import DECLARED
from toolproxy.config.settings import load_settings
from toolproxy.dialects.registry import DIALECTS
from toolproxy.meaning.extraction import extract

FORMATS = page("docs/formats.md")
# `\n` in an example stands for a line break (Functionary v3.2 puts one after the name); an example holding
# backticks sits between two (`` ```tool_code ``).
EXAMPLES = {name: example.replace("\\n", "\n")
            for name, _, example in re.findall(r"^- `(\w+)` \([^\n]*?\): (`+) ?(.+?) ?\2$", FORMATS, flags=re.M)}
TOOLS = {"read": {"type": "object", "properties": {"path": {"type": "string"}}},
         "list_dir": {"type": "object", "properties": {"path": {"type": "string"}}}}
SERVERS = ["vLLM", "llama.cpp", "Ollama", "SGLang", "LM Studio", "MLX"]


def test_every_dialect_has_an_example_in_registry_order():
    assert list(EXAMPLES) == list(DIALECTS)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_parses_pinned_and_automatic(name):
    for dialects in ((name,), ()):
        extraction = extract(EXAMPLES[name], TOOLS, dialects)
        assert (extraction.calls[0].name, extraction.calls[0].arguments) == ("read", {"path": "a.py"})
        assert extraction.calls[0].dialect == name
        assert extraction.content() is None


def test_the_python_sdk_snippet_runs_as_written(serve, settings, capsys):
    """Copied from docs/clients.md and run against the demo model, with only the address changed; the recipe
    says what to install."""
    from tests.conftest import with_settings

    assert "`pip install openai`" in recipe("OpenAI SDK (Python)")
    snippet = code_block("OpenAI SDK (Python)", "python")
    proxy = serve(with_settings(settings, upstream=None))
    exec(snippet.replace("http://127.0.0.1:8003", proxy.url), {})
    printed = capsys.readouterr().out
    line = next(line for line in printed.splitlines() if line.startswith("call #0: read_file "))
    assert json.loads(line.removeprefix("call #0: read_file ")) == {"path": "README.md"}


def test_the_anthropic_sdk_snippet_runs_as_written(serve, settings, capsys):
    """The Anthropic SDK's snippet, run against the demo model as written but for the address (no /v1)."""
    from tests.conftest import with_settings

    assert "`pip install anthropic`" in recipe("Anthropic SDKs")
    snippet = code_block("Anthropic SDKs", "python")
    proxy = serve(with_settings(settings, upstream=None))
    exec(snippet.replace("http://127.0.0.1:8003", proxy.url), {})
    printed = capsys.readouterr().out
    line = next(line for line in printed.splitlines() if line.startswith("call toolu_"))
    assert line.split(": ", 1)[1] == "read_file {'path': 'README.md'}"


def test_the_readme_curl_request_gets_a_call_from_the_demo_model(serve, settings):
    """The landing page's first request, run by curl as written (only the address changed)."""
    from tests.conftest import with_settings

    command = next(block for block in re.findall(r"^```sh\n(.*?)^```$", README, flags=re.M | re.S)
                   if block.startswith("curl "))
    proxy = serve(with_settings(settings, upstream=None))
    curl = shutil.which("curl")
    assert curl is not None, "curl is needed to run the README's request as written"
    argv = shlex.split(command.replace("http://127.0.0.1:8003", proxy.url))
    result = subprocess.run([curl, *argv[1:]], capture_output=True, text=True, timeout=60, check=True)
    calls = json.loads(result.stdout)["choices"][0]["message"]["tool_calls"]
    assert [(call["function"]["name"], json.loads(call["function"]["arguments"])) for call in calls] == [
        ("read_file", {"path": "src/app.py"})]


@pytest.mark.parametrize("title", SERVERS)
def test_server_recipe_points_the_proxy_at_the_port_its_server_listens_on(title):
    block = code_block(title, "sh")
    url = re.search(r"^TOOLPROXY_UPSTREAM=(\S+) make run$", block, flags=re.M)
    assert url is not None, f"{title}: no `TOOLPROXY_UPSTREAM=... make run` line"
    settings = load_settings({"TOOLPROXY_UPSTREAM": url.group(1)})
    assert settings.upstream == url.group(1) and urlsplit(url.group(1)).path == "/v1"
    port = re.search(r"--port (\d+)", block)
    if port is not None:
        assert urlsplit(url.group(1)).port == int(port.group(1))
    table_row = next(line for line in page("docs/servers.md").splitlines() if line.startswith(f"| [{title}]"))
    assert f"`{url.group(1)}`" in table_row, "the page's table gives the same default address"


def test_readme_lists_every_server_with_its_recipe():
    for title in SERVERS:
        anchor = re.sub(r"[^\w -]", "", title.lower()).replace(" ", "-")
        assert f"](docs/servers.md#{anchor})" in README


def test_the_configuration_page_lists_every_variable():
    table = page("docs/configuration.md")
    variables = [item.variable for item in DECLARED if item.variable] + list(config._OTHER_VARIABLES)
    assert [variable for variable in variables if f"`{variable}`" not in table] == []
