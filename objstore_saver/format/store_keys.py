"""Key layout of the long-term store (spec §8.1): namespace paths, item, index and clear
marker keys, versions."""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from objstore_saver.format.keys import token, untoken

ROOT = "store/"
ITEMS = ROOT + "it/"
INDEX = ROOT + "ix/"
#: Longest namespace path kept fully readable.
MAX_PATH = 400
#: Longest readable lead of a hashed namespace path.
MAX_LEAD = 300


def _lead(tokens: Sequence[str]) -> list[str]:
    """The longest leading run of whole tokens whose joined path fits ``MAX_LEAD``."""
    kept: list[str] = []
    size = -1
    for tok in tokens:
        if size + 1 + len(tok) > MAX_LEAD:
            break
        kept.append(tok)
        size += 1 + len(tok)
    return kept


def namespace_path(namespace: Sequence[str]) -> str:
    """``<P>`` of a namespace: its label tokens joined by ``/``, hashed past 400 characters."""
    tokens = [token("namespace label", label) for label in namespace]
    path = "/".join(tokens)
    if len(path) <= MAX_PATH:
        return path
    digest = hashlib.sha256(json.dumps(list(namespace)).encode("utf-8")).hexdigest()
    return "/".join([*_lead(tokens), "~~" + digest])


def listing_prefix(prefix: Sequence[str], root: str = INDEX) -> str:
    """The LIST prefix under which every namespace starting with ``prefix`` lies."""
    lead = _lead([token("namespace label", label) for label in prefix])
    return root + "".join(t + "/" for t in lead)


def key_hash(key: str) -> str:
    """``<h>``: 16 hex digits of SHA-256 of the key."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def item_key(namespace: Sequence[str], key: str) -> str:
    """Key of the item object of (namespace, key)."""
    return f"{ITEMS}{namespace_path(namespace)}/i/{token('key', key)}"


def items_prefix(namespace: Sequence[str]) -> str:
    """Prefix of the item objects of one namespace."""
    return f"{ITEMS}{namespace_path(namespace)}/i/"


def index_prefix(namespace: Sequence[str]) -> str:
    """Prefix of the index segments of one namespace."""
    return f"{INDEX}{namespace_path(namespace)}/x/"


#: Length of a version: 20 digits, ``-``, 8 hex digits.
VERSION_LEN = 29
#: Op letters of record names: put without TTL, put with TTL, delete.
PERMANENT, EXPIRING, DELETED = "p", "t", "d"


def record_name(version: str, key: str, op: str) -> str:
    """``<V>-<h>-<o>``: name of an index record (``o``: ``p``, ``t`` or ``d``)."""
    return f"{version}-{key_hash(key)}-{op}"


def snapshot_name(version: str, permanent: int, clear: str = "") -> str:
    """``<V>-<n>``, or ``<V>-<n>-<C>`` when built after the clear ``C`` (spec §8.1)."""
    return f"{version}-{permanent}-{clear}" if clear else f"{version}-{permanent}"


def clears_prefix(namespace: Sequence[str]) -> str:
    """Prefix of the clear markers of one namespace (spec §8.4.9)."""
    return path_clears_prefix(namespace_path(namespace))


def name_version(name: str) -> str:
    """The version a record or snapshot name starts with."""
    return name[:VERSION_LEN]


def record_hash(name: str) -> str:
    return name[VERSION_LEN + 1 : VERSION_LEN + 17]


def record_op(name: str) -> str:
    return name[VERSION_LEN + 18 :]


def snapshot_permanent(name: str) -> int:
    return int(name[VERSION_LEN + 1 :].split("-", 1)[0])


def snapshot_clear(name: str) -> str:
    """``<C>`` of a snapshot name: the clear it was built after, ``""`` if none."""
    parts = name[VERSION_LEN + 1 :].split("-", 1)
    return parts[1] if len(parts) == 2 else ""


def clear_of(key: str) -> tuple[str, int] | None:
    """(namespace path, epoch it begins) of a clear marker's key (spec §8.4.9), else None."""
    parsed = parse_index_key(key)
    if parsed is None or parsed.kind != "c":
        return None
    return parsed.path, clear_epoch(parsed.name)


def path_clears_prefix(path: str) -> str:
    """The LIST prefix of the clear markers of the namespace whose path is ``path``."""
    return f"{INDEX}{path}/x/c/"


def index_prefix_path(prefix: str) -> str | None:
    """``<P>`` of a namespace's index prefix ``store/ix/<P>/x/``, else None."""
    if prefix.startswith(INDEX) and prefix.endswith("/x/") and len(prefix) > len(INDEX) + 3:
        return prefix[len(INDEX) : -len("/x/")]
    return None


def clear_epoch(clear: str) -> int:
    """The namespace epoch a clear begins: the nanoseconds its version starts with (0: none)."""
    return version_nanos(clear) if clear else 0


def path_labels(path: str) -> tuple[str, ...] | None:
    """The labels of a namespace path made only of readable tokens, else None."""
    labels = []
    for segment in path.split("/"):
        label = untoken(segment)
        if label is None:
            return None
        labels.append(label)
    return tuple(labels)


@dataclass(frozen=True, slots=True)
class IndexKey:
    """A parsed index key: namespace path, kind (``r``, ``s`` or ``c``) and name."""

    path: str
    kind: str
    name: str


def parse_index_key(key: str) -> IndexKey | None:
    """Parse ``store/ix/<P>/x/<kind>/<name>``; None for anything else."""
    if not key.startswith(INDEX):
        return None
    segments = key[len(INDEX) :].split("/")
    try:
        cut = segments.index("x")
    except ValueError:
        return None
    rest = segments[cut + 1 :]
    if cut == 0 or len(rest) != 2 or rest[0] not in _INDEX_KINDS:
        return None
    return IndexKey("/".join(segments[:cut]), rest[0], rest[1])


#: Index kinds (spec §8.1): records, snapshots and clear markers, and what ``du`` calls them.
_INDEX_KINDS = {"r": "index records", "s": "snapshots", "c": "clear markers"}


def version_nanos(version: str) -> int:
    """The clock reading (ns) a version starts with."""
    return int(version[:20])


class Versions:
    """Issues versions: ``<20-digit ns>-<8 hex>``, never smaller than the last one issued."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._last = 0
        self._lock = threading.Lock()

    def next(self, above: str = "") -> str:
        """A new version, greater than ``above`` (a version seen in the store) too."""
        with self._lock:
            floor = version_nanos(above) + 1 if above else 0
            self._last = max(self._last + 1, int(self._clock() * 1e9), floor)
            return f"{self._last:020d}-{secrets.token_hex(4)}"


def classify(key: str) -> tuple[str, str]:
    """(namespace path, kind) of a key under ``store/``: ``"items"``, an index kind,
    or ``"other"`` with path ``""`` (a key the format does not define)."""
    if key.startswith(INDEX):
        parsed = parse_index_key(key)
        if parsed is not None:
            return parsed.path, _INDEX_KINDS[parsed.kind]
        return "", "other"
    if key.startswith(ITEMS):
        path, sep, _ = key[len(ITEMS) :].rpartition("/i/")
        if sep:
            return path, "items"
    return "", "other"
