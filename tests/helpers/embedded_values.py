"""Addresses of objects embedded in manifests (format version 2), and damage to them."""

from __future__ import annotations

from objstore_saver.format import codec
from objstore_saver.storage.base import ObjectStore, PutMode


def in_url(address: str) -> str:
    """An address ``<manifest key>#<hex>`` as a URL path: ``#`` would start its fragment."""
    return address.replace("#", "%23")


def corrupt_embedded(store: ObjectStore, address: str) -> None:
    """Flip the last byte of the object embedded at ``<manifest key>#<hex>``, in place.

    The manifest still decodes, but no longer embeds an object of that
    SHA-256: a reader looks for it alone at ``objects/<H>``.
    """
    mkey, _, hexd = address.rpartition("#")
    data = store.get(mkey)
    assert data is not None, mkey
    body = codec.embedded_objects(codec.decode_manifest(data, mkey))[bytes.fromhex(hexd)]
    end = data.index(body) + len(body) - 1
    store.put(mkey, data[:end] + bytes([data[end] ^ 0x01]) + data[end + 1 :], PutMode.OVERWRITE)
