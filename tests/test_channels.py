"""Channels leaked into text (`meaning/channels.py`): gpt-oss analysis is reasoning, headers are markup, messages to
a recipient are left whole for the harmony dialect; Functionary's `>>>all` header is markup; nothing is lost, and
the split is linear."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolproxy.meaning.channels import split_channels
from toolproxy.meaning.holdback import ReasoningStream
from toolproxy.meaning.reasoning import MARKERS, split, split_pair

PIECES = ["<|start|>assistant", "<|channel|>", "analysis", "final", "commentary", " to=functions.add", "<|message|>",
          "<|end|>", "<|return|>", "<|call|>", "<|constrain|>json", "assistantfinal", "assistantcommentary",
          "assistantanalysis", "thinking", '{"a": 1}', " ", "\n", "x", "<|", ">>>all\n", ">>>"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES) | st.text(max_size=3), max_size=20).map("".join))
def test_every_character_is_answer_or_markup(text: str) -> None:
    channels = split_channels(text)
    assert sum(map(len, channels.answer)) + sum(map(len, channels.markup)) == len(text)
    assert all(piece in text for piece in channels.reasoning)


@pytest.mark.parametrize(
    ("text", "answer", "reasoning"),
    [
        ("<|channel|>analysis<|message|>Think.<|end|>\n<|start|>assistant<|channel|>final<|message|>Hi.<|return|>",
         "Hi.", "Think."),
        ("<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary to=functions.add json"
         '<|message|>{"a": 1}<|call|>',
         '<|start|>assistant<|channel|>commentary to=functions.add json<|message|>{"a": 1}<|call|>', "Think."),
        ("<|channel|>analysis<|message|>cut off before the end", "", "cut off before the end"),
        ("<|channel|>analysis to=python code<|message|>print(1)<|call|>",
         "<|channel|>analysis to=python code<|message|>print(1)<|call|>", ""),
        ("analysisThink.assistantfinalHi.", "Hi.", "Think."),
        ('analysisThink.assistantcommentary to=functions.add json{"a": 1}', 'commentary to=functions.add json{"a": 1}',
         "Think."),
        ("analysis shows that commentary helps.", "analysis shows that commentary helps.", ""),
        ("<|channel|>thinking<|message|>x", "<|channel|>thinking<|message|>x", ""),
        ('>>>all\nLet me check.>>>add\n{"a": 1}', 'Let me check.>>>add\n{"a": 1}', ""),
        # llama.cpp's tests/test-chat.cpp: an answer in a format the request asked for, a header that never got its
        # message (the model addressing itself), a recipient in the role part (its `<|start|>assistant` in the prompt).
        ('<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final <|constrain|>json<|message|>'
         '{"a": 1}', '{"a": 1}', "Think."),
        ("<|channel|>commentary to=assistant<|channel|>analysis<|message|>Think.<|end|><|start|>assistant"
         "<|channel|>final<|message|>Hi.", "Hi.", "Think."),
        (' to=functions.add<|channel|>analysis<|message|>{"a": 1}', ' to=functions.add<|channel|>analysis<|message|>'
         '{"a": 1}', ""),
        ("I wrote to=assistant<|channel|>analysis<|message|>Think.", "I wrote to=assistant", "Think."),
    ],
)
def test_channels_split(text: str, answer: str, reasoning: str) -> None:
    parts = split(text)
    assert (parts.answer, parts.reasoning) == (answer, reasoning)


@pytest.mark.parametrize(
    "text",
    ["<|channel|>" * 100_000, "<|channel|>analysis<|message|>" * 50_000,
     " to=x" * 100_000 + "<|channel|>final<|message|>",
     "<|channel|>final <|constrain|>" * 50_000, "<|start|>" * 100_000 + "<|channel|>",
     "analysis" + "assistantfinal" * 50_000, "<|channel|>final" + " " * 1_000_000],
)
def test_floods_stay_linear(text: str) -> None:
    started = time.process_time()
    channels = split_channels(text)
    assert time.process_time() - started < 2
    assert sum(map(len, channels.answer)) + sum(map(len, channels.markup)) == len(text)


THINK_PIECES = ["<think>", "</think>", "<seed:think>", "</seed:think>", "<thinking>", "</thinking>", "<thi", "nk>",
                "ing>", "nking>", "<seed:", "think>", "<|channel>thought", "<channel|>", "<", "/", "x", "\n",
                "<|channel|>analysis<|message|>"]


def plain_split(text: str) -> tuple[str, str, str]:
    """The split as it was before markers were found in one pass: one `in` per marker, on the answer left."""
    channels = split_channels(text)
    answer = "".join(channels.answer)
    inner = ["\n\n".join(piece.strip() for piece in channels.reasoning if piece.strip())]
    markup = ["".join(channels.markup)]
    for opener, closer in MARKERS:
        if closer in answer or opener in answer:
            part = split_pair(answer, opener, closer)
            answer = part.answer
            inner.append(part.reasoning)
            markup.append(part.markup)
    return answer, "\n\n".join(piece for piece in inner if piece), "".join(markup)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(THINK_PIECES), max_size=30).map("".join))
def test_reasoning_split_is_the_plain_split(text: str) -> None:
    """Also where removing a span joins the text around it into another pair's marker (`<thi<think>.</think>nk>`)."""
    parts = split(text)
    assert (parts.answer, parts.reasoning, parts.markup) == plain_split(text)


