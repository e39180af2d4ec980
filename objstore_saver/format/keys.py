"""Key layout (spec §3): identifiers, tokens, keys, and locations relative to a manifest.

Every key the saver builds comes from here; locations: spec §4.0, §4.4.
"""

from __future__ import annotations

import hashlib
import random
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from objstore_saver.errors import CorruptObjectError, InvalidIdentifierError

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

#: Longest percent-encoded identifier kept readable; longer ones are hashed.
MAX_QUOTED_TOKEN = 200
#: Longest checkpoint id, in UTF-8 bytes: its reversed segment (2n+1) must fit a
#: 255-byte file name on the local backend.
MAX_CHECKPOINT_ID_BYTES = 120

THREADS = "threads/"

#: The unreserved characters of spec §3.1, kept as they are in a token.
_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]*")
RUNS = "runs/"
#: Hex digits of an encrypted thread's content object name (``objects/<sealed name>``):
#: a 32-byte address and the 16-byte SIV tag (spec §4.10).
SEALED_NAME_LEN = 96


def _require_str(what: str, value: object) -> str:
    if not isinstance(value, str):
        raise InvalidIdentifierError(f"{what} must be a string, got {type(value).__name__}")
    return value


def token(what: str, value: object) -> str:
    """The key token of an identifier (spec §3.1); ``what`` names it in errors."""
    s = _require_str(what, value)
    if _UNRESERVED.fullmatch(s) is not None:
        q = s  # what percent-encoding would leave as it is (most identifiers)
    else:
        try:
            q = quote(s, safe="", encoding="utf-8", errors="strict")
        except UnicodeEncodeError as exc:
            raise InvalidIdentifierError(f"{what} {s!r} is not valid Unicode text: {exc}") from exc
    if len(q) <= MAX_QUOTED_TOKEN:
        return "_" + q
    return "~" + hashlib.sha256(s.encode("utf-8")).hexdigest()


def untoken(tok: str) -> str | None:
    """Return the identifier of a readable token, or None for a hashed one."""
    if tok.startswith("_"):
        return unquote(tok[1:], encoding="utf-8", errors="strict")
    return None


#: ``b -> 255 - b`` for every byte, as a ``bytes.translate`` table.
_COMPLEMENT = bytes(range(255, -1, -1))


def reverse_id(checkpoint_id: object) -> str:
    """Return the reverse-ordered key segment of a checkpoint id (spec §3.2)."""
    s = _require_str("checkpoint_id", checkpoint_id)
    raw = s.encode("utf-8")
    if not raw:
        raise InvalidIdentifierError("checkpoint_id must not be empty")
    if len(raw) > MAX_CHECKPOINT_ID_BYTES:
        raise InvalidIdentifierError(
            f"checkpoint_id {s[:40]!r}... is {len(raw)} bytes; at most "
            f"{MAX_CHECKPOINT_ID_BYTES} are supported"
        )
    return raw.translate(_COMPLEMENT).hex() + "~"


def unreverse_id(segment: str) -> str:
    """Invert :func:`reverse_id`."""
    if not segment.endswith("~"):
        raise ValueError(f"not a checkpoint key segment: {segment!r}")
    return bytes.fromhex(segment[:-1]).translate(_COMPLEMENT).decode("utf-8")


def thread_prefix(thread_id: str) -> str:
    """``threads/<T>/``: every key of the thread starts with it."""
    return f"{THREADS}{token('thread_id', thread_id)}/"


def manifests_prefix(thread_id: str, checkpoint_ns: str | None = None) -> str:
    """Manifests of a thread, or of one namespace of it."""
    base = thread_prefix(thread_id) + "checkpoints/"
    if checkpoint_ns is None:
        return base
    return f"{base}{token('checkpoint_ns', checkpoint_ns)}/"


#: Suffix of a version-2 manifest key after the reversed id (spec §3).
V2_MANIFEST_SUFFIX = ".2"
#: What follows the reversed id in a version-2 pending write's key (spec §3): a
#: folder of its own, so the local backend never needs ``<R>`` as both a file
#: (a version-1 manifest) and a folder.
V2_WRITES_SUFFIX = ".w/"


