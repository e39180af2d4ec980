"""State keys of LangChain messages: what their serialized bytes are a function of.

Pure functions; no I/O. LangGraph's serializer writes a message as its class
and the output of ``model_dump()``, which reads nothing but the message's
fields and extra fields. When those hold only plain data (``str``, ``int``,
``float``, ``bool``, ``None``, ``bytes`` and lists and dicts of them), an
exact MessagePack encoding of them, with the class, is the message's *state
key*: two messages with equal state keys serialize to equal bytes. A long
conversation's messages are serialized at every put; with their bytes
remembered by state key, each is serialized once per process. The key is
computed from the message as it is now, so a message changed in place gets
a new key and is serialized again: nothing relies on object identity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ormsgpack
from langgraph.checkpoint.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

#: Plain data only: every type MessagePack would write through a conversion
#: (tuples, subclasses, dates, enums, dataclasses, UUIDs, big ints) goes to the
#: missing ``default`` hook and fails, so distinct values never share a key.
_PLAIN_ONLY = (
    ormsgpack.OPT_PASSTHROUGH_BIG_INT
    | ormsgpack.OPT_PASSTHROUGH_DATACLASS
    | ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_ENUM
    | ormsgpack.OPT_PASSTHROUGH_SUBCLASS
    | ormsgpack.OPT_PASSTHROUGH_TUPLE
    | ormsgpack.OPT_PASSTHROUGH_UUID
)

#: The message classes whose serialization depends on their fields alone.
_KEYED_CLASSES: dict[type, bool] = {}
_KEYED_CLASSES_MAX = 1024

#: Messages larger than this have no key: a key is as large as the message,
#: and serializing a large message once more costs little next to storing it.
STATE_MAX = 64 * 1024

StateKey = tuple[type, bytes]


def applies_to(serde: SerializerProtocol) -> bool:
    """Whether state keys stand for this serializer's bytes: exactly LangGraph's default.

    Any other serializer (an encrypting one, a subclass) may write the same
    state differently, so its bytes are never looked up by state.
    """
    return type(serde) is JsonPlusSerializer


def state_key(value: Any) -> StateKey | None:
    """The state key of a LangChain message, or None when it has none.

    None for anything but a message class of ``langchain_core.messages``
    without computed fields, for a message holding anything but plain data,
    and for a message larger than :data:`STATE_MAX`.
    """
    return known_pairs([value], lambda _key: None)[0][0]


def known_pairs(
    values: list[Any], lookup: Callable[[StateKey], tuple[str, bytes] | None]
) -> tuple[list[StateKey | None], list[tuple[str, bytes] | None]]:
    """Each value's state key, and its serialized pair by ``lookup`` of that key.

    :func:`state_key` for a whole list in one pass (a long conversation's
    messages are looked up at every put): the same keys, the same ``None``
    for a value without one; ``lookup`` is asked only for keys that exist.
    """
    keys: list[StateKey | None] = []
    pairs: list[tuple[str, bytes] | None] = []
    keyed_classes, packb, plain, limit = _KEYED_CLASSES, ormsgpack.packb, _PLAIN_ONLY, STATE_MAX
    for value in values:
        cls = type(value)
        keyed = keyed_classes.get(cls)
        if keyed is None:
            keyed = _keyed_class(cls)
        key: StateKey | None = None
        if keyed:
            text = value.content
            if type(text) is not str or len(text) <= limit:
                try:
                    state = packb([value.__dict__, value.__pydantic_extra__], option=plain)
                except ormsgpack.MsgpackEncodeError:
                    state = None
                if state is not None and len(state) <= limit:
                    key = (cls, state)
        keys.append(key)
        pairs.append(None if key is None else lookup(key))
    return keys, pairs


def _keyed_class(cls: type) -> bool:
    keyed = (
        cls.__module__.startswith("langchain_core.messages.")
        and hasattr(cls, "__pydantic_computed_fields__")
        and not cls.__pydantic_computed_fields__  # type: ignore[attr-defined]
    )
    if len(_KEYED_CLASSES) < _KEYED_CLASSES_MAX:
        _KEYED_CLASSES[cls] = keyed
    return keyed