def test_reasoning_split_looks_again_after_a_span_is_removed() -> None:
    text = "c<seed:<think>a</think>think>b"
    assert (split(text).answer, split(text).reasoning) == plain_split(text)[:2] == ("c", "a\n\nb")


def test_a_span_that_opens_where_one_closed_continues_it() -> None:
    """AWS Bedrock's gpt-oss wraps each streamed chunk's reasoning in its own pair, cutting words in half
    (llama-stack's recording of openai.gpt-oss-20b-1:0)."""
    text = "<reasoning>We used it and</reasoning><reasoning> got -10. myaw</reasoning><reasoning>esome</reasoning>Done."
    parts = split(text)
    assert (parts.answer, parts.reasoning) == ("Done.", "We used it and got -10. myawesome")
    assert parts.markup == text[: text.index("Done.")]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([("<reasoning>", "</reasoning>"), ("<think>", "</think>")]).flatmap(
    lambda pair: st.lists(st.sampled_from([*pair, "x", " ", "\n", "y z"]), max_size=16).map("".join)),
    st.lists(st.integers(min_value=1, max_value=6), max_size=40))
def test_a_stream_in_any_pieces_splits_as_the_whole_text(text: str, sizes: list[int]) -> None:
    """The live stream's reasoning and answer are the whole-text split's, however the text is cut (where no
    closer comes before its opener, and no `<reasoning>` is left open: a stream has sent that text already)."""
    stream, pieces, position = ReasoningStream(), [], 0
    for size in [*sizes, len(text)]:
        pieces += stream.feed(text[position : position + size])
        position += size
    pieces += stream.finish()
    if not stream.late_closer and not stream.unclosed:
        answer = "".join(piece for is_reasoning, piece in pieces if not is_reasoning)
        assert (answer, stream.thought()) == (split(text).answer, split(text).reasoning)


@pytest.mark.parametrize("text", ["<reasoning>x</reasoning>" * 100_000, "<think>a</think>b" * 100_000,
                                  "<reasoning>" * 100_000, "</reasoning>" * 100_000])
def test_reasoning_floods_stay_linear(text: str) -> None:
    """A hundred thousand touching spans (Bedrock's one pair per chunk, a long answer) are joined once."""
    started = time.process_time()
    parts = split(text)
    assert time.process_time() - started < 2
    assert len(parts.answer) + len(parts.markup) == len(text)
