"""A list's MessagePack elements decode as one run: the same values; a broken one is named."""

from __future__ import annotations

from typing import Any

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from objstore_saver.errors import CorruptObjectError
from objstore_saver.format.codec import Inline, InlineList, ListObj, Payload
from objstore_saver.plans.values import materialize

PFX = "threads/t/"


def _inline(serde: Any, value: Any) -> Inline:
    type_, data = serde.dumps_typed(value)
    return Inline(Payload(type_, "raw", data))


def _list(items: list[Inline]) -> InlineList:
    return InlineList(ListObj(count=len(items), sealed=(), tail=tuple(items)))


class _Subclass(JsonPlusSerializer):
    """Not LangGraph's serializer exactly: elements are decoded one by one."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self.calls += 1
        return super().loads_typed(data)


@pytest.mark.parametrize("n", [1, 15, 16, 300, 70_000])
def test_a_run_decodes_to_the_elements_values(n: int) -> None:
    serde = JsonPlusSerializer()
    values: list[Any] = [
        HumanMessage(content=f"q{i}", id=f"h{i}") if i % 3 else {"n": i, "s": "x" * (i % 7)}
        for i in range(n)
    ]
    if n > 1:
        values[n // 2] = None  # a "null" element between two runs
    entry = _list([_inline(serde, v) for v in values])
    assert materialize(serde, entry, {}, PFX) == values


def test_another_serializer_decodes_element_by_element() -> None:
    serde = _Subclass()
    values = [AIMessage(content=f"a{i}", id=f"a{i}") for i in range(5)]
    entry = _list([_inline(serde, v) for v in values])
    assert materialize(serde, entry, {}, PFX) == values
    assert serde.calls == 5


def _with_element(data: bytes) -> InlineList:
    serde = JsonPlusSerializer()
    items = [_inline(serde, f"m{i}") for i in range(4)]
    items[1] = Inline(Payload("msgpack", "raw", data))
    return _list(items)


def test_an_element_of_two_values_is_corrupt() -> None:
    with pytest.raises(CorruptObjectError, match="threads/t/"):
        materialize(JsonPlusSerializer(), _with_element(b"\x01\x02"), {}, PFX)


def test_an_empty_element_fails_as_it_does_alone() -> None:
    with pytest.raises(ormsgpack.MsgpackDecodeError):
        JsonPlusSerializer().loads_typed(("msgpack", b""))
    with pytest.raises(ormsgpack.MsgpackDecodeError):
        materialize(JsonPlusSerializer(), _with_element(b""), {}, PFX)
