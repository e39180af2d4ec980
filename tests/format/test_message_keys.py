"""Messages serialized once per process, looked up by state key (caches.message_keys).

A long conversation's messages are serialized at every put. The saver keeps
their bytes by state key (class + exact encoding of the fields), so an
unchanged message is not serialized again, and one changed in place is.
"""

from __future__ import annotations

import enum
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pydantic
import pytest
from faultkit import checkpoint_id, config
from hypothesis import given, settings, strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from objstore_saver import LocalStore, ObjectStoreSaver
from objstore_saver.caches import message_keys

SERDE = JsonPlusSerializer()


class Colour(enum.Enum):
    RED = "red"


class Name(str):
    pass


#: Pairs of field values a lax comparison would confuse; the serializer does not.
LOOKALIKES: list[tuple[Any, Any]] = [
    (1, True),
    (1, 1.0),
    (0, False),
    (0.0, -0.0),
    ("a", b"a"),
    ([1, 2], (1, 2)),
    ("red", Colour.RED),
    ("x", Name("x")),
    ("2026-01-01T00:00:00+00:00", datetime(2026, 1, 1, tzinfo=UTC)),
    ("12345678-1234-5678-1234-567812345678", uuid.UUID("12345678-1234-5678-1234-567812345678")),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
    (None, {}),
]


def _keys_tell_apart(a: Any, b: Any) -> None:
    """Equal state keys must mean equal serialized bytes."""
    ka, kb = message_keys.state_key(a), message_keys.state_key(b)
    if ka is not None and ka == kb:
        assert SERDE.dumps_typed(a) == SERDE.dumps_typed(b)


@pytest.mark.parametrize(("x", "y"), LOOKALIKES)
def test_lookalike_fields_never_share_a_key(x: Any, y: Any) -> None:
    a = HumanMessage("hi", additional_kwargs={"v": x})
    b = HumanMessage("hi", additional_kwargs={"v": y})
    ka, kb = message_keys.state_key(a), message_keys.state_key(b)
    if SERDE.dumps_typed(a) != SERDE.dumps_typed(b):
        assert ka != kb


def test_the_lookalikes_do_serialize_differently() -> None:
    # Most pairs above differ in bytes, so the test above checks something.
    differ = [
        SERDE.dumps_typed(HumanMessage("hi", additional_kwargs={"v": x}))
        != SERDE.dumps_typed(HumanMessage("hi", additional_kwargs={"v": y}))
        for x, y in LOOKALIKES
    ]
    assert sum(differ) >= len(LOOKALIKES) - 3


_plain = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([0.0, -0.0, 1.0, 2.5])
    | st.sampled_from(["", "a", "1"])
    | st.sampled_from([b"", b"a"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "1"]), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def _messages(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from([HumanMessage, AIMessage, SystemMessage, ToolMessage]))
    content = draw(
        st.sampled_from(["", "a", "1"])
        | st.lists(st.just({"type": "text", "text": "a"}), max_size=2)
    )
    kwargs: dict[str, Any] = {
        "additional_kwargs": draw(st.dictionaries(st.sampled_from(["a", "b"]), _plain, max_size=2)),
        "id": draw(st.sampled_from([None, "m1"])),
    }
    if kind is ToolMessage:
        kwargs["tool_call_id"] = draw(st.sampled_from(["c1", "c2"]))
    return kind(content, **kwargs)


@settings(max_examples=300, deadline=None)
@given(a=_messages(), b=_messages())
def test_equal_state_keys_mean_equal_bytes(a: Any, b: Any) -> None:
    _keys_tell_apart(a, b)
    # A message and an in-place changed copy of it.
    c = a.model_copy(deep=True)
    # A value the strategies never draw (``[1] == [True]`` in Python: no flip between those).
    c.additional_kwargs["a"] = ["changed in place"]
    assert message_keys.state_key(a) != message_keys.state_key(c)


class Note(pydantic.BaseModel):
    text: str


