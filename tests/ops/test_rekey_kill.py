"""``kill -9`` in the middle of ``rekey --drop-old --apply``, then readers and a rerun.

The job runs in a child process whose key object writes are slowed a little;
the parent sends SIGKILL once a chosen number of key objects holds the new
wrapping. Every thread must then read as before with the keys configured
during the rotation (never an error, never an older checkpoint), and the
rerun must finish the rotation: the new key alone reads everything, the old
key alone nothing.
"""

from __future__ import annotations

import base64
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest
from kill_child import kill_when
from ops_helpers import chat, snapshot

from objstore_saver import ObjectStoreSaver
from objstore_saver.crypto import ClientEncryption
from objstore_saver.crypto.master_keys import LocalMasterKey
from objstore_saver.crypto.names import KEY_ENV, KEYS_ENV, KEYS_URL_ENV
from objstore_saver.crypto.sealed_store import key_object_key
from objstore_saver.crypto.thread_keys import key_object_wrappings
from objstore_saver.errors import ThreadKeyError
from objstore_saver.ops import OpsConfig, rekey
from objstore_saver.storage import LocalStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

THREADS = [f"r{i:02d}" for i in range(10)]

#: The child: rekey --drop-old --apply of store argv[1], each PUT 20 ms slower.
CHILD = textwrap.dedent(
    """
    slowed("put", 0.02)
    from objstore_saver.ops import OpsConfig, rekey

    rekey(OpsConfig(url=sys.argv[1]), apply=True, drop_old=True, concurrency=2)
    """
)


def _spec(*keys: LocalMasterKey) -> str:
    return ",".join(base64.b64encode(k.key).decode() for k in keys)


def _rewrapped(store: LocalStore, new: LocalMasterKey) -> int:
    """Key objects wrapped by the new key alone (what --drop-old writes)."""
    done = 0
    for t in THREADS:
        key = key_object_key("_" + t)
        names = [name for name, _ in key_object_wrappings(store.get(key), key, "_" + t)]
        done += names == [new.name]
    return done


def _reads(store: LocalStore, *keys: LocalMasterKey) -> dict[str, object]:
    with ObjectStoreSaver(store, client_encryption=ClientEncryption.of(*keys)) as saver:
        return {t: snapshot(saver, t) for t in THREADS}


@pytest.mark.parametrize("rewrapped", [1, 4, 8])
def test_rekey_killed_then_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rewrapped: int
) -> None:
    old, new = LocalMasterKey(os.urandom(32)), LocalMasterKey(os.urandom(32))
    store = LocalStore(tmp_path / "store")
    with ObjectStoreSaver(store, client_encryption=ClientEncryption.of(old)) as saver:
        for t in THREADS:
            chat(saver, t, [f"a secret for {t}", "a second question"])
    before = _reads(store, old)
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(KEYS_URL_ENV, raising=False)
    monkeypatch.setenv(KEYS_ENV, _spec(new, old))
    killed = kill_when(CHILD, [store.location], lambda: _rewrapped(store, new) >= rewrapped)
    assert killed == -signal.SIGKILL
    done = _rewrapped(store, new)
    assert rewrapped <= done < len(THREADS)
    # Mid-rotation, with the keys every process holds during it: every thread as it was.
    assert _reads(store, new, old) == before
    with pytest.raises(ThreadKeyError):  # the old key alone no longer opens the rewrapped
        _reads(store, old)
    report = rekey(OpsConfig(url=store.location), apply=True, drop_old=True)
    assert report["errors"] == [] and report["complete"] is True
    assert report["key_objects"]["rewrapped"] == len(THREADS) - done
    assert _rewrapped(store, new) == len(THREADS)
    assert _reads(store, new) == before
    with pytest.raises(ThreadKeyError):
        _reads(store, old)
    assert not list(store.list("jobs/").objects)  # the finished run left no cursor
