"""Key layout of the long-term store (spec §8.1). Pure functions only."""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from objstore_saver.keys import token

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


def record_name(version: str, key: str) -> str:
    """``<V>-<h>``: name of an index record."""
    return f"{version}-{key_hash(key)}"


@dataclass(frozen=True, slots=True)
class IndexKey:
    """A parsed index key: namespace path, kind (``r`` or ``s``) and name."""

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
    if cut == 0 or len(rest) != 2 or rest[0] not in ("r", "s"):
        return None
    return IndexKey("/".join(segments[:cut]), rest[0], rest[1])


def version_nanos(version: str) -> int:
    """The clock reading (ns) a version starts with."""
    return int(version[:20])


class Versions:
    """Issues versions: ``<20-digit ns>-<8 hex>``, never smaller than the last one issued."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> str:
        """A new version."""
        with self._lock:
            self._last = max(self._last + 1, int(self._clock() * 1e9))
            return f"{self._last:020d}-{secrets.token_hex(4)}"
