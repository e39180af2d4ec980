"""Client-side encryption in the saver (docs/encryption.md), on every backend.

Each test fails if the encrypted saver reads back anything but what was
written, stores a readable byte of a message, lets a moved or plain object
through, reads a thread whose key was destroyed, or stops keeping the
increments (equal values stored once in a thread, shared by no other).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import zstandard
from backends import Backend
from deleted import not_tombstones
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from ops_helpers import chat_graph

from objstore_saver import ObjectStoreSaver
from objstore_saver.crypto import ClientEncryption
from objstore_saver.crypto.master_keys import KmsMasterKey, LocalMasterKey
from objstore_saver.crypto.sealed_store import key_object_key
from objstore_saver.crypto.thread_keys import ThreadKey, open_key_object
from objstore_saver.errors import (
    ConfigurationError,
    CorruptObjectError,
    EncryptedObjectError,
    ThreadKeyError,
    ThreadKeyMissingError,
)
from objstore_saver.format import codec
from objstore_saver.longterm import ObjectStoreStore
from objstore_saver.storage import LocalStore, MeteredStore, ObjectStore, PutMode

TURNS = 6


def _settings(key_store: ObjectStore | None = None) -> ClientEncryption:
    return ClientEncryption.of(LocalMasterKey(os.urandom(32)), key_store=key_store)


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


#: A tool result large enough to be stored as objects of its own (spec §4.3), the
#: same in every thread: in clear, two threads would store it under one address.
LARGE = "secret attachment " + bytes(range(256)).hex() * 1200


def _chat(
    saver: Any,
    thread: str,
    turns: int = TURNS,
    start: int = 0,
    large: bool = False,
    durability: str = "async",
) -> list[Any]:
    graph = chat_graph(saver)
    for t in range(start, start + turns):
        text = f"secret question {thread} {t} " + "q" * 200
        if large and t == start:
            text += LARGE
        graph.invoke({"messages": [("user", text)]}, _cfg(thread), durability=durability)
    return list(graph.get_state(_cfg(thread)).values["messages"])


def _texts(messages: list[Any]) -> list[str]:
    return [m.content for m in messages]


def _everything(store: ObjectStore) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    after = None
    while True:
        page = store.list("", start_after=after)
        for o in page.objects:
            out[o.key] = store.get(o.key)
        if not page.truncated or not page.objects:
            return out
        after = page.objects[-1].key


def test_an_encrypted_chat_reads_back_as_in_memory(backend: Backend) -> None:
    store = backend.store()
    settings = _settings()
    with ObjectStoreSaver(store, client_encryption=settings) as saver:
        ours = _chat(saver, "t1")
        history = [t.checkpoint["id"] for t in saver.list(_cfg("t1"))]
    reference = _chat(InMemorySaver(), "t1")
    assert _texts(ours) == _texts(reference)
    with ObjectStoreSaver(store, client_encryption=settings) as fresh:  # a cold process
        again = fresh.get_tuple(_cfg("t1"))
        assert again is not None
        assert _texts(again.checkpoint["channel_values"]["messages"]) == _texts(ours)
        assert [t.checkpoint["id"] for t in fresh.list(_cfg("t1"))] == history
    assert key_object_key("_t1") in {o.key for o in store.list("keys/").objects}


def test_no_stored_byte_reveals_a_message(backend: Backend) -> None:
    store = backend.store()
    with ObjectStoreSaver(store, client_encryption=_settings()) as saver:
        _chat(saver, "t1", large=True)
    stored = _everything(store)
    assert stored
    for key, data in stored.items():
        if key.startswith("keys/") or "/runs/" in key or not data:
            continue  # key objects hold wrapped keys only; run markers are empty
        # The project's own decoder, key absent: every object is sealed.
        with pytest.raises(EncryptedObjectError) as info:
            codec.unpack_object(data, key, versions=codec.CHECKPOINT_VERSIONS)
        assert info.value.key == key
        for candidate in (data, *_decompressions(data)):
            assert b"secret" not in candidate, key
            assert b"qqqqqqqqqq" not in candidate, key
            assert bytes(range(256)).hex()[:64].encode() not in candidate, key


def _decompressions(data: bytes) -> list[bytes]:
    """Whatever zstd or zlib would make of the bytes or any suffix a frame could start at."""
    out = []
    for start in range(0, len(data) - 4):
        if data[start : start + 4] == b"\x28\xb5\x2f\xfd":
            with contextlib.suppress(zstandard.ZstdError):
                out.append(zstandard.ZstdDecompressor().decompress(data[start:], 1 << 24))
    with contextlib.suppress(zlib.error):
        out.append(zlib.decompress(data))
    return out


def test_equal_values_are_stored_once_in_a_thread_and_shared_by_no_other(tmp_path: Any) -> None:
    store = MeteredStore(LocalStore(tmp_path / "s"))
    settings = _settings()
    with ObjectStoreSaver(store, client_encryption=settings) as saver:
        _chat(saver, "a", turns=3, large=True)
        store.reset()
        _chat(saver, "a", turns=1, start=3)
        one_turn = store.snapshot()
        _chat(saver, "b", turns=3, large=True)
    names = {
        t: {o.key.rsplit("/", 1)[1] for o in store.inner.list(f"threads/_{t}/objects/").objects}
        for t in ("a", "b")
    }
    assert names["a"] and names["b"]
    assert not names["a"] & names["b"]  # equal content, nothing shared
    assert all(len(n) == 96 for n in names["a"])  # sealed names, not addresses
    assert one_turn.put_requests <= 6  # a turn writes only what is new


def test_turns_make_the_same_requests_as_in_clear(backend: Backend) -> None:
    counts = {}
    for mode in ("clear", "sealed"):
        store = MeteredStore(backend.store(f"{mode}/"))
        settings = _settings() if mode == "sealed" else False
        with ObjectStoreSaver(store, client_encryption=settings) as saver:
            graph = chat_graph(saver)
            per_turn = []
            for t in range(4):
                store.reset()
                graph.invoke({"messages": [("user", f"q{t}")]}, _cfg("t"))
                per_turn.append(store.snapshot().requests)
        counts[mode] = per_turn
    first_clear, first_sealed = counts["clear"][0], counts["sealed"][0]
    assert first_sealed == {**first_clear, "put": first_clear["put"] + 1}  # the key object
    assert counts["sealed"][1:] == counts["clear"][1:]


def test_stats_count_what_the_store_sees(backend: Backend) -> None:
    """saver.stats() includes the sealing layer's work: key object requests, envelope bytes."""
    store = MeteredStore(backend.store())
    settings = _settings()
    with ObjectStoreSaver(store, client_encryption=settings) as writer:
        _chat(writer, "t1", turns=3, large=True)
        _assert_same_work(writer.stats(), store)
    store.reset()
    with ObjectStoreSaver(store, client_encryption=settings) as reader:  # a cold process
        assert reader.get_tuple(_cfg("t1")) is not None
        assert len(list(reader.list(_cfg("t1")))) > 3
        _assert_same_work(reader.stats(), store)
        assert reader.stats().requests["get"] >= 2  # the key object's GET is one of them
        reader.reset_stats()
        store.reset()
        reader.delete_thread("t1")
        _assert_same_work(reader.stats(), store)


