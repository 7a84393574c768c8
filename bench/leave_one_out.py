"""How extraction does on a format it does not know: every case of a corpus whose calls a dialect reads is read
again with that dialect taken out of the chain, so only the other dialects and recovery (the name-anchored
fallback, `toolproxy/meaning/anchor.py`, above all) can find them. It stands in for the next model's format, which
no dialect knows yet. It measures; it asserts nothing and changes nothing.

    .venv/bin/python bench/leave_one_out.py [DIR ...]     # default: the real-world and reference corpora

A case counts when automatic detection reads its calls right with every dialect in place; it is then right "left
out" when the same calls come back without the dialects that read them, and exact when the content is the same too.
False calls are calls beyond those meant, matched by tool name, as in `tests/corpus.py`.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.corpus import Case, false_calls, load_cases
from toolproxy.dialects.registry import AUTO_ORDER
from toolproxy.meaning.extraction import extract

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ("tests/golden/realworld", "tests/golden/reference/vllm", "tests/golden/reference/sglang",
           "tests/golden/reference/llamacpp")


Calls = list[tuple[str, object]]


def calls_of(case: Case, dialects: list[str] | tuple[str, ...] = ()) -> tuple[Calls, object, set[str]]:
    # Automatic detection without some dialects, not a pinned format: the fallback reads as it does by default.
    extraction = extract(case.text, case.tools, dialects, reasoning_field=case.reasoning_field, anchored=True)
    calls = [(call.name, call.arguments) for call in extraction.calls]
    return calls, extraction.content(), {call.dialect for call in extraction.calls}


def main() -> None:
    cases = [case for directory in sys.argv[1:] or CORPORA for case in load_cases(ROOT / directory)]
    totals: Counter[str] = Counter()
    per, right = Counter[str](), Counter[str]()
    for case in cases:
        wanted = case.wanted()["calls"]
        calls, content, read_by = calls_of(case)
        if not wanted or calls != wanted or not read_by - {"recovered"}:
            continue  # no call meant, not read right with every dialect, or read by recovery alone
        key = "+".join(sorted(read_by - {"recovered"}))
        left_out, left_content, _ = calls_of(case, [name for name in AUTO_ORDER if name not in read_by])
        per[key] += 1
        totals["cases"] += 1
        totals["false calls"] += false_calls(case, {"calls": left_out})
        if left_out == wanted:
            right[key] += 1
            totals["right left out"] += 1
            totals["exact"] += left_content == content
    print(f"{totals['cases']} cases whose calls a dialect reads: right with that dialect left out "
          f"{totals['right left out']} ({100 * totals['right left out'] / max(1, totals['cases']):.1f} %), content "
          f"the same too {totals['exact']}, false calls {totals['false calls']}")
    for key in sorted(per):
        print(f"  {key:<28} {right[key]:>4}/{per[key]}")


if __name__ == "__main__":
    main()
