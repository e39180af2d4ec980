"""A backend on a local directory: key ``a/b/c`` is the file ``<root>/a/b/c``.

Writes go to a temporary file (its name has ``#``, outside the key alphabet:
listings skip it) in the target's directory, then are linked (create-only) or
renamed (overwrite) into place: a reader never sees a partial object.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import stat
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime

from objstore_saver.storage.base import (
    MAX_LIST_PAGE,
    InvalidKeyError,
    ListPage,
    ObjectExistsError,
    ObjectInfo,
    ObjectNotFoundError,
    PutMode,
    RequestFacts,
    StorageError,
    ThreadedAsync,
    validate_byte_range,
    validate_key,
)

#: Longest file name on common filesystems (ext4, xfs, apfs, ntfs).
_MAX_SEGMENT_BYTES = 255
#: Attempts of a put whose parent directory a concurrent delete keeps removing.
_PUT_ATTEMPTS = 5
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~%/")
_O_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation
#: Flags of a new temporary file (os.open makes it non-inheritable).
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY
_READ_FLAGS = os.O_RDONLY | _O_BINARY
#: Smallest read of a whole object after the first (which asks for its size).
_READ_CHUNK = 1 << 16


class _TempNames:
    """Names of temporary files: ``#``, a random token of this process (drawn again in a
    forked child), a counter advanced under the GIL."""

    def __init__(self) -> None:
        self._renew()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._renew)

    def _renew(self) -> None:
        self._prefix = f"#{uuid.uuid4().hex}-"
        self._counter = itertools.count()

    def next(self) -> str:
        return f"{self._prefix}{next(self._counter):x}"


_temp_names = _TempNames()


def _unlink_quiet(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _read_to_end(fd: int, size: int, limit: int | None = None) -> bytes:
    """Read from ``fd`` until end of file (or ``limit`` bytes); the first read asks for
    ``size + 1``, so a file of the expected ``size`` needs one more (empty) read."""
    want = size + 1 if limit is None else limit
    chunks = []
    got = 0
    while limit is None or got < limit:
        chunk = os.read(fd, want)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
        want = _READ_CHUNK if limit is None else limit - got
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _fsync_dir(path: str) -> None:
    if os.name != "posix":  # directories cannot be opened for fsync elsewhere
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        # A concurrent delete removed the key just stored and its directory: nothing to sync.
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _scan(path: str, dir_key: str) -> Iterator[tuple[str, bool, str]]:
    """Entries of one directory as ``(sort key, is_dir, path)``, ascending; a directory
    sorts as its name plus ``/``, so its subtree sits there in byte order (``a-c`` < ``a/b``)."""
    try:
        with os.scandir(path) as it:
            entries = []
            for entry in it:
                if "#" in entry.name:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    entries.append((f"{dir_key}{entry.name}/", True, entry.path))
                elif entry.is_file(follow_symlinks=False):
                    entries.append((dir_key + entry.name, False, entry.path))
    except (FileNotFoundError, NotADirectoryError):  # removed by a concurrent delete
        return iter(())
    entries.sort()
    return iter(entries)


class LocalStore(ThreadedAsync):
    """An :class:`~objstore_saver.storage.base.ObjectStore` on a local directory.

    Safe for threads and for processes sharing the directory (atomic ``link`` and
    ``rename``). A key cannot be both an object and a directory of other keys, and
    every segment must fit in a file name. ``root`` is created if missing;
    ``fsync=False`` (tests and scratch data only) skips flushing file contents
    and directory entries to disk before a put returns.
    """

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self._root = os.path.abspath(os.fspath(root))
        self._fsync = fsync
        os.makedirs(self._root, exist_ok=True)

    @property
    def root(self) -> str:
        """Absolute path of the directory holding the objects."""
        return self._root

    @property
    def location(self) -> str:
        """``file://`` URL of the root directory."""
        return f"file://{self._root}"

    def __repr__(self) -> str:
        return f"LocalStore({self._root!r})"

    def request_facts(self) -> RequestFacts:
        """Requests named ``LocalStore.PutObject``..., with ``file.*`` attributes."""
        return RequestFacts(
            "LocalStore", file_root=self._root, attributes={"file.directory": self._root}
        )

    def _path(self, key: str) -> str:
        validate_key(key)
        segments = key.split("/")
        if any(len(seg) > _MAX_SEGMENT_BYTES for seg in segments):
            raise InvalidKeyError(
                f"invalid key {key!r}: a segment is longer than {_MAX_SEGMENT_BYTES} bytes, "
                f"the longest file name {self.location} can store"
            )
        return os.path.join(self._root, *segments)

    def _conflict(self, key: str) -> StorageError:
        return StorageError(
            f"cannot store key {key!r} in {self.location}: a key cannot be both an object "
            "and a directory of other keys on a local filesystem"
        )

    def _make_parents(self, key: str) -> list[str]:
        """Create the missing directories of ``key``; return those this call created."""
        created: list[str] = []
        missing: list[str] = []
        path = os.path.dirname(self._path(key))
        while path != self._root and not self._mkdir(path, key, created):
            missing.append(path)
            path = os.path.dirname(path)
        for path in reversed(missing):
            if not self._mkdir(path, key, created):
                break  # a concurrent delete removed it again: the put retries
        return created

    def _mkdir(self, path: str, key: str, created: list[str]) -> bool:
        """Make directory ``path`` (or find it); False when its parent is missing."""
        try:
            os.mkdir(path)
        except FileNotFoundError:
            return False
        except FileExistsError:
            if not os.path.isdir(path):
                raise self._conflict(key) from None
        except NotADirectoryError:  # an ancestor is an object
            raise self._conflict(key) from None
        else:
            created.append(path)
        return True

    def _write_temp(self, directory: str, data: bytes) -> str:
        tmp = os.path.join(directory, _temp_names.next())
        fd = os.open(tmp, _TEMP_FLAGS, 0o666)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if self._fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException:
            _unlink_quiet(tmp)
            raise
        return tmp

    def _commit(self, tmp: str, target: str, key: str, mode: PutMode) -> None:
        if mode is PutMode.CREATE:
            try:
                os.link(tmp, target)
            except FileExistsError:
                if os.path.isdir(target):
                    raise self._conflict(key) from None
                raise ObjectExistsError(self.location, key) from None
        else:
            try:
                os.replace(tmp, target)
            except IsADirectoryError:
                raise self._conflict(key) from None

    def put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        """Store ``data`` at ``key`` atomically; InvalidKeyError also for a segment too long
        for a file name, StorageError when the key or a directory of it is the other kind."""
        target = self._path(key)
        parent = os.path.dirname(target)
        created: list[str] = []
        for _ in range(_PUT_ATTEMPTS):
            try:
                tmp = self._write_temp(parent, data)
            except (FileNotFoundError, NotADirectoryError):
                # The directory is missing (first key in it, or a concurrent delete
                # removed it empty) or an ancestor is an object (named by the chain).
                # Once the temp file exists no delete removes the chain: only this races.
                created.extend(self._make_parents(key))
                continue
            try:
                self._commit(tmp, target, key, mode)
            finally:
                _unlink_quiet(tmp)
            if self._fsync:
                # The new entry, and every directory this call created, durable now.
                for directory in {parent, *(os.path.dirname(d) for d in created)}:
                    _fsync_dir(directory)
            return
        raise StorageError(
            f"cannot store key {key!r} in {self.location}: its directory kept disappearing"
        )

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        """Return the object at ``key``, or bytes ``[start, end)`` of it (``end`` clamped)."""
        path = self._path(key)
        if byte_range is not None:
            start, end = validate_byte_range(byte_range)
        try:
            fd = os.open(path, _READ_FLAGS)
            try:
                st = os.fstat(fd)
                if stat.S_ISDIR(st.st_mode):
                    raise IsADirectoryError(errno.EISDIR, "is a directory", path)
                # Writes replace the file: the open file's size is the object's.
                if byte_range is None:
                    return _read_to_end(fd, st.st_size)
                end = min(end, st.st_size)
                if start >= end:
                    return b""
                os.lseek(fd, start, os.SEEK_SET)
                return _read_to_end(fd, end - start, limit=end - start)
            finally:
                os.close(fd)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ObjectNotFoundError(self.location, key) from None

    def _iter_keys(self, prefix: str, start_after: str | None) -> Iterator[tuple[str, str]]:
        """Yield ``(key, path)`` of files under ``prefix`` after ``start_after``, ascending."""
        if not set(prefix) <= _KEY_CHARS:
            return  # no key can start with it
        dir_key = prefix[: prefix.rfind("/") + 1]
        segments = dir_key.split("/")[:-1]
        if any(seg in ("", ".", "..") for seg in segments):
            return
        # Descend straight to the deepest directory the prefix names.
        stack = [_scan(os.path.join(self._root, *segments), dir_key)]
        while stack:
            item = next(stack[-1], None)
            if item is None:
                stack.pop()
                continue
            sort_key, is_dir, path = item
            # Every key of a directory's subtree starts with its sort key.
            if not (sort_key.startswith(prefix) or (is_dir and prefix.startswith(sort_key))):
                if sort_key > prefix:
                    return  # past the range of keys with this prefix
                continue
            if (
                start_after is not None
                and sort_key <= start_after
                and not (is_dir and start_after.startswith(sort_key))
            ):
                continue  # the entry, or its whole subtree, is <= start_after
            if is_dir:
                stack.append(_scan(path, sort_key))
            else:
                yield sort_key, path

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int = MAX_LIST_PAGE
    ) -> ListPage:
        """List up to ``limit`` (1 to 1,000) keys after ``start_after`` under ``prefix``
        (``truncated`` exactly when more keys follow)."""
        if not 1 <= limit <= MAX_LIST_PAGE:
            raise ValueError(f"limit must be between 1 and {MAX_LIST_PAGE}, got {limit}")
        objects: list[ObjectInfo] = []
        truncated = False
        for key, path in self._iter_keys(prefix, start_after):
            try:
                st = os.stat(path)
            except FileNotFoundError:  # deleted since the directory was read
                continue
            if len(objects) == limit:
                truncated = True
                break
            mtime = datetime.fromtimestamp(st.st_mtime, UTC)
            objects.append(ObjectInfo(key=key, size=st.st_size, last_modified=mtime))
        return ListPage(objects=objects, truncated=truncated)

    def _prune(self, directory: str) -> None:
        while directory != self._root and directory.startswith(self._root + os.sep):
            try:
                os.rmdir(directory)
            except OSError as exc:
                # Not empty: another key, or a concurrent put's temp file. Gone: a
                # concurrent delete removed it.
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    return
                if exc.errno != errno.ENOENT:
                    raise
            directory = os.path.dirname(directory)

    def delete(self, keys: Sequence[str]) -> None:
        """Delete the given keys (holding nothing is no error), then emptied directories
        (an invalid key raises InvalidKeyError before anything is deleted)."""
        paths = [self._path(key) for key in keys]
        parents = set()
        for path in paths:
            try:
                os.unlink(path)
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                continue
            parents.add(os.path.dirname(path))
        for directory in sorted(parents, key=len, reverse=True):
            self._prune(directory)