def _assert_same_work(stats: Any, store: MeteredStore) -> None:
    meter = store.snapshot()
    assert stats.requests == meter.requests
    assert (stats.bytes_sent, stats.bytes_received) == (meter.bytes_sent, meter.bytes_received)
    assert stats.create_conflicts == meter.create_conflicts


@pytest.mark.parametrize("attack", ["manifest swapped", "object moved", "other thread's"])
def test_a_moved_or_swapped_object_is_an_error_never_a_value(attack: str, tmp_path: Any) -> None:
    raw = LocalStore(tmp_path / "s")
    settings = _settings()
    with ObjectStoreSaver(raw, client_encryption=settings) as saver:
        # Sync durability: LangGraph's default writes a checkpoint while the next
        # step runs, so which objects a run leaves would depend on the timing.
        _chat(saver, "t1", turns=3, large=True, durability="sync")
        _chat(saver, "t2", turns=3, durability="sync")
    stored = _everything(raw)
    manifests = sorted(k for k in stored if k.startswith("threads/_t1/") and k.endswith(".2"))
    # The objects a reader of every checkpoint GETs (an object no read reaches,
    # such as one a racing write left, would prove nothing when moved).
    reading = MeteredStore(raw, log=True)
    with ObjectStoreSaver(reading, client_encryption=settings) as reader:
        for t in reader.list(_cfg("t1")):
            reader.get_tuple({"configurable": {**t.config["configurable"]}})
    read = {e.key for e in reading.log if e.op == "get"}
    objects = sorted(k for k in stored if k.startswith("threads/_t1/objects/"))
    reached = [k for k in objects if k in read]
    if attack == "manifest swapped":
        raw.put(manifests[0], stored[manifests[1]])  # the newest now holds another's bytes
    elif attack == "object moved":
        assert reached and len(objects) >= 2
        raw.put(reached[0], stored[next(k for k in objects if k != reached[0])])
    else:
        other = sorted(k for k in stored if k.startswith("threads/_t2/") and k.endswith(".2"))
        raw.put(manifests[0], stored[other[0]])
    with ObjectStoreSaver(raw, client_encryption=settings) as fresh:
        with pytest.raises(CorruptObjectError) as info:
            for t in fresh.list(_cfg("t1")):
                fresh.get_tuple({"configurable": {**t.config["configurable"]}})
        assert info.value.key.startswith("threads/_t1/")


