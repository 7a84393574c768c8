"""What kind of server the upstream is, read from what it serves (never from a model's name), and how each kind
is asked: its quirks as data. Pure: the probes that gather the answers live in upstream/probe.py.

What each server serves, as read from their sources: llama.cpp's llama-server answers `GET /props` (with
`build_info` and the `chat_template`) and sends `Server: llama.cpp`; Ollama answers `GET /api/version`; SGLang
`GET /server_info` (older: `/get_server_info`) with its `version`; vLLM `GET /version`; llama-cpp-python's server
lists its models with `"owned_by": "me"` and `"permissions": []`; LM Studio with `"owned_by":
"organization_owner"`; mlx-lm's server is Python's http.server (`Server: BaseHTTP/...`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolproxy.config.values import BACKEND_KINDS
from toolproxy.upstream.constrain import with_strict

# Kinds whose grammar engine builds a constrained call from a tool with `strict: true`, under any tool_choice
# (vllm-project/vllm#45003, #45600; sgl-project/sglang#4310).
STRICT_KINDS = frozenset({"vllm", "sglang"})
# llama-cpp-python's "chatml-function-calling" format ignores `tools` unless `tool_choice` is sent, and refuses a
# streamed request with tools and `tool_choice: auto` ("Automatic streaming tool choice is not supported") after
# answering 200 (llama_cpp/llama_chat_format.py, 0.3.36).
AUTO_CHOICE_KINDS = frozenset({"llama-cpp-python"})
NO_TOOL_STREAM_KINDS = frozenset({"llama-cpp-python"})
assert set(BACKEND_KINDS) >= STRICT_KINDS | AUTO_CHOICE_KINDS | NO_TOOL_STREAM_KINDS


@dataclass(frozen=True, slots=True)
class Backend:
    kind: str = "generic"
    version: str = ""
    source: str = "unknown"  # "configured", "detected", or "unknown" (not probed yet, or the probe failed)
    evidence: str = ""  # one line: what told the kind
    props: dict[str, Any] | None = field(default=None, repr=False, compare=False)  # llama.cpp's /props

    @property
    def label(self) -> str:
        """The kind and its version, as the record, the dashboard and /health show it."""
        return f"{self.kind} {self.version}".strip()

    @property
    def takes_strict(self) -> bool:
        return self.kind in STRICT_KINDS

    @property
    def streams_tools(self) -> bool:
        return self.kind not in NO_TOOL_STREAM_KINDS


@dataclass(frozen=True, slots=True)
class Answer:
    """One probe's answer: its status, the `Server` header, and the JSON body (None when it was not JSON)."""

    status: int
    server: str = ""
    body: Any = None


def configured(kind: str) -> Backend:
    return Backend(kind, source="configured", evidence="set in the configuration")


def from_server_header(answer: Answer) -> Backend | None:
    if answer.server.lower().startswith("llama.cpp"):
        return Backend("llamacpp", source="detected", evidence=f"Server: {answer.server[:40]}")
    return None


def from_props(answer: Answer) -> Backend | None:
    body = answer.body
    if answer.status != 200 or not isinstance(body, dict):
        return None
    if not {"default_generation_settings", "total_slots", "build_info", "chat_template"} & set(body):
        return None
    version = str(body.get("build_info") or "")[:40]
    return Backend("llamacpp", version, "detected", "GET /props", props=body)


def from_version(answer: Answer, kind: str, path: str) -> Backend | None:
    body = answer.body
    if answer.status != 200 or not isinstance(body, dict) or not isinstance(body.get("version"), str):
        return None
    return Backend(kind, body["version"][:40], "detected", f"GET {path}")


def from_model_list(answer: Answer) -> Backend | None:
    """The kinds that have no version endpoint, told by how they list their models."""
    body = answer.body
    models = body.get("data") if isinstance(body, dict) else None
    if answer.status != 200 or not isinstance(models, list) or not models or not isinstance(models[0], Mapping):
        return None
    first = models[0]
    if first.get("owned_by") == "me" and first.get("permissions") == []:
        return Backend("llama-cpp-python", source="detected", evidence='GET /models: "owned_by": "me"')
    if first.get("owned_by") == "organization_owner":
        return Backend("lmstudio", source="detected", evidence='GET /models: "owned_by": "organization_owner"')
    if answer.server.startswith("BaseHTTP/"):
        return Backend("mlx", source="detected", evidence=f"GET /models: Server: {answer.server[:40]}")
    return None


def prepare(body: dict[str, Any], backend: Backend, *, constrain: str,
            unconstrainable: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The upstream body as this kind of server wants it (a new dict where anything changes)."""
    tools = body.get("tools")
    if not tools:
        return body
    if backend.kind in AUTO_CHOICE_KINDS and body.get("tool_choice", "required") == "required":
        # Unsaid, `auto` is OpenAI's default, which this server needs said; `required` it fails with a 500, so a
        # lone tool is named and several go as `auto`, the corrective round keeping the choice (routes/repair.py).
        lone = tools[0].get("function", {}).get("name") if len(tools) == 1 and "tool_choice" in body else None
        choice: Any = {"type": "function", "function": {"name": lone}} if lone else "auto"
        body = {**body, "tool_choice": choice}
    if constrain == "auto" and backend.takes_strict:
        body = {**body, "tools": with_strict(tools, unconstrainable)}
    return body
