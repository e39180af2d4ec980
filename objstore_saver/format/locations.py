"""Where a list's segment is (spec §4.4): locations relative to the manifest holding them.

A segment reference's location is stored relative to the manifest that
holds the reference (``""``: that manifest; a checkpoint id, or a UUID's 16
bytes: that checkpoint's manifest beside it; nil: ``objects/<H>``) and kept
in memory as a full key. Pure functions.
"""

from __future__ import annotations

import uuid
from typing import Any

from objstore_saver.errors import CorruptObjectError, InvalidIdentifierError
from objstore_saver.format import keys
from objstore_saver.format.model import CHUNK_LEN, SEGMENT_MAX_LEN, SEGMENT_MERGE


def relative_loc(loc: str | None, holder: str | None) -> str | None:
    if loc is None:
        return None
    if loc == holder:
        return ""
    folder, _, name = loc.rpartition("/")
    # Beside the holder (a manifest key): a version-2 manifest of its folder.
    beside = holder is not None and holder.rpartition("/")[0] == folder
    if not beside or not name.endswith("~" + keys.V2_MANIFEST_SUFFIX):
        raise ValueError(f"segment location {loc!r} is not a manifest beside {holder!r}")
    checkpoint_id = keys.unreverse_id(name.removesuffix(keys.V2_MANIFEST_SUFFIX))
    return _uuid_bytes(checkpoint_id) or checkpoint_id


def _uuid_bytes(checkpoint_id: str) -> bytes | None:
    """The 16 bytes of a UUID in its canonical text form (LangGraph's ids), else None."""
    if len(checkpoint_id) != 36:
        return None
    try:
        raw = uuid.UUID(checkpoint_id)
    except ValueError:
        return None
    return raw.bytes if str(raw) == checkpoint_id else None


def absolute_loc(raw: Any, holder: str, key: str) -> str | None:
    if raw is None:
        return None
    if raw == "":
        return holder
    if isinstance(raw, bytes) and len(raw) == 16:
        raw = str(uuid.UUID(bytes=raw))
    if not isinstance(raw, str) or not keys.is_manifest_v2_key(holder):
        raise CorruptObjectError(key, f"a segment's location {raw!r:.80} is not a checkpoint id")
    try:
        return manifest_beside(holder, raw)
    except InvalidIdentifierError as exc:
        raise CorruptObjectError(
            key, f"a segment's location {raw!r:.80} is not a checkpoint id"
        ) from exc


def is_segment_count(n: object) -> bool:
    """Whether ``n`` elements make a segment: ``CHUNK_LEN * 2**l``, at most ``SEGMENT_MAX_LEN``."""
    if not isinstance(n, int) or isinstance(n, bool):
        return False
    size = CHUNK_LEN
    while size < n:
        size *= SEGMENT_MERGE
    return size == n and n <= SEGMENT_MAX_LEN


def stored_at(at: str, holder_id: str | None) -> str | bytes:
    """A value's location as stored (spec §4.0): ``""`` for the holder itself, else the id.

    ``holder_id`` is the checkpoint id of the manifest holding the entry, or
    None inside a segment (which any manifest of the namespace may refer to).
    """
    if at == holder_id:
        return ""
    return _uuid_bytes(at) or at


def read_at(raw: Any, holder_key: str, key: str) -> str:
    """The checkpoint id a stored value location names; ``key`` is named in errors.

    ``holder_key`` is the key the entry was read from: ``""`` is valid only in
    a version-2 manifest, where it names that manifest.
    """
    if raw == "":
        if not keys.is_manifest_v2_key(holder_key):
            raise CorruptObjectError(key, "a value located '' (here) outside a manifest")
        return keys.checkpoint_id_of_manifest_key(holder_key)
    if isinstance(raw, bytes) and len(raw) == 16:
        return str(uuid.UUID(bytes=raw))
    if isinstance(raw, str) and raw:
        try:
            keys.reverse_id(raw)
        except InvalidIdentifierError as exc:
            raise CorruptObjectError(
                key, f"a value's location {raw!r:.80} is not a checkpoint id"
            ) from exc
        return raw
    raise CorruptObjectError(key, f"a value's location {raw!r:.80} is not a checkpoint id")


def manifest_beside(manifest: str, checkpoint_id: str) -> str:
    """Key of the version-2 manifest ``checkpoint_id`` in the namespace of ``manifest``."""
    return (
        f"{manifest.rpartition('/')[0]}/{keys.reverse_id(checkpoint_id)}{keys.V2_MANIFEST_SUFFIX}"
    )
