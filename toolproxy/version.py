"""The one place the version is written; the package, the pages, /health and the build metadata read it."""

__version__ = "0.1.0"
