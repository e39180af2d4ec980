"""``rekey``: thread keys rewrapped under a new master key, no data object rewritten.

Threads are written encrypted with an old master key; rekey runs with
``OBJSTORE_SAVER_ENCRYPTION_KEYS=new,old``. Each test fails if a dry run
writes, if a data object changes, if the new key alone cannot read every
thread afterwards, if ``--drop-old`` leaves the old key able to, if a
resumed run redoes or skips work, if one unreadable key object stops the
job, or if a thread deleted while rekey runs gets its key back.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from backends import Backend
from cli_process import run_cli as _cli
from deleted import the_tombstone
from ops_helpers import chat, snapshot

from objstore_saver import ObjectStoreSaver, ObjectStoreStore
from objstore_saver.crypto import ClientEncryption
from objstore_saver.crypto.master_keys import LocalMasterKey
from objstore_saver.crypto.names import KEY_ENV, KEYS_ENV, KEYS_URL_ENV
from objstore_saver.crypto.sealed_store import key_object_key
from objstore_saver.crypto.thread_keys import (
    encode_key_object,
    key_object_wrappings,
    new_thread_key,
)
from objstore_saver.errors import ConfigurationError, ThreadKeyError
from objstore_saver.format import codec
from objstore_saver.ops import OpsConfig, arekey, rekey
from objstore_saver.ops.rekey import _Job, _run
from objstore_saver.ops.sharding import ALL
from objstore_saver.storage import LocalStore, MeteredStore, ObjectStore, PutMode

THREADS = ["alice", "bob", "carol", "dave"]
TOKENS = ["_" + t for t in THREADS]
KEY_OBJECTS = [key_object_key(t) for t in TOKENS]


def _key() -> LocalMasterKey:
    return LocalMasterKey(os.urandom(32))


def _spec(*keys: LocalMasterKey) -> str:
    return ",".join(base64.b64encode(k.key).decode() for k in keys)


def _everything(store: ObjectStore, prefix: str = "") -> dict[str, bytes]:
    """Every object under ``prefix``, byte for byte."""
    out: dict[str, bytes] = {}
    after = None
    while True:
        page = store.list(prefix, start_after=after)
        for o in page.objects:
            out[o.key] = store.get(o.key)
        if not page.truncated or not page.objects:
            return out
        after = page.objects[-1].key


def _write(store: ObjectStore, key: LocalMasterKey, threads: Sequence[str] = THREADS) -> None:
    with ObjectStoreSaver(store, client_encryption=ClientEncryption.of(key)) as saver:
        for t in threads:
            chat(saver, t, [f"a secret for {t}", "second question"])


def _reads(store: ObjectStore, *keys: LocalMasterKey, threads: Sequence[str] = THREADS) -> Any:
    """Everything LangGraph reads of the threads, with these master keys only."""
    with ObjectStoreSaver(store, client_encryption=ClientEncryption.of(*keys)) as saver:
        return {t: snapshot(saver, t) for t in threads}


def _wrapped_by(store: ObjectStore, token: str) -> list[str]:
    key = key_object_key(token)
    return [name for name, _ in key_object_wrappings(store.get(key), key, token)]


@pytest.fixture
def old() -> LocalMasterKey:
    return _key()


@pytest.fixture
def new() -> LocalMasterKey:
    return _key()


@pytest.fixture
def rotating(monkeypatch: pytest.MonkeyPatch, old: LocalMasterKey, new: LocalMasterKey) -> None:
    """The environment of a rotation: the new key current, the old one still configured."""
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(KEYS_URL_ENV, raising=False)
    monkeypatch.setenv(KEYS_ENV, _spec(new, old))


@pytest.fixture
def local(tmp_path: Path, old: LocalMasterKey) -> tuple[LocalStore, OpsConfig]:
    """A directory of encrypted threads, their keys wrapped by ``old``."""
    store = LocalStore(tmp_path / "store")
    _write(store, old)
    return store, OpsConfig(url=store.location)


@pytest.mark.usefixtures("rotating")
def test_dry_run_changes_no_byte_and_counts_what_it_would_rewrap(
    local: tuple[LocalStore, OpsConfig], old: LocalMasterKey, new: LocalMasterKey
) -> None:
    store, config = local
    before = _everything(store)
    report = rekey(config)
    assert _everything(store) == before
    json.dumps(report)
    assert report["dry_run"] is True and report["apply"] is False and report["drop_old"] is False
    assert report["current_master_key"] == new.name
    assert report["key_objects"] == {
        "scanned": 4,
        "rewrapped": 4,
        "current": 0,
        "failed": 0,
        "dropped_deleted": 0,
        "vanished": 0,
    }
    assert report["errors"] == [] and report["complete"] is True
    assert report["store"] == report["key_store"] == store.location
    assert all(_wrapped_by(store, t) == [old.name] for t in TOKENS)


@pytest.mark.backends("local", "s3-lean")
def test_apply_rewraps_every_key_object_and_no_data_object(
    backend: Backend, old: LocalMasterKey, new: LocalMasterKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = backend.store()
    _write(store, old)
    config = OpsConfig(url=backend.url())
    threads_before = _everything(store, "threads/")
    keys_before = _everything(store, "keys/")
    reads_before = _reads(store, old)
    with pytest.raises(ThreadKeyError):  # the new key alone opens nothing yet
        _reads(store, new)

    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.setenv(KEYS_ENV, _spec(new, old))
    report = rekey(config, apply=True)

    assert report["key_objects"]["rewrapped"] == 4 and report["key_objects"]["scanned"] == 4
    assert report["errors"] == [] and report["complete"] is True
    assert _everything(store, "threads/") == threads_before  # no data object rewritten
    keys_after = _everything(store, "keys/")
    assert sorted(keys_after) == sorted(keys_before) == KEY_OBJECTS
    assert all(keys_after[k] != keys_before[k] for k in KEY_OBJECTS)
    assert all(_wrapped_by(store, t) == [new.name, old.name] for t in TOKENS)
    assert not _everything(store, "jobs/")  # a complete run leaves no cursor
    # The new key alone reads every thread as the old key did; so does the old key.
    assert _reads(store, new) == reads_before
    assert _reads(store, old) == reads_before

    again = rekey(config, apply=True)  # idempotent: nothing left to do
    assert again["key_objects"]["current"] == 4 and again["key_objects"]["rewrapped"] == 0
    assert _everything(store, "keys/") == keys_after


@pytest.mark.usefixtures("rotating")
def test_drop_old_leaves_the_old_key_unable_to_read(
    local: tuple[LocalStore, OpsConfig], old: LocalMasterKey, new: LocalMasterKey
) -> None:
    store, config = local
    reads_before = _reads(store, old)
    threads_before = _everything(store, "threads/")
    assert rekey(config, apply=True)["key_objects"]["rewrapped"] == 4

    dry = rekey(config, drop_old=True)  # the old wrappings are still there to drop
    assert dry["key_objects"]["rewrapped"] == 4 and dry["drop_old"] is True
    dropped = rekey(config, apply=True, drop_old=True)
    assert dropped["key_objects"]["rewrapped"] == 4 and dropped["errors"] == []
    assert all(_wrapped_by(store, t) == [new.name] for t in TOKENS)
    assert _everything(store, "threads/") == threads_before
    assert _reads(store, new) == reads_before
    for t in THREADS:
        with pytest.raises(ThreadKeyError, match="no configured master key opens it"):
            _reads(store, old, threads=[t])
    assert rekey(config, apply=True, drop_old=True)["key_objects"]["current"] == 4


@pytest.mark.usefixtures("rotating")
def test_long_term_store_namespace_keys_are_rewrapped_too(
    local: tuple[LocalStore, OpsConfig], old: LocalMasterKey, new: LocalMasterKey
) -> None:
    store, config = local
    with ObjectStoreStore(store, client_encryption=ClientEncryption.of(old)) as memories:
        memories.put(("users", "ada"), "prefs", {"note": "a secret"})
        memories.put(("teams",), "t", {"x": 1})
    items_before = _everything(store, "store/")
    namespace_keys = sorted(k for k in _everything(store, "keys/") if k.startswith("keys/store/"))
    assert namespace_keys == ["keys/store/_teams/k", "keys/store/_users/_ada/k"]

    report = rekey(config, apply=True, drop_old=True)
    assert report["key_objects"]["rewrapped"] == 4 + 2 and report["errors"] == []
    assert _everything(store, "store/") == items_before  # no item rewritten
    for key in namespace_keys:
        scope = "store/" + key[len("keys/store/") : -len("/k")]
        assert [n for n, _ in key_object_wrappings(store.get(key), key, scope)] == [new.name]
    with ObjectStoreStore(store, client_encryption=ClientEncryption.of(new)) as memories:
        got = memories.get(("users", "ada"), "prefs")
        assert got is not None and got.value == {"note": "a secret"}
    with (
        ObjectStoreStore(store, client_encryption=ClientEncryption.of(old)) as memories,
        pytest.raises(ThreadKeyError, match="namespace path '_users/_ada'"),
    ):
        memories.get(("users", "ada"), "prefs")


@pytest.mark.usefixtures("rotating")
def test_drop_old_in_one_run_from_the_old_key_alone(
    local: tuple[LocalStore, OpsConfig], old: LocalMasterKey, new: LocalMasterKey
) -> None:
    store, config = local
    reads_before = _reads(store, old)
    assert rekey(config, apply=True, drop_old=True)["key_objects"]["rewrapped"] == 4
    assert all(_wrapped_by(store, t) == [new.name] for t in TOKENS)
    assert _reads(store, new) == reads_before
    with pytest.raises(ThreadKeyError):
        _reads(store, old, threads=["alice"])


@pytest.mark.usefixtures("rotating")
def test_a_cancelled_run_resumes_after_its_cursor(
    local: tuple[LocalStore, OpsConfig], new: LocalMasterKey, old: LocalMasterKey
) -> None:
    store, config = local
    polls = iter([False, True])
    first = rekey(config, apply=True, should_cancel=lambda: next(polls))
    assert first["cancelled"] is True and first["complete"] is False
    assert first["key_objects"]["scanned"] == first["key_objects"]["rewrapped"] == 1
    assert first["resumed_after"] is None
    (cursor,) = _everything(store, "jobs/").items()
    assert cursor[0] == first["cursor"] and cursor[0].startswith("jobs/rekey/")
    assert json.loads(cursor[1])["after"] == KEY_OBJECTS[0]
    assert _wrapped_by(store, TOKENS[0]) == [new.name, old.name]
    assert all(_wrapped_by(store, t) == [old.name] for t in TOKENS[1:])

    second = rekey(config, apply=True)
    assert second["resumed_after"] == KEY_OBJECTS[0] and second["complete"] is True
    # The two runs did one run's work: each key object read and rewrapped once.
    assert second["key_objects"]["scanned"] == second["key_objects"]["rewrapped"] == 3
    assert all(_wrapped_by(store, t) == [new.name, old.name] for t in TOKENS)
    assert not _everything(store, "jobs/")

    third = rekey(config)  # the cursor is gone: every key object is checked again
    assert third["resumed_after"] is None and third["key_objects"]["current"] == 4


@pytest.mark.usefixtures("rotating")
def test_restart_ignores_the_cursor(local: tuple[LocalStore, OpsConfig]) -> None:
    store, config = local
    polls = iter([False, True])
    rekey(config, apply=True, should_cancel=lambda: next(polls))
    assert _everything(store, "jobs/")
    again = rekey(config, apply=True, restart=True)
    assert again["resumed_after"] is None
    assert again["key_objects"]["scanned"] == 4 and again["key_objects"]["current"] == 1


def test_a_cursor_towards_another_key_is_not_resumed(
    local: tuple[LocalStore, OpsConfig],
    old: LocalMasterKey,
    new: LocalMasterKey,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store, config = local
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.setenv(KEYS_ENV, _spec(new, old))
    polls = iter([False, True])
    rekey(config, apply=True, should_cancel=lambda: next(polls))
    other = _key()
    monkeypatch.setenv(KEYS_ENV, _spec(other, new, old))
    report = rekey(config, apply=True)
    assert report["resumed_after"] is None and report["key_objects"]["rewrapped"] == 4
    assert all(_wrapped_by(store, t)[0] == other.name for t in TOKENS)


@pytest.mark.usefixtures("rotating")
def test_a_key_object_no_configured_key_opens_fails_alone(
    local: tuple[LocalStore, OpsConfig], old: LocalMasterKey, new: LocalMasterKey
) -> None:
    store, config = local
    stranger = _key()
    _write(store, stranger, threads=["eve"])  # sorts after the others' keys
    _write(store, old, threads=["zed"])  # and one after it
    before = store.get(key_object_key("_eve"))

    report = rekey(config, apply=True)

    assert report["key_objects"]["failed"] == 1 and report["key_objects"]["rewrapped"] == 5
    (error,) = report["errors"]
    assert error["key"] == key_object_key("_eve")
    assert (
        "ThreadKeyError" in error["error"] and "no configured master key opens it" in error["error"]
    )
    assert stranger.name in error["error"]  # the key it is wrapped with, by name
    text = json.dumps(report)
    for k in (old, new, stranger):  # no key material in the report
        assert base64.b64encode(k.key).decode() not in text and k.key.hex() not in text
    assert store.get(key_object_key("_eve")) == before
    assert _wrapped_by(store, "_zed") == [new.name, old.name]


@pytest.mark.usefixtures("rotating")
def test_a_failed_key_object_holds_the_cursor_back(
    local: tuple[LocalStore, OpsConfig], new: LocalMasterKey, old: LocalMasterKey
) -> None:
    store, config = local
    _write(store, _key(), threads=["aaron"])  # the first key object: no configured key opens it
    polls = iter([False, False, True])
    first = rekey(config, apply=True, concurrency=1, should_cancel=lambda: next(polls))
    assert first["key_objects"]["failed"] == 1 and first["key_objects"]["rewrapped"] == 1
    assert not _everything(store, "jobs/")  # the mark never passed the failed key object
    second = rekey(config, apply=True)  # so the rerun tries it again, and finds the rest
    assert second["resumed_after"] is None
    assert second["key_objects"] == {
        "scanned": 5,
        "rewrapped": 3,
        "current": 1,
        "failed": 1,
        "dropped_deleted": 0,
        "vanished": 0,
    }


def test_without_a_master_key_it_names_the_setting(
    local: tuple[LocalStore, OpsConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, config = local
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(KEYS_ENV, raising=False)
    monkeypatch.delenv(KEYS_URL_ENV, raising=False)
    before = _everything(store)
    with pytest.raises(ConfigurationError, match=KEYS_ENV):
        rekey(config, apply=True)
    assert _everything(store) == before


def test_key_objects_in_a_key_store_of_their_own(
    tmp_path: Path, old: LocalMasterKey, new: LocalMasterKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = LocalStore(tmp_path / "data")
    key_store = LocalStore(tmp_path / "keys")
    with ObjectStoreSaver(
        data, client_encryption=ClientEncryption.of(old, key_store=key_store)
    ) as s:
        for t in THREADS:
            chat(s, t, [f"a secret for {t}"])
    data_before = _everything(data)
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.setenv(KEYS_ENV, _spec(new, old))
    monkeypatch.setenv(KEYS_URL_ENV, key_store.location)
    polls = iter([False, True])
    rekey(OpsConfig(url=data.location), apply=True, should_cancel=lambda: next(polls))
    assert _everything(key_store, "jobs/")  # the cursor lives beside the key objects
    report = rekey(OpsConfig(url=data.location), apply=True)
    assert report["key_store"] == key_store.location and report["store"] == data.location
    assert report["key_objects"]["rewrapped"] == 3 and report["errors"] == []
    assert _everything(data) == data_before  # not one byte of the data store
    assert all(_wrapped_by(key_store, t) == [new.name, old.name] for t in TOKENS)
    with ObjectStoreSaver(
        data, client_encryption=ClientEncryption.of(new, key_store=key_store)
    ) as s:
        assert all(snapshot(s, t) for t in THREADS)


class _DeletedWhileRewrapped:
    """A key store on which ``delete_thread`` of one thread runs between rekey's GET and PUT.

    The delete stores its tombstone, destroys the key object, sweeps the
    thread's objects and destroys the key object again (spec §6.6), all
    before rekey's PUT lands: the PUT brings the key object back, for an
    epoch that is ended.
    """

    def __init__(self, inner: ObjectStore, data: ObjectStore, token: str) -> None:
        self.inner, self.data, self.token = inner, data, token
        self.location = inner.location

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def aput(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        if key == key_object_key(self.token):
            tombstone = f"threads/{self.token}/checkpoints/_/-9999999998"
            await self.data.aput(tombstone, codec.encode_tombstone(thread_id="bob", epoch=1))
            await self.inner.adelete([key])
            swept = _everything(self.data, f"threads/{self.token}/")
            await self.data.adelete([k for k in swept if k != tombstone])
            await self.inner.adelete([key])
        await self.inner.aput(key, data, mode)


def _job(data: ObjectStore, key_store: ObjectStore, *keys: LocalMasterKey, apply: bool) -> _Job:
    return _Job(data, key_store, keys, apply, drop_old=False)


async def test_a_thread_deleted_while_rewrapped_keeps_no_key_object(
    tmp_path: Path, old: LocalMasterKey, new: LocalMasterKey
) -> None:
    store = LocalStore(tmp_path / "store")
    _write(store, old)
    racing = _DeletedWhileRewrapped(store, store, "_bob")
    report = await _run(_job(store, racing, new, old, apply=True), False, 8, ALL, _quiet, _no)
    assert report["key_objects"]["dropped_deleted"] == 1
    assert report["key_objects"]["rewrapped"] == 3
    assert list(_everything(store, "threads/_bob/")) == ["threads/_bob/checkpoints/_/-9999999998"]
    assert key_object_key("_bob") not in _everything(store, "keys/")  # shredded for good
    others = [t for t in THREADS if t != "bob"]
    assert all(_wrapped_by(store, "_" + t) == [new.name, old.name] for t in others)
    assert all(_reads(store, new, threads=others).values())


class _NamespaceDeletedWhileRewrapped(_DeletedWhileRewrapped):
    """The same race for a long-term store namespace: its delete (spec §8.4.9) stores
    its clear marker and destroys the namespace's key between rekey's GET and PUT."""

    async def aput(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        if key == "keys/store/_users/_u1/k":
            with ObjectStoreStore(self.data, client_encryption=False) as plain:
                # the marker and the item deletes of a namespace delete, in clear
                done = plain.delete_namespace(("users", "u1"))
            assert done.clear is not None
            await self.inner.adelete([key])
        await self.inner.aput(key, data, mode)


async def test_a_namespace_deleted_while_rewrapped_keeps_no_key_object(
    tmp_path: Path, old: LocalMasterKey, new: LocalMasterKey
) -> None:
    store = LocalStore(tmp_path / "store")
    with ObjectStoreStore(store, client_encryption=ClientEncryption.of(old)) as memories:
        memories.put(("users", "u1"), "prefs", {"secret": 1})
        memories.put(("users", "u2"), "prefs", {"secret": 2})
    racing = _NamespaceDeletedWhileRewrapped(store, store, "")
    report = await _run(_job(store, racing, new, old, apply=True), False, 8, ALL, _quiet, _no)
    assert report["key_objects"]["dropped_deleted"] == 1
    kept = _everything(store, "keys/store/")
    assert list(kept) == ["keys/store/_users/_u2/k"]  # the deleted namespace's key stays gone
    with ObjectStoreStore(store, client_encryption=ClientEncryption.of(new)) as memories:
        assert memories.get(("users", "u2"), "prefs").value == {"secret": 2}
        assert memories.get(("users", "u1"), "prefs") is None


async def test_a_thread_whose_objects_remain_keeps_its_rewrapped_key(
    tmp_path: Path, old: LocalMasterKey, new: LocalMasterKey
) -> None:
    """The check after the PUT deletes a key object only when a delete ended its epoch."""
    store = LocalStore(tmp_path / "store")
    _write(store, old)
    job = _job(store, store, new, old, apply=True)
    listed = store.list(key_object_key("_alice")).objects[0]
    row = await job.key_object(listed)
    assert row.status == "rewrapped" and _wrapped_by(store, "_alice") == [new.name, old.name]


async def test_a_key_object_deleted_since_it_was_listed_is_left_alone(
    tmp_path: Path, old: LocalMasterKey, new: LocalMasterKey
) -> None:
    store = LocalStore(tmp_path / "store")
    _write(store, old)
    listed = store.list(key_object_key("_alice")).objects[0]
    store.delete([listed.key])
    row = await _job(store, store, new, old, apply=True).key_object(listed)
    assert row.status == "vanished"
    assert key_object_key("_alice") not in _everything(store, "keys/")


async def test_requests_one_list_per_thousand_one_get_each_one_put_per_rewrap(
    tmp_path: Path, old: LocalMasterKey, new: LocalMasterKey
) -> None:
    raw = LocalStore(tmp_path / "store", fsync=False)
    count = 1_001
    tokens = [f"_t{i:04d}" for i in range(count)]
    current = set(tokens[::10])  # already wrapped by the new key: read, not written
    for t in tokens:
        body = encode_key_object(new_thread_key(t), [new] if t in current else [old])
        raw.put(key_object_key(t), body, PutMode.CREATE)
        raw.put(f"threads/{t}/runs/_r", b"", PutMode.CREATE)  # the thread holds an object
    key_store = MeteredStore(raw, log=True)
    data = MeteredStore(raw, log=True)

    report = await _run(_job(data, key_store, new, old, apply=True), False, 64, ALL, _quiet, _no)

    rewrapped = count - len(current)
    assert report["key_objects"]["rewrapped"] == rewrapped
    assert report["key_objects"]["current"] == len(current)
    meter = key_store.snapshot()
    listed = [e for e in key_store.log if e.op == "list"]
    assert [e.key for e in listed] == ["keys/"] * 2  # 1,001 key objects: two pages
    # One GET per key object, one PUT per rewrapped one; the cursor: a GET, a DELETE.
    assert meter.get_requests == count + 1
    assert meter.put_requests == rewrapped
    assert [e.key for e in key_store.log if e.op == "delete"] == [report["cursor"]]
    # The data store: one LIST of one key per PUT (the deleted-thread check), nothing else.
    assert data.snapshot().requests == {"put": 0, "get": 0, "list": rewrapped, "delete": 0}


def _quiet(done: int, total: int | None, item: str) -> None:
    pass


def _no() -> bool:
    return False


# --- the command line --------------------------------------------------------------------


def test_the_command_rotates_and_exits_non_zero_on_a_failed_key_object(
    local: tuple[LocalStore, OpsConfig], old: LocalMasterKey, new: LocalMasterKey
) -> None:
    store, config = local
    assert config.url is not None
    env = {KEYS_ENV: _spec(new, old)}
    threads_before = _everything(store, "threads/")

    dry = _cli(["rekey", "--url", config.url, "--no-progress"], env)
    assert dry.returncode == 0, dry.stderr
    assert "dry run (add --apply to rewrite)" in dry.stdout
    assert "4 scanned, 4 to rewrap, 0 current, 0 failed" in dry.stdout
    assert all(_wrapped_by(store, t) == [old.name] for t in TOKENS)

    applied = _cli(["rekey", "--url", config.url, "--apply", "--json"], env)
    assert applied.returncode == 0, applied.stderr
    report = json.loads(applied.stdout)
    assert report["key_objects"]["rewrapped"] == 4 and report["apply"] is True

    dropped = _cli(
        ["rekey", "--url", config.url, "--apply", "--drop-old", "--concurrency", "2"], env
    )
    assert dropped.returncode == 0, dropped.stderr
    assert f"wrapped by {new.name} alone: applied" in dropped.stdout
    assert all(_wrapped_by(store, t) == [new.name] for t in TOKENS)
    assert _everything(store, "threads/") == threads_before

    _write(store, _key(), threads=["eve"])  # a key no configured master key opens
    failed = _cli(["rekey", "--url", config.url], env)
    assert failed.returncode == 1, failed.stderr
    assert f"FAILED {key_object_key('_eve')!r}: ThreadKeyError" in failed.stdout
    assert base64.b64encode(new.key).decode() not in failed.stdout + failed.stderr

    unset = _cli(["rekey", "--url", config.url], {})
    assert unset.returncode == 2
    assert KEYS_ENV in unset.stderr


async def test_the_async_job_fails_every_key_object_the_keys_do_not_open(
    local: tuple[LocalStore, OpsConfig], monkeypatch: pytest.MonkeyPatch, new: LocalMasterKey
) -> None:
    store, config = local
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.setenv(KEYS_ENV, _spec(new, _key()))  # the old key is not configured
    before = _everything(store)
    report = await arekey(config, apply=True)
    assert report["key_objects"]["failed"] == 4 and len(report["errors"]) == 4
    assert [e["key"] for e in report["errors"]] == KEY_OBJECTS
    assert _everything(store) == before


async def test_a_reused_threads_new_epoch_key_is_rewrapped_and_the_ended_one_stays_gone(
    tmp_path: Path, old: LocalMasterKey, new: LocalMasterKey
) -> None:
    """A thread deleted and begun again has the key of its new epoch alone (spec §4.11)."""
    store = LocalStore(tmp_path / "store")
    _write(store, old, threads=["t"])
    with ObjectStoreSaver(store, client_encryption=ClientEncryption.of(old)) as saver:
        saver.delete_thread("t")
        chat(saver, "t", ["the new conversation"])
    scope = f"_t%e{the_tombstone(_everything(store, 'threads/_t/checkpoints/_/-'))}"
    assert sorted(k for k in _everything(store, "keys/")) == [f"keys/threads/{scope}"]
    report = await _run(_job(store, store, new, old, apply=True), False, 8, ALL, _quiet, _no)
    assert report["key_objects"]["rewrapped"] == 1
    assert report["key_objects"]["dropped_deleted"] == 0
    assert _wrapped_by(store, scope) == [new.name, old.name]
    assert sorted(k for k in _everything(store, "keys/")) == [f"keys/threads/{scope}"]
    got = _reads(store, new, threads=["t"])["t"]
    assert "the new conversation" in str(got) and "a secret for t" not in str(got)
