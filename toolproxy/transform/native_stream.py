"""Native tool-call deltas as servers really stream them, gathered into whole calls: deltas without `index`,
indices from 1, the name repeated in every delta, arguments sent as an object (or as a JSON string encoded
twice, which extraction decodes). Strict clients (the OpenAI SDKs, the Vercel AI SDK) reject all of these, so a
stream's native calls are collected here, then judged like any other call and sent whole. A delta that is no call
at all (`5`, a null function), or a call that never got a name, is dropped with an issue: it was never text the
model wrote, so it must not become content. Pure, no I/O."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from toolproxy.dialects.base import Call


@dataclass(slots=True)
class _Slot:
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)


class NativeCalls:
    """The native calls of one streamed choice, in the order they began."""

    def __init__(self) -> None:
        self._slots: list[_Slot] = []
        self._by_index: dict[int, _Slot] = {}  # the server's index, whatever it counts from
        self.repairs: set[str] = set()  # what had to be put right, for the transform log
        self.dropped: list[str] = []  # issues: what was no call at all

    def add(self, deltas: Any) -> None:
        for delta in deltas if isinstance(deltas, list) else [deltas]:
            if not isinstance(delta, dict) or not isinstance(delta.get("function", {}), dict):
                self._drop(delta)
                continue
            self._add(self._slot(delta), delta)

    def calls(self) -> list[Call]:
        """The calls gathered so far (those still without a name are not calls yet)."""
        return [_call(slot) for slot in self._slots if slot.name]

    def finish(self) -> list[Call]:
        """The calls, once the stream is over: a slot that never got a name is dropped, with an issue."""
        for slot in self._slots:
            if not slot.name:
                self._drop({"function": {"arguments": "".join(slot.arguments)}})
        self._slots = [slot for slot in self._slots if slot.name]
        return self.calls()

    def _drop(self, delta: Any) -> None:
        shown = json.dumps(delta, ensure_ascii=False)[:200]
        self.dropped.append(f"native stream: malformed native call dropped: {shown}")

    def _slot(self, delta: dict[str, Any]) -> _Slot:
        index, call_id = delta.get("index"), delta.get("id")
        name = (delta.get("function") or {}).get("name")
        if isinstance(index, int) and not isinstance(index, bool):
            if index not in self._by_index:
                if index != len(self._by_index):
                    self.repairs.add("tool-call indices did not count from 0")
                self._by_index[index] = self._new()
            return self._by_index[index]
        self.repairs.add("tool-call delta without index")
        last = self._slots[-1] if self._slots else None
        # Without an index, a new id (or a new name once arguments have begun) starts the next call.
        starts = last is None or (call_id and last.ids and call_id not in last.ids) or (
            name and last.arguments and name != last.name)
        return self._new() if starts or last is None else last

    def _new(self) -> _Slot:
        self._slots.append(_Slot())
        return self._slots[-1]

    def _add(self, slot: _Slot, delta: dict[str, Any]) -> None:
        if isinstance(delta.get("id"), str):
            slot.ids.add(delta["id"])
        function = delta.get("function") or {}
        name, arguments = function.get("name"), function.get("arguments")
        if name is not None and not isinstance(name, str):
            self.repairs.add("tool-call name that is no string ignored")
        elif name:
            if name == slot.name:
                self.repairs.add("tool-call name repeated in every delta")
            else:
                slot.name += name
        if isinstance(arguments, str):
            slot.arguments.append(arguments)
        elif arguments is not None:
            # An object (or any value) is the whole arguments: servers that send one send it complete.
            self.repairs.add("tool-call arguments sent as an object")
            slot.arguments = [json.dumps(arguments, ensure_ascii=False)]


def _call(slot: _Slot) -> Call:
    raw = "".join(slot.arguments)
    source = f'{{"name": {json.dumps(slot.name, ensure_ascii=False)}, "arguments": {raw or "{}"}}}'
    return Call(slot.name, raw, source, "native")
