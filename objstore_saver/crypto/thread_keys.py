"""A thread's data key, the keys derived from it, and the key object that stores it wrapped.

docs/encryption.md, "Keys": the key object is the one object whose deletion shreds the thread.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESSIV
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from objstore_saver.crypto.master_keys import MasterKey, answers_to, label_of, unwrap_any
from objstore_saver.crypto.names import scope_owner, split_scope
from objstore_saver.errors import CorruptObjectError, ThreadKeyError
from objstore_saver.format import codec

DATA_KEY_LEN = 32
#: Bytes of the id an envelope names its data key by.
KEY_ID_LEN = 8
KEY_OBJECT_VERSION = 1


def _derive(data_key: bytes, thread_id: str, purpose: bytes, length: int) -> bytes:
    hkdf = HKDF(
        algorithm=hashes.SHA256(),
        length=length,
        salt=b"objstore-saver v1",
        info=purpose + b"\0" + thread_id.encode(),
    )
    return hkdf.derive(data_key)


@dataclass(frozen=True)
class ThreadKey:
    """The AES-256-SIV keys of one scope (``thread_id``, bound into every derivation) and
    ``key_id``, an HKDF output of its own that names the data key in envelopes."""

    thread_id: str
    data_key: bytes = field(repr=False)
    name_key: bytes = field(init=False, repr=False)
    object_key: bytes = field(init=False, repr=False)
    keyed_key: bytes = field(init=False, repr=False)
    key_id: bytes = field(init=False, compare=False)
    epoch: int = field(init=False, compare=False)
    #: The ciphers of those keys, made once (AES-SIV objects are reusable).
    name_siv: AESSIV = field(init=False, repr=False, compare=False)
    object_siv: AESSIV = field(init=False, repr=False, compare=False)
    keyed_siv: AESSIV = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.data_key) != DATA_KEY_LEN:
            raise ValueError(f"a thread data key is {DATA_KEY_LEN} bytes")
        for name, purpose in (("name", b"name"), ("object", b"object"), ("keyed", b"keyed")):
            key = _derive(self.data_key, self.thread_id, purpose, 64)
            object.__setattr__(self, name + "_key", key)
            object.__setattr__(self, name + "_siv", AESSIV(key))
        object.__setattr__(
            self, "key_id", _derive(self.data_key, self.thread_id, b"id", KEY_ID_LEN)
        )
        object.__setattr__(self, "epoch", split_scope(self.thread_id)[1])


def new_thread_key(thread_id: str) -> ThreadKey:
    """A fresh random data key for a thread."""
    return ThreadKey(thread_id, os.urandom(DATA_KEY_LEN))


def encode_key_object(thread: ThreadKey, keys: Sequence[MasterKey]) -> bytes:
    """The key object of a thread, its data key wrapped by each of ``keys``."""
    if not keys:
        raise ValueError("a key object needs at least one master key")
    return _key_object(
        thread.thread_id, [(k.name, k.wrap(thread.thread_id, thread.data_key)) for k in keys]
    )


def _key_object(thread_id: str, wrappings: Sequence[tuple[str, bytes]]) -> bytes:
    return codec.pack_object(
        {
            "f": KEY_OBJECT_VERSION,
            "k": "thread-key",
            "t": thread_id,
            "w": [list(w) for w in wrappings],
        }
    )


def key_object_wrappings(data: bytes, key: str, thread_id: str) -> list[tuple[str, bytes]]:
    """The (master key name, wrapped data key) pairs of ``thread_id``'s key object, checked."""
    obj = codec.unpack_object(data, key, "thread-key", versions=(KEY_OBJECT_VERSION,))
    if obj.get("t") != thread_id:
        raise CorruptObjectError(key, f"the key object of thread {obj.get('t')!r:.80}")
    raw = obj.get("w")
    if not isinstance(raw, list) or not raw:
        raise CorruptObjectError(key, "a key object without wrappings")
    out: list[tuple[str, bytes]] = []
    for w in raw:
        pair = isinstance(w, list) and len(w) == 2
        if not (pair and isinstance(w[0], str) and isinstance(w[1], bytes)):
            raise CorruptObjectError(key, "a wrapping is not [master key name, bytes]")
        out.append((w[0], w[1]))
    return out


def open_key_object(data: bytes, key: str, thread_id: str, keys: Sequence[MasterKey]) -> ThreadKey:
    """The thread's keys from its key object, with the first master key that opens it."""
    return _opened(key_object_wrappings(data, key, thread_id), key, thread_id, keys)


def _opened(
    wrappings: Sequence[tuple[str, bytes]], key: str, thread_id: str, keys: Sequence[MasterKey]
) -> ThreadKey:
    data_key, reasons = unwrap_any(keys, thread_id, wrappings)
    if data_key is None:
        wrapped_by = ", ".join(name for name, _ in wrappings)
        configured = ", ".join(label_of(k) for k in keys) or "none"
        tried = f"; {'; '.join(reasons)}" if reasons else ""
        raise ThreadKeyError(
            thread_id,
            key,
            f"no configured master key opens it (wrapped by {wrapped_by}; configured: "
            f"{configured}{tried})",
            owner=scope_owner(thread_id),
        )
    if len(data_key) != DATA_KEY_LEN:
        raise CorruptObjectError(key, f"a data key of {len(data_key)} bytes")
    return ThreadKey(thread_id, data_key)


def rewrapped(
    data: bytes, key: str, thread_id: str, keys: Sequence[MasterKey], *, drop_old: bool
) -> bytes | None:
    """The key object wrapped by the current master key (``keys[0]``) too, the data key
    unchanged; None if it already is. ``drop_old`` keeps only the current wrapping."""
    wrappings = key_object_wrappings(data, key, thread_id)
    current = keys[0]
    has_current = any(answers_to(current, name) for name, _ in wrappings)
    if has_current and (not drop_old or len(wrappings) == 1):
        return None
    thread = _opened(wrappings, key, thread_id, keys)
    kept = [] if drop_old else [(n, w) for n, w in wrappings if not answers_to(current, n)]
    return _key_object(thread_id, [(current.name, current.wrap(thread_id, thread.data_key)), *kept])
