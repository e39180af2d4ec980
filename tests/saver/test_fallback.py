"""FallbackSaver: the bucket for writes, the old saver until the bucket holds a thread (spec §6.14).

The application switches first and the migration runs later, or at the same
time: no thread is ever unreadable, nothing is written to the old saver, and
the migration job finds every thread continued, never diverged.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import ops_helpers
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from ops_helpers import add_pending_writes, chat, chat_graph, snapshot, subgraph_chat

from objstore_saver import ObjectStoreSaver
from objstore_saver.fallback import FallbackSaver
from objstore_saver.ops import OpsConfig, migrate
from objstore_saver.storage import LocalStore, MeteredStore

#: ``migrate --from saver ops_helpers:memory_source``: the old saver of each test.
SOURCE, SAVER = "saver", "ops_helpers:memory_source"


@pytest.fixture(autouse=True)
def _forget_the_source() -> Any:
    yield
    ops_helpers.MEMORY_SOURCE.clear()


def _config(tmp_path: Path, old: Any) -> OpsConfig:
    ops_helpers.MEMORY_SOURCE["saver"] = old
    return OpsConfig(url=f"file://{tmp_path}/new")


def _messages(saver: Any, thread_id: str) -> list[str]:
    tup = saver.get_tuple({"configurable": {"thread_id": thread_id}})
    return [] if tup is None else [m.content for m in tup.checkpoint["channel_values"]["messages"]]


def _count(saver: Any, thread_id: str) -> int:
    return len(list(saver.list({"configurable": {"thread_id": thread_id}})))


def test_an_old_thread_is_read_from_the_old_saver_and_continued_in_the_bucket(
    tmp_path: Path,
) -> None:
    old = InMemorySaver()
    chat(old, "t", ["one", "two"])
    add_pending_writes(old, "t")
    old_count = _count(old, "t")
    with ObjectStoreSaver.from_directory(tmp_path / "new") as new:
        saver = FallbackSaver(new, old)
        assert _messages(saver, "t") == _messages(old, "t")
        assert snapshot(saver, "t") == snapshot(old, "t")
        assert new.get_tuple({"configurable": {"thread_id": "t"}}) is None

        chat(saver, "t", ["three"])
        # Nothing is written to the old saver; the bucket holds the old head and the turn.
        assert _count(old, "t") == old_count
        old_head = old.get_tuple({"configurable": {"thread_id": "t"}})
        assert old_head is not None
        copied = new.get_tuple(old_head.config)
        assert copied is not None
        assert copied.checkpoint["channel_values"] == old_head.checkpoint["channel_values"]
        assert sorted(map(repr, copied.pending_writes or [])) == sorted(
            map(repr, old_head.pending_writes or [])
        )
        messages = _messages(saver, "t")
        assert messages[:4] == _messages(old, "t") and len(messages) == 6
        assert _messages(new, "t") == messages
        # The whole history reads through the fallback: the old one, then the new turn.
        assert _count(saver, "t") == old_count + 3  # input, loop and bot steps of the turn

        # The job completes the history behind the new head: continued, not diverged.
        report = migrate(SOURCE, SAVER, config=_config(tmp_path, old), apply=True)
        assert report["diverged"] == []
        assert report["checkpoints"]["copied"] == old_count - 1  # the head was copied already
        assert snapshot(new, "t")[:old_count] == snapshot(old, "t")


def test_a_migrated_thread_is_read_from_the_bucket_alone_once_settled(tmp_path: Path) -> None:
    old = InMemorySaver()
    chat(old, "t", ["one"])
    migrate(SOURCE, SAVER, config=_config(tmp_path, old), apply=True)
    root = LocalStore(tmp_path / "new")
    meter = MeteredStore(root)
    with ObjectStoreSaver(meter) as new:
        saver = FallbackSaver(new, old)
        expected = _messages(old, "t")
        calls: list[str] = []
        real = old.get_tuple
        old.get_tuple = lambda config: calls.append("get") or real(config)  # type: ignore[method-assign]
        assert _messages(saver, "t") == expected
        assert calls == ["get"]  # heads compared once: equal, so the thread is settled
        meter.reset()
        assert _messages(saver, "t") == expected
        assert calls == ["get"]  # then the bucket alone
        assert meter.snapshot().requests["get"] >= 1


def test_a_new_thread_lives_in_the_bucket_only(tmp_path: Path) -> None:
    old = InMemorySaver()
    with ObjectStoreSaver.from_directory(tmp_path / "new") as new:
        saver = FallbackSaver(new, old)
        chat(saver, "fresh", ["hi"])
        assert _count(old, "fresh") == 0
        assert _messages(new, "fresh") == _messages(saver, "fresh") != []


def test_subgraph_namespaces_settle_apart_from_the_root(tmp_path: Path) -> None:
    old = InMemorySaver()
    subgraph_chat(old, "g", ["one"])
    with ObjectStoreSaver.from_directory(tmp_path / "new") as new:
        saver = FallbackSaver(new, old)
        subgraph_chat(saver, "g", ["two"])
        assert _messages(saver, "g") == _messages(new, "g")
        assert len(_messages(saver, "g")) == 4
        report = migrate(SOURCE, SAVER, config=_config(tmp_path, old), apply=True)
        assert report["diverged"] == []


def test_delete_thread_deletes_in_both(tmp_path: Path) -> None:
    old = InMemorySaver()
    chat(old, "t", ["one"])
    with ObjectStoreSaver.from_directory(tmp_path / "new") as new:
        saver = FallbackSaver(new, old)
        chat(saver, "t", ["two"])
        saver.delete_thread("t")
        assert _count(old, "t") == _count(new, "t") == _count(saver, "t") == 0
        assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is None


async def test_the_async_api_runs_the_same_plans(tmp_path: Path) -> None:
    old = InMemorySaver()
    chat(old, "t", ["one", "two"])
    with ObjectStoreSaver.from_directory(tmp_path / "new") as new:
        saver = FallbackSaver(new, old)
        graph = chat_graph(saver)
        config = {"configurable": {"thread_id": "t"}}
        state = await graph.aget_state(config)
        assert [m.content for m in state.values["messages"]] == _messages(old, "t")
        await graph.ainvoke({"messages": [("user", "three")]}, config)
        after = [m.content for m in (await graph.aget_state(config)).values["messages"]]
        assert after[:4] == _messages(old, "t") and len(after) == 6
        assert _messages(new, "t") == after
        listed = [t async for t in saver.alist(config)]
        assert len(listed) == _count(old, "t") + 3


def test_postgres_while_a_graph_keeps_talking_during_the_migration(
    postgres_url: str, tmp_path: Path
) -> None:
    """A real PostgreSQL as the old saver; turns run on every thread while ``migrate`` runs."""
    from langgraph.checkpoint.postgres import PostgresSaver

    threads = [f"pg-{i}" for i in range(12)]
    with PostgresSaver.from_conn_string(postgres_url) as old:
        old.setup()
        for t in threads:
            chat(old, t, ["first", "second"])
        before = {t: _messages(old, t) for t in threads}
        counts = {t: _count(old, t) for t in threads}
        config = OpsConfig(url=f"file://{tmp_path}/new", postgres_url=postgres_url)
        with ObjectStoreSaver.from_url(config.require_url()) as new:
            saver = FallbackSaver(new, old)
            failures: list[BaseException] = []

            def talk() -> None:
                try:
                    for round_ in range(2):
                        for t in threads:
                            chat(saver, t, [f"during {round_}"])
                except BaseException as exc:  # noqa: BLE001  # reported by the test
                    failures.append(exc)

            talker = threading.Thread(target=talk)
            talker.start()
            first = migrate("postgres", config=config, apply=True, concurrency=4)
            talker.join(timeout=300)
            assert not talker.is_alive() and failures == []
            assert first["diverged"] == []
            final = migrate("postgres", config=config, apply=True)
            assert final["diverged"] == [] and final["checkpoints"]["copied"] == 0
            for t in threads:
                # Every old checkpoint is in the bucket, with the turns of the fallback after them.
                assert _count(old, t) == counts[t]  # nothing was written to PostgreSQL
                assert _count(new, t) == counts[t] + 2 * 3
                messages = _messages(new, t)
                assert messages[:4] == before[t] and len(messages) == 8
                assert _messages(saver, t) == messages


def test_create_checkpointer_with_a_fallback(tmp_path: Path) -> None:
    from objstore_saver import create_checkpointer

    old = InMemorySaver()
    chat(old, "t", ["one"])
    env = {"OBJSTORE_SAVER_URL": f"file://{tmp_path}/new"}
    saver = create_checkpointer(environ=env, fallback=old)
    assert isinstance(saver, FallbackSaver) and saver.old is old
    assert _messages(saver, "t") == _messages(old, "t")
    saver.new.close()
    # Without OBJSTORE_SAVER_URL there is no bucket to fall back from.
    assert not isinstance(create_checkpointer(environ={}, fallback=old), FallbackSaver)
