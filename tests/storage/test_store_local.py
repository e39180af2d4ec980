"""LocalStore: the store contract plus what is specific to files."""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from objstore_saver.storage import (
    InvalidKeyError,
    LocalStore,
    ObjectExistsError,
    ObjectNotFoundError,
    PutMode,
    StorageError,
    local as local_module,
)
from objstore_saver.testing.store_contract import StoreContract


class TestLocalStoreContract(StoreContract):
    @pytest.fixture
    def empty_store(self, tmp_path: Path) -> LocalStore:
        return LocalStore(tmp_path / "store")


class TestLocalStoreWithoutFsyncContract(StoreContract):
    @pytest.fixture
    def empty_store(self, tmp_path: Path) -> LocalStore:
        return LocalStore(tmp_path / "store", fsync=False)


def _all_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _all_dirs(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir())


def test_root_is_created_and_named(tmp_path: Path) -> None:
    root = tmp_path / "deep" / "root"
    store = LocalStore(root)
    assert root.is_dir()
    assert store.location == f"file://{root}"
    assert LocalStore(os.path.relpath(root)).location == f"file://{root}"


def test_key_maps_to_path(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("a/b/c.bin", b"payload")
    assert (tmp_path / "a" / "b" / "c.bin").read_bytes() == b"payload"


def test_no_temp_files_remain(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("x/one", b"1")
    store.put("x/one", b"2")
    store.put("x/two", b"3", PutMode.CREATE)
    with pytest.raises(ObjectExistsError):
        store.put("x/two", b"4", PutMode.CREATE)
    with pytest.raises(StorageError):
        store.put("x/one/child", b"5")
    assert _all_files(tmp_path) == ["x/one", "x/two"]


def test_listing_skips_temp_files(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("d/k", b"v")
    (tmp_path / "#stray").write_bytes(b"partial")
    (tmp_path / "d" / "#abc").write_bytes(b"partial")
    (tmp_path / "e#x").mkdir()
    (tmp_path / "e#x" / "inner").write_bytes(b"")
    assert [o.key for o in store.list("").objects] == ["d/k"]
    assert [o.key for o in store.list("d/").objects] == ["d/k"]
    assert store.list("e").objects == []


def test_delete_removes_empty_directories(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("a/b/c/one", b"1")
    store.put("a/b/two", b"2")
    store.put("z/three", b"3")
    store.delete(["a/b/c/one", "z/three"])
    assert _all_dirs(tmp_path) == ["a", "a/b"]
    store.delete(["a/b/two"])
    assert _all_dirs(tmp_path) == []
    assert tmp_path.is_dir()


def test_object_and_directory_of_same_name_conflict(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("a", b"object")
    with pytest.raises(StorageError, match="both an object and a directory") as info:
        store.put("a/b", b"x")
    assert "'a/b'" in str(info.value)
    store.put("c/d", b"x")
    for mode in PutMode:
        with pytest.raises(StorageError, match="both an object and a directory"):
            store.put("c", b"x", mode)
    with pytest.raises(ObjectNotFoundError):
        store.get("c")
    with pytest.raises(ObjectNotFoundError):
        store.get("a/b")
    store.delete(["c", "a/b"])
    assert store.get("c/d") == b"x"
    assert store.get("a") == b"object"


def test_segment_longer_than_a_file_name(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    key = "s" * 256
    with pytest.raises(InvalidKeyError, match="255") as info:
        store.put(key, b"x")
    assert repr(key) in str(info.value)
    store.put("s" * 255, b"x")


def test_put_retries_when_a_delete_removes_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalStore(tmp_path)
    original = LocalStore._write_temp
    calls = []

    def racing_write_temp(self: LocalStore, directory: str, data: bytes) -> str:
        calls.append(directory)
        if len(calls) == 1:
            # What a concurrent delete's cleanup does to a still-empty directory.
            os.rmdir(directory)
            os.rmdir(os.path.dirname(directory))
        return original(self, directory, data)

    monkeypatch.setattr(LocalStore, "_write_temp", racing_write_temp)
    # The directories exist when the put starts, so its first write goes straight there.
    os.makedirs(tmp_path / "p" / "q")
    store.put("p/q/key", b"v", PutMode.CREATE)
    assert calls == [str(tmp_path / "p" / "q")] * 2
    assert store.get("p/q/key") == b"v"
    assert _all_files(tmp_path) == ["p/q/key"]


def test_put_gives_up_when_its_directory_keeps_disappearing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalStore(tmp_path)
    original = LocalStore._write_temp

    def racing_write_temp(self: LocalStore, directory: str, data: bytes) -> str:
        os.rmdir(directory)
        return original(self, directory, data)

    monkeypatch.setattr(LocalStore, "_write_temp", racing_write_temp)
    with pytest.raises(StorageError, match="kept disappearing"):
        store.put("p/key", b"v")


@pytest.mark.parametrize("mode", list(PutMode))
def test_readers_never_see_a_partial_object(tmp_path: Path, mode: PutMode) -> None:
    store = LocalStore(tmp_path, fsync=False)
    old, new = b"o" * 1000, os.urandom(16 * 1024 * 1024)
    if mode is PutMode.OVERWRITE:
        store.put("big", old)
    seen: set[int] = set()
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                seen.add(len(store.get("big")))
            except ObjectNotFoundError:
                seen.add(-1)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for _ in range(5):
            store.delete(["big"]) if mode is PutMode.CREATE else store.put("big", old)
            store.put("big", new, mode)
    finally:
        done.set()
        reader.join()
    assert seen <= {-1, len(old), len(new)}
    assert store.get("big") == new


# Segments from a tiny alphabet around '/', so that names collide in interesting ways.
_segment = st.text(alphabet="ab-.0~", min_size=1, max_size=3).filter(lambda s: s not in {".", ".."})
_key = st.lists(_segment, min_size=1, max_size=3).map("/".join)
_probe = st.text(alphabet="ab-./0~", max_size=6)


def _storable(keys: set[str]) -> list[str]:
    """Drop keys that are directories of other keys (not storable on files)."""
    return sorted(k for k in keys if not any(o.startswith(k + "/") for o in keys))


@settings(max_examples=150, deadline=None)
@given(
    keys=st.sets(_key, max_size=25),
    prefix=_probe,
    start_after=st.none() | _probe,
    limit=st.integers(1, 6),
)
def test_listing_matches_sorted_model(
    keys: set[str], prefix: str, start_after: str | None, limit: int
) -> None:
    stored = _storable(keys)
    with tempfile.TemporaryDirectory() as root:
        store = LocalStore(root, fsync=False)
        for key in stored:
            store.put(key, b"")
        expected = [k for k in stored if k.startswith(prefix)]
        if start_after is not None:
            expected = [k for k in expected if k > start_after]
        page = store.list(prefix, start_after=start_after, limit=limit)
        assert [o.key for o in page.objects] == expected[:limit]
        assert page.truncated == (len(expected) > limit)


def test_put_into_an_existing_directory_makes_no_directory_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalStore(tmp_path)
    store.put("t/c/first", b"1", PutMode.CREATE)
    mkdirs: list[str] = []
    synced: list[str] = []
    real_mkdir, real_fsync_dir = os.mkdir, local_module._fsync_dir

    def counting_mkdir(path: str, *args: object, **kwargs: object) -> None:
        mkdirs.append(path)
        real_mkdir(path, *args, **kwargs)  # type: ignore[arg-type]

    def counting_fsync_dir(path: str) -> None:
        synced.append(path)
        real_fsync_dir(path)

    monkeypatch.setattr(os, "mkdir", counting_mkdir)
    monkeypatch.setattr(local_module, "_fsync_dir", counting_fsync_dir)
    store.put("t/c/second", b"2", PutMode.CREATE)
    assert mkdirs == []
    assert synced == [str(tmp_path / "t" / "c")]
    # A new directory under an existing one: one mkdir, and its parent synced.
    c = tmp_path / "t" / "c"
    store.put("t/c/new/third", b"3", PutMode.CREATE)
    assert mkdirs == [str(c / "new")]
    assert sorted(synced[1:]) == [str(c), str(c / "new")]
    # A new chain: found from the bottom up, created from the top down.
    del mkdirs[:], synced[:]
    store.put("t/d/e/fourth", b"4", PutMode.CREATE)
    t = tmp_path / "t"
    assert mkdirs == [str(t / "d" / "e"), str(t / "d"), str(t / "d" / "e")]
    assert sorted(synced) == [str(t), str(t / "d"), str(t / "d" / "e")]
    keys = ("t/c/first", "t/c/second", "t/c/new/third", "t/d/e/fourth")
    assert [store.get(k) for k in keys] == [b"1", b"2", b"3", b"4"]


def test_get_of_a_directory_is_not_found_with_or_without_range(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("dir/key", b"v")
    for byte_range in (None, (0, 0), (0, 5), (3, 2000)):
        with pytest.raises(ObjectNotFoundError, match="'dir'"):
            store.get("dir", byte_range)


def test_ranged_and_whole_reads_of_a_large_object(tmp_path: Path) -> None:
    store = LocalStore(tmp_path, fsync=False)
    data = os.urandom(3 * 65536 + 17)
    store.put("big", data)
    assert store.get("big") == data
    assert store.get("big", (65530, 2 * 65536 + 3)) == data[65530 : 2 * 65536 + 3]
    assert store.get("big", (len(data) - 5, len(data) + 100)) == data[-5:]
    assert store.get("big", (len(data), len(data) + 1)) == b""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_temporary_names_differ_in_a_forked_child(tmp_path: Path) -> None:
    parent_name = local_module._temp_names.next()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reports its next name and exits at once
        try:
            os.write(write_end, local_module._temp_names.next().encode())
        finally:
            os._exit(0)
    os.close(write_end)
    child_name = os.read(read_end, 200).decode()
    os.close(read_end)
    os.waitpid(pid, 0)
    assert child_name.startswith("#") and parent_name.startswith("#")
    # Different process tokens, not just different counters.
    assert child_name.rsplit("-", 1)[0] != parent_name.rsplit("-", 1)[0]
