"""``upgrade``: a bucket written by format version 1 rewritten in version 2.

The bucket is ``tests/fixtures/format-v1`` (copied: the fixture never
changes). What a saver reads from it before the upgrade, and what
``InMemorySaver`` answers for the calls that wrote it, is what it must read
after, and at every point in between: a killed or cancelled run leaves a
readable bucket, and a rerun completes it as one run would have.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import format_v1_script as script
import pytest
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from repo_root import ROOT

from objstore_saver import LocalStore, ObjectStoreSaver, cli
from objstore_saver.format import codec, keys
from objstore_saver.ops import JobError, OpsConfig, prune, upgrade, verify
from objstore_saver.ops.upgrade import LEFT_FOR_PRUNE
from objstore_saver.storage import PutMode, StoreUnavailableError

FIXTURE = ROOT / "tests" / "fixtures" / "format-v1"
SCOPES = [(script.CHAT, ""), (script.CHAT, "inner:7b1e"), (script.ODD, "")]
#: Version-1 manifests of the fixture: 20 root and 2 subgraph checkpoints of
#: the chat, one of the other thread.
V1_MANIFESTS = 23
#: Pending writes in force: t1's two, t2's one, t3's latest special write, s1's one.
WRITES_IN_FORCE = 5
#: Version-1 write keys: t1's group, t2's write, t3's two special writes, s1's write.
V1_WRITE_KEYS = 5


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _normalized(names: Any) -> Counter[str]:
    """Keys with the sequence of special writes removed (a clock, not content)."""
    return Counter(re.sub(r"(\.-\d+)\.\d{26}$", r"\1", k) for k in names)


def _tuple(t: CheckpointTuple | None) -> Any:
    assert t is not None
    return {
        "config": t.config["configurable"],
        "checkpoint": t.checkpoint,
        "metadata": t.metadata,
        "parent": t.parent_config and t.parent_config["configurable"],
        "writes": list(t.pending_writes or []),  # in order: the task path decides it
    }


def _reads(root: Path) -> dict[str, Any]:
    """Everything a fresh saver reads from the bucket: lists, latest, each by id."""
    saver = ObjectStoreSaver(LocalStore(str(root)))
    out: dict[str, Any] = {}
    for thread in (script.CHAT, script.ODD):
        everything = [_tuple(t) for t in saver.list({"configurable": {"thread_id": thread}})]
        out[f"{thread} all namespaces"] = everything
    for thread, ns in SCOPES:
        config = script._config(thread, ns)
        listed = [_tuple(t) for t in saver.list(config)]
        assert listed
        out[f"{thread}|{ns}"] = listed
        out[f"{thread}|{ns} latest"] = _tuple(saver.get_tuple(config))
        for t in listed:
            cid = t["config"]["checkpoint_id"]
            out[f"{thread}|{ns}|{cid}"] = _tuple(saver.get_tuple(script._config(thread, ns, cid)))
    return out


def _v1_keys(root: Path) -> list[str]:
    """Version-1 manifests and write keys left in the bucket."""
    return [
        name
        for name in _files(root)
        if name.startswith(keys.THREADS)
        and name.split("/")[2] in ("checkpoints", "writes")
        and keys.parse_checkpoint_key(name).version == 1
    ]


@pytest.fixture(scope="module")
def reference() -> InMemorySaver:
    saver = InMemorySaver()
    script.play(saver)
    return saver


@pytest.fixture(scope="module")
def before(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the version-1 bucket reads as."""
    copy = tmp_path_factory.mktemp("before") / "bucket"
    shutil.copytree(FIXTURE, copy)
    return _reads(copy)


@pytest.fixture
def bucket(tmp_path: Path) -> Path:
    copy = tmp_path / "bucket"
    shutil.copytree(FIXTURE, copy)
    return copy


def _config(root: Path) -> OpsConfig:
    return OpsConfig(url=f"file://{root}")


def _clean_upgrade(tmp_path: Path) -> Path:
    clean = tmp_path / "clean"
    shutil.copytree(FIXTURE, clean)
    upgrade(config=_config(clean), apply=True)
    return clean


def test_dry_run_changes_nothing_and_counts_the_work(bucket: Path) -> None:
    files = _files(bucket)
    report = upgrade(config=_config(bucket))
    assert _files(bucket) == files
    json.dumps(report)
    assert report["dry_run"] is True and report["apply"] is False
    assert report["threads"] == {"scanned": 2, "upgraded": 2, "current": 0, "failed": 0}
    assert report["checkpoints_rewritten"] == V1_MANIFESTS
    assert report["writes_rewritten"] == WRITES_IN_FORCE
    assert report["v1_keys_deleted"] == V1_MANIFESTS + V1_WRITE_KEYS == len(_v1_keys(bucket))
    assert report["errors"] == [] and report["complete"] is True
    assert report["left_for_prune"] == LEFT_FOR_PRUNE