def test_a_plain_object_in_an_encrypted_thread_is_refused(tmp_path: Any) -> None:
    raw = LocalStore(tmp_path / "s")
    settings = _settings()
    with ObjectStoreSaver(raw, client_encryption=settings) as saver:
        _chat(saver, "t1", turns=2)
    with ObjectStoreSaver(raw, client_encryption=False) as plain:
        _chat(plain, "t2", turns=2)
    head = sorted(o.key for o in raw.list("threads/_t1/").objects if o.key.endswith(".2"))[0]
    plain_manifest = sorted(
        o.key for o in raw.list("threads/_t2/").objects if o.key.endswith(".2")
    )[0]
    raw.put(head, raw.get(plain_manifest))
    with ObjectStoreSaver(raw, client_encryption=settings) as fresh:
        with pytest.raises(CorruptObjectError, match="plain object where a sealed one"):
            fresh.get_tuple(_cfg("t1"))
        # A thread written in clear has no key object: refused, named.
        with pytest.raises(ThreadKeyMissingError) as info:
            fresh.get_tuple(_cfg("t2"))
        assert info.value.thread_id == "t2" and info.value.key == "keys/threads/_t2"


def test_objects_under_two_keys_fail_naming_both(tmp_path: Any) -> None:
    """A thread whose key object was replaced holds objects under two data keys:
    reading an object of the first fails naming both keys, never as a value."""
    raw = LocalStore(tmp_path / "s")
    settings = _settings()
    with ObjectStoreSaver(raw, client_encryption=settings) as saver:
        first = _put_value(saver, "t1", "under the first key")
    first_key = raw.get(key_object_key("_t1"))
    raw.delete([key_object_key("_t1")])  # replaced: a new key comes with the next write
    with ObjectStoreSaver(raw, client_encryption=settings) as other:
        _put_value(other, "t1", "under the second key")
        second_key = raw.get(key_object_key("_t1"))
        assert second_key != first_key
        with pytest.raises(CorruptObjectError) as info:
            other.get_tuple(first)
    ids = [
        ThreadKey("_t1", k).key_id.hex()
        for k in (
            open_key_object(first_key, key_object_key("_t1"), "_t1", settings.master_keys).data_key,
            open_key_object(
                second_key, key_object_key("_t1"), "_t1", settings.master_keys
            ).data_key,
        )
    ]
    message = str(info.value)
    assert "two keys" in message and all(i in message for i in ids), message


def test_without_the_key_or_with_another_reads_fail_naming_the_thread(tmp_path: Any) -> None:
    raw = LocalStore(tmp_path / "s")
    with ObjectStoreSaver(raw, client_encryption=_settings()) as saver:
        _chat(saver, "t1", turns=2, large=True)
    nokey = ObjectStoreSaver(raw, client_encryption=False)
    with nokey:
        with pytest.raises(EncryptedObjectError, match="OBJSTORE_SAVER_ENCRYPTION_KEY"):
            nokey.get_tuple(_cfg("t1"))
        # verify says what it cannot open, and why: no problem names a value.
        report = nokey.verify("t1", read_data=True)
        kinds = {(p.kind, "encrypted" in p.detail) for p in report.problems}
        assert kinds == {("unreadable", True), ("unknown-key", True)}, report.problems
    with ObjectStoreSaver(raw, client_encryption=_settings()) as stranger:
        with pytest.raises(ThreadKeyError) as info:
            stranger.get_tuple(_cfg("t1"))
        assert info.value.thread_id == "_t1" and "no configured master key" in str(info.value)
        with pytest.raises(ThreadKeyError):
            _chat(stranger, "t1", turns=1, start=2)  # nor writes to it


