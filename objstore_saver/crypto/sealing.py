"""Sealed objects and sealed names: deterministic authenticated encryption (AES-256-SIV).

docs/encryption.md, "Objects". Deterministic: equal plaintexts give equal bytes, so
content addressing still stores an object once and a retried create-only PUT finds
its own bytes.
"""

from __future__ import annotations

import binascii

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

from objstore_saver.crypto.names import scope_owner
from objstore_saver.crypto.thread_keys import ThreadKey
from objstore_saver.errors import CorruptObjectError
from objstore_saver.format import codec
from objstore_saver.format.keys import SEALED_NAME_LEN

ALGORITHM = "aes-256-siv"
SEALED_VERSION = 1
_LABEL = b"objstore-saver v1"


def sealed_name(thread: ThreadKey, digest: bytes) -> str:
    """The stored name (96 hex digits) of the content object whose address is ``digest``."""
    return thread.name_siv.encrypt(digest, [_LABEL, b"name", thread.thread_id.encode()]).hex()


def opened_name(thread: ThreadKey, name: str) -> bytes | None:
    """The address a sealed name stands for; None if the thread's key did not make it."""
    if len(name) != SEALED_NAME_LEN:
        return None
    try:
        raw = bytes.fromhex(name)
        return thread.name_siv.decrypt(raw, [_LABEL, b"name", thread.thread_id.encode()])
    except (ValueError, binascii.Error, InvalidTag):
        return None


def envelope_key(data: bytes, key: str) -> tuple[int, bytes | None]:
    """The epoch (field ``e``, spec §4.10) and data key id (field ``i``, None if absent) that
    sealed an object, read without any key: they choose the key that opens it."""
    obj = _envelope_fields(data, key)
    epoch = obj.get("e", 0)
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
        raise CorruptObjectError(key, f"a sealed object's epoch is {epoch!r:.40}")
    sealed_by = obj.get("i")
    return epoch, sealed_by if isinstance(sealed_by, bytes) else None


def is_sealed(data: bytes) -> bool:
    """Whether ``data`` is a sealed envelope (decided without any key)."""
    try:
        obj = codec.unpack_object(data, "", versions=codec.CHECKPOINT_VERSIONS, sealed=True)
        return obj["k"] == "sealed"
    except CorruptObjectError:
        return False


def _envelope_fields(data: bytes, key: str) -> dict[str, object]:
    if not data:
        raise CorruptObjectError(key, "empty where a sealed object is expected")
    # Any object's versions: a plain object is told apart by its kind, not its version.
    obj = codec.unpack_object(data, key, versions=codec.CHECKPOINT_VERSIONS, sealed=True)
    if obj.get("k") != "sealed":
        raise CorruptObjectError(key, "a plain object where a sealed one is expected")
    if obj["f"] != SEALED_VERSION or obj.get("a") != ALGORITHM:
        raise CorruptObjectError(
            key, f"sealed with {obj.get('a')!r} version {obj['f']!r}, not known"
        )
    return obj


def _bound(thread: ThreadKey, at: bytes | str) -> tuple[AESSIV, list[bytes]]:
    """The cipher and associated data binding an object to the thread and ``at``."""
    if isinstance(at, bytes):
        return thread.object_siv, [_LABEL, b"obj", thread.thread_id.encode(), at]
    return thread.keyed_siv, [_LABEL, b"key", thread.thread_id.encode(), at.encode()]


def seal(thread: ThreadKey, at: bytes | str, plaintext: bytes) -> bytes:
    """The stored bytes of a content object whose address is ``at`` (bytes), or of a keyed
    object (manifest, write, item...) whose name in the thread is ``at`` (a str)."""
    siv, ad = _bound(thread, at)
    fields: dict[str, object] = {"f": SEALED_VERSION, "k": "sealed", "a": ALGORITHM}
    fields["i"] = thread.key_id
    if thread.epoch:
        fields["e"] = thread.epoch
    fields["c"] = siv.encrypt(plaintext, ad)
    return codec.pack_object(fields)


def unseal(thread: ThreadKey, at: bytes | str, data: bytes, key: str) -> bytes:
    """The plaintext of an object sealed for ``at`` (CorruptObjectError if not, or altered)."""
    fields = _envelope_fields(data, key)
    sealed_by = fields.get("i")  # absent in envelopes sealed before it was named
    if sealed_by is not None and sealed_by != thread.key_id:
        shown = sealed_by.hex() if isinstance(sealed_by, bytes) else repr(sealed_by)[:40]
        raise CorruptObjectError(
            key,
            f"does not open with the key of {scope_owner(thread.thread_id)}: it was sealed "
            f"with data key {shown}, its key object holds data key {thread.key_id.hex()} "
            "(moved from another thread or namespace, or objects under two keys: a key "
            "object replaced, or objects restored from another copy)",
        )
    ciphertext = fields.get("c")
    if not isinstance(ciphertext, bytes):
        raise CorruptObjectError(key, "a sealed object without ciphertext")
    siv, ad = _bound(thread, at)
    try:
        return siv.decrypt(ciphertext, ad)
    except InvalidTag as exc:
        bound_to = "at this address" if isinstance(at, bytes) else "under this name"
        raise CorruptObjectError(
            key,
            f"does not open with the key of its thread (or store namespace) {bound_to} "
            "(moved, altered, or another thread's or namespace's)",
        ) from exc