def test_what_has_no_state_key() -> None:
    assert message_keys.state_key(Note(text="a")) is None  # not a LangChain message
    assert message_keys.state_key({"content": "a"}) is None
    when = datetime(2026, 1, 1, tzinfo=UTC)
    assert message_keys.state_key(HumanMessage("a", additional_kwargs={"at": when})) is None
    assert (
        message_keys.state_key(HumanMessage("a", additional_kwargs={"n": Note(text="a")})) is None
    )
    assert message_keys.state_key(HumanMessage("a")) is not None
    # A large message: its key would be a second copy of it.
    big = "x" * (message_keys.STATE_MAX + 1)
    assert message_keys.state_key(HumanMessage(big)) is None
    assert message_keys.state_key(HumanMessage([{"type": "text", "text": big}])) is None
    assert not message_keys.applies_to(EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 16))


def _chat(n: int) -> list[Any]:
    # Long enough that the list is stored element by element (spec §4.4).
    return [
        (HumanMessage if i % 2 else AIMessage)(f"message {i} " + "w" * 300, id=f"m{i}")
        for i in range(n)
    ]


def _put(saver: ObjectStoreSaver, parent: dict, n: int, messages: list[Any]) -> dict:
    cp = empty_checkpoint()
    cp["id"] = checkpoint_id(n)
    cp["channel_values"] = {"messages": messages}
    cp["channel_versions"] = {"messages": n}
    return saver.put(parent, cp, {"step": n}, {"messages": n})


class _CountingSerde:
    """Counts the messages the saver's serializer serializes (its type stays exact)."""

    def __init__(self, serde: JsonPlusSerializer) -> None:
        self.serialized: list[Any] = []
        inner = serde.dumps_typed

        def dumps_typed(obj: Any) -> tuple[str, bytes]:
            if isinstance(obj, BaseMessage):
                self.serialized.append(obj)
            return inner(obj)

        serde.dumps_typed = dumps_typed  # type: ignore[method-assign]


def test_a_message_changed_in_place_is_stored_as_it_is_now(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store", fsync=False)
    messages = _chat(40)
    with ObjectStoreSaver(store) as saver:
        counter = _CountingSerde(saver.serde)
        first = _put(saver, config("t"), 1, messages)
        assert len(counter.serialized) == 40
        # The application changes two old messages in place and appends one.
        messages[3].additional_kwargs["flag"] = True
        messages[5].content = "changed"
        messages.append(HumanMessage("new", id="m40"))
        counter.serialized.clear()
        second = _put(saver, first, 2, messages)
        # Only the changed and the new messages were serialized again.
        assert sorted(m.id for m in counter.serialized) == ["m3", "m40", "m5"]
    with ObjectStoreSaver(store) as reader:  # nothing from the writer's memory
        got = reader.get_tuple(second).checkpoint["channel_values"]["messages"]
        old = reader.get_tuple(first).checkpoint["channel_values"]["messages"]
    assert got == [SERDE.loads_typed(SERDE.dumps_typed(m)) for m in messages]
    assert got[3].additional_kwargs == {"flag": True} and got[5].content == "changed"
    assert old[3].additional_kwargs == {} and old[5].content.startswith("message 5 ")


def test_another_serializer_never_gets_remembered_bytes(tmp_path: Path) -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 16)
    with ObjectStoreSaver(LocalStore(tmp_path / "store", fsync=False), serde=serde) as saver:
        first = _put(saver, config("t"), 1, _chat(40))
        _put(saver, first, 2, _chat(41))
        assert saver._ctx.elements.serialized.held_bytes == 0


def test_known_pairs_keys_a_list_as_state_key_does_and_looks_up_only_keyed_values() -> None:
    big = HumanMessage("x" * (message_keys.STATE_MAX + 1))
    values = [HumanMessage("a"), Note(text="a"), AIMessage("b", id="m1"), big, {"content": "a"}]
    asked: list[Any] = []
    remembered = {message_keys.state_key(values[2]): ("msgpack", b"remembered")}

    def lookup(key: Any) -> Any:
        asked.append(key)
        return remembered.get(key)

    keys, pairs = message_keys.known_pairs(values, lookup)
    assert keys == [message_keys.state_key(v) for v in values]
    assert [k is None for k in keys] == [False, True, False, True, True]
    assert asked == [keys[0], keys[2]]
    assert pairs == [None, None, ("msgpack", b"remembered"), None, None]