def test_delete_thread_shreds_the_copies_kept_elsewhere(backend: Backend, tmp_path: Any) -> None:
    store = backend.store()
    key_store = LocalStore(tmp_path / "keys")  # key objects in a store of their own
    settings = _settings(key_store)
    with ObjectStoreSaver(store, client_encryption=settings) as saver:
        _chat(saver, "t1", turns=3)
        _chat(saver, "t2", turns=2)
        backup = {k: v for k, v in _everything(store).items() if k.startswith("threads/_t1/")}
        assert backup and key_object_key("_t1") in {o.key for o in key_store.list("").objects}
        saver.delete_thread("t1")
        assert not not_tombstones(store.list("threads/_t1/").objects)
        assert key_object_key("_t1") not in {o.key for o in key_store.list("").objects}
    for k, v in backup.items():  # a backup restored
        store.put(k, v, PutMode.OVERWRITE)
    with ObjectStoreSaver(store, client_encryption=settings) as fresh:
        assert fresh.get_tuple(_cfg("t1")) is None  # beside the tombstone: deleted still
    # The backup restored whole: the thread as before the delete, no tombstone.
    store.delete([o.key for o in store.list("threads/_t1/").objects if "/-" in o.key])
    with ObjectStoreSaver(store, client_encryption=settings) as fresh:
        with pytest.raises(ThreadKeyMissingError) as info:
            fresh.get_tuple(_cfg("t1"))
        assert info.value.thread_id == "t1"
        with pytest.raises(ThreadKeyMissingError):
            list(fresh.list(_cfg("t1")))
        assert fresh.get_tuple(_cfg("t2")) is not None  # the other thread is untouched
        report = fresh.verify("t1", read_data=True)
        assert [p.kind for p in report.problems] == ["unreadable"]
        assert "key object of thread '_t1' is missing" in report.problems[0].detail
        # Only the leftovers a delete stopped short of: counted, not a problem.
        store.delete([k for k in backup if "/checkpoints/" in k and k.endswith(".2")])
        report = fresh.verify("t1", read_data=True)
        assert report.ok and report.shredded_leftovers > 0, report
        fresh.delete_thread("t1")
        assert not not_tombstones(store.list("threads/_t1/").objects)


def test_two_first_writers_agree_on_one_key(tmp_path: Any) -> None:
    raw = LocalStore(tmp_path / "s")
    settings = _settings()
    a = ObjectStoreSaver(raw, client_encryption=settings)
    b = ObjectStoreSaver(raw, client_encryption=settings)
    _chat(a, "t1", turns=1)
    # b never saw the thread: its first write meets the key object and uses it.
    b.put_writes(
        {"configurable": {**a.get_tuple(_cfg("t1")).config["configurable"]}},
        [("messages", "from b")],
        "task-b",
    )
    for saver in (a, b, ObjectStoreSaver(raw, client_encryption=settings)):
        got = saver.get_tuple(_cfg("t1"))
        assert got is not None and ("task-b", "messages", "from b") in got.pending_writes
    assert [o.key for o in raw.list("keys/").objects] == ["keys/threads/_t1"]


def test_the_async_api_and_copy_thread_reseal(tmp_path: Any) -> None:
    raw = LocalStore(tmp_path / "s")
    settings = _settings()

    async def run() -> list[str]:
        async with ObjectStoreSaver(raw, client_encryption=settings) as saver:
            graph = chat_graph(saver)
            for t in range(3):
                await graph.ainvoke({"messages": [("user", f"async {t}")]}, _cfg("t1"))
            await saver.acopy_thread("t1", "t9")
            await saver.adelete_thread("t1")
            state = await graph.aget_state(_cfg("t9"))
            return _texts(state.values["messages"])

    texts = asyncio.run(run())
    assert [t for t in texts if t.startswith("async")] == ["async 0", "async 1", "async 2"]
    assert {o.key for o in raw.list("keys/").objects} == {"keys/threads/_t9"}
    with ObjectStoreSaver(raw, client_encryption=settings) as fresh:
        assert _texts(fresh.get_tuple(_cfg("t9")).checkpoint["channel_values"]["messages"])


