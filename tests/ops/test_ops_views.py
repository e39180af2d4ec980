"""Read-only jobs: threads, history, show, cat, du (local directory and S3)."""

from __future__ import annotations

import itertools
import pickle
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from backends import Backend
from langgraph.checkpoint.base import empty_checkpoint
from ops_helpers import add_pending_writes, chat
from payloads import incompressible_text

from objstore_saver import CorruptObjectError, ObjectStoreSaver, ops
from objstore_saver.format import keys as k
from objstore_saver.ops import JobError, OpsConfig
from objstore_saver.ops.decode import decode_serialized
from objstore_saver.storage import LocalStore, PutMode

pytestmark = pytest.mark.backends("local", "s3-lean")


@pytest.fixture
def any_url(backend: Backend) -> str:
    return backend.url("ops/")


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"file://{tmp_path}/store"


def _demo(url: str) -> OpsConfig:
    with ObjectStoreSaver.from_url(url) as saver:
        chat(saver, "alice", ["hello", "how are you?", "bye"])
        chat(saver, "bob/with slash", ["one question"])
        add_pending_writes(saver, "alice")
    return OpsConfig(url=url)


@pytest.fixture
def demo(url: str) -> OpsConfig:
    """Two chat threads in a local directory, the first with pending writes."""
    return _demo(url)


@pytest.fixture
def demo_any(any_url: str) -> OpsConfig:
    """The same on the local directory and on S3."""
    return _demo(any_url)


def test_threads_counts_sizes_and_last_update(demo_any: OpsConfig) -> None:
    demo = demo_any
    seen: list[tuple[int, int | None, str]] = []
    report = ops.threads(demo, progress=lambda d, t, i: seen.append((d, t, i)))
    by_id = {t["thread_id"]: t for t in report["threads"]}
    assert set(by_id) == {"alice", "bob/with slash"}
    assert by_id["alice"]["checkpoints"] == 9  # input + 2 steps per turn, 3 turns
    assert by_id["bob/with slash"]["checkpoints"] == 3
    assert by_id["alice"]["writes"] > by_id["bob/with slash"]["writes"]
    assert all(t["bytes"] > 0 and t["last_update"] for t in report["threads"])
    assert sorted(i for _, _, i in seen) == ["alice", "bob/with slash"]
    assert seen[-1][:2] == (2, 2)


def test_threads_stops_cleanly_when_cancelled(demo: OpsConfig) -> None:
    calls = iter([False, True])
    report = ops.threads(demo, should_cancel=lambda: next(calls))
    assert report["cancelled"] is True
    assert report["count"] == 1


def test_history_newest_first_with_step_source_parent(demo: OpsConfig) -> None:
    report = ops.history("alice", demo)
    rows = report["checkpoints"]
    assert [r["step"] for r in rows] == [7, 6, 5, 4, 3, 2, 1, 0, -1]
    assert rows[-1]["source"] == "input" and rows[-1]["parent_checkpoint_id"] is None
    for newer, older in itertools.pairwise(rows):
        assert newer["parent_checkpoint_id"] == older["checkpoint_id"]
    assert all(r["manifest_bytes"] > 0 for r in rows)


def test_history_of_unknown_thread_is_an_error(demo: OpsConfig) -> None:
    with pytest.raises(JobError, match="'nobody'"):
        ops.history("nobody", demo)


def test_show_decodes_messages_as_role_and_content(demo_any: OpsConfig) -> None:
    demo = demo_any
    report = ops.show("alice", config=demo)
    messages = report["channel_values"]["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("human", "hello"),
        ("ai", "(turn 1) echo: hello"),
        ("human", "how are you?"),
        ("ai", "(turn 2) echo: how are you?"),
        ("human", "bye"),
        ("ai", "(turn 3) echo: bye"),
    ]
    assert report["metadata"]["step"] == 7
    writes = {(w["task_id"], w["channel"]): w["value"] for w in report["pending_writes"]}
    assert writes[("task-a", "notes")] == {"k": 1}
    assert writes[("task-b", "__interrupt__")] == {"value": "ask the user"}
    older = ops.history("alice", demo)["checkpoints"][-1]["checkpoint_id"]
    first = ops.show("alice", older, config=demo)
    assert first["checkpoint_id"] == older
    assert first["channel_values"]["__start__"]["messages"] == [["user", "hello"]]


def test_show_does_not_import_user_classes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module_dir = tmp_path / "mods"
    module_dir.mkdir()
    (module_dir / "user_state_mod.py").write_text(
        textwrap.dedent(
            """
            import pydantic
            IMPORTED = []
            class Profile(pydantic.BaseModel):
                name: str
                score: int
            """
        )
    )
    monkeypatch.syspath_prepend(str(module_dir))
    import user_state_mod  # type: ignore[import-not-found]

    url = f"file://{tmp_path}/store"
    with ObjectStoreSaver.from_url(url) as saver:
        cp = empty_checkpoint()
        cp["channel_values"] = {"profile": user_state_mod.Profile(name="ann", score=3)}
        cp["channel_versions"] = {"profile": 1}
        saver.put({"configurable": {"thread_id": "u", "checkpoint_ns": ""}}, cp, {}, {"profile": 1})
    monkeypatch.delitem(sys.modules, "user_state_mod")
    report = ops.show("u", config=OpsConfig(url=url))
    assert report["channel_values"]["profile"] == {
        "__type__": "user_state_mod.Profile",
        "value": {"name": "ann", "score": 3},
    }
    assert "user_state_mod" not in sys.modules


