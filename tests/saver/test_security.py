"""Deserialization safety and encryption at rest (docs/security.md)."""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import pytest
from backends import Backend
from faultkit import all_keys, config
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

from objstore_saver import ObjectStoreSaver
from objstore_saver.storage import ObjectStore

AES_KEY = b"0123456789abcdef0123456789abcdef"
SECRET_WORDS = ["pineapple-on-pizza", "my-bank-pin-4242", "the tool said: confidential"]


@dataclasses.dataclass
class Ticket:
    """A custom type in graph state; not in LangGraph's safe msgpack list."""

    number: int
    title: str


# Both S3 transports: what reaches the server (ciphertext only, no pickle) is
# read back from the bucket through each transport.
@pytest.fixture
def store(backend: Backend) -> ObjectStore:
    return backend.store("sec/", fsync=False)


class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    notes: Annotated[list[str], operator.add]


def _chat_graph(saver: ObjectStoreSaver) -> Any:
    def bot(state: ChatState) -> dict[str, Any]:
        last = state["messages"][-1].content
        n = len(state["messages"])
        return {
            "messages": [AIMessage(content=f"echo: {last} " + "padding " * 40, id=f"ai-{n}")],
            "notes": [f"note {n}: {last}"],
        }

    builder = StateGraph(ChatState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=saver)


def _all_bytes(store: ObjectStore) -> Iterator[tuple[str, bytes]]:
    for key in all_keys(store):
        yield key, store.get(key)


def test_encrypted_chat_round_trips_and_stores_no_plaintext(store: ObjectStore) -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=AES_KEY)
    with ObjectStoreSaver(store, serde=serde) as saver:
        graph = _chat_graph(saver)
        cfg = config("encrypted-chat")
        for i, word in enumerate(SECRET_WORDS * 6):  # long enough for chunked lists
            graph.invoke({"messages": [HumanMessage(content=f"{word} #{i}", id=f"h-{i}")]}, cfg)
        state = graph.get_state(cfg)
    assert len(state.values["messages"]) == 36
    assert state.values["messages"][0].content == f"{SECRET_WORDS[0]} #0"
    # A new process with the key reads everything back.
    with ObjectStoreSaver(store, serde=serde) as reader:
        again = _chat_graph(reader).get_state(cfg)
    assert again.values == state.values
    # Nothing stored holds a message, a note or the thread's words in clear.
    stored = list(_all_bytes(store))
    assert len(stored) > 20
    for key, body in stored:
        for word in SECRET_WORDS:
            assert word.encode() not in body, key
            assert word.encode("utf-16-le") not in body, key
    # Without the key the data cannot be read, and that is an error, not an absence.
    with (
        ObjectStoreSaver(
            store, serde=EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 32)
        ) as wrong,
        pytest.raises(ValueError, match="MAC check failed"),
    ):
        wrong.get_tuple(cfg)


def _put_value(saver: ObjectStoreSaver, thread: str, value: Any) -> dict:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": value}
    cp["channel_versions"] = {"v": 1}
    return saver.put(config(thread), cp, {"step": 0}, {"v": 1})


def test_strict_msgpack_allowlist_blocks_unlisted_types(store: ObjectStore) -> None:
    with ObjectStoreSaver(store) as writer:
        stored = _put_value(writer, "allow", Ticket(7, "printer on fire"))
    strict = JsonPlusSerializer(allowed_msgpack_modules=None)
    with ObjectStoreSaver(store, serde=strict) as reader:
        got = reader.get_tuple(stored).checkpoint["channel_values"]["v"]
    assert got == {"number": 7, "title": "printer on fire"}  # data, never the class
    listed = JsonPlusSerializer(allowed_msgpack_modules=[(Ticket.__module__, "Ticket")])
    with ObjectStoreSaver(store, serde=listed) as reader:
        assert reader.get_tuple(stored).checkpoint["channel_values"]["v"] == Ticket(
            7, "printer on fire"
        )


def test_allowlist_from_langgraph_reaches_the_reads(store: ObjectStore) -> None:
    """``with_allowlist`` (what ``compile`` applies for the state's types) must take effect."""
    with ObjectStoreSaver(store) as writer:
        stored = _put_value(writer, "derived", Ticket(8, "toner"))
    strict = JsonPlusSerializer(allowed_msgpack_modules=None)
    with ObjectStoreSaver(store, serde=strict) as base:
        derived = base.with_allowlist([(Ticket.__module__, "Ticket")])
        assert derived is not base
        assert derived.get_tuple(stored).checkpoint["channel_values"]["v"] == Ticket(8, "toner")
        # The original keeps its own, stricter list.
        assert base.get_tuple(stored).checkpoint["channel_values"]["v"] == {
            "number": 8,
            "title": "toner",
        }


def test_nothing_is_pickled(store: ObjectStore) -> None:
    with ObjectStoreSaver(store) as saver:
        graph = _chat_graph(saver)
        graph.invoke({"messages": [HumanMessage(content="hi", id="h")]}, config("np-1"))
        _put_value(saver, "np-2", {"set": {1, 2}, "ticket": Ticket(1, "x")})
    assert saver.serde.pickle_fallback is False  # type: ignore[attr-defined]
    for key, body in _all_bytes(store):
        assert b"pickle" not in body, key