def _put_value(saver: ObjectStoreSaver, thread: str, value: str, parent: Any = None) -> Any:
    config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    if parent is not None:
        config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    cp = empty_checkpoint()
    cp["channel_values"] = {"doc": value}
    cp["channel_versions"] = {"doc": 1 if parent is None else 2}
    return saver.put(config, cp, {"step": 0}, {"doc": cp["channel_versions"]["doc"]})


def test_prune_sweeps_and_verify_checks_an_encrypted_thread(tmp_path: Any) -> None:
    raw = LocalStore(tmp_path / "s")
    settings = _settings()
    with ObjectStoreSaver(raw, client_encryption=settings, prune_grace=timedelta(0)) as saver:
        second_value = os.urandom(300_000).hex()  # stands alone: incompressible, large
        first = _put_value(saver, "t1", os.urandom(300_000).hex())
        _put_value(saver, "t1", second_value, parent=first)
        assert saver.verify("t1", read_data=True).ok
        objects_before = {o.key for o in saver.store.list("threads/_t1/objects/").objects}
        for later in (timedelta(0), timedelta(hours=2)):  # mark, then sweep after the delay
            plan = saver._prune_plan(
                ["t1"], "keep_latest", 1, 0.0, False, now=datetime.now(UTC) + later
            )
            saver._driver.run(plan)
        assert len(list(saver.list(_cfg("t1")))) == 1
        report = saver.verify("t1", read_data=True)
        assert report.ok, report
        objects_after = {o.key for o in saver.store.list("threads/_t1/objects/").objects}
        assert objects_after and objects_after < objects_before  # the first value was swept
        assert all(len(k.rsplit("/", 1)[1]) == 64 for k in objects_after)  # addresses again
        stored = {o.key for o in raw.list("threads/_t1/objects/").objects}
        assert len(stored) == len(objects_after) and all(len(k) > 96 for k in stored)
    with ObjectStoreSaver(raw, client_encryption=settings) as fresh:
        got = fresh.get_tuple(_cfg("t1"))
        assert got is not None and got.checkpoint["channel_values"]["doc"] == second_value


