"""`POST /v1/messages` and `/v1/messages/count_tokens`, Anthropic's Messages protocol (Claude Code, the
`anthropic` SDKs): the request decoded into the core's chat request (messages_request.py), answers, streams and
errors written in Anthropic's shapes (messages_answer.py), the key read from `x-api-key` or a bearer token."""

from __future__ import annotations

from flask import Response
from werkzeug.datastructures import Headers

from toolproxy.config.settings import Settings
from toolproxy.errors import ProxyError
from toolproxy.fronts import messages_request
from toolproxy.fronts.base import Front, StreamEncoder, cooperate, json_response, sse_response
from toolproxy.fronts.messages_answer import Framing, MessagesEncoder, error_object, message_of
from toolproxy.fronts.messages_request import MessagesRequest
from toolproxy.routes.exchange import Exchange
from toolproxy.transform import tokens
from toolproxy.transform.chat_request import ChatRequest
from toolproxy.transform.turn import DONE, Answer, Whole


class AnthropicMessages(Front):
    protocol = "messages"
    key_hint = "x-api-key: <key> (or Authorization: Bearer <key>)"

    def __init__(self) -> None:
        self._request: MessagesRequest | None = None
        self._prompt_tokens: int | None = None

    def presented_key(self, headers: Headers) -> str | None:
        return headers.get("x-api-key") or super().presented_key(headers)

    def decode(self, data: bytes, settings: Settings) -> ChatRequest:
        self._request = messages_request.decode(data, settings, cooperate)
        return self._request.chat

    def notes(self) -> list[str]:
        return list(self._request.notes) if self._request is not None else []

    def whole(self, exchange: Exchange, answer: Answer) -> Response:
        if not exchange.request.stream:
            return json_response(message_of(answer, self._framing()))
        return sse_response(iter([self.encoder(exchange).encode([Whole(answer), DONE])]))

    def encoder(self, exchange: Exchange) -> StreamEncoder:
        return MessagesEncoder(self._framing())

    def error(self, error: ProxyError) -> Response:
        return json_response(error_object(error), status=error.status, headers=error.headers)

    def prompt_tokens(self) -> int:
        """The prompt's estimated tokens, counted once, and only when an answer needs them."""
        if self._prompt_tokens is None:
            assert self._request is not None
            self._prompt_tokens = tokens.estimate(self._request.chat.body)
        return self._prompt_tokens

    def _framing(self) -> Framing:
        assert self._request is not None
        return Framing(self._request.model, self._request.thinking, self.prompt_tokens)
