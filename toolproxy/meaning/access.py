"""Tool access policy, for every client alike: which tools a model may call, and argument patterns that are
never let through (a command matching `rm -rf /`). A refused call is replaced by a sentence saying which rule
refused it, so the agent and the person watching it can see why nothing ran."""

from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass
from typing import Any

from toolproxy.meaning.arguments import strings


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    allow_tools: tuple[str, ...] = ()  # globs; empty allows every tool
    deny_tools: tuple[str, ...] = ()  # globs
    deny_arguments: tuple[str, ...] = ()  # regular expressions, searched in every string argument value

    def refusal(self, name: str, arguments: Any) -> str | None:
        """Why this call may not run, or None."""
        if self.allow_tools and not any(fnmatch.fnmatchcase(name, glob) for glob in self.allow_tools):
            return f"toolproxy refused the call to `{name}`: the tool is not in this model's allow list."
        denied = next((glob for glob in self.deny_tools if fnmatch.fnmatchcase(name, glob)), None)
        if denied is not None:
            return f"toolproxy refused the call to `{name}`: the tool matches the deny rule `{denied}`."
        for pattern in self.deny_arguments:
            compiled = _compiled(pattern)
            if any(compiled.search(value) for value in strings(arguments)):
                return f"toolproxy refused the call to `{name}`: an argument matches the deny pattern `{pattern}`."
        return None


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)