def test_apply_rewrites_every_checkpoint_and_it_reads_the_same(
    bucket: Path, before: dict[str, Any], reference: InMemorySaver
) -> None:
    old = _v1_keys(bucket)
    progress: list[tuple[int, int | None, str]] = []
    report = upgrade(
        config=_config(bucket), apply=True, progress=lambda d, t, i: progress.append((d, t, i))
    )
    assert report["threads"] == {"scanned": 2, "upgraded": 2, "current": 0, "failed": 0}
    assert report["checkpoints_rewritten"] == V1_MANIFESTS
    assert report["writes_rewritten"] == WRITES_IN_FORCE
    assert report["v1_keys_deleted"] == len(old) == V1_MANIFESTS + V1_WRITE_KEYS
    assert sorted(i for _, _, i in progress) == sorted([script.CHAT, script.ODD])

    files = _files(bucket)
    assert _v1_keys(bucket) == []
    assert not [k for k in files if "/writes/" in k]
    assert all(k + keys.V2_MANIFEST_SUFFIX in files for k in old if "/checkpoints/" in k)
    assert not [k for k in files if k.startswith("jobs/")]  # a complete run leaves no cursor
    # The version-1 objects stay, for prune to mark and sweep.
    assert {k for k in _files(FIXTURE) if "/objects/" in k} <= set(files)

    assert _reads(bucket) == before
    for thread, ns in SCOPES:
        config = script._config(thread, ns)
        ours = [_tuple(t) for t in ObjectStoreSaver(LocalStore(str(bucket))).list(config)]
        theirs = [_tuple(t) for t in reference.list(config)]
        for t in ours + theirs:
            t["writes"] = sorted(t["writes"], key=repr)  # InMemorySaver keeps call order
        assert ours == theirs
    # The task path went along with the write: it orders a super-step's writes.
    (t2,) = [k for k in files if k.endswith("/_t2.0")]
    assert [w.task_path for w in codec.decode_writes(files[t2], t2)] == ["~x"]

    checked = verify(config=_config(bucket), read_data=True)
    assert checked["ok"] is True, checked["problems"]
    again = upgrade(config=_config(bucket), apply=True)
    assert again["threads"] == {"scanned": 2, "upgraded": 0, "current": 2, "failed": 0}
    assert again["checkpoints_rewritten"] == again["writes_rewritten"] == 0
    assert again["v1_keys_deleted"] == 0
    assert _files(bucket) == files


