"""Builds are told apart: the version comes from the repository (the latest vX.Y.Z tag, plus the commit for a
build that is not the tagged one, plus `.dirty`), from a source distribution's PKG-INFO, or from the installed
package's metadata; a copy with none of these still has one. /health and `toolproxy_build_info` show it."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT, ProxyServer
from toolproxy.version import RELEASE, version, version_at

pytestmark = pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
                                reason="git is not installed")


def git(repository: Path, *args: str) -> str:
    environ = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    result = subprocess.run(["git", "-C", str(repository), "-c", "user.name=t", "-c", "user.email=t@example.com",
                             *args], capture_output=True, text=True, timeout=60, check=True, env=environ)
    return result.stdout.strip()


def test_a_checkout_names_its_tag_its_commit_and_uncommitted_changes(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("one")
    git(tmp_path, "add", "a.txt")
    git(tmp_path, "commit", "-qm", "first")
    first = git(tmp_path, "rev-parse", "HEAD")
    untagged = version_at(tmp_path)
    assert untagged.startswith(f"{RELEASE}+g") and first.startswith(untagged.removeprefix(f"{RELEASE}+g"))
    git(tmp_path, "tag", "v0.2.0")
    assert version_at(tmp_path) == "0.2.0", "the tagged commit itself is the release"
    (tmp_path / "a.txt").write_text("two")
    assert re.fullmatch(r"0\.2\.0\+g[0-9a-f]{8,}\.dirty", version_at(tmp_path))
    git(tmp_path, "commit", "-qam", "second")
    after = version_at(tmp_path)
    assert git(tmp_path, "rev-parse", "HEAD").startswith(after.removeprefix("0.2.0+g")) and ".dirty" not in after


def test_without_git_a_source_distribution_or_the_release_gives_the_version(tmp_path: Path) -> None:
    assert version_at(tmp_path) == RELEASE, "a copy without git, not installed"
    (tmp_path / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: toolproxy\nVersion: 0.3.0+gabcdef12\n")
    assert version_at(tmp_path) == "0.3.0+gabcdef12"


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="this checkout has no git repository")
def test_health_and_build_info_name_this_checkout_s_commit(proxy: ProxyServer) -> None:
    built = version()
    if "+g" in built:
        assert git(ROOT, "rev-parse", "HEAD").startswith(built.partition("+g")[2].removesuffix(".dirty"))
    else:  # HEAD is a release's tagged commit
        assert f"v{built}" in git(ROOT, "tag", "--points-at", "HEAD").split()
    assert requests.get(f"{proxy.url}/health", timeout=10).json()["version"] == built
    metrics = text_string_to_metric_families(requests.get(f"{proxy.url}/metrics", timeout=10).text)
    labels = [sample.labels for family in metrics for sample in family.samples
              if sample.name == "toolproxy_build_info"]
    assert labels == [{"version": built}]
