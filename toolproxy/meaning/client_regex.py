"""A client's regular expressions (a tool schema's `pattern`, `patternProperties` and `propertyNames`), run over
model output with RE2, whose time is linear in the text.

Why not Python's `re`: it backtracks, and `^(a+)+$` against 40 characters of model output takes hours, freezing
the gevent worker and every stream on it until gunicorn kills it (issue 12, reliability #20). Why not a safety
check on the pattern instead: nested quantifiers are not the only trap (`(a|a)*$` is exponential too), and a
checker that misses one case is a denial of service. RE2 has no backreferences and no lookaround; a pattern that
needs them is not run at all, and what cannot be checked safely is never held against the model.
"""

from __future__ import annotations

import functools
from typing import Any

MAX_PATTERN_CHARS = 2000  # longer client patterns are not run (RE2 compiles in memory bounded below)


@functools.cache
def _re2() -> tuple[Any, Any]:
    """RE2 and its options, imported at the first client pattern: most tool schemas have none, and the module
    costs each worker 1.6 MiB."""
    import re2  # type: ignore[import-untyped]

    options = re2.Options()
    options.log_errors = False  # an unsupported pattern is an expected case, not something to print on stderr
    options.max_mem = 4 << 20  # bytes per compiled pattern: a huge pattern fails to compile instead of growing
    return re2, options


@functools.lru_cache(maxsize=1024)
def compiled(pattern: str) -> Any | None:
    """The pattern compiled by RE2, or None when RE2 cannot run it (its syntax, or its size)."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return None
    re2, options = _re2()
    try:
        return re2.compile(pattern, options)
    except (re2.error, UnicodeEncodeError):
        return None


def is_runnable(pattern: str) -> bool:
    return compiled(pattern) is not None


def search(pattern: str, text: str) -> bool | None:
    """Whether the pattern matches anywhere in `text` (JSON Schema's rule: not anchored); None when the pattern
    is not run."""
    regex = compiled(pattern)
    if regex is None:
        return None
    try:
        return regex.search(text) is not None
    except UnicodeEncodeError:  # a lone surrogate (legal in a JSON escape) is not UTF-8, which RE2 reads
        return regex.search(text.encode("utf-8", "replace").decode("utf-8")) is not None
