"""Channels leaked into text (`meaning/channels.py`): gpt-oss analysis is reasoning, headers are markup, messages to
a recipient are left whole for the harmony dialect; Functionary's `>>>all` header is markup; nothing is lost, and
the split is linear."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolproxy.meaning.channels import split_channels
from toolproxy.meaning.reasoning import split

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
    ],
)
def test_channels_split(text: str, answer: str, reasoning: str) -> None:
    parts = split(text)
    assert (parts.answer, parts.reasoning) == (answer, reasoning)


@pytest.mark.parametrize(
    "text",
    ["<|channel|>" * 100_000, "<|channel|>analysis<|message|>" * 50_000, "<|start|>" * 100_000 + "<|channel|>",
     "analysis" + "assistantfinal" * 50_000, "<|channel|>final" + " " * 1_000_000],
)
def test_floods_stay_linear(text: str) -> None:
    started = time.process_time()
    channels = split_channels(text)
    assert time.process_time() - started < 2
    assert sum(map(len, channels.answer)) + sum(map(len, channels.markup)) == len(text)
