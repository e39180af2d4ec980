"""A deleted thread stays deleted, in every process (spec §4.11, §6.6).

Each saver here has its own store client and memories, as separate server
workers, replicas and jobs do: process B runs a conversation, process A
deletes the thread, B's run goes on (its late ``put`` reuses a value it
remembers as stored), and process W begins a new conversation on the same id.
A fresh reader must see W's conversation alone, or nothing. CI runs the
module again with a master key in the environment: every thread encrypted.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
from backends import Backend
from deleted import the_tombstone
from faultkit import all_keys
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from objstore_saver import ObjectStoreSaver
from objstore_saver.errors import CorruptObjectError
from objstore_saver.format import keys
from objstore_saver.storage import MeteredStore
from objstore_saver.testing.faults import FailWhere, FaultyStore, InjectedFaultError, Request

pytestmark = pytest.mark.backends("local", "s3-lean")


#: A tool result large enough to be a content object of its own (not inline).
BIG = "tool output " * 4000
#: A value whose compressed data spans several parts: stored alone, never embedded.
HUGE = random.Random(7).randbytes(300_000).hex()


def _cfg(thread: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        c["checkpoint_id"] = checkpoint_id
    return {"configurable": c}


def _turn(
    saver: ObjectStoreSaver,
    thread: str,
    parent: str | None,
    messages: list[Any],
    step: int,
    big: str = BIG,
) -> str:
    """One checkpoint whose ``messages`` is ``messages``: its id."""
    cp: Checkpoint = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=step))
    cp["channel_values"] = {"messages": list(messages), "big": big}
    cp["channel_versions"] = {"messages": step + 1, "big": 1}
    new = {"messages": step + 1} if parent is not None else {"messages": 1, "big": 1}
    saver.put(_cfg(thread, parent), cp, {"step": step, "source": "loop"}, new)
    return cp["id"]


def _conversation(
    saver: ObjectStoreSaver, thread: str, who: str, turns: int, big: str = BIG
) -> list[str]:
    ids: list[str] = []
    messages: list[Any] = []
    for step in range(turns):
        messages = [*messages, HumanMessage(f"{who} asks {step}"), AIMessage(f"{who} {step}")]
        ids.append(_turn(saver, thread, ids[-1] if ids else None, messages, step, big))
    return ids


def test_a_late_put_after_a_delete_does_not_bring_the_thread_back(backend: Backend) -> None:
    b_store, a_store, c_store = backend.store(), backend.store(), backend.store()
    with ObjectStoreSaver(b_store) as b, ObjectStoreSaver(a_store) as a:
        ids = _conversation(b, "t", "old", 3)
        assert a.get_tuple(_cfg("t")) is not None
        a.delete_thread("t")
        # B's run goes on: its put reuses the big value it remembers as stored
        # (the delete removed it) and carries its parent's messages on.
        late = _turn(b, "t", ids[-1], [HumanMessage("late")], 3)
        b.put_writes(_cfg("t", late), [("messages", [AIMessage("late write")])], "task-1")
        with ObjectStoreSaver(c_store) as c:
            assert c.get_tuple(_cfg("t")) is None
            assert c.get_tuple(_cfg("t", late)) is None
            assert c.get_tuple(_cfg("t", ids[0])) is None
            assert list(c.list(_cfg("t"))) == []
            assert [t.config["configurable"]["thread_id"] for t in c.list(None)] == []
        # B itself, asked again, sees the delete too.
        assert b.get_tuple(_cfg("t")) is None


def test_a_reused_id_reads_the_new_conversation_in_every_process(backend: Backend) -> None:
    stores = [backend.store() for _ in range(4)]
    with (
        ObjectStoreSaver(stores[0]) as b,
        ObjectStoreSaver(stores[1]) as a,
        ObjectStoreSaver(stores[2]) as w,
    ):
        old = _conversation(b, "t", "old", 3)
        assert b.get_tuple(_cfg("t")) is not None  # B holds the head in memory
        a.delete_thread("t")
        assert w.get_tuple(_cfg("t")) is None
        new = _conversation(w, "t", "new", 2)
        # Late writes of B's run land after W's checkpoints (newer ids).
        late = _turn(b, "t", old[-1], [HumanMessage("late")], 5)
        b.put_writes(_cfg("t", old[-1]), [("messages", [AIMessage("late")])], "task-x")
        for reader in (ObjectStoreSaver(stores[3]), b, a, w):
            with reader:
                head = reader.get_tuple(_cfg("t"))
                assert head is not None
                assert head.config["configurable"]["checkpoint_id"] == new[-1]
                texts = [m.content for m in head.checkpoint["channel_values"]["messages"]]
                assert texts == ["new asks 0", "new 0", "new asks 1", "new 1"]
                assert head.checkpoint["channel_values"]["big"] == BIG
                listed = [t.config["configurable"]["checkpoint_id"] for t in reader.list(_cfg("t"))]
                assert listed == list(reversed(new))
                assert reader.get_tuple(_cfg("t", late)) is None
                assert reader.get_tuple(_cfg("t", new[0])) is not None
        # B continues the new conversation from what it now reads.
        with ObjectStoreSaver(stores[0]) as b2:
            nxt = _turn(b2, "t", new[-1], [HumanMessage("next")], 9)
            head = ObjectStoreSaver(stores[3]).get_tuple(_cfg("t"))
            assert head is not None and head.config["configurable"]["checkpoint_id"] == nxt


def test_a_delete_that_stops_after_its_tombstone_has_deleted_the_thread(backend: Backend) -> None:
    store = backend.store()
    with ObjectStoreSaver(store) as writer:
        ids = _conversation(writer, "t", "old", 4)
    # Every delete request of the sweep fails: the tombstone alone is stored.
    faulty = FaultyStore(backend.store(), FailWhere(lambda r: r.op == "delete"))
    with ObjectStoreSaver(faulty) as deleter, pytest.raises(InjectedFaultError):
        deleter.delete_thread("t")
    (first,) = [e for k in all_keys(store, "threads/_t/") if (e := keys.tombstone_epoch_of(k))]
    with ObjectStoreSaver(backend.store()) as reader:
        assert reader.get_tuple(_cfg("t")) is None
        assert reader.get_tuple(_cfg("t", ids[1])) is None
        assert list(reader.list(_cfg("t"))) == []
        new = _conversation(reader, "t", "new", 1)
        assert reader.get_tuple(_cfg("t")).config["configurable"]["checkpoint_id"] == new[0]
    # A second delete completes it: only its own tombstones are left.
    with ObjectStoreSaver(backend.store()) as deleter:
        deleter.delete_thread("t")
        assert the_tombstone(all_keys(store, "threads/_t/")) > first
        assert deleter.get_tuple(_cfg("t")) is None


def test_a_delete_leaves_nothing_but_its_tombstone(backend: Backend) -> None:
    store = backend.store()
    with ObjectStoreSaver(store) as saver:
        _conversation(saver, "t", "old", 3)
        saver.put_writes(_cfg("t", _conversation(saver, "u", "x", 1)[0]), [("a", 1)], "k")
        saver.delete_thread("t")
        first = the_tombstone(all_keys(store, "threads/_t/"))
        assert all_keys(store, "threads/_u/")  # another thread is untouched
        saver.delete_thread("t")  # a delete of a deleted thread supersedes the tombstone
        assert the_tombstone(all_keys(store, "threads/_t/")) > first


def test_late_writers_in_many_processes_never_resurrect(backend: Backend) -> None:
    """Four runs go on while the thread is deleted and a new conversation begins."""
    setup = ObjectStoreSaver(backend.store())
    old = _conversation(setup, "t", "old", 2)
    late_writers = [ObjectStoreSaver(backend.store()) for _ in range(4)]
    for saver in late_writers:
        assert saver.get_tuple(_cfg("t")) is not None
    deleted = threading.Event()
    errors: list[BaseException] = []

    def late(w: int, saver: ObjectStoreSaver) -> None:
        try:
            parent = old[-1]
            deleted.wait(30)
            for step in range(3):
                parent = _turn(saver, "t", parent, [HumanMessage(f"late {w} {step}")], 10 + step)
                saver.put_writes(_cfg("t", parent), [("messages", ["late"])], f"task-{w}")
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=late, args=(w, s)) for w, s in enumerate(late_writers)]
    for t in threads:
        t.start()
    ObjectStoreSaver(backend.store()).delete_thread("t")
    deleted.set()
    reader_epoch = the_tombstone(
        k for k in all_keys(backend.store(), "threads/_t/") if keys.is_tombstone_key(k)
    )
    new = _conversation(ObjectStoreSaver(backend.store()), "t", "new", 2)
    for t in threads:
        t.join(60)
    assert errors == []
    reader = ObjectStoreSaver(backend.store())
    head = reader.get_tuple(_cfg("t"))
    assert head is not None and head.config["configurable"]["checkpoint_id"] == new[-1]
    assert [t.config["configurable"]["checkpoint_id"] for t in reader.list(_cfg("t"))] == list(
        reversed(new)
    )
    assert head.pending_writes == []
    # A later delete sweeps the late writes with the rest.
    reader.delete_thread("t")
    assert the_tombstone(all_keys(backend.store(), "threads/_t/")) > reader_epoch


def test_a_conversation_begun_during_the_sweep_shares_no_object_with_it(backend: Backend) -> None:
    """The new epoch stores equal values under other addresses than the swept ones."""
    with ObjectStoreSaver(backend.store()) as old:
        _conversation(old, "t", "same", 3, HUGE)
    begun: list[list[str]] = []

    def begin_when_the_sweep_starts(request: Request) -> None:
        # The tombstone is stored and nothing deleted yet: W begins the same
        # conversation again (equal messages, the same big value).
        if request.op == "delete" and not begun:
            with ObjectStoreSaver(backend.store()) as w:
                assert w.get_tuple(_cfg("t")) is None
                begun.append(_conversation(w, "t", "same", 3, HUGE))

    with ObjectStoreSaver(FaultyStore(backend.store(), begin_when_the_sweep_starts)) as a:
        a.delete_thread("t")
    assert begun
    with ObjectStoreSaver(backend.store()) as reader:
        head = reader.get_tuple(_cfg("t"))
        assert head is not None
        assert head.config["configurable"]["checkpoint_id"] == begun[0][-1]
        assert head.checkpoint["channel_values"]["big"] == HUGE
        assert len(head.checkpoint["channel_values"]["messages"]) == 6
        listed = [t.checkpoint["channel_values"]["big"] for t in reader.list(_cfg("t"))]
        assert listed == [HUGE] * 3


def test_prune_keeps_the_new_conversation_and_removes_the_late_writes(backend: Backend) -> None:
    store = backend.store()
    with ObjectStoreSaver(backend.store()) as b:
        old = _conversation(b, "t", "old", 2)
        ObjectStoreSaver(backend.store()).delete_thread("t")
        new = _conversation(ObjectStoreSaver(backend.store()), "t", "new", 2)
        late = _turn(b, "t", old[-1], [HumanMessage("late")], 7)  # newer than every new one
    with ObjectStoreSaver(backend.store()) as operator:
        report = operator.prune(["t"], keep_last=1, min_age=0)
        assert report["checkpoints_kept"] == 1
        head = operator.get_tuple(_cfg("t"))
        assert head is not None and head.config["configurable"]["checkpoint_id"] == new[-1]
        manifests = [k for k in all_keys(store, "threads/_t/checkpoints/") if k.endswith(".2")]
        assert manifests == [keys.manifest_key("t", "", new[-1])]
        assert late not in {keys.checkpoint_id_of_manifest_key(k) for k in manifests}


def test_verify_counts_late_writes_and_a_stopped_delete_without_a_problem(
    backend: Backend,
) -> None:
    with ObjectStoreSaver(backend.store()) as b:
        old = _conversation(b, "t", "old", 3)
        faulty = FaultyStore(backend.store(), FailWhere(lambda r: r.op == "delete", times=1))
        with ObjectStoreSaver(faulty) as a, pytest.raises(InjectedFaultError):
            a.delete_thread("t")  # its first delete (the manifests) fails
        _turn(b, "t", old[-1], [HumanMessage("late")], 5)
    verifier = ObjectStoreSaver(backend.store())
    report = verifier.verify(read_data=True)
    assert report.ok, report.problems
    if verifier.client_encryption:
        # The ended epoch's key is destroyed: its manifests are a delete's leftovers.
        assert report.shredded_leftovers >= 4 and report.manifests == 0
    else:
        assert report.ended_manifests == 4 and report.manifests == 4


def test_encrypted_a_reused_id_is_sealed_with_its_new_key_in_every_process(
    backend: Backend,
) -> None:
    """B holds the thread's data key; A deletes the thread; B begins a new conversation."""
    from objstore_saver.crypto import ClientEncryption
    from objstore_saver.crypto.master_keys import LocalMasterKey

    master = ClientEncryption.of(LocalMasterKey(bytes(range(32))))

    def saver() -> ObjectStoreSaver:
        return ObjectStoreSaver(backend.store(), client_encryption=master)

    with saver() as b, saver() as a:
        _conversation(b, "t", "old", 2)
        assert b.get_tuple(_cfg("t")) is not None  # B's key for "t" is in memory
        a.delete_thread("t")
        assert b.get_tuple(_cfg("t")) is None  # B sees the delete: its key is dropped
        new = _conversation(b, "t", "new", 2)
    for reader in (saver(), saver()):
        with reader:
            head = reader.get_tuple(_cfg("t"))
            assert head is not None and head.config["configurable"]["checkpoint_id"] == new[-1]
            texts = [m.content for m in head.checkpoint["channel_values"]["messages"]]
            assert texts == ["new asks 0", "new 0", "new asks 1", "new 1"]
    with saver() as w:  # a later writer continues it with the same key
        _turn(w, "t", new[-1], [HumanMessage("more")], 4)
        assert saver().get_tuple(_cfg("t")) is not None


