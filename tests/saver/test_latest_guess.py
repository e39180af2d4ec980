"""The latest lookup with this process's guess of the newest checkpoint (spec §6.2).

A saver that wrote (or last found) a thread's newest checkpoint lists the
namespace once (the newest manifest comes with its writes, spec §3) and
decodes the guess's values meanwhile. Another process may have moved the thread on:
the lookup must then answer exactly as a saver without the guess would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from backends import Backend
from faultkit import checkpoint_id, config
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from objstore_saver import LocalStore, ObjectStoreSaver, plans
from objstore_saver.errors import CorruptObjectError
from objstore_saver.format import keys
from objstore_saver.plans import lookup
from objstore_saver.plans.lookup import LATEST_LIST_KEYS as LATEST
from objstore_saver.plans.requests import Batch, ListKeys
from objstore_saver.storage import ObjectStore

pytestmark = pytest.mark.backends("local", "s3-lean")


@pytest.fixture
def store(backend: Backend) -> ObjectStore:
    return backend.store(fsync=False)


def _put(saver: ObjectStoreSaver, parent: dict, n: int) -> dict:
    cp = empty_checkpoint()
    cp["id"] = checkpoint_id(n)
    cp["channel_values"] = {"messages": [HumanMessage(f"q{i}") for i in range(n)]}
    cp["channel_versions"] = {"messages": n}
    return saver.put(parent, cp, {"step": n}, {"messages": n})


def test_one_list_finds_the_newest_manifest_and_its_writes(tmp_path: Path) -> None:
    with ObjectStoreSaver(LocalStore(tmp_path / "store", fsync=False)) as saver:
        head = _put(saver, config("t"), 1)
        saver.put_writes(head, [("messages", [AIMessage("a1")])], "task-1")
        plan = plans.get_tuple(saver._ctx, config("t"))
        first = next(plan)
        assert isinstance(first, Batch) and first.meanwhile is not None
        assert list(first.ops) == [ListKeys(keys.manifests_prefix("t", ""), limit=LATEST)]
        # Answered with that one LIST: the next step fetches the write the LIST named.
        page = saver.store.list(keys.manifests_prefix("t", ""), limit=LATEST)
        first.meanwhile()
        second = plan.send([page])
        plan.close()
    assert isinstance(second, Batch)
    (write_key,) = [op.key for op in second.ops]
    assert write_key.startswith(keys.checkpoint_writes_prefix("t", "", checkpoint_id(1)))


def test_a_saver_that_knows_nothing_lists_the_namespace_alone(tmp_path: Path) -> None:
    with ObjectStoreSaver(LocalStore(tmp_path / "store", fsync=False)) as saver:
        first = next(plans.get_tuple(saver._ctx, config("t")))
    assert isinstance(first, Batch) and first.meanwhile is None
    assert list(first.ops) == [ListKeys(keys.manifests_prefix("t", ""), limit=LATEST)]


def _expected(store: ObjectStore, thread: str) -> Any:
    """What a saver without any memory answers."""
    with ObjectStoreSaver(store) as fresh:
        return fresh.get_tuple(config(thread))


def test_a_newer_checkpoint_of_another_process_wins(store: ObjectStore) -> None:
    with ObjectStoreSaver(store) as ours, ObjectStoreSaver(store) as theirs:
        first = _put(ours, config("t"), 1)
        assert ours.get_tuple(config("t")).config == first  # the guess, right
        second = _put(theirs, first, 2)
        theirs.put_writes(second, [("messages", [AIMessage("late")])], "task-9")
        got = ours.get_tuple(config("t"))
    assert got.config == second
    assert got == _expected(store, "t")
    assert [w[2] for w in got.pending_writes] == [[AIMessage("late")]]


def test_writes_of_another_process_on_the_guessed_checkpoint_are_seen(
    store: ObjectStore,
) -> None:
    with ObjectStoreSaver(store) as ours, ObjectStoreSaver(store) as theirs:
        first = _put(ours, config("t"), 1)
        theirs.put_writes(first, [("messages", [AIMessage("resumed")])], "task-1")
        got = ours.get_tuple(config("t"))
    assert got.config == first
    assert got == _expected(store, "t")
    assert [w[2] for w in got.pending_writes] == [[AIMessage("resumed")]]


def test_a_thread_deleted_by_another_process_has_no_checkpoint(store: ObjectStore) -> None:
    with ObjectStoreSaver(store) as ours, ObjectStoreSaver(store) as theirs:
        _put(ours, config("t"), 1)
        theirs.delete_thread("t")
        assert ours.get_tuple(config("t")) is None


async def test_the_async_lookup_uses_the_guess_too(store: ObjectStore) -> None:
    async with ObjectStoreSaver(store) as ours:
        with ObjectStoreSaver(store) as theirs:
            first = _put(ours, config("t"), 1)
            assert (await ours.aget_tuple(config("t"))).config == first
            second = _put(theirs, first, 2)
            got = await ours.aget_tuple(config("t"))
    assert got.config == second and got == _expected(store, "t")


def test_a_guess_that_does_not_decode_fails_the_lookup_only_while_it_is_newest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalStore(tmp_path / "store", fsync=False)

    def undecodable(ctx: Any, manifest: Any, mkey: str) -> Any:
        raise CorruptObjectError(mkey, "undecodable (test)")

    with ObjectStoreSaver(store) as ours, ObjectStoreSaver(store) as theirs:
        first = _put(ours, config("t"), 1)
        monkeypatch.setattr(lookup, "values_from_memory", undecodable)
        with pytest.raises(CorruptObjectError, match="undecodable"):
            ours.get_tuple(config("t"))
        second = _put(theirs, first, 2)
        assert ours.get_tuple(config("t")) == _expected(store, "t")
        assert ours.get_tuple(config("t")).config == second
