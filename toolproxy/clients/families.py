"""Which family of client sent a request, from its User-Agent: a bounded set of names for the metrics' `client`
label (any other agent is `other`), so a client cannot grow the series by what it sends. A hint, never a fact:
nothing but the metrics decides by it. Pure: no I/O."""

from __future__ import annotations

import functools

# (family, words of which any in the lower-cased User-Agent names it), the agents before the SDKs they are built
# on (Codex, OpenClaw or Claude Code may name their SDK too), and longer words before the short ones.
FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("claude-code", ("claude-cli", "claude-code")),
    ("codex", ("codex",)),
    ("openclaw", ("openclaw",)),
    ("opencode", ("opencode",)),
    ("kilo-code", ("kilo",)),
    ("roo-code", ("roo-code", "roocode", "roo code", "roo-cline")),
    ("cline", ("cline",)),
    ("continue", ("continue",)),
    ("aider", ("aider",)),
    ("goose", ("goose",)),
    ("zed", ("zed/",)),
    ("litellm", ("litellm",)),
    ("langchain", ("langchain",)),
    ("openai-python", ("openai/python",)),
    ("openai-node", ("openai/js",)),
    ("anthropic-python", ("anthropic/python",)),
    ("anthropic-node", ("anthropic/js",)),
    ("curl", ("curl/",)),
    ("python-requests", ("python-requests/",)),
    ("browser", ("mozilla/",)),
)
NAMES = (*(name for name, _ in FAMILIES), "none", "other")
MAX_AGENT_CHARS = 512  # a User-Agent is read this far: the words come first, and a long one costs no more


@functools.lru_cache(maxsize=1024)
def family(user_agent: str) -> str:
    """The family's name, `none` for no User-Agent, or `other`."""
    if not user_agent:
        return "none"
    agent = user_agent[:MAX_AGENT_CHARS].lower()
    return next((name for name, words in FAMILIES if any(word in agent for word in words)), "other")