def test_a_stray_key_does_not_stop_the_delete_and_is_named_after_it(backend: Backend) -> None:
    store = backend.store()
    with ObjectStoreSaver(store) as saver:
        _conversation(saver, "t", "old", 2)
        stray = "threads/_t/notes.txt"
        store.put(stray, b"left by hand")
        with pytest.raises(CorruptObjectError) as info:
            saver.delete_thread("t")
        assert info.value.key == stray and "thread 't' is deleted" in str(info.value)
        assert saver.get_tuple(_cfg("t")) is None
        left = all_keys(store, "threads/_t/")
        assert left[1:] == [stray] and the_tombstone(left[:1]) >= keys.epoch_floor(0)
        if saver.client_encryption:  # the key went too: a backup of the thread reads nothing
            assert not [k for k in all_keys(store, "keys/") if k.startswith("keys/threads/_t")]


def _delete_stopping_after_its_tombstone(backend: Backend) -> None:
    """Thread "t" with a value stored apart, then a delete whose sweep fails."""
    with ObjectStoreSaver(backend.store()) as old:
        _conversation(old, "t", "old", 2, HUGE)  # parts stored alone: objects to leave behind
    sweep_fails = FailWhere(lambda r: r.op == "delete" and r.key.startswith("threads/"))
    with (
        ObjectStoreSaver(FaultyStore(backend.store(), sweep_fails)) as a,
        pytest.raises(InjectedFaultError),
    ):
        a.delete_thread("t")


