"""Split values (spec §4.4a): large message texts stored apart from their value.

LangGraph's serializer peaks at about three times a large message, so such a text
is emptied in the value and encoded and compressed piece by piece on its own.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from objstore_saver.errors import CorruptObjectError

#: A message text longer than this many characters is stored apart.
SPLIT_MIN = 1024 * 1024
#: Containers (dicts, lists) searched above a message.
MAX_DEPTH = 3
#: Serializer type of a stored text: its UTF-8 bytes.
TEXT_TYPE = "utf8"
#: Characters encoded at a time (at most 256 KiB of UTF-8).
_PIECE_CHARS = 64 * 1024

#: One step of a path: a dict key or a list index.
Step = str | int
Path = tuple[Step, ...]


def splits_for(serde: SerializerProtocol) -> bool:
    """Whether values are split for this serializer: exactly LangGraph's default (any other,
    an encrypting one above all, must see the text)."""
    return type(serde) is JsonPlusSerializer


def find_holes(value: Any) -> list[tuple[Path, str]]:
    """Paths of the messages with a text longer than :data:`SPLIT_MIN`, and the texts."""
    cls = type(value)
    if cls is dict or cls is list:
        found: list[tuple[Path, str]] = []
        _walk(value, (), found)
        return found
    known = _MESSAGE_CLASSES.get(cls)
    if known or (known is None and _is_message(cls)):
        text = value.content
        if type(text) is str and len(text) > SPLIT_MIN:
            return [((), text)]
    return []


#: Whether a class is a message class, by class: an ``isinstance`` against
#: the message base class costs more than serializing a small value's header.
_MESSAGE_CLASSES: dict[type, bool] = {}
_MESSAGE_CLASSES_MAX = 4096


def _is_message(cls: type) -> bool:
    known = _MESSAGE_CLASSES.get(cls)
    if known is None:
        known = issubclass(cls, BaseMessage)
        if len(_MESSAGE_CLASSES) < _MESSAGE_CLASSES_MAX:
            _MESSAGE_CLASSES[cls] = known
    return known


def _worth_walking(cls: type) -> bool:
    return cls is dict or cls is list or _is_message(cls)


def _walk(value: Any, path: Path, found: list[tuple[Path, str]]) -> None:
    cls = type(value)
    if cls is dict:
        if len(path) < MAX_DEPTH:
            for k, v in value.items():
                if type(k) is str and _worth_walking(type(v)):
                    _walk(v, (*path, k), found)
    elif cls is list:
        if len(path) < MAX_DEPTH:
            for i, v in enumerate(value):
                if _worth_walking(type(v)):
                    _walk(v, (*path, i), found)
    else:
        text = value.content
        if type(text) is str and len(text) > SPLIT_MIN:
            found.append((path, text))


def emptied(value: Any, paths: Iterable[Path]) -> Any:
    """A copy of ``value`` whose messages at ``paths`` have ``content`` ``""`` (the containers
    on the paths copied shallowly)."""
    out = value
    for path in paths:
        out = _empty_at(out, value, path)
    return out


def _empty_at(current: Any, original: Any, path: Path) -> Any:
    if not path:
        return current.model_copy(update={"content": ""})
    step, rest = path[0], path[1:]
    # Copy a container once: ``current is original`` until the first copy.
    copy = current
    if current is original:
        copy = dict(current) if type(current) is dict else list(current)
    copy[step] = _empty_at(current[step], original[step], rest)  # type: ignore[index]
    return copy


def text_size(text: str) -> int:
    """Length of ``text`` in UTF-8, without encoding it whole."""
    if text.isascii():
        return len(text)
    return sum(len(piece) for piece in text_pieces(text))


def text_pieces(text: str) -> Iterator[bytes]:
    """``text`` in UTF-8, a piece at a time; a lone surrogate is a ValueError (as serializing)."""
    for start in range(0, len(text), _PIECE_CHARS):
        try:
            yield text[start : start + _PIECE_CHARS].encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"a message text of {len(text)} characters cannot be stored: character "
                f"{start + exc.start} is not encodable as UTF-8 ({exc.reason})"
            ) from None


def decode_text(pieces: Iterable[bytes], key: str) -> str:
    """Decode UTF-8 given in pieces, keeping one copy of the text (and the pieces' strs)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        parts = [decoder.decode(p) for p in pieces]
        parts.append(decoder.decode(b"", final=True))
    except UnicodeDecodeError as exc:
        raise CorruptObjectError(key, f"a stored message text is not UTF-8: {exc}") from exc
    return "".join(parts)


def fill(value: Any, path: Path, text: str, key: str) -> None:
    """Put ``text`` back as the content of the message at ``path`` in ``value``."""
    target = value
    for step in path:
        try:
            target = target[step]
        except (KeyError, IndexError, TypeError):
            raise CorruptObjectError(
                key, f"split value: path {list(path)!r} does not lead to a message"
            ) from None
    if isinstance(target, BaseMessage) and target.content == "":
        target.content = text
    elif type(target) is dict and target.get("content") == "":
        # The serializer rebuilt the message as a dict (its class not allowed).
        target["content"] = text
    else:
        raise CorruptObjectError(
            key, f"split value: path {list(path)!r} does not lead to a message with empty content"
        )
