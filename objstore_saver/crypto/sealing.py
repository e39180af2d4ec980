"""Sealed objects: keyed content addresses and deterministic authenticated encryption.

docs/encryption.md, "Objects". A content object's address is the HMAC of
its plaintext under the thread's address key; its bytes are AES-256-SIV of
the plaintext, bound to the thread and the address. A keyed object
(manifest, write) is bound to its key instead. AES-SIV is deterministic:
equal plaintexts give equal bytes, so content addressing still stores an
object once and a retried create-only PUT finds its own bytes.
"""

from __future__ import annotations

import hashlib
import hmac

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

from objstore_saver.crypto.thread_keys import ThreadKey
from objstore_saver.errors import CorruptObjectError
from objstore_saver.format import codec

#: The algorithm a sealed object names.
ALGORITHM = "aes-256-siv"
#: Version of the sealed envelope.
SEALED_VERSION = 1
_LABEL = b"objstore-saver v1"


def address(thread: ThreadKey, plaintext: bytes) -> bytes:
    """A content object's address: HMAC-SHA256 of its plaintext under the thread's key."""
    return hmac.new(thread.address_key, plaintext, hashlib.sha256).digest()


def _envelope(ciphertext: bytes) -> bytes:
    return codec.pack_object({"f": SEALED_VERSION, "k": "sealed", "a": ALGORITHM, "c": ciphertext})


def is_sealed(data: bytes) -> bool:
    """Whether ``data`` is a sealed envelope (decided without any key)."""
    try:
        return codec.unpack_object(data, "", versions=codec.CHECKPOINT_VERSIONS)["k"] == "sealed"
    except CorruptObjectError:
        return False


def _ciphertext(data: bytes, key: str) -> bytes:
    # Any object's versions: a plain object is told apart by its kind, not its version.
    obj = codec.unpack_object(data, key, versions=codec.CHECKPOINT_VERSIONS)
    if obj.get("k") != "sealed":
        raise CorruptObjectError(key, "a plain object where a sealed one is expected")
    if obj["f"] != SEALED_VERSION or obj.get("a") != ALGORITHM:
        raise CorruptObjectError(
            key, f"sealed with {obj.get('a')!r} version {obj['f']!r}, not known"
        )
    c = obj.get("c")
    if not isinstance(c, bytes):
        raise CorruptObjectError(key, "a sealed object without ciphertext")
    return c


def seal_object(thread: ThreadKey, digest: bytes, plaintext: bytes) -> bytes:
    """The stored bytes of a content object whose address is ``digest``."""
    ad = [_LABEL, b"obj", thread.thread_id.encode(), digest]
    return _envelope(AESSIV(thread.object_key).encrypt(plaintext, ad))


def open_object(thread: ThreadKey, digest: bytes, data: bytes, key: str) -> bytes:
    """The plaintext of a content object, its address checked.

    Raises:
        CorruptObjectError: not sealed, sealed for another thread or address,
            altered, or its plaintext does not hash to ``digest`` (named by ``key``).
    """
    ad = [_LABEL, b"obj", thread.thread_id.encode(), digest]
    try:
        plaintext = AESSIV(thread.object_key).decrypt(_ciphertext(data, key), ad)
    except InvalidTag as exc:
        raise CorruptObjectError(
            key,
            "does not open with this thread's key at this address (moved, altered or "
            "another thread's)",
        ) from exc
    if not hmac.compare_digest(address(thread, plaintext), digest):
        raise CorruptObjectError(key, "its plaintext does not hash to its address")
    return plaintext


def seal_keyed(thread: ThreadKey, name: str, plaintext: bytes) -> bytes:
    """The stored bytes of a keyed object (manifest, write) at ``name``, its key in the thread."""
    ad = [_LABEL, b"key", thread.thread_id.encode(), name.encode()]
    return _envelope(AESSIV(thread.keyed_key).encrypt(plaintext, ad))


def open_keyed(thread: ThreadKey, name: str, data: bytes, key: str) -> bytes:
    """The plaintext of a keyed object sealed for ``name``.

    Raises:
        CorruptObjectError: not sealed, or sealed for another key or thread, or
            altered (named by ``key``).
    """
    ad = [_LABEL, b"key", thread.thread_id.encode(), name.encode()]
    try:
        return AESSIV(thread.keyed_key).decrypt(_ciphertext(data, key), ad)
    except InvalidTag as exc:
        raise CorruptObjectError(
            key,
            "does not open with this thread's key under this name (moved, altered or "
            "another thread's)",
        ) from exc
