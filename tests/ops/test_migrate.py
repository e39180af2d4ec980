"""Migration into the object store: from memory, SQLite, real PostgreSQL and another store;
idempotent, resumable after a kill, divergence reporting, secrets kept out of output."""

from __future__ import annotations

import base64
import json
import os
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import ops_helpers
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from ops_helpers import add_pending_writes, chat, snapshot, subgraph_chat
from pg_server import PG_PASSWORD

from objstore_saver import ObjectStoreSaver
from objstore_saver.ops import JobError, OpsConfig, migrate
from objstore_saver.storage import LocalStore

THREADS = ["t-alpha", "t-beta", "t-gamma"]


def _fill(saver: Any) -> None:
    chat(saver, "t-alpha", ["hello", "and again", "a third time"])
    chat(saver, "t-beta", ["only once"])
    add_pending_writes(saver, "t-alpha")
    subgraph_chat(saver, "t-gamma", ["sub one", "sub two"])


@pytest.fixture
def memory_source() -> Any:
    saver = InMemorySaver()
    _fill(saver)
    ops_helpers.MEMORY_SOURCE["saver"] = saver
    yield saver
    ops_helpers.MEMORY_SOURCE.clear()


def _target(tmp_path: Path, name: str = "target") -> OpsConfig:
    return OpsConfig(url=f"file://{tmp_path}/{name}")


def _assert_same(source: Any, config: OpsConfig, threads: list[str] = THREADS) -> None:
    with ObjectStoreSaver.from_url(config.require_url()) as target:
        for t in threads:
            expected = snapshot(source, t)
            assert expected, t
            assert snapshot(target, t) == expected, t


def _all_keys(root: Path) -> list[str]:
    store = LocalStore(root)
    out: list[str] = []
    after = None
    while True:
        page = store.list("", start_after=after)
        out += [o.key for o in page.objects]
        if not page.truncated or not page.objects:
            return out
        after = page.objects[-1].key


def _normalized(keys_: list[str]) -> Counter[str]:
    """Keys with the sequence of special writes removed (it is a clock, not content)."""
    return Counter(re.sub(r"(\.-\d+)\.\d{26}$", r"\1", key) for key in keys_)


SOURCE = "ops_helpers:memory_source"


def test_dry_run_counts_and_writes_nothing(memory_source: Any, tmp_path: Path) -> None:
    config = _target(tmp_path)
    report = migrate("saver", SOURCE, config=config)
    assert report["apply"] is False
    n = sum(len(list(memory_source.list({"configurable": {"thread_id": t}}))) for t in THREADS)
    assert report["threads"] == {"source": 3, "done": 3}
    assert report["checkpoints"] == {"source": n, "present": 0, "missing": n, "copied": 0}
    assert report["writes"]["copied"] == 0 and report["writes"]["missing"] > 3
    assert _all_keys(tmp_path / "target") == []
    json.dumps(report)


def test_from_memory_copies_everything_and_is_idempotent(
    memory_source: Any, tmp_path: Path
) -> None:
    config = _target(tmp_path)
    progress: list[tuple[int, int | None, str]] = []
    first = migrate(
        "saver",
        SOURCE,
        config=config,
        apply=True,
        progress=lambda d, t, i: progress.append((d, t, i)),
    )
    c = first["checkpoints"]
    assert c["copied"] == c["missing"] == c["source"] > 0
    assert first["writes"]["copied"] == first["writes"]["source"]
    assert first["diverged"] == []
    # Threads finish in any order (they run at once); each is reported once.
    assert [(d, t) for d, t, _ in progress] == [(1, 3), (2, 3), (3, 3)]
    assert sorted(i for _, _, i in progress) == THREADS
    _assert_same(memory_source, config)
    with ObjectStoreSaver.from_url(config.require_url()) as target:
        namespaces = {
            t.config["configurable"]["checkpoint_ns"]
            for t in target.list({"configurable": {"thread_id": "t-gamma"}})
        }
    assert len(namespaces) == 3  # the root graph and one subgraph namespace per turn

    keys_before = _all_keys(tmp_path / "target")
    again = migrate("saver", SOURCE, config=config, apply=True)
    assert again["checkpoints"]["present"] == c["source"]
    assert again["checkpoints"]["copied"] == again["writes"]["copied"] == 0
    assert _all_keys(tmp_path / "target") == keys_before


