"""Write groups (spec §4.7, §6.5): a put_writes call's regular writes as one object."""

from __future__ import annotations

import hashlib
from typing import Any

import msgpack
import pytest
from backends import Backend
from langgraph.checkpoint.base import empty_checkpoint
from layout import is_write

from objstore_saver import ObjectStoreSaver
from objstore_saver.errors import CorruptObjectError
from objstore_saver.format import codec, keys as k
from objstore_saver.format.codec import Inline
from objstore_saver.storage import MeteredStore
from objstore_saver.storage.base import ObjectStore, PutMode
from objstore_saver.testing.faults import FailWhere, Fault, FaultyStore, InjectedFaultError

pytestmark = pytest.mark.backends("local", "s3-boto3")


@pytest.fixture
def store(backend: Backend) -> ObjectStore:
    return backend.store("wg/")


def _head(saver: ObjectStoreSaver, thread: str) -> dict:
    cp = empty_checkpoint()
    cp["channel_values"] = {"x": 1}
    cp["channel_versions"] = {"x": 1}
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return saver.put(config, cp, {"step": 0}, {"x": 1})


def _write_keys(store: ObjectStore, config: dict) -> list[str]:
    c = config["configurable"]
    at = (c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"])
    return [
        o.key
        for p in (k.writes_prefix(*at), k.checkpoint_writes_prefix(*at))
        for o in store.list(p).objects
    ]


def _v1_write_key(at: tuple[str, str, str], task: str, idx: int) -> str:
    """Where an earlier release stored one write (format version 1)."""
    return f"{k.writes_prefix(*at)}{k.token('task_id', task)}.{idx}"


def _pending(saver: ObjectStoreSaver, config: dict) -> list[tuple[str, str, Any]]:
    tup = saver.get_tuple(config)
    assert tup is not None
    return list(tup.pending_writes or [])


def _single(task: str, idx: int, channel: str, value: bytes, group: tuple[int, ...]) -> bytes:
    """A write as earlier releases stored it (format version 1, one object per write, `g`)."""
    body = codec.encode_write(
        task_id=task,
        task_path="",
        idx=idx,
        channel=channel,
        value=Inline(codec.Payload("json", "raw", value)),
        group=group,
    )
    return msgpack.packb({**msgpack.unpackb(body, raw=False), "f": 1}, use_bin_type=True)


def test_a_call_with_two_writes_is_one_request_and_reads_back(store: ObjectStore) -> None:
    metered = MeteredStore(store)
    with ObjectStoreSaver(metered) as saver:
        config = _head(saver, "t")
        metered.reset()
        saver.put_writes(config, [("messages", ["hi"]), ("branch:to:agent", None)], "task-1")
        # Inline values: no object, one write group. Main stored one object per write (2).
        assert metered.snapshot().requests == {"put": 1, "get": 0, "list": 0, "delete": 0}
        assert _pending(saver, config) == [
            ("task-1", "messages", ["hi"]),
            ("task-1", "branch:to:agent", None),
        ]
    (key,) = _write_keys(store, config)
    assert key.endswith("/_task-1.0~1")
    assert msgpack.unpackb(store.get(key), raw=False)["k"] == "writes"
    with ObjectStoreSaver(store) as fresh:  # nothing remembered
        assert [w[1] for w in _pending(fresh, config)] == ["messages", "branch:to:agent"]


def test_group_is_smaller_than_the_writes_it_replaces(store: ObjectStore) -> None:
    metered = MeteredStore(store)
    writes = [("messages", ["hello there"]), ("branch:to:agent", None)]
    with ObjectStoreSaver(metered) as saver:
        config = _head(saver, "t")
        metered.reset()
        saver.put_writes(config, writes, "task-1")
        grouped = metered.snapshot().bytes_sent
        metered.reset()
        for i, (channel, value) in enumerate(writes):
            # Two calls of one write each: the layout of a call before groups.
            saver.put_writes(config, [(channel, value)], f"task-2-{i}")
        singles = metered.snapshot().bytes_sent
    assert grouped < singles, (grouped, singles)


def test_special_writes_stay_single_and_last_wins(store: ObjectStore) -> None:
    with ObjectStoreSaver(store) as saver:
        config = _head(saver, "t")
        saver.put_writes(config, [("a", 1), ("__interrupt__", "first"), ("b", 2)], "task")
        saver.put_writes(config, [("__interrupt__", "second")], "task")
        leaves = sorted(key.rsplit("/", 1)[1] for key in _write_keys(store, config))
        assert leaves[-1] == "_task.0~2"  # the regular writes at positions 0 and 2
        assert [leaf.split(".")[1] for leaf in leaves[:-1]] == ["-3", "-3"]
        assert sorted(_pending(saver, config)) == [
            ("task", "__interrupt__", "second"),
            ("task", "a", 1),
            ("task", "b", 2),
        ]


def test_retry_after_lost_response_and_first_call_wins(store: ObjectStore) -> None:
    faulty = FaultyStore(
        store,
        FailWhere(lambda r: r.op == "put" and is_write(r.key), Fault.LOST_RESPONSE, times=1),
    )
    with ObjectStoreSaver(faulty) as saver:
        config = _head(saver, "t")
        with pytest.raises(InjectedFaultError):
            saver.put_writes(config, [("a", 1), ("b", 2)], "task")
        saver.put_writes(config, [("a", 1), ("b", 2)], "task")  # the retry: exists is success
        saver.put_writes(config, [("a", 9), ("b", 9)], "task")  # a later call: first wins
        assert _pending(saver, config) == [("task", "a", 1), ("task", "b", 2)]
    assert len(_write_keys(store, config)) == 1


def _v1_head(store: ObjectStore, thread: str) -> dict:
    """A head checkpoint as an earlier release stored it (a format-version-1 manifest)."""
    with ObjectStoreSaver(store) as writer:
        config = _head(writer, thread)
    c = config["configurable"]
    at = (c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"])
    body = store.get(k.manifest_key(*at))
    old = msgpack.packb({**msgpack.unpackb(body, raw=False), "f": 1}, use_bin_type=True)
    store.put(k.v1_manifest_key(*at), old, PutMode.CREATE)
    store.delete([k.manifest_key(*at)])
    return config


def test_mixed_layouts_the_earliest_call_wins(store: ObjectStore) -> None:
    config = _v1_head(store, "t")
    with ObjectStoreSaver(store) as saver:
        c = config["configurable"]
        at = (c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"])
        # An earlier release stored the task's writes 0 and 1 one object each;
        # a newer writer (a later call of the task) stored the group 0~1~2.
        store.put(
            _v1_write_key(at, "task", 0), _single("task", 0, "a", b"1", (0, 1)), PutMode.CREATE
        )
        store.put(
            _v1_write_key(at, "task", 1), _single("task", 1, "b", b"2", (0, 1)), PutMode.CREATE
        )
        saver.put_writes(config, [("a", 7), ("b", 8), ("c", 9)], "task")
        # Per index, the earliest call's write (the old ones carry seq 0), as
        # InMemorySaver keeps the first call's: only index 2 is the group's.
        assert _pending(saver, config) == [("task", "a", 1), ("task", "b", 2), ("task", "c", 9)]
        # An incomplete old call (its write 3 missing) is hidden and keeps its
        # slot 0 (seq 0, earlier than the group's).
        store.put(
            _v1_write_key(at, "other", 0), _single("other", 0, "a", b"5", (0, 3)), PutMode.CREATE
        )
        saver.put_writes(config, [("x", 1), ("y", 2)], "other")
        assert [w for w in _pending(saver, config) if w[0] == "other"] == [("other", "y", 2)]
    with ObjectStoreSaver(store) as fresh:
        assert fresh.verify("t", read_data=True).ok


def test_calls_of_different_shapes_keep_the_first_calls_writes(store: ObjectStore) -> None:
    # InMemorySaver keeps, per (task, index), the first call's regular write.
    with ObjectStoreSaver(store) as saver:
        config = _head(saver, "t")
        saver.put_writes(config, [("a", 1), ("a", 2)], "g-first")  # the group 0~1
        saver.put_writes(config, [("a", 3)], "g-first")  # a single write of index 0
        saver.put_writes(config, [("a", 4)], "s-first")
        saver.put_writes(config, [("a", 5), ("a", 6)], "s-first")
    with ObjectStoreSaver(store) as fresh:  # no memory of the calls
        assert _pending(fresh, config) == [
            ("g-first", "a", 1),
            ("g-first", "a", 2),
            ("s-first", "a", 4),
            ("s-first", "a", 6),
        ]


def test_a_long_index_list_is_still_one_object_named_by_its_hash(store: ObjectStore) -> None:
    writes = [(f"c{i}", i) for i in range(16)]  # "0~1~...~15" is 37 characters
    metered = MeteredStore(store)
    with ObjectStoreSaver(metered) as saver:
        config = _head(saver, "t")
        metered.reset()
        saver.put_writes(config, writes, "task")
        assert metered.snapshot().put_requests == 1
        (key,) = _write_keys(store, config)
        digest = hashlib.sha256("~".join(str(i) for i in range(16)).encode()).hexdigest()
        assert key.endswith(f"/_task.h{digest[:16]}")
        assert msgpack.unpackb(store.get(key), raw=False)["k"] == "writes"
        assert [(w[1], w[2]) for w in _pending(saver, config)] == writes
    body = store.get(key)
    with pytest.raises(CorruptObjectError, match="do not match its key"):
        codec.decode_writes(body, key[: -len(digest[:16])] + "0" * 16)
    assert len(k.write_group_key("t", "", "c", "task", tuple(range(16)))) < len(
        k.write_key("t", "", "c", "task", -3, 10**25)
    )


def test_corrupt_group_names_its_key(store: ObjectStore) -> None:
    body = codec.encode_write_group(
        task_id="task",
        task_path="p",
        writes=[(0, "a", Inline(codec.Payload("json", "raw", b"1")))],
        seq=1,
    )
    with pytest.raises(CorruptObjectError, match=r"_task\.0"):
        codec.decode_writes(body, "threads/_t/writes/_/_c/_task.0")  # one write is no group
    two = [(i, "a", Inline(codec.Payload("json", "raw", b"1"))) for i in (0, 1)]
    body = codec.encode_write_group(task_id="task", task_path="p", writes=two, seq=1)
    with pytest.raises(CorruptObjectError, match=r"_task\.0~2.*do not match its key"):
        codec.decode_writes(body, "threads/_t/writes/_/_c/_task.0~2")
    with ObjectStoreSaver(store) as saver:
        config = _head(saver, "t")
        c = config["configurable"]
        bad = k.write_group_key(c["thread_id"], "", c["checkpoint_id"], "task", (0, 2))
        store.put(bad, body, PutMode.CREATE)
        with pytest.raises(CorruptObjectError, match="do not match its key"):
            saver.get_tuple(config)
        report = saver.verify("t", read_data=True)
        assert [(p.key, p.kind) for p in report.problems] == [(bad, "unreadable")]


def test_write_slots_parses_every_form() -> None:
    assert k.write_slots(k.write_key("t", "", "c", "a.0~1", 3)) == ("_a.0~1", (3,))
    assert k.write_slots(k.write_group_key("t", "", "c", "a.0", (0, 2))) == ("_a.0", (0, 2))
    assert k.write_slots(k.write_key("t", "", "c", "a", -3, 5)) == ("_a", (-3,))
