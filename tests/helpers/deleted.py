"""What a deleted thread leaves: its tombstones (spec §4.11), and nothing else."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from objstore_saver.format import keys


def not_tombstones(listed: Iterable[Any]) -> list[Any]:
    """The keys (or ``ObjectInfo`` rows, or file paths) that are not tombstones."""
    out = []
    for item in listed:
        key = item if isinstance(item, str) else getattr(item, "key", None)
        if isinstance(item, Path):
            key = "/".join(item.parts[-5:])
        if key is None or not keys.is_tombstone_key(key):
            out.append(item)
    return out


def the_tombstone(listed: Iterable[str], thread_id: str = "t", checkpoint_ns: str = "") -> int:
    """The epoch of the one key listed, which must be the thread's tombstone in ``checkpoint_ns``.

    A delete numbers its epoch by its clock (spec §4.11), so tests compare
    epochs with each other, never with a fixed number.
    """
    (key,) = list(listed)
    epoch = keys.tombstone_epoch_of(key)
    assert epoch is not None, key
    assert key == keys.tombstone_key(thread_id, checkpoint_ns, epoch), key
    return epoch