def test_each_namespace_goes_oldest_first_and_the_root_head_last(
    bucket: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_put = LocalStore.put
    written: list[str] = []

    def recording(self: LocalStore, key: str, data: bytes, mode: Any = PutMode.OVERWRITE) -> None:
        if key.endswith(keys.V2_MANIFEST_SUFFIX):
            written.append(key)
        real_put(self, key, data, mode)

    monkeypatch.setattr(LocalStore, "put", recording)
    upgrade(config=_config(bucket), apply=True, concurrency=1)
    chat = [k for k in written if k.startswith(keys.thread_prefix(script.CHAT))]
    assert len(chat) == V1_MANIFESTS - 1
    by_ns: dict[str, list[str]] = {}
    for k in chat:
        by_ns.setdefault(k.split("/")[3], []).append(keys.checkpoint_id_of_manifest_key(k))
    assert all(ids == sorted(ids) for ids in by_ns.values())  # every parent before its child
    head = script._id(script.TURNS - 1)
    assert chat[-1] == keys.manifest_key(script.CHAT, "", head)


def test_a_later_prune_marks_the_version_1_objects(bucket: Path, before: dict[str, Any]) -> None:
    upgrade(config=_config(bucket), apply=True)
    report = prune(config=_config(bucket), keep_last=100, min_age=0, apply=True)
    assert report["totals"]["objects_marked"] > 0
    # Every root checkpoint is kept (prune may drop a subgraph checkpoint of no kept run).
    after = _reads(bucket)
    for name, read in before.items():
        if "|inner" not in name and "all namespaces" not in name:
            assert after[name] == read, name


def test_cancelled_between_threads_resumes_after_the_cursor(
    bucket: Path, tmp_path: Path, before: dict[str, Any]
) -> None:
    clean = _clean_upgrade(tmp_path)
    polls = iter([False, True])
    first = upgrade(config=_config(bucket), apply=True, should_cancel=lambda: next(polls))
    assert first["cancelled"] is True and first["complete"] is False
    assert first["threads"]["upgraded"] == 1
    assert [k for k in _files(bucket) if k.startswith("jobs/upgrade/")]
    assert _reads(bucket) == before  # half upgraded, read the same

    rest = upgrade(config=_config(bucket), apply=True)
    assert rest["resumed_after"] == keys.thread_prefix(script.CHAT)
    assert rest["threads"] == {"scanned": 1, "upgraded": 1, "current": 0, "failed": 0}
    assert rest["complete"] is True
    assert _normalized(_files(bucket)) == _normalized(_files(clean))
    assert _reads(bucket) == before
    # --restart (or a complete run's deleted cursor) checks every thread again.
    again = upgrade(config=_config(bucket), apply=True, restart=True)
    assert again["threads"]["current"] == 2


def _count_puts(monkeypatch: pytest.MonkeyPatch, root: Path) -> int:
    puts = {"n": 0}
    real_put = LocalStore.put

    def counting(self: LocalStore, key: str, data: bytes, mode: Any = PutMode.OVERWRITE) -> None:
        puts["n"] += 1
        real_put(self, key, data, mode)

    with monkeypatch.context() as mp:
        mp.setattr(LocalStore, "put", counting)
        upgrade(config=_config(root), apply=True, concurrency=1)
    return puts["n"]


@pytest.mark.parametrize("fraction", [0.05, 0.3, 0.6, 0.95])
def test_a_failed_put_part_way_then_a_rerun_equals_one_run(
    bucket: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    before: dict[str, Any],
    fraction: float,
) -> None:
    clean = tmp_path / "clean"
    shutil.copytree(FIXTURE, clean)
    total = _count_puts(monkeypatch, clean)
    real_put = LocalStore.put
    budget = {"left": int(total * fraction)}

    def failing(self: LocalStore, key: str, data: bytes, mode: Any = PutMode.OVERWRITE) -> None:
        if budget["left"] <= 0 and not key.startswith("jobs/"):
            raise StoreUnavailableError(f"injected: {key}")
        budget["left"] -= 1
        real_put(self, key, data, mode)

    with monkeypatch.context() as mp:
        mp.setattr(LocalStore, "put", failing)
        with pytest.raises(JobError, match="injected"):
            upgrade(config=_config(bucket), apply=True, concurrency=1)
    assert _reads(bucket) == before  # readable in between, the same
    done = sum(k.endswith(keys.V2_MANIFEST_SUFFIX) for k in _files(bucket))

    resumed = upgrade(config=_config(bucket), apply=True)
    assert resumed["complete"] is True and resumed["errors"] == []
    assert resumed["checkpoints_rewritten"] == V1_MANIFESTS - done  # none twice
    assert _v1_keys(bucket) == []
    assert _normalized(_files(bucket)) == _normalized(_files(clean))
    assert _reads(bucket) == before
    assert upgrade(config=_config(bucket), apply=True)["threads"]["current"] == 2


def test_a_failed_delete_part_way_then_a_rerun_completes(
    bucket: Path, monkeypatch: pytest.MonkeyPatch, before: dict[str, Any]
) -> None:
    real_delete = LocalStore.delete
    calls = {"n": 0}

    def failing(self: LocalStore, names: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 2:  # the chat's manifests are gone, its writes not yet
            raise StoreUnavailableError("injected delete failure")
        real_delete(self, names)

    with monkeypatch.context() as mp:
        mp.setattr(LocalStore, "delete", failing)
        with pytest.raises(JobError, match="injected"):
            upgrade(config=_config(bucket), apply=True, concurrency=1)
    left = _v1_keys(bucket)
    chat = [k for k in left if k.startswith(keys.thread_prefix(script.CHAT))]
    assert len(chat) == V1_WRITE_KEYS and all("/writes/" in k for k in chat)
    assert _reads(bucket) == before

    resumed = upgrade(config=_config(bucket), apply=True)
    assert resumed["threads"]["failed"] == 0
    assert resumed["checkpoints_rewritten"] == 1  # the other thread's only one
    assert resumed["v1_keys_deleted"] == len(left)
    assert _v1_keys(bucket) == []
    assert _reads(bucket) == before


def _conflicting_put(monkeypatch: pytest.MonkeyPatch, thread: str) -> None:
    """Another writer stores other bytes as the thread's first ``<R>.2`` just before us."""
    real_put = LocalStore.put
    pfx = keys.thread_prefix(thread)

    def racing(self: LocalStore, key: str, data: bytes, mode: Any = PutMode.OVERWRITE) -> None:
        mine = key.startswith(pfx) and key.endswith(keys.V2_MANIFEST_SUFFIX)
        if mine and not os.path.exists(os.path.join(self.root, key)):
            real_put(self, key, data[:-1] + bytes([data[-1] ^ 1]), PutMode.CREATE)
        real_put(self, key, data, mode)

    monkeypatch.setattr(LocalStore, "put", racing)


def test_a_conflict_fails_its_thread_alone_and_deletes_nothing_of_it(
    bucket: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old_chat = [k for k in _v1_keys(bucket) if k.startswith(keys.thread_prefix(script.CHAT))]
    _conflicting_put(monkeypatch, script.CHAT)
    report = upgrade(config=_config(bucket), apply=True)
    assert report["threads"] == {"scanned": 2, "upgraded": 1, "current": 0, "failed": 1}
    (error,) = report["errors"]
    assert error["thread_id"] == script.CHAT
    assert "CheckpointConflictError" in error["error"]
    assert set(old_chat) <= set(_v1_keys(bucket))  # nothing of that thread deleted
    assert not [k for k in _v1_keys(bucket) if k.startswith(keys.thread_prefix(script.ODD))]

    out = io.StringIO()
    args = ["upgrade", "--url", f"file://{bucket}", "--apply", "--no-progress"]
    code = cli.main(args, stdout=out)
    assert code == cli.EXIT_FOUND
    assert f"FAILED {script.CHAT!r}" in out.getvalue()


def test_a_thread_with_a_key_the_format_does_not_define_is_left_alone(bucket: Path) -> None:
    stray = bucket / "threads" / keys.token("thread_id", script.ODD) / "checkpoints" / "_" / "x"
    stray.write_bytes(b"?")
    files = {k: v for k, v in _files(bucket).items() if "/_user" in k}
    report = upgrade(config=_config(bucket), apply=True)
    assert report["threads"]["failed"] == 1 and report["threads"]["upgraded"] == 1
    (error,) = report["errors"]
    assert error["thread_id"] == script.ODD and "checkpoints/_/x" in error["error"]
    assert {k: v for k, v in _files(bucket).items() if "/_user" in k} == files


def test_the_command_line_end_to_end(bucket: Path, before: dict[str, Any]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OBJSTORE_SAVER_URL",)}
    env["PYTHONPATH"] = str(ROOT)
    url = f"file://{bucket}"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "objstore_saver", "upgrade", "--url", url, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )

    files = _files(bucket)
    dry = run()
    assert dry.returncode == 0, dry.stderr
    assert "dry run" in dry.stdout and f"{V1_MANIFESTS} to rewrite" in dry.stdout
    assert _files(bucket) == files
    applied = run("--apply", "--json")
    assert applied.returncode == 0, applied.stderr
    report = json.loads(applied.stdout)
    assert report["checkpoints_rewritten"] == V1_MANIFESTS and report["threads"]["failed"] == 0
    assert _v1_keys(bucket) == []
    assert _reads(bucket) == before
    again = run("--json", "--no-progress")
    assert again.returncode == 0 and json.loads(again.stdout)["threads"]["current"] == 2


def test_on_s3(
    s3_endpoint: Any, s3_bucket: str, creds_env: None, before: dict[str, Any], tmp_path: Path
) -> None:
    client = s3_endpoint.client()
    for name, body in _files(FIXTURE).items():
        client.put_object(Bucket=s3_bucket, Key=f"up/{name}", Body=body)
    url = f"s3://{s3_bucket}/up?endpoint_url={s3_endpoint.url}&region={s3_endpoint.region}"
    config = OpsConfig(url=url)

    def stored() -> list[str]:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=s3_bucket, Prefix="up/")
        return [o["Key"][3:] for page in pages for o in page.get("Contents", [])]

    dry = upgrade(config=config)
    assert dry["checkpoints_rewritten"] == V1_MANIFESTS and len(stored()) == len(_files(FIXTURE))
    report = upgrade(config=config, apply=True)
    assert report["threads"]["upgraded"] == 2 and report["errors"] == []
    assert report["v1_keys_deleted"] == V1_MANIFESTS + V1_WRITE_KEYS
    names = stored()
    assert not [k for k in names if "/writes/" in k]
    assert sum(k.endswith(keys.V2_MANIFEST_SUFFIX) for k in names) == V1_MANIFESTS
    # What the bucket reads as, through a saver on S3, is what it read as before.
    local = tmp_path / "copy"
    for name in names:
        path = local / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(client.get_object(Bucket=s3_bucket, Key=f"up/{name}")["Body"].read())
    assert _reads(local) == before
    with ObjectStoreSaver.from_url(url) as saver:
        latest = saver.get_tuple(script._config(script.CHAT))
        assert _tuple(latest) == before[f"{script.CHAT}| latest"]
    assert verify(config=config, read_data=True)["ok"] is True
    assert upgrade(config=config, apply=True)["threads"]["current"] == 2