class _Killed(BaseException):
    """Stands for the process being killed: nothing catches it."""


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_killed_after_random_writes_then_rerun_is_complete_without_duplicates(
    memory_source: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    clean = _target(tmp_path, "clean")
    migrate("saver", SOURCE, config=clean, apply=True)
    clean_keys = _all_keys(tmp_path / "clean")

    config = _target(tmp_path)
    real_put = LocalStore.put
    budget = {"left": random.Random(seed).randrange(1, len(clean_keys))}

    def dying_put(self: LocalStore, key: str, data: bytes, mode: Any = None) -> None:
        if budget["left"] <= 0:
            raise _Killed(key)
        budget["left"] -= 1
        real_put(self, key, data, mode) if mode is not None else real_put(self, key, data)

    with monkeypatch.context() as mp:
        mp.setattr(LocalStore, "put", dying_put)
        with pytest.raises(_Killed):
            migrate("saver", SOURCE, config=config, apply=True)
    partial = _all_keys(tmp_path / "target")
    assert 0 < len(partial) < len(clean_keys)

    resumed = migrate("saver", SOURCE, config=config, apply=True)
    assert (
        resumed["checkpoints"]["present"] + resumed["checkpoints"]["copied"]
        == resumed["checkpoints"]["source"]
    )
    _assert_same(memory_source, config)
    assert _normalized(_all_keys(tmp_path / "target")) == _normalized(clean_keys)
    final = migrate("saver", SOURCE, config=config, apply=True)
    assert final["checkpoints"]["copied"] == final["writes"]["copied"] == 0


def test_cancel_stops_between_threads_and_a_rerun_finishes(
    memory_source: Any, tmp_path: Path
) -> None:
    config = _target(tmp_path)
    polls = iter([False, True])
    report = migrate("saver", SOURCE, config=config, apply=True, should_cancel=lambda: next(polls))
    assert report["cancelled"] is True and report["threads"]["done"] == 1
    assert report["complete"] is False
    # The rerun resumes after the finished thread, without reading it again.
    rest = migrate("saver", SOURCE, config=config, apply=True)
    assert rest["resumed_after"] == "t-alpha" and rest["complete"] is True
    assert rest["threads"] == {"source": 2, "done": 2}
    assert rest["checkpoints"]["present"] == 0 and rest["checkpoints"]["copied"] > 0
    _assert_same(memory_source, config)
    # A complete run leaves no cursor: the next one checks every thread again.
    assert not [k for k in _all_keys(tmp_path / "target") if k.startswith("jobs/")]
    again = migrate("saver", SOURCE, config=config, apply=True)
    assert again["resumed_after"] is None and again["threads"]["done"] == 3
    assert again["checkpoints"]["copied"] == 0


def test_continued_thread_is_not_diverged_but_a_branch_is(
    memory_source: Any, tmp_path: Path
) -> None:
    config = _target(tmp_path)
    migrate("saver", SOURCE, config=config, apply=True)
    # The application moved to the bucket and kept talking on t-alpha.
    with ObjectStoreSaver.from_url(config.require_url()) as target:
        chat(target, "t-alpha", ["after the move"])
    report = migrate("saver", SOURCE, config=config, apply=True)
    assert report["diverged"] == []
    assert report["checkpoints"]["copied"] == 0

    # The old deployment also kept talking on t-alpha: the heads now differ.
    chat(memory_source, "t-alpha", ["meanwhile, in the old store"])
    report = migrate("saver", SOURCE, config=config)
    assert [d["thread_id"] for d in report["diverged"]] == ["t-alpha"]
    assert report["diverged"][0]["checkpoint_ns"] == ""
    assert report["checkpoints"]["missing"] > 0


def test_from_sqlite(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = tmp_path / "agent.sqlite"
    with SqliteSaver.from_conn_string(str(db)) as source:
        _fill(source)
        config = _target(tmp_path)
        report = migrate("sqlite", str(db), config=config, apply=True)
        assert report["threads"]["source"] == 3
        assert report["checkpoints"]["copied"] == report["checkpoints"]["source"] > 0
        _assert_same(source, config)
    with pytest.raises(JobError, match="does not exist"):
        migrate("sqlite", str(tmp_path / "missing.sqlite"), config=config)


def test_from_postgres_without_leaking_the_password(postgres_url: str, tmp_path: Path) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(postgres_url) as source:
        source.setup()
        _fill(source)
        config = OpsConfig(url=f"file://{tmp_path}/target", postgres_url=postgres_url)
        dry = migrate("postgres", config=config)
        assert dry["checkpoints"]["copied"] == 0 and dry["checkpoints"]["missing"] > 0
        report = migrate("postgres", config=config, apply=True)
        assert report["threads"]["source"] == 3
        assert report["checkpoints"]["copied"] == report["checkpoints"]["source"]
        assert report["writes"]["copied"] == report["writes"]["source"] > 0
        _assert_same(source, config)
        assert PG_PASSWORD not in json.dumps(report)
        assert "***" in report["source"]
        assert PG_PASSWORD not in repr(config)

    bad = OpsConfig(url=config.url, postgres_url=postgres_url.rsplit("/", 1)[0] + "/nodb")
    with pytest.raises(JobError) as info:
        migrate("postgres", config=bad)
    assert "nodb" in str(info.value)
    assert PG_PASSWORD not in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_postgres_url_is_configuration_not_an_argument(tmp_path: Path) -> None:
    with pytest.raises(JobError, match="POSTGRES_URL"):
        migrate("postgres", "postgresql://u:pw@h/db", config=_target(tmp_path))
    with pytest.raises(JobError, match="POSTGRES_URL"):
        migrate("postgres", config=_target(tmp_path))


def test_from_another_object_store(memory_source: Any, tmp_path: Path) -> None:
    first = _target(tmp_path, "first")
    migrate("saver", SOURCE, config=first, apply=True)
    second = _target(tmp_path, "second")
    report = migrate("objstore", first.url, config=second, apply=True)
    assert report["checkpoints"]["copied"] == report["checkpoints"]["source"] > 0
    _assert_same(memory_source, second)
    assert _normalized(_all_keys(tmp_path / "first")) == _normalized(_all_keys(tmp_path / "second"))


def test_bad_sources_are_clear_errors(tmp_path: Path) -> None:
    config = _target(tmp_path)
    with pytest.raises(JobError, match="module:callable"):
        migrate("saver", "no_colon", config=config)
    with pytest.raises(JobError, match="no_such_module_xyz"):
        migrate("saver", "no_such_module_xyz:f", config=config)
    with pytest.raises(JobError, match="unknown migration source 'redis'"):
        migrate("redis", "x", config=config)


def test_into_an_encrypted_store_with_the_key_in_the_environment(
    memory_source: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OBJSTORE_SAVER_ENCRYPTION_KEY", base64.b64encode(os.urandom(32)).decode())
    config = _target(tmp_path)
    report = migrate("saver", SOURCE, config=config, apply=True)
    assert report["checkpoints"]["copied"] == report["checkpoints"]["source"] > 0
    _assert_same(memory_source, config)  # read back with the key
    keys_ = _all_keys(tmp_path / "target")
    assert sorted(k for k in keys_ if k.startswith("keys/")) == [
        f"keys/threads/_{t}" for t in sorted(THREADS)
    ]
    for path in (tmp_path / "target").rglob("*"):
        if path.is_file():
            assert b"hello" not in path.read_bytes() and b"sub one" not in path.read_bytes()
    again = migrate("saver", SOURCE, config=config, apply=True)  # idempotent, sealed too
    assert again["checkpoints"]["present"] == report["checkpoints"]["source"]
    assert again["checkpoints"]["copied"] == 0
