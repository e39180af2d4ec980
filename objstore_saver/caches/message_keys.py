"""State keys of LangChain messages: what their serialized bytes are a function of.

LangGraph's serializer writes a message as its class and ``model_dump()``, which
reads only its fields. When those hold only plain data, their exact MessagePack
encoding, with the class, is the *state key*: equal keys serialize to equal
bytes. The key is computed from the message as it is now: nothing relies on
object identity.
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
    """Whether state keys stand for this serializer's bytes: exactly LangGraph's default
    (another, even a subclass, may write the same state differently)."""
    return type(serde) is JsonPlusSerializer


def state_key(value: Any) -> StateKey | None:
    """The state key of a LangChain message; None for anything else, a message
    holding more than plain data, or one larger than :data:`STATE_MAX`."""
    return known_pairs([value], lambda _key: None)[0][0]


def known_pairs(
    values: list[Any], lookup: Callable[[StateKey], tuple[str, bytes] | None]
) -> tuple[list[StateKey | None], list[tuple[str, bytes] | None]]:
    """:func:`state_key` of each value, and ``lookup`` of each key there is, in one pass."""
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
