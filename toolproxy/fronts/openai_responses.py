"""`POST /v1/responses`, the OpenAI Responses protocol (Codex CLI speaks only this one), stateless: the request
becomes the core's chat request (responses_request.py), the answer a response object or its stream of events
(responses_output.py, responses_stream.py); errors keep the OpenAI shape the chat path uses."""

from __future__ import annotations

from flask import Response

from toolproxy.config.settings import Settings
from toolproxy.errors import ProxyError
from toolproxy.fronts.base import Front, StreamEncoder, cooperate, json_response, sse_response
from toolproxy.fronts.responses_output import ResponseHeader, whole_response
from toolproxy.fronts.responses_request import Decoded, decode_responses
from toolproxy.fronts.responses_stream import ResponsesEncoder
from toolproxy.routes.exchange import Exchange
from toolproxy.transform.chat_request import ChatRequest
from toolproxy.transform.turn import DONE, Answer, Whole


class OpenAIResponses(Front):
    protocol = "responses"

    def __init__(self) -> None:
        self._decoded: Decoded | None = None

    def decode(self, data: bytes, settings: Settings) -> ChatRequest:
        self._decoded = decode_responses(data, settings, cooperate)
        return self._decoded.chat

    def notes(self) -> list[str]:
        return list(self._decoded.notes) if self._decoded is not None else []

    def whole(self, exchange: Exchange, answer: Answer) -> Response:
        if exchange.request.stream:
            return sse_response(iter([self.encoder(exchange).encode([Whole(answer), DONE])]))
        decoded = self._known()
        return json_response(whole_response(self._header(exchange), answer, decoded.names))

    def encoder(self, exchange: Exchange) -> StreamEncoder:
        return ResponsesEncoder(self._header(exchange), self._known().names)

    def error(self, error: ProxyError) -> Response:
        return json_response(error.body(), status=error.status, headers=error.headers)

    def _header(self, exchange: Exchange) -> ResponseHeader:
        return ResponseHeader.new(exchange.request.model, self._known().echo)

    def _known(self) -> Decoded:
        assert self._decoded is not None, "a request is answered only after it was decoded"
        return self._decoded
