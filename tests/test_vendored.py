"""The vendored chart library is the pinned release, unchanged: each file's hash is the one its note records, and
the file is byte for byte the one npm installs from the pinned (lock-checked) package in tests/node."""

from __future__ import annotations

import hashlib
import json
import re

from tests.conftest import ROOT

VENDOR = ROOT / "toolproxy" / "web" / "static" / "vendor"
PACKAGE = ROOT / "tests" / "node" / "node_modules" / "uplot"
FROM_PACKAGE = {"uPlot.iife.min.js": "dist/uPlot.iife.min.js", "uPlot.min.css": "dist/uPlot.min.css",
                "uPlot.LICENSE": "LICENSE"}


def recorded() -> dict[str, str]:
    note = (VENDOR / "README.md").read_text()
    return dict(re.findall(r"^\| `([^`]+)` \| `([0-9a-f]{64})` \|$", note, re.MULTILINE))


def test_each_vendored_file_has_its_recorded_hash():
    hashes = recorded()
    assert set(hashes) == set(FROM_PACKAGE) == {path.name for path in VENDOR.iterdir()} - {"README.md"}
    for name, digest in hashes.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest, name


def test_the_files_are_the_pinned_package_s():
    pinned = json.loads((ROOT / "tests" / "node" / "package.json").read_text())["dependencies"]["uplot"]
    assert json.loads((PACKAGE / "package.json").read_text())["version"] == pinned
    assert f"uplot` {pinned} from the npm registry" in (VENDOR / "README.md").read_text()
    assert f"(v{pinned})" in (VENDOR / "uPlot.iife.min.js").read_text()[:100]
    for name, source in FROM_PACKAGE.items():
        assert (VENDOR / name).read_bytes() == (PACKAGE / source).read_bytes(), name
