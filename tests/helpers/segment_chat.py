"""A thread whose ``messages`` list has sealed and merged segments (format version 2).

Each put adds two short messages: the list seals a segment of 8 elements
every 4 puts and merges two of one size into one twice as large, so after 28
puts (7 runs of 8, 0b111) the head's list holds segments of 32, 16 and 8
elements, each embedded in the manifest of the put that made it and located
there by the later ones (none is full yet: no index, spec §4.4).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgpack
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from layout import is_manifest
from payloads import incompressible_text

from objstore_saver import ObjectStoreSaver
from objstore_saver.format import codec, keys as k
from objstore_saver.format.codec import InlineList, Manifest, SegmentRef
from objstore_saver.storage import LocalStore, PutMode

TURNS = 28
THREAD = "seg"


def turn(i: int, big: bool = False) -> list[BaseMessage]:
    """Two messages short enough to be inline list elements, long enough for a list layout.

    ``big``: the question is 3,000 characters that do not compress, a
    ``value`` object embedded in the manifest of its put, which its segment
    locates there.
    """
    question = incompressible_text(3000, i) if big else f"question {i}: " + "please " * 20
    return [
        HumanMessage(question, id=f"h{i}"),
        AIMessage(f"answer {i}: " + "sure " * 20, id=f"a{i}"),
    ]


def grow(
    saver: ObjectStoreSaver, thread: str = THREAD, turns: int = TURNS, big_at: int | None = None
) -> list[BaseMessage]:
    """``turns`` puts, each adding two messages; returns every message.

    ``big_at``: the put whose question is large (:func:`turn`).
    """
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    messages: list[BaseMessage] = []
    for i in range(turns):
        messages += turn(i, i == big_at)
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": list(messages)}
        cp["channel_versions"] = {"messages": i + 1}
        config = saver.put(config, cp, {"step": i}, {"messages": i + 1})
    return messages


def manifests(store: LocalStore, thread: str = THREAD) -> dict[str, Manifest]:
    """The thread's manifests, newest first, read from the store."""
    infos = store.list(k.thread_prefix(thread) + "checkpoints/").objects
    return {
        o.key: codec.decode_manifest(store.get(o.key), o.key)  # type: ignore[arg-type]
        for o in infos
        if is_manifest(o.key)
    }


def head(store: LocalStore, thread: str = THREAD) -> tuple[str, Manifest]:
    return next(iter(manifests(store, thread).items()))


def segments(m: Manifest) -> tuple[SegmentRef, ...]:
    entry = m.channels["messages"]
    assert isinstance(entry, InlineList)
    return entry.obj.segments


def elsewhere(store: LocalStore, thread: str = THREAD) -> tuple[str, SegmentRef]:
    """The head's key and its first segment, which an older manifest embeds."""
    hkey, hm = head(store, thread)
    g = next(g for g in segments(hm) if g.loc not in (None, hkey))
    return hkey, g


def file_of(store: LocalStore, key: str) -> Path:
    return Path(store.root, *key.split("/"))


def flip_embedded(store: LocalStore, key: str, digest: bytes, at: int) -> None:
    """Flip one byte of an object embedded in manifest ``key`` (index ``at`` of its bytes)."""
    path = file_of(store, key)
    data = path.read_bytes()
    body = codec.embedded_objects(codec.decode_manifest(data, key))[digest]
    where = data.index(body)
    pos = where + (at % len(body))
    path.write_bytes(data[:pos] + bytes([data[pos] ^ 0x01]) + data[pos + 1 :])


def rewrite_manifest(store: LocalStore, key: str, change: Any) -> None:
    """Rewrite a manifest's MessagePack map in place through ``change(fields)``."""
    path = file_of(store, key)
    fields = msgpack.unpackb(path.read_bytes(), raw=False)
    change(fields)
    path.write_bytes(msgpack.packb(fields, use_bin_type=True))


def store_alone(store: LocalStore, thread: str, digest: bytes, body: bytes) -> str:
    """Store an embedded object at ``objects/<H>``, as prune does before deleting its manifest."""
    key = k.object_key_in(k.thread_prefix(thread), digest)
    store.put(key, body, PutMode.CREATE)
    return key
