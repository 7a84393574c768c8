"""The one place the version is worked out; the package, the pages, /health, the build metadata and
`toolproxy_build_info` read it. Builds are told apart by the repository they come from:

- a git checkout: the latest `vX.Y.Z` tag (`RELEASE` while there is none), `+g<commit>` unless HEAD is the tagged
  commit, `.dirty` with uncommitted changes (`0.1.0+g1a2b3c4d.dirty`);
- an unpacked source distribution: its PKG-INFO;
- an installed package (a wheel built from a checkout): the version in its metadata, fixed when it was built;
- anything else (a copy without git): `RELEASE`.

Worked out on first use, not at import: it may run git once.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import Path

RELEASE = "0.1.0"  # the last release; its commit carries the tag v0.1.0
ROOT = Path(__file__).resolve().parent.parent  # the checkout (or site-packages, when installed)
GIT_SECONDS = 5
_DESCRIBED = re.compile(r"(?:v(?P<tag>[0-9]+(?:\.[0-9]+)*)-(?P<distance>[0-9]+)-g)?(?P<commit>[0-9a-f]+)"
                        r"(?P<dirty>-dirty)?")


def __getattr__(name: str) -> str:
    """`__version__`, computed when first asked for (PEP 562)."""
    if name == "__version__":
        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def version() -> str:
    return version_at(ROOT)


def version_at(root: Path) -> str:
    """The version of the toolproxy whose package lies in `root`, by the rules above."""
    if (root / ".git").exists():
        described = _describe(root)
        if described is not None:
            return described
    return _from_pkg_info(root) or _from_metadata(root) or RELEASE


def _describe(root: Path) -> str | None:
    # --no-optional-locks: asking for the version never rewrites the checkout's index. GIT_* variables of a
    # caller (a hook's GIT_DIR) must not point git at another repository.
    environ = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    command = ["git", "--no-optional-locks", "-C", str(root), "describe", "--tags", "--match", "v[0-9]*", "--long",
               "--dirty", "--always", "--abbrev=8"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=GIT_SECONDS, env=environ)
    except (OSError, subprocess.SubprocessError):  # no git, or a git that hangs: the next source answers
        return None
    found = _DESCRIBED.fullmatch(result.stdout.strip()) if result.returncode == 0 else None
    if found is None:  # not a repository git accepts (another user's checkout, a damaged one)
        return None
    release = found["tag"] or RELEASE
    if found["distance"] == "0" and not found["dirty"]:
        return release
    return f"{release}+g{found['commit']}{'.dirty' if found['dirty'] else ''}"


def _from_pkg_info(root: Path) -> str | None:
    try:
        text = (root / "PKG-INFO").read_text(encoding="utf-8")
    except OSError:
        return None
    found = re.search(r"^Version: *(\S+)", text, re.MULTILINE)
    return found[1] if found else None


def _from_metadata(root: Path) -> str | None:
    """The installed distribution's version, if this very file is the one it installed (a checkout that also has
    an older install elsewhere must not report that one)."""
    from importlib import metadata

    try:
        distribution = metadata.distribution("toolproxy")
    except metadata.PackageNotFoundError:
        return None
    installed = Path(str(distribution.locate_file("toolproxy/version.py")))
    here = root / "toolproxy" / "version.py"
    same = installed.exists() and here.exists() and installed.resolve() == here.resolve()
    return distribution.version if same else None