def test_verify_and_prune_clear_a_stopped_delete_beside_a_new_conversation(
    backend: Backend,
) -> None:
    store = backend.store()
    _delete_stopping_after_its_tombstone(backend)
    with ObjectStoreSaver(backend.store()) as w:
        new = _conversation(w, "t", "new", 1)
    with ObjectStoreSaver(backend.store()) as operator:
        report = operator.verify(read_data=True)
        assert report.ok, report.problems
        assert report.ended_manifests + report.shredded_leftovers >= 2
        operator.prune(["t"], keep_last=1, min_age=0)
        head = operator.get_tuple(_cfg("t"))
        assert head is not None and head.config["configurable"]["checkpoint_id"] == new[-1]
        manifests = [k for k in all_keys(store, "threads/_t/checkpoints/") if k.endswith(".2")]
        assert manifests == [keys.manifest_key("t", "", new[-1])]
        names = [k.rsplit("/", 1)[1] for k in all_keys(store, "threads/_t/objects/")]
        # Encrypted, the ended epoch's objects are unreadable leftovers: swept at once.
        # In clear they are unreferenced objects, marked for the next sweep.
        assert all(len(n) != 96 for n in names)
        assert operator.verify(read_data=True).ok


def test_a_copy_takes_the_conversation_in_force_and_leaves_the_late_writes(
    backend: Backend,
) -> None:
    with ObjectStoreSaver(backend.store()) as b:
        old = _conversation(b, "t", "old", 2)
        ObjectStoreSaver(backend.store()).delete_thread("t")
        new = _conversation(ObjectStoreSaver(backend.store()), "t", "new", 2)
        _turn(b, "t", old[-1], [HumanMessage("late")], 7)  # newer than every new one
    with ObjectStoreSaver(backend.store()) as operator:
        operator.copy_thread("t", "u")
        head = operator.get_tuple(_cfg("u"))
        assert head is not None and head.config["configurable"]["checkpoint_id"] == new[-1]
        copied = [t.config["configurable"]["checkpoint_id"] for t in operator.list(_cfg("u"))]
        assert copied == list(reversed(new))
    assert not [k for k in all_keys(backend.store(), "threads/_u/") if "/-" in k]