class _Boom:
    def __reduce__(self) -> Any:
        return (sys.exit, ("unpickled!",))


def test_pickle_payloads_are_never_loaded() -> None:
    out = decode_serialized("pickle", pickle.dumps(_Boom()))
    assert out["__unreadable__"].startswith("pickle payload")


def test_cat_decodes_every_kind(demo: OpsConfig) -> None:
    hist = ops.history("alice", demo)["checkpoints"]
    manifest = ops.cat(hist[0]["key"], demo)
    assert manifest["kind"] == "manifest" and manifest["thread_id"] == "alice"
    ref = manifest["channels"]["messages"]
    assert ref["ref"] in ("value", "list")
    obj = ops.cat(ref["key"], demo)
    assert obj["sha256_ok"] is True
    if obj["kind"] == "value":
        assert obj["value"][0] == {"role": "human", "content": "hello", "id": obj["value"][0]["id"]}
    show = ops.show("alice", config=demo)
    assert show["storage"]["messages"]["key"] == ref["key"]


def test_cat_missing_and_corrupt(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/store"
    with ObjectStoreSaver.from_url(url) as saver:
        # Over 256 KiB compressed: parts stored alone (smaller values are embedded).
        chat(saver, "t", [incompressible_text(300_000, 1)])
    store = LocalStore(f"{tmp_path}/store")
    obj_key = next(o.key for o in store.list(k.objects_prefix("t")).objects)
    store.put(obj_key, b"garbage", PutMode.OVERWRITE)
    with pytest.raises(CorruptObjectError) as info:
        ops.cat(obj_key, OpsConfig(url=url))
    assert obj_key in str(info.value)
    with pytest.raises(JobError, match="no object at key"):
        ops.cat("threads/_t/objects/00", OpsConfig(url=url))


def test_du_by_thread_and_kind(demo_any: OpsConfig) -> None:
    demo = demo_any
    report = ops.du(demo)
    rows = {r["thread_id"]: r for r in report["by_thread"]}
    assert set(rows) == {"alice", "bob/with slash"}
    assert rows["alice"]["by_kind"]["manifests"]["objects"] == 9
    assert (
        sum(r["objects"] for r in rows.values())
        + report["by_kind"].get("run-index", {"objects": 0})["objects"]
        == report["total"]["objects"]
    )
    assert report["total"]["bytes"] == sum(v["bytes"] for v in report["by_kind"].values())
    threads = {t["thread_id"]: t for t in ops.threads(demo)["threads"]}
    assert rows["alice"]["bytes"] == threads["alice"]["bytes"]


def test_delete_thread_is_a_dry_run_unless_applied(demo: OpsConfig) -> None:
    dry = ops.delete_thread("bob/with slash", config=demo)
    assert dry["deleted"] is False and dry["checkpoints"] == 3
    assert ops.history("bob/with slash", demo)["checkpoints"]
    done = ops.delete_thread("bob/with slash", apply=True, config=demo)
    assert done["deleted"] is True
    with pytest.raises(JobError):
        ops.history("bob/with slash", demo)
    assert [t["thread_id"] for t in ops.threads(demo)["threads"]] == ["alice"]


def test_jobs_need_a_store() -> None:
    with pytest.raises(ValueError, match="OBJSTORE_SAVER_URL"):
        ops.threads(OpsConfig(url=None))


def test_show_and_cat_a_long_chunked_message_list(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/store"
    questions = [f"question {i}: " + "lorem ipsum dolor sit amet " * 12 for i in range(20)]
    with ObjectStoreSaver.from_url(url) as saver:
        chat(saver, "long", questions)
    config = OpsConfig(url=url)
    report = ops.show("long", config=config)
    messages = report["channel_values"]["messages"]
    assert len(messages) == 40
    assert [m["content"] for m in messages[::2]] == questions
    assert {m["role"] for m in messages} == {"human", "ai"}
    storage = report["storage"]["messages"]
    # The list's root is inline in the manifest (format version 2).
    assert storage["stored"] == "inline list" and storage["elements"] == 40
    # Its sealed runs are segments (format version 2), embedded in manifests.
    assert storage["segments"], "a 40-element list has sealed segments"
    seg = storage["segments"][0]
    assert seg["embedded_in"] and seg["key"] == seg["embedded_in"]
    sub = ops.cat(f"{seg['embedded_in']}#{seg['digest']}", config)
    assert sub["kind"] == "segment" and sub["sha256_ok"] is True
    assert len(sub["elements"]) == seg["elements"]
