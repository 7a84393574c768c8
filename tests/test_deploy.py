"""The systemd unit in deploy/: systemd itself checks it, and its stop timeout covers gunicorn's graceful one."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from toolproxy.config.settings import Settings
from toolproxy.server import gunicorn_settings

UNIT = ROOT / "deploy" / "toolproxy.service"
EXEC = "/opt/toolproxy/venv/bin/toolproxy"


def _directives(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if re.match(r"^[A-Z][A-Za-z]+=", line))


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed (Debian: apt-get install systemd)")
def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    # The unit names where deploy/README.md installs the command; here that path does not exist, and verify
    # would (rightly) report it, so the copy runs an executable that is on every box.
    text = UNIT.read_text()
    assert f"ExecStart={EXEC} serve" in text
    copy = tmp_path / "toolproxy.service"
    copy.write_text(text.replace(EXEC, shutil.which("true") or "/bin/true"))
    result = subprocess.run(["systemd-analyze", "verify", "--man=no", str(copy)], capture_output=True, text=True,
                            timeout=60)
    # A misspelt directive is only a warning to systemd: any output at all fails this test.
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_the_unit_runs_as_its_own_user_and_outwaits_a_graceful_stop() -> None:
    unit = _directives(UNIT.read_text())
    graceful = gunicorn_settings(Settings())["graceful_timeout"]
    assert unit["User"] == "toolproxy" and unit["EnvironmentFile"] == "/etc/toolproxy/env"
    assert unit["Restart"] == "on-failure"
    assert graceful < int(unit["TimeoutStopSec"]) <= graceful + 10


def test_the_service_keeps_its_data_in_var_lib() -> None:
    unit = _directives(UNIT.read_text())
    assert unit["StateDirectory"] == "toolproxy" and unit["Environment"] == "TOOLPROXY_DATA_DIR=/var/lib/toolproxy"


def test_the_image_and_the_compose_example_agree_on_the_data_volume_the_port_and_the_health_check() -> None:
    # The behaviour is `make test-container`'s (podman, minutes): here only what two files must say alike.
    dockerfile = (ROOT / "Dockerfile").read_text()
    service = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())["services"]["toolproxy"]
    assert "TOOLPROXY_DATA_DIR=/var/lib/toolproxy" in dockerfile and "VOLUME /var/lib/toolproxy" in dockerfile
    assert any(volume.endswith(":/var/lib/toolproxy") for volume in service["volumes"])
    assert "TOOLPROXY_BIND=0.0.0.0:8003" in dockerfile and service["ports"] == ["8003:8003"]
    check = service["healthcheck"]["test"][-1]
    assert "http://127.0.0.1:8003/health" in check and check in dockerfile.replace("\\\n", "")
    graceful = gunicorn_settings(Settings())["graceful_timeout"]
    assert graceful < int(service["stop_grace_period"].removesuffix("s")) <= graceful + 10