def checkpoint_key(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> str:
    """``threads/<T>/checkpoints/<N>/<R>``: every key of one checkpoint starts with it (no
    ``<R>`` is a prefix of another: each ends with its only ``~``)."""
    return manifests_prefix(thread_id, checkpoint_ns) + reverse_id(checkpoint_id)


def manifest_key(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> str:
    """Key of one checkpoint's manifest as this release writes it (version 2)."""
    return checkpoint_key(thread_id, checkpoint_ns, checkpoint_id) + V2_MANIFEST_SUFFIX


#: Key of one checkpoint's version-1 manifest (read, never written).
v1_manifest_key = checkpoint_key


def checkpoint_writes_prefix(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> str:
    """Version-2 pending writes of one checkpoint: ``.../checkpoints/<N>/<R>.w/``."""
    return checkpoint_key(thread_id, checkpoint_ns, checkpoint_id) + V2_WRITES_SUFFIX


#: Tombstones (spec §3.4) sort before every checkpoint of their namespace: ``-``
#: (0x2D) is below the hex digits a reversed id starts with.
TOMBSTONE_MARK = "-"
#: Epochs are numbered up to this; a tombstone's key holds ``MAX_EPOCH - n``
#: in :data:`TOMBSTONE_DIGITS` digits, so the newest tombstone is listed first.
MAX_EPOCH = 9_999_999_999
#: 2026-01-01T00:00:00Z: a delete numbers its epoch at least the seconds since then
#: (spec §4.11), so epochs keep growing after a thread's tombstones are swept.
EPOCH_ORIGIN = 1_767_225_600


def epoch_floor(unix_seconds: float) -> int:
    """The least epoch a delete at ``unix_seconds`` (its own clock) begins (spec §4.11)."""
    return max(1, min(MAX_EPOCH, int(unix_seconds) - EPOCH_ORIGIN))


TOMBSTONE_DIGITS = 10


def tombstone_key(thread_id: str, checkpoint_ns: str, epoch: int) -> str:
    """``threads/<T>/checkpoints/<N>/-<D>``: the tombstone that begins ``epoch`` (spec §3.4)."""
    pfx = thread_prefix(thread_id)
    return tombstone_key_in(pfx, token("checkpoint_ns", checkpoint_ns), epoch)


def tombstone_key_in(thread_pfx: str, ns_token: str, epoch: int) -> str:
    """:func:`tombstone_key` from a thread prefix and a namespace token."""
    if not 1 <= epoch <= MAX_EPOCH:
        raise InvalidIdentifierError(f"epoch {epoch!r} is outside 1..{MAX_EPOCH}")
    return f"{thread_pfx}checkpoints/{ns_token}/{TOMBSTONE_MARK}{MAX_EPOCH - epoch:010d}"


def tombstones_prefix(thread_id: str, checkpoint_ns: str) -> str:
    """What every tombstone key of a namespace starts with (its newest is listed first)."""
    return manifests_prefix(thread_id, checkpoint_ns) + TOMBSTONE_MARK


def tombstone_epoch(segment: str) -> int | None:
    """The epoch a tombstone begins, from the last segment of its key; None if not a tombstone."""
    digits = segment[1:]
    if not segment.startswith(TOMBSTONE_MARK) or len(digits) != TOMBSTONE_DIGITS:
        return None
    if not (digits.isdigit() and digits.isascii()):
        return None
    epoch = MAX_EPOCH - int(digits)
    return epoch if epoch >= 1 else None


def tombstone_epoch_of(key: str) -> int | None:
    """The epoch the tombstone ``threads/<T>/checkpoints/<N>/-<D>`` begins; None for another key."""
    parts = key.split("/")
    if len(parts) != 5 or parts[0] + "/" != THREADS or parts[2] != "checkpoints":
        return None
    if not parts[4].startswith(TOMBSTONE_MARK):  # a manifest or a write: the usual key
        return None
    return tombstone_epoch(parts[4])


def is_tombstone_key(key: str) -> bool:
    """Whether ``key`` is a tombstone ``threads/<T>/checkpoints/<N>/-<D>`` (spec §3.4)."""
    return tombstone_epoch_of(key) is not None


def reversed_id_of(rest: str) -> str:
    """``<R>`` of a key's part after ``checkpoints/<N>/`` (a manifest or a write of any version)."""
    seg, slash, _ = rest.partition("/")
    if slash:
        return seg.removesuffix(V2_WRITES_SUFFIX[:-1])
    return seg.removesuffix(V2_MANIFEST_SUFFIX)


def writes_prefix(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> str:
    """Version-1 pending writes of one checkpoint (read, never written)."""
    return (
        f"{thread_prefix(thread_id)}writes/{token('checkpoint_ns', checkpoint_ns)}/"
        f"{token('checkpoint_id', checkpoint_id)}/"
    )


def write_key(
    thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str, idx: int, seq: int = 0
) -> str:
    """Key of one pending write; special writes (idx < 0) carry their sequence."""
    base = _task_writes(thread_id, checkpoint_ns, checkpoint_id, task_id)
    return f"{base}.{idx}" if idx >= 0 else f"{base}.{idx}.{seq:026d}"


def _task_writes(thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str) -> str:
    return checkpoint_writes_prefix(thread_id, checkpoint_ns, checkpoint_id) + token(
        "task_id", task_id
    )


GROUP_SUFFIX_MAX = 29
"""Longest index list of a write group key: never longer than a special write's suffix."""


def write_group_key(
    thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str, indexes: tuple[int, ...]
) -> str:
    """Key of the write group holding one call's regular writes (spec §4.7)."""
    base = _task_writes(thread_id, checkpoint_ns, checkpoint_id, task_id)
    return f"{base}.{write_group_suffix(indexes)}"


def write_group_suffix(indexes: list[int] | tuple[int, ...]) -> str:
    """The part of a write group key after the task token: ``<L>`` or its hash (spec §4.7)."""
    suffix = "~".join(str(i) for i in indexes)
    if len(suffix) > GROUP_SUFFIX_MAX:
        suffix = "h" + hashlib.sha256(suffix.encode()).hexdigest()[:16]
    return suffix


def write_slots(key: str) -> tuple[str, tuple[int, ...] | None]:
    """(task token, write indexes) of a pending write or write group key (None: hashed)."""
    seg = key.rsplit("/", 1)[1]
    parts = seg.rsplit(".", 2)
    if len(parts) == 3 and parts[1].startswith("-") and len(parts[2]) == 26:
        return parts[0], (int(parts[1]),)
    task, _, idxs = seg.rpartition(".")
    if idxs.startswith("h"):
        return task, None
    return task, tuple(int(i) for i in idxs.split("~"))


@dataclass(frozen=True)
class CheckpointKeyParts:
    """What a key under ``threads/<T>/checkpoints/`` or ``writes/`` is (spec §3): ``kind``
    ``"manifest"``, ``"write"`` or ``"tombstone"``, the ``version`` its place implies."""

    thread_pfx: str
    ns_token: str
    checkpoint_token: str
    kind: str
    version: int
    epoch: int = 0

    @property
    def checkpoint(self) -> tuple[str, str, str]:
        """The checkpoint the key belongs to: (thread prefix, namespace token, id token)."""
        return self.thread_pfx, self.ns_token, self.checkpoint_token


def parse_checkpoint_key(key: str) -> CheckpointKeyParts:
    """Parse a manifest, pending-write or tombstone key (ValueError for any other)."""
    pfx, rest = split_thread_key(key)
    area, _, tail = rest.partition("/")
    ns_tok, _, inner = tail.partition("/")
    if not ns_tok or not inner:
        raise ValueError(f"not a checkpoint key: {key!r}")
    if area == "writes":
        cid_tok, slash, write = inner.partition("/")
        if not slash or not write or "/" in write:
            raise ValueError(f"not a pending write key: {key!r}")
        return CheckpointKeyParts(pfx, ns_tok, cid_tok, "write", 1)
    if area != "checkpoints":
        raise ValueError(f"not a checkpoint key: {key!r}")
    seg, slash, write = inner.partition("/")
    if not slash and seg.startswith(TOMBSTONE_MARK):
        epoch = tombstone_epoch(seg)
        if epoch is None:
            raise ValueError(f"not a tombstone key: {key!r}")
        return CheckpointKeyParts(pfx, ns_tok, seg, "tombstone", 2, epoch)
    kind, version = "manifest", 1
    if slash:
        if not write or "/" in write or not seg.endswith(V2_WRITES_SUFFIX[:-1]):
            raise ValueError(f"not a pending write key: {key!r}")
        seg, kind, version = seg[: -len(V2_WRITES_SUFFIX) + 1], "write", 2
    elif seg.endswith(V2_MANIFEST_SUFFIX):
        seg, version = seg[: -len(V2_MANIFEST_SUFFIX)], 2
    try:
        checkpoint_id = unreverse_id(seg)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not a checkpoint key: {key!r}") from exc
    return CheckpointKeyParts(pfx, ns_tok, token("checkpoint_id", checkpoint_id), kind, version)


def objects_prefix(thread_id: str) -> str:
    """Content-addressed objects of a thread."""
    return thread_prefix(thread_id) + "objects/"


def object_key_in(thread_pfx: str, digest: bytes) -> str:
    """Key of a content-addressed object under a thread prefix."""
    return f"{thread_pfx}objects/{digest.hex()}"


def marks_prefix(thread_id: str) -> str:
    """Sweep marks of a thread (spec §4.9)."""
    return thread_prefix(thread_id) + "marks/"


def mark_key(thread_id: str, stamp_ns: int, nonce: str) -> str:
    """Key of one sweep mark: the writer's clock in ns (20 digits) and a random nonce."""
    return f"{marks_prefix(thread_id)}{stamp_ns:020d}-{nonce}"


def run_markers(thread_id: str, run_id: str) -> tuple[str, str]:
    """The run index entry and the thread-side run marker (spec §4.8)."""
    t = token("thread_id", thread_id)
    u = token("run_id", run_id)
    return f"{RUNS}{u}/{t}", f"{THREADS}{t}/runs/{u}"


def run_prefix(run_id: str) -> str:
    """Index entries of one run: ``runs/<U>/``."""
    return f"{RUNS}{token('run_id', run_id)}/"


def split_thread_key(key: str) -> tuple[str, str]:
    """Split ``threads/<T>/rest`` into (``threads/<T>/``, ``rest``)."""
    if not key.startswith(THREADS):
        raise ValueError(f"not a thread key: {key!r}")
    end = key.index("/", len(THREADS)) + 1
    return key[:end], key[end:]


def checkpoint_id_of_manifest_key(key: str) -> str:
    """The checkpoint id of a manifest key of either version."""
    return unreverse_id(key.rsplit("/", 1)[1].removesuffix(V2_MANIFEST_SUFFIX))


def namespace_of_manifest_key(key: str) -> tuple[str, str]:
    """Return (namespace token, reversed id segment) of a manifest key of either version."""
    _, rest = split_thread_key(key)
    _, ns_tok, seg = rest.split("/", 2)
    return ns_tok, seg.removesuffix(V2_MANIFEST_SUFFIX)


def is_manifest_v2_key(key: str) -> bool:
    """Whether ``key`` has the shape ``threads/<T>/checkpoints/<N>/<R>.2``."""
    parts = key.split("/")
    return (
        len(parts) == 5
        and parts[0] + "/" == THREADS
        and parts[2] == "checkpoints"
        and parts[4].endswith("~" + V2_MANIFEST_SUFFIX)
    )


# --- locations relative to the manifest holding them (spec §4.0, §4.4) ---


def relative_loc(loc: str | None, holder: str | None) -> str | None:
    if loc is None:
        return None
    if loc == holder:
        return ""
    folder, _, name = loc.rpartition("/")
    # Beside the holder (a manifest key): a version-2 manifest of its folder.
    beside = holder is not None and holder.rpartition("/")[0] == folder
    if not beside or not name.endswith("~" + V2_MANIFEST_SUFFIX):
        raise ValueError(f"segment location {loc!r} is not a manifest beside {holder!r}")
    checkpoint_id = unreverse_id(name.removesuffix(V2_MANIFEST_SUFFIX))
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


def location_id(raw: Any, key: str, what: str) -> str:
    """The checkpoint id a stored location names: a UUID's 16 bytes, or the id itself."""
    if isinstance(raw, bytes) and len(raw) == 16:
        return str(uuid.UUID(bytes=raw))
    problem = f"{what} location {raw!r:.80} is not a checkpoint id"
    if isinstance(raw, str) and raw:
        try:
            reverse_id(raw)
        except InvalidIdentifierError as exc:
            raise CorruptObjectError(key, problem) from exc
        return raw
    raise CorruptObjectError(key, problem)


def absolute_loc(raw: Any, holder: str, key: str) -> str | None:
    if raw is None:
        return None
    if raw == "":
        return holder
    checkpoint_id = location_id(raw, key, "a segment's")
    if not is_manifest_v2_key(holder):
        raise CorruptObjectError(
            key, f"a segment's location {checkpoint_id!r:.80} is not a checkpoint id"
        )
    return manifest_beside(holder, checkpoint_id)


def index_loc(loc: str | None) -> str | bytes | None:
    """A segment's or an index's location as an index holds it: the id alone, never ``""``."""
    return None if loc is None else stored_at(checkpoint_id_of_manifest_key(loc), None)


def stored_at(at: str, holder_id: str | None) -> str | bytes:
    """A value's location as stored (spec §4.0): ``""`` for the holder itself, else the id."""
    if at == holder_id:
        return ""
    return _uuid_bytes(at) or at


def read_at(raw: Any, holder_key: str, key: str) -> str:
    """The checkpoint id a stored value location names, read from ``holder_key``."""
    if raw == "":
        if not is_manifest_v2_key(holder_key):
            raise CorruptObjectError(key, "a value located '' (here) outside a manifest")
        return checkpoint_id_of_manifest_key(holder_key)
    return location_id(raw, key, "a value's")


def manifest_beside(manifest: str, checkpoint_id: str) -> str:
    """Key of the version-2 manifest ``checkpoint_id`` in the namespace of ``manifest``."""
    return f"{manifest.rpartition('/')[0]}/{reverse_id(checkpoint_id)}{V2_MANIFEST_SUFFIX}"


# --- the identifiers a config names, and channel versions (spec §5) ---


@dataclass(frozen=True, slots=True)
class Scope:
    """Thread, namespace and (optional) checkpoint id named by a config."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str | None


def scope_of(config: RunnableConfig, *, need_checkpoint_id: bool = False) -> Scope:
    """Read and check the identifiers of a config."""
    conf = config.get("configurable") or {}
    if "thread_id" not in conf:
        raise InvalidIdentifierError(
            "config['configurable']['thread_id'] is required by objstore-saver"
        )
    thread_id = conf["thread_id"]
    if not isinstance(thread_id, str):
        raise InvalidIdentifierError(
            f"thread_id must be a string, got {type(thread_id).__name__} {thread_id!r}"
        )
    ns = conf.get("checkpoint_ns") or ""
    if not isinstance(ns, str):
        raise InvalidIdentifierError(f"checkpoint_ns must be a string, got {ns!r}")
    cid = conf.get("checkpoint_id") or None
    if cid is not None:
        reverse_id(cid)
    if need_checkpoint_id and cid is None:
        raise InvalidIdentifierError(
            f"config of thread {thread_id!r} names no checkpoint_id; writes belong to a checkpoint"
        )
    return Scope(thread_id, ns, cid)


def checkpoint_config(thread_id: str, ns: str, cid: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}}


def next_version(current: str | int | float | None) -> str | int:
    """Next channel version, keeping the thread's type (spec §5)."""
    if current is None:
        return 1
    if isinstance(current, int):
        return current + 1
    if isinstance(current, float):
        return int(current) + 1
    head = int(str(current).split(".")[0]) + 1
    return f"{head:032}.{random.random():016}"
