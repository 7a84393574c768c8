"""How the proxy does on real model output nobody tuned to: every case of a held-out set judged one-shot and
streamed exactly as the real-world ratchet judges its corpus (`tests/corpus.py`), with the totals and a breakdown
per model family. It measures; it asserts nothing and changes nothing.

    .venv/bin/python bench/heldout.py DIR          # e.g. tests/golden/heldout16, once, before a round's first change

The folder has no default on purpose: the next round's set (`tests/golden/heldout16`) is run only by whoever means
to take its figure, never by a command typed out of habit. Any folder of cases works (`tests/golden/realworld`).

False calls are calls returned beyond those meant (a call where none was meant, or to a tool nobody meant);
missed calls are calls meant but not returned; both are matched by tool name, so a call with the right name and
wrong arguments counts in neither and shows only as a wrong case.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.corpus import Case, false_calls, load_cases, mislabelled, missed_calls, one_shot, streaming_disagreement

NO_CALL = "(no call is right)"

# The family a case belongs to, read from its `model` field: the first keyword found wins, so the more specific
# spellings come first (DSML names DeepSeek even when the model is not stated).
FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("DeepSeek", ("deepseek", "dsml")),
    ("gpt-oss", ("gpt-oss",)),
    ("Qwen", ("qwen",)),
    ("Gemma", ("gemma",)),
    ("MiniMax", ("minimax",)),
    ("GLM", ("glm",)),
    ("Kimi", ("kimi",)),
    ("Mistral", ("mistral", "devstral")),
    ("Llama", ("llama",)),
    ("Granite", ("granite",)),
    ("Nemotron", ("nemotron",)),
)


@dataclass(frozen=True)
class Verdict:
    case: Case
    one_shot: bool
    streamed: bool
    false: int
    missed: int

    @property
    def family(self) -> str:
        model = self.case.expected["model"].lower()
        return next((name for name, keys in FAMILIES if any(key in model for key in keys)), "other")

    @property
    def no_call(self) -> bool:
        return not self.case.expected["tool_calls"]


def judge(case: Case) -> Verdict:
    got = one_shot(case)
    right = got == case.wanted()
    return Verdict(case, right, right and streaming_disagreement(case) is None, false_calls(case, got),
                   missed_calls(case, got))


def mark(passed: bool) -> str:
    return "ok" if passed else "WRONG"


def row(label: str, verdicts: list[Verdict]) -> str:
    total = len(verdicts)
    one, streamed = sum(v.one_shot for v in verdicts), sum(v.streamed for v in verdicts)
    return (f"{label:<20} {total:>5} {one:>5}/{total:<3} {100 * one / total:5.1f} % {streamed:>5}/{total:<3} "
            f"{100 * streamed / total:5.1f} % {sum(v.false for v in verdicts):>6} {sum(v.missed for v in verdicts):>7}")


def breakdown(verdicts: list[Verdict]) -> Iterable[str]:
    yield f"{'family':<20} {'cases':>5} {'one-shot':>16} {'streamed':>16} {'false':>6} {'missed':>7}"
    for family in sorted({v.family for v in verdicts}):
        yield row(family, [v for v in verdicts if v.family == family])
    no_call = [v for v in verdicts if v.no_call]
    if no_call:  # a set may hold none
        yield row(NO_CALL, no_call)
    yield row("all", verdicts)


def report(directory: Path, verdicts: list[Verdict]) -> Iterable[str]:
    total = len(verdicts)
    yield f"held-out set {directory}: {total} cases, {sum(v.no_call for v in verdicts)} where no call is right"
    yield f"{'case':<58} {'family':<10} {'one-shot':<9} {'streamed':<9} {'false':>5} {'missed':>6}"
    for v in verdicts:
        yield (f"{v.case.name:<58} {v.family:<10} {mark(v.one_shot):<9} {mark(v.streamed):<9} {v.false:>5} "
               f"{v.missed:>6}")
    one, streamed = sum(v.one_shot for v in verdicts), sum(v.streamed for v in verdicts)
    yield (f"totals: right one-shot {one}/{total} ({100 * one / total:.1f} %), right streamed {streamed}/{total} "
           f"({100 * streamed / total:.1f} %), false calls {sum(v.false for v in verdicts)}, "
           f"missed calls {sum(v.missed for v in verdicts)}")
    yield from breakdown(verdicts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path, help="a folder of cases (<case>.txt and <case>.json)")
    directory = parser.parse_args().directory
    cases = load_cases(directory)
    if not cases:
        print(f"no cases in {directory}", file=sys.stderr)
        return 1
    wrong = [f"{case.name}: {why}" for case in cases if (why := mislabelled(case))]
    if wrong:  # a label is mended before the figure is taken, never after (docs/heldout.md, set 15)
        print("expectations to mend before measuring:", *wrong, sep="\n  ", file=sys.stderr)
        return 2
    for line in report(directory, [judge(case) for case in cases]):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
