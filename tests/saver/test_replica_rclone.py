"""A replica made by rclone run on a schedule (docs/replication.md, "No replication on the server").

Debian's ``rclone copy`` copies the source region's objects to the replica,
several objects at once in an order of its own, while a saver there (told it
is a replica) is probed; after the last copy both regions hold the same
checkpoints. On S3 endpoints only (moto here, Ceph RGW in CI's second pass).
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest
import system_deps
from helpers.backends import Backend
from langchain_core.messages import HumanMessage
from replicas import cfg, encryption, ids, open_saver, same

from bench.graphs import noisy_chat_graph
from objstore_saver.errors import MissingObjectError
from objstore_saver.testing.replication import rclone_copy

pytestmark = pytest.mark.backends("s3-lean")
__all__ = ["encryption"]  # the fixture, imported for pytest to find


def _rclone(backend: Backend) -> tuple[list[str], dict[str, str]]:
    """The command copying ``east/`` to ``west/`` of the test's bucket, and its environment."""
    exe = shutil.which("rclone") or system_deps.missing("rclone")
    endpoint = backend.endpoint
    assert endpoint is not None and backend.bucket is not None
    return rclone_copy(
        f"{backend.bucket}/east",
        f"{backend.bucket}/west",
        endpoint_url=endpoint.url,
        region=endpoint.region,
        access_key=endpoint.access_key or "test",
        secret_key=endpoint.secret_key or "test",
        rclone=exe,
    )


def test_a_replica_copied_by_rclone_reads_through_and_converges(
    backend: Backend, encryption: Any
) -> None:
    command, env = _rclone(backend)
    east, west = backend.store("east/"), backend.store("west/")
    probes = found = 0
    with (
        open_saver(east, encryption) as writer,
        open_saver(west, encryption, replica_lag=900) as reader,
    ):
        graph = noisy_chat_graph(writer, seed=3)
        for turn in range(6):
            graph.invoke({"messages": [HumanMessage(f"turn {turn}", id=f"h{turn}")]}, cfg("t"))
            copying = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
            try:
                for _ in range(200):  # probed while rclone copies (bounded)
                    probes += 1
                    latest = reader.get_tuple(cfg("t"))
                    if latest is not None:
                        found += 1
                        cid = latest.config["configurable"]["checkpoint_id"]
                        same(latest, writer.get_tuple(cfg("t", cid)))
                    if copying.poll() is not None:
                        break
            finally:
                _, err = copying.communicate(timeout=120)
            assert copying.returncode == 0, err
        head = writer.get_tuple(cfg("t"))
        assert head is not None
        caught_up = reader.get_tuple(cfg("t"))
        assert caught_up is not None and caught_up.config == head.config
        same(caught_up, head)
        assert ids(reader, "t") == ids(writer, "t")
        assert reader.verify().ok
    assert probes >= 6 and found > 0
    # A copy with nothing new is a no-op: no key differs between the regions.
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr


def test_without_the_setting_an_rclone_copy_in_progress_can_be_corruption(
    backend: Backend,
) -> None:
    """The replica's state mid-copy: manifests before objects, which a plain reader refuses."""
    command, env = _rclone(backend)
    east, west = backend.store("east/"), backend.store("west/")
    with open_saver(east, False) as writer:
        graph = noisy_chat_graph(writer, seed=3, big=400 * 1024)
        for turn in range(2):
            graph.invoke({"messages": [HumanMessage(f"turn {turn}", id=f"h{turn}")]}, cfg("t"))
    only_checkpoints = [*command, "--include", "/threads/*/checkpoints/**"]
    done = subprocess.run(only_checkpoints, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    with open_saver(west, False) as plain, pytest.raises(MissingObjectError):
        plain.get_tuple(cfg("t"))
    with open_saver(west, False, replica_lag=900) as replica:
        assert replica.get_tuple(cfg("t")) is not None
