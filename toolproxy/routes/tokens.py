"""A prompt's token count (Anthropic's `count_tokens`): by the upstream's own tokenizer where it serves one, else
estimated (transform/tokens.py says how). Never an error: a client asks this to decide when to compact, and an
error there stops it."""

from __future__ import annotations

import logging

from toolproxy.config.settings import ModelSettings
from toolproxy.errors import UpstreamError
from toolproxy.transform import request_transform, tokens
from toolproxy.transform.chat_request import ChatRequest
from toolproxy.upstream.client import HttpUpstream

logger = logging.getLogger(__name__)


def estimate(chat: ChatRequest) -> int:
    return tokens.estimate(chat.body)


def count(chat: ChatRequest, target: ModelSettings, http: HttpUpstream, api_key: str | None) -> int:
    """Tokens of the prompt as the upstream will get it (in prompt mode, the tools in its system prompt)."""
    body = request_transform.upstream_body(chat.body, target, stream=False)
    if target.upstream:
        try:
            counted = tokens.counted(http.tokenize(target.upstream, tokens.tokenize_body(body), api_key))
        except UpstreamError as error:  # no tokenizer there (Ollama, LM Studio: 404), or it failed: estimate
            logger.debug("the upstream's /tokenize did not count the prompt: %s", error.message)
            counted = None
        if counted is not None:
            return counted
    return tokens.estimate(body)