def test_a_copy_of_a_thread_a_stopped_delete_left_behind_copies_what_is_in_force(
    backend: Backend,
) -> None:
    _delete_stopping_after_its_tombstone(backend)
    with ObjectStoreSaver(backend.store()) as w:
        new = _conversation(w, "t", "new", 1)
        w.copy_thread("t", "u")
        head = w.get_tuple(_cfg("u"))
        assert head is not None and head.config["configurable"]["checkpoint_id"] == new[-1]
        assert [t.config["configurable"]["checkpoint_id"] for t in w.list(_cfg("u"))] == new
        assert w.verify("u", read_data=True).ok


def test_a_prune_of_a_reused_thread_reads_each_manifest_once(backend: Backend) -> None:
    """Its manifests are newer than its tombstone: the epoch check reads them, and
    the prune's own choice, sweep and extraction reuse what it read."""
    store = backend.store()
    with ObjectStoreSaver(store) as saver:
        _conversation(saver, "t", "old", 2)
        saver.delete_thread("t")
        _conversation(saver, "t", "new", 5)
    meter = MeteredStore(backend.store(), log=True)
    with ObjectStoreSaver(meter) as pruner:
        report = pruner.prune(["t"], keep_last=1, min_age=0)
    assert report["checkpoints_kept"] == 1 and report["checkpoints_deleted"] == 4
    manifest_gets = [e.key for e in meter.log if e.op == "get" and e.key.endswith("~.2")]
    assert len(manifest_gets) == 5 and len(set(manifest_gets)) == 5, manifest_gets
