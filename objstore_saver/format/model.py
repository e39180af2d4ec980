"""The decoded forms of stored objects (plain data), and the format's limits (spec §4)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

FORMAT_VERSION = 1
#: Format version of the manifests and pending writes this release writes
#: (docs/format-v2.md); content objects and marks are still version 1.
CHECKPOINT_FORMAT_VERSION = 2
#: Versions of manifests and pending writes a reader accepts.
CHECKPOINT_VERSIONS = (1, 2)
#: Serialized values up to this size are inline (in the manifest, write or chunk).
INLINE_MAX = 1024
#: A pending write's value whose compressed payload is at most this is inline in
#: its write object (spec §6.5 step 2): one S3 PUT costs as much as keeping 18 KB a year.
WRITE_INLINE_MAX = 16 * 1024
#: List elements up to this size are inline in their chunk.
ELEMENT_INLINE_MAX = 128
#: Data stored in an object is compressed above this size when that helps.
COMPRESS_MIN = 128
#: Largest payload data of one ``value`` object; larger data is split into parts.
PART_SIZE = 256 * 1024
#: Elements per sealed chunk; fewer wait in the list object's tail.
CHUNK_LEN = 8
#: Subtrees per node: F full subtrees of one size are sealed under a node.
NODE_FANOUT = 4
#: Segments of one size that merge into one (format version 2).
SEGMENT_MERGE = 2
#: Most elements of one list segment a reader accepts (what releases before indexes merged up to).
SEGMENT_MAX_LEN = CHUNK_LEN * SEGMENT_MERGE**8
#: A writer's full segment (spec §4.4): merges stop at this many elements.
SEGMENT_FULL_LEN = CHUNK_LEN * SEGMENT_MERGE**3
#: References of a full index (spec §4.4): full segments, or full indexes of the level below.
INDEX_FANOUT = 16
#: Segments merge only while their entries together encode to at most this, so a
#: turn however long writes at most this plus its own entries (under 256 KB).
SEGMENT_MAX_BYTES = 128 * 1024
#: Lists whose elements average less than this are stored as one value.
LIST_MIN_MEAN_ELEMENT = 256
#: A manifest larger than this moves its largest inline entries to objects.
MANIFEST_BUDGET = 1024 * 1024


_SEGMENT_COUNTS = frozenset(CHUNK_LEN * SEGMENT_MERGE**level for level in range(9))


def is_segment_count(n: object) -> bool:
    """Whether ``n`` elements make a segment: ``CHUNK_LEN * 2**l``, at most ``SEGMENT_MAX_LEN``."""
    return isinstance(n, int) and n in _SEGMENT_COUNTS


@dataclass(frozen=True, slots=True)
class Payload:
    """Serializer type, byte encoding and data of one serialized value."""

    type: str
    encoding: str
    data: bytes

    def to_msgpack(self) -> list[Any]:
        return [self.type, self.encoding, self.data]


@dataclass(frozen=True, slots=True)
class Inline:
    """Entry holding its value inline."""

    payload: Payload


@dataclass(frozen=True, slots=True)
class Ref:
    """Entry pointing at a content-addressed object: ``b`` value, ``p`` parts, ``l`` list,
    ``s`` split value (§4.4a)."""

    tag: Literal["b", "p", "l", "s"]
    digest: bytes
    at: str | None = None
    """``b`` only: the id of the manifest embedding the value; None: at ``objects/<H>`` (§4.0)."""


@dataclass(frozen=True, slots=True)
class SegmentRef:
    """A list's sealed run of elements (a ``segment`` object), or an index (spec §4.4).

    ``loc``: the key of the manifest embedding it, or None at ``objects/<H>``.
    """

    digest: bytes
    count: int
    loc: str | None = None
    index: bool = False


@dataclass(frozen=True, slots=True)
class IndexRef:
    """A reference in an ``index`` object: a segment or an index, located by checkpoint id."""

    digest: bytes
    count: int
    at: str | None
    index: bool = False


@dataclass(frozen=True, slots=True)
class InlineList:
    """A list channel's list, inline in the manifest (format version 2, entry tag ``L``)."""

    obj: ListObj


Entry = Inline | Ref | InlineList


@dataclass(frozen=True, slots=True)
class Manifest:
    """Decoded manifest (spec §4.1)."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    checkpoint: Entry
    metadata: Entry
    channels: dict[str, Entry]
    version: int = CHECKPOINT_FORMAT_VERSION
    #: Content objects carried in the manifest (field ``e``).
    embedded: tuple[bytes, ...] = ()
    #: The thread's epoch (field ``ep``, spec §4.11).
    epoch: int = 0


@dataclass(frozen=True, slots=True)
class ValueObj:
    payload: Payload


@dataclass(frozen=True, slots=True)
class PartsObj:
    type: str
    encoding: str
    size: int
    parts: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class PartObj:
    data: bytes


@dataclass(frozen=True, slots=True)
class ListObj:
    count: int
    #: Sealed subtrees (chunks or nodes) in order, as (digest, element count).
    sealed: tuple[tuple[bytes, int], ...]
    #: Elements after the sealed ones (fewer than ``CHUNK_LEN``).
    tail: tuple[Entry, ...]
    #: Segments after the sealed subtrees (format version 2), in order.
    segments: tuple[SegmentRef, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeObj:
    #: Full subtrees of one size, as (digest, element count).
    subtrees: tuple[tuple[bytes, int], ...]


@dataclass(frozen=True, slots=True)
class ChunkObj:
    items: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class SegmentObj:
    """A sealed run of list elements (format version 2, ``k = "segment"``)."""

    items: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class IndexObj:
    """References of a list's full segments or full indexes, oldest first (``k = "index"``)."""

    refs: tuple[IndexRef, ...]

    @property
    def subtrees(self) -> tuple[tuple[bytes, int], ...]:
        """Its references as (digest, element count), as a :class:`NodeObj` holds them."""
        return tuple((r.digest, r.count) for r in self.refs)


@dataclass(frozen=True, slots=True)
class WriteObj:
    task_id: str
    task_path: str
    idx: int
    channel: str
    value: Entry
    #: Call order: of special writes the greatest is in force, of regular ones the least.
    seq: int = 0
    #: Indexes of the regular writes stored by the same call (empty: not recorded); §4.7.
    group: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class SplitObj:
    """A value with its large message texts stored apart (spec §4.4a)."""

    value: Entry
    #: (path to a message, ``b`` or ``p`` reference to its UTF-8 text).
    holes: tuple[tuple[tuple[str | int, ...], Ref], ...]


StoredObject = (
    ValueObj | PartsObj | PartObj | ListObj | NodeObj | ChunkObj | SegmentObj | IndexObj | SplitObj
)


@dataclass(slots=True)
class Encoded:
    """An entry, the content-addressed objects it needs, and each container's references."""

    entry: Entry
    objects: dict[bytes, bytes] = field(default_factory=dict)
    children: dict[bytes, tuple[bytes, ...]] = field(default_factory=dict)