def test_the_environment_turns_encryption_on_for_every_constructor(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = base64.b64encode(os.urandom(32)).decode()
    monkeypatch.setenv("OBJSTORE_SAVER_ENCRYPTION_KEY", key)
    monkeypatch.setenv("OBJSTORE_SAVER_KEYS_URL", (tmp_path / "keys").as_uri())
    with ObjectStoreSaver.from_url((tmp_path / "data").as_uri()) as saver:
        _chat(saver, "t1", turns=2)
        assert saver.client_encryption is not None
    assert [o.key for o in LocalStore(tmp_path / "keys").list("").objects] == ["keys/threads/_t1"]
    with ObjectStoreSaver.from_directory(tmp_path / "data") as again:
        assert again.get_tuple(_cfg("t1")) is not None
    plain = ObjectStoreSaver.from_directory(tmp_path / "data", client_encryption=False)
    with plain, pytest.raises(EncryptedObjectError):
        plain.get_tuple(_cfg("t1"))
    # The long-term store's constructors too: its key objects go to the key store.
    with ObjectStoreStore.from_directory(tmp_path / "memories") as memories:
        memories.put(("users", "u1"), "prefs", {"theme": "dark"})
        assert memories.client_encryption is not None
    assert "keys/store/_users/_u1/k" in {
        o.key for o in LocalStore(tmp_path / "keys").list("keys/store/").objects
    }
    clear = ObjectStoreStore.from_directory(tmp_path / "memories", client_encryption=False)
    with clear, pytest.raises(EncryptedObjectError):
        clear.get(("users", "u1"), "prefs")
    monkeypatch.delenv("OBJSTORE_SAVER_ENCRYPTION_KEY")
    with pytest.raises(ConfigurationError, match="OBJSTORE_SAVER_KEYS_URL"):
        ObjectStoreSaver.from_directory(tmp_path / "data")
    monkeypatch.delenv("OBJSTORE_SAVER_KEYS_URL")
    with pytest.raises(ConfigurationError, match="OBJSTORE_SAVER_ENCRYPTION_KEY"):
        ObjectStoreSaver.from_directory(tmp_path / "data", client_encryption=True)


def test_a_kms_master_key_serves_the_saver_sync_and_async(backend: Backend, kms: Any) -> None:
    key_id = kms.create_key()["KeyMetadata"]["KeyId"]
    settings = ClientEncryption.of(KmsMasterKey(key_id, kms))
    store = backend.store()
    with ObjectStoreSaver(store, client_encryption=settings) as saver:
        texts = _texts(_chat(saver, "t1", turns=2))

    async def read() -> Any:
        async with ObjectStoreSaver(store, client_encryption=settings) as fresh:
            return await fresh.aget_tuple(_cfg("t1"))

    got = asyncio.run(read())  # a cold process: KMS Decrypt, off the event loop
    assert got is not None and _texts(got.checkpoint["channel_values"]["messages"]) == texts
    wrapped = codec.unpack_object(
        store.get(key_object_key("_t1")), "k", "thread-key", versions=(1,)
    )["w"]
    arn = kms.describe_key(KeyId=key_id)["KeyMetadata"]["Arn"]
    assert [name for name, _ in wrapped] == [f"kms:{arn}"]  # named by the ARN KMS returns
    other_key = kms.create_key()["KeyMetadata"]["KeyId"]
    with ObjectStoreSaver(
        store, client_encryption=ClientEncryption.of(KmsMasterKey(other_key, kms))
    ) as stranger:
        with pytest.raises(ThreadKeyError) as info:
            stranger.get_tuple(_cfg("t1"))
        assert info.value.thread_id == "_t1" and f"wrapped by kms:{arn}" in str(info.value)


def _aliased_key(kms: Any) -> tuple[dict[str, Any], str]:
    """A new KMS key's metadata, and an alias made for it."""
    meta = kms.create_key()["KeyMetadata"]
    alias = f"alias/objstore-{os.urandom(4).hex()}"
    kms.create_alias(AliasName=alias, TargetKeyId=meta["KeyId"])
    return meta, alias


def test_a_kms_key_named_by_alias_id_or_arn_opens_the_same_key_objects(
    tmp_path: Any, kms: Any
) -> None:
    meta, alias = _aliased_key(kms)
    store = LocalStore(tmp_path / "data")
    names = (alias, meta["KeyId"], meta["Arn"])
    for i, configured in enumerate(names):
        settings = ClientEncryption.of(KmsMasterKey(configured, kms))
        with ObjectStoreSaver(store, client_encryption=settings) as saver:
            _chat(saver, f"t{i}", turns=1)
    for configured in names:  # every thread opens, however its writer named the key
        settings = ClientEncryption.of(KmsMasterKey(configured, kms))
        with ObjectStoreSaver(store, client_encryption=settings) as reader:
            for i in range(len(names)):
                assert reader.get_tuple(_cfg(f"t{i}")) is not None, (configured, i)
    wrapped = {
        codec.unpack_object(store.get(key_object_key(f"_t{i}")), "k", "thread-key", versions=(1,))[
            "w"
        ][0][0]
        for i in range(len(names))
    }
    assert wrapped == {f"kms:{meta['Arn']}"}


def test_a_key_object_an_alias_named_opens_with_the_key_named_by_its_arn(
    tmp_path: Any, kms: Any
) -> None:
    """Key objects of earlier releases record the KMS key as it was configured."""
    from objstore_saver.crypto.thread_keys import new_thread_key, open_key_object

    meta, alias = _aliased_key(kms)
    thread = new_thread_key("_t")
    wrapped = KmsMasterKey(alias, kms).wrap("_t", thread.data_key)
    body = codec.pack_object(
        {"f": 1, "k": "thread-key", "t": "_t", "w": [[f"kms:{alias}", wrapped]]}
    )
    opened = open_key_object(body, "keys/threads/_t", "_t", [KmsMasterKey(meta["Arn"], kms)])
    assert opened.data_key == thread.data_key
