"""Client-side encryption of the long-term store (docs/encryption.md), on every backend.

Each test fails if the encrypted store reads back anything but what was written,
stores a readable byte of an item, lets a moved or plain object through, reads a
namespace whose key was destroyed, or shares one key between namespaces.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from backends import Backend
from langgraph.store.memory import InMemoryStore

from objstore_saver import ObjectStoreSaver, ObjectStoreStore
from objstore_saver.crypto import ClientEncryption
from objstore_saver.crypto.master_keys import LocalMasterKey
from objstore_saver.crypto.names import key_object_key
from objstore_saver.errors import (
    CorruptObjectError,
    EncryptedObjectError,
    ThreadKeyError,
    ThreadKeyMissingError,
)
from objstore_saver.format import codec, store_keys
from objstore_saver.storage import MeteredStore, ObjectStore, PutMode

pytestmark = pytest.mark.backends("local", "s3-lean", "s3-boto3")

SECRET = "the vault code is 4711"
U1, U2 = ("users", "u1"), ("users", "u2")


def _settings() -> ClientEncryption:
    return ClientEncryption.of(LocalMasterKey(os.urandom(32)))


def _everything(store: ObjectStore, prefix: str = "") -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    after = None
    while True:
        page = store.list(prefix, start_after=after)
        out.update((o.key, store.get(o.key)) for o in page.objects)
        if not page.truncated or not page.objects:
            return out
        after = page.objects[-1].key


def _fill(store: Any) -> None:
    store.put(U1, "prefs", {"note": SECRET, "theme": "dark"})
    store.put(U1, "food", {"likes": ["tea", SECRET]})
    store.put(U2, "prefs", {"note": SECRET, "theme": "dark"})  # equal to u1's
    store.put(U2, "gone", {"x": 1})
    store.delete(U2, "gone")
    store.put(("teams",), "t", {"members": ["u1", "u2"]})


def _seen(store: Any) -> Any:
    return (
        [(i.namespace, i.key, i.value) for i in store.search(("users",), limit=50)],
        [(i.key, i.value) for i in store.search(U1, filter={"theme": "dark"})],
        store.list_namespaces(),
        store.get(U2, "gone"),
        store.get(U1, "food").value,
    )


def test_items_and_index_are_sealed_with_a_key_per_namespace(backend: Backend) -> None:
    raw = backend.store()
    settings = _settings()
    with ObjectStoreStore(raw, client_encryption=settings) as store:
        _fill(store)
        ours = _seen(store)
    reference = InMemoryStore()
    _fill(reference)
    assert ours == _seen(reference)

    stored = _everything(raw)
    keys_ = sorted(k for k in stored if k.startswith("keys/"))
    assert keys_ == sorted(
        key_object_key("store/" + store_keys.namespace_path(ns)) for ns in (U1, U2, ("teams",))
    )
    data = {k: v for k, v in stored.items() if k.startswith("store/")}
    assert {k.split("/")[1] for k in data} == {"it", "ix"}
    for key, body in data.items():
        with pytest.raises(EncryptedObjectError, match=key):
            codec.unpack_object(body, key)
        assert SECRET.encode() not in body and b"dark" not in body, key
    # Equal items of two namespaces share nothing: their stored bytes differ.
    u1_prefs, u2_prefs = (stored[store_keys.item_key(ns, "prefs")] for ns in (U1, U2))
    assert u1_prefs != u2_prefs
    with ObjectStoreStore(backend.store(), client_encryption=settings) as fresh:  # a cold process
        assert _seen(fresh) == ours


def test_async_batches_seal_and_open_alike(backend: Backend) -> None:
    raw = backend.store()
    settings = _settings()

    async def run() -> Any:
        with ObjectStoreStore(raw, client_encryption=settings) as store:
            await store.aput(U1, "prefs", {"note": SECRET})
            await asyncio.gather(*(store.aput(U2, f"k{n}", {"n": n}) for n in range(8)))
            found = await store.asearch(U2, limit=20)
            return (await store.aget(U1, "prefs")), sorted(i.value["n"] for i in found)

    got, numbers = asyncio.run(run())
    assert got is not None and got.value == {"note": SECRET}
    assert numbers == list(range(8))
    stored = _everything(raw, "keys/")
    assert len(stored) == 2  # eight concurrent first writes of u2 made one key object


def test_a_moved_swapped_or_plain_object_is_refused(backend: Backend) -> None:
    raw = backend.store()
    settings = _settings()
    with ObjectStoreStore(raw, client_encryption=settings) as store:
        _fill(store)
    u1_prefs, u2_prefs = store_keys.item_key(U1, "prefs"), store_keys.item_key(U2, "prefs")
    u1_food = store_keys.item_key(U1, "food")
    sealed_u1 = raw.get(u1_prefs)
    raw.put(u2_prefs, sealed_u1)  # another namespace's object
    raw.put(u1_food, sealed_u1)  # another key's object, same namespace
    with ObjectStoreStore(raw, client_encryption=settings) as store:
        for ns, key, where in ((U2, "prefs", u2_prefs), (U1, "food", u1_food)):
            with pytest.raises(CorruptObjectError, match="does not open") as raised:
                store.get(ns, key)
            assert where in str(raised.value)
        raw.put(u1_prefs, codec.pack_object({"f": 1, "k": "item"}))  # plain where sealed belongs
        with pytest.raises(CorruptObjectError, match="a plain object where a sealed one"):
            store.get(U1, "prefs")


def test_without_the_key_or_with_another_nothing_is_read(backend: Backend) -> None:
    raw = backend.store()
    with ObjectStoreStore(raw, client_encryption=_settings()) as store:
        _fill(store)
    with ObjectStoreStore(backend.store(), client_encryption=_settings()) as other:
        with pytest.raises(ThreadKeyError, match=r"namespace path '_users/_u1'.*no configured"):
            other.get(U1, "prefs")
        with pytest.raises(ThreadKeyError, match="no configured master key opens it"):
            other.search(("users",))
    with ObjectStoreStore(backend.store(), client_encryption=False) as clear:
        with pytest.raises(EncryptedObjectError, match=store_keys.item_key(U1, "prefs")):
            clear.get(U1, "prefs")
        with pytest.raises(EncryptedObjectError):
            clear.search(U1)


def test_deleting_a_namespace_key_object_shreds_that_namespace_alone(backend: Backend) -> None:
    raw = backend.store()
    settings = _settings()
    with ObjectStoreStore(raw, client_encryption=settings) as store:
        _fill(store)
    u1_key = key_object_key("store/" + store_keys.namespace_path(U1))
    raw.delete([u1_key])
    with ObjectStoreStore(backend.store(), client_encryption=settings) as store:
        with pytest.raises(ThreadKeyMissingError, match=r"namespace path '_users/_u1'") as raised:
            store.get(U1, "prefs")
        assert raised.value.key == u1_key
        with pytest.raises(ThreadKeyMissingError):
            store.search(U1)  # never an empty answer for a namespace that has objects
        got = store.get(U2, "prefs")
        assert got is not None and got.value["note"] == SECRET


def test_a_namespace_never_written_reads_as_absent_and_writes_no_key(backend: Backend) -> None:
    raw = backend.store()
    metered = MeteredStore(raw)
    with ObjectStoreStore(metered, client_encryption=_settings()) as store:
        assert store.get(("nobody",), "k") is None
        assert store.search(("nobody",)) == []
    assert _everything(raw) == {}
    assert metered.snapshot().put_requests == 0


def test_a_store_on_an_encrypting_savers_store_seals_once(backend: Backend) -> None:
    raw = backend.store()
    settings = _settings()
    with ObjectStoreSaver(raw, client_encryption=settings) as saver:
        with ObjectStoreStore(saver.store) as store:  # the environment names no key here
            assert store.store is saver.store and store.client_encryption is settings
            store.put(U1, "prefs", {"note": SECRET})
        with ObjectStoreStore(raw, client_encryption=settings) as again:
            got = again.get(U1, "prefs")
            assert got is not None and got.value == {"note": SECRET}


def test_verify_reports_an_altered_encrypted_object_and_goes_on(backend: Backend) -> None:
    raw = backend.store()
    settings = _settings()
    with ObjectStoreStore(raw, client_encryption=settings) as store:
        _fill(store)
    with ObjectStoreSaver(raw, client_encryption=settings) as saver:
        assert saver.verify(read_data=True).ok
        item = store_keys.item_key(U1, "prefs")
        body = bytearray(raw.get(item))
        body[-1] ^= 1
        raw.put(item, bytes(body), PutMode.OVERWRITE)
        report = saver.verify(read_data=True)
    assert [(p.key, p.kind) for p in report.problems] == [(item, "unreadable")]
    assert "does not open" in report.problems[0].detail
    assert report.store_items == 3  # the others still read and counted
