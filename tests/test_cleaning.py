"""A stream chunk with nothing to remove is passed on as it is; any chunk comes out as the full cleaning makes it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from toolproxy.wire import cleaning

TOKEN = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
         "choices": [{"index": 0, "delta": {"content": "token "}, "logprobs": None, "finish_reason": None}]}


def variant(**changes: Any) -> dict[str, Any]:
    chunk = copy.deepcopy(TOKEN)
    for path, value in changes.items():
        target = chunk
        *parents, last = path.split("__")
        for key in parents:
            target = target[int(key)] if key.isdigit() else target[key]
        target[last] = value
    return chunk


CHUNKS = [
    TOKEN,
    variant(system_fingerprint="fp"), variant(service_tier="default"), variant(prompt_token_ids=[1]),
    variant(usage={"prompt_tokens": 1, "prompt_tokens_details": {"cached_tokens": 0}}),
    variant(usage={"prompt_tokens": 1, "completion_tokens": 2}),
    variant(choices__0__stop_reason=None), variant(choices__0__token_ids=[5]),
    variant(choices__0__delta__refusal=None), variant(choices__0__delta__reasoning="hm"),
    variant(choices__0__delta__reasoning_content=""), variant(choices__0__delta__reasoning_content="why"),
    variant(choices__0__delta__tool_calls=[]), variant(choices__0__delta__tool_calls=None),
    variant(choices__0__delta__tool_calls=[{"index": 0, "function": {"arguments": "{"}}]),
    variant(choices=[]), variant(choices=[5]), variant(choices="x"), variant(choices__0__delta="text"),
]


@pytest.mark.parametrize("reasoning", ["move", "keep", "drop"])
@pytest.mark.parametrize("chunk", CHUNKS)
def test_a_chunk_comes_out_as_the_full_cleaning_makes_it(chunk: dict[str, Any], reasoning: str) -> None:
    expected = cleaning._clean(copy.deepcopy(chunk), "delta", reasoning)
    assert cleaning.clean_chunk(copy.deepcopy(chunk), reasoning) == expected


def test_a_chunk_with_nothing_to_remove_is_not_copied() -> None:
    assert cleaning.clean_chunk(TOKEN) is TOKEN
