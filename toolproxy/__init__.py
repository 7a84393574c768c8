"""toolproxy: an OpenAI-compatible proxy that makes tool calling with local models work."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flask import Flask

    from toolproxy.config.settings import Settings

__all__ = ["__version__", "create_app"]


def __getattr__(name: str) -> str:
    """`toolproxy.__version__`, worked out on first use (toolproxy/version.py), not when the package is imported."""
    if name == "__version__":
        from toolproxy.version import version

        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def create_app(settings: Settings | None = None) -> Flask:
    """The only way to build the app. Imported lazily because gunicorn's master loads `toolproxy.config.settings`
    before the workers monkey-patch, and Flask (through `ssl`) must not be imported that early."""
    from toolproxy.web.application import build_app

    return build_app(settings)
