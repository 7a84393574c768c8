"""Special tokens that leak beside a call (`<|/tool_call|>`, `<|assistant|>`, `<|im_end|>`, `<｜end▁of▁sentence｜>`,
MiniMax-M3's namespace token before its wrapper) are markup of the call: they go into its source, not into
content. Tokens are recognised by shape (`dialects/tokens.py`), so a model's new token needs no list.

Only runs of tokens that touch a call, with white space between, are taken; text with no call keeps every
character. Works on the merged segments, so streaming and one-shot agree.
"""

from __future__ import annotations

from toolproxy.dialects.base import Call, Segment, Text, merge_text
from toolproxy.dialects.tokens import leading_run, trailing_run

RULE = "recovered:tokens_absorbed"


def absorb_tokens(segments: list[Segment], issues: list[str]) -> list[Segment]:
    """The segments with each run of special tokens right before or after a call moved into that call."""
    out = list(segments)
    absorbed = False
    for index, segment in enumerate(out):
        if not isinstance(segment, Call) or not segment.source:
            continue
        last = index
        while last + 1 < len(out) and isinstance(out[last + 1], Call) and not out[last + 1].source:  # type: ignore[union-attr]
            last += 1  # calls of one JSON list share the first one's source: the tokens go with it
        prefix = suffix = ""
        before = out[index - 1] if index else None
        if isinstance(before, Text) and (size := trailing_run(before.text)):
            prefix, out[index - 1] = before.text[-size:], Text(before.text[:-size])
        after = out[last + 1] if last + 1 < len(out) else None
        if isinstance(after, Text) and (size := leading_run(after.text)):
            suffix, out[last + 1] = after.text[:size], Text(after.text[size:])
        if prefix or suffix:
            out[index] = Call(segment.name, segment.arguments, prefix + segment.source + suffix, segment.dialect)
            absorbed = True
    if absorbed:
        issues.append(RULE)
    return merge_text(out)
