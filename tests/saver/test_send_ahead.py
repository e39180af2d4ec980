"""Requests sent ahead of their answers (``SendsAhead``): the blocking driver's batches.

The lean S3 transport sends a batch's requests from the caller's thread,
runs the batch's ``meanwhile`` work, then reads the answers: no thread hop.
Real S3 endpoint on loopback (moto's server; Ceph RGW in CI's second pass).
"""

from __future__ import annotations

from typing import Any

import pytest

from objstore_saver.driver import AHEAD_BODY_MAX, Driver
from objstore_saver.plans.requests import (
    Delete,
    Get,
    ListKeys,
    Op,
    Put,
    execute,
    execute_ahead,
    run_batch_while,
)
from objstore_saver.storage.base import (
    InvalidKeyError,
    ListPage,
    ObjectNotFoundError,
    PutMode,
)
from objstore_saver.storage.requests import SendsAhead


@pytest.fixture
def lean(s3_endpoint: Any, s3_bucket: str) -> Any:
    store = s3_endpoint.lean_store(s3_bucket, "pfx/")
    yield store
    store.close()


def test_the_lean_store_sends_ahead(lean: Any) -> None:
    assert isinstance(lean, SendsAhead)


def test_a_batch_is_in_flight_during_the_work_and_no_thread_is_used(lean: Any) -> None:
    lean.put("a/1", b"one")
    lean.put("a/old", b"old")
    driver = Driver(lean)
    in_flight: list[int] = []

    def plan() -> Any:
        results, _ = yield from run_batch_while(
            lambda: in_flight.append(lean._pool.busy),
            ListKeys("a/"),
            Put("a/2", b"two"),
            Delete(("a/old",)),
        )
        return results

    try:
        page, stored, deleted = driver.run(plan())
    finally:
        driver.close()
    # All three were written before the work ran, and none was answered yet.
    assert in_flight == [3]
    # The LIST ran beside the PUT and the DELETE: it saw a/1, maybe the others.
    assert "a/1" in {o.key for o in page.objects}
    assert stored is True and deleted is None
    assert lean.get("a/2") == b"two"
    assert [o.key for o in lean.list("a/").objects] == ["a/1", "a/2"]
    assert lean._pool.busy == 0
    assert not driver._pool._threads  # the driver's worker pool never started a thread


@pytest.mark.parametrize(
    "big", [Get("a/1"), Put("a/big", b"x" * (AHEAD_BODY_MAX + 1))], ids=["get", "large put"]
)
def test_a_batch_with_a_large_answer_or_body_goes_to_the_pool(lean: Any, big: Op) -> None:
    # One thread reads answers in order: a large one would hold up the others.
    lean.put("a/1", b"one")
    driver = Driver(lean)
    try:
        driver.run(run_batch_while(lambda: None, ListKeys("a/"), big))
    finally:
        driver.close()
    assert driver._pool._threads


@pytest.mark.parametrize(
    "op",
    [
        Get("k/present"),
        Get("k/missing"),
        Get("k/present", (1, 3)),
        Put("k/present", b"other", PutMode.CREATE),
        Put("k/new", b"new", PutMode.CREATE),
        Put("k/present", b"same", PutMode.OVERWRITE),
        ListKeys("k/"),
        ListKeys("k/", start_after="k/new", limit=1),
        Delete(("k/present", "k/never")),
    ],
    ids=repr,
)
def test_an_answer_is_what_the_blocking_call_returns(lean: Any, op: Op) -> None:
    lean.put("k/present", b"same")
    ahead = execute_ahead(lean, op)()
    lean.delete(["k/new"])
    lean.put("k/present", b"same")
    blocking = execute(lean, op)
    if isinstance(ahead, ListPage):
        assert [o.key for o in ahead.objects] == [o.key for o in blocking.objects]
        assert ahead.truncated == blocking.truncated
    else:
        assert ahead == blocking


def test_an_invalid_key_is_raised_when_the_answer_is_read(lean: Any) -> None:
    answer = lean.send_ahead(Get("bad//key"))  # nothing sent, nothing raised yet
    assert lean._pool.busy == 0
    with pytest.raises(InvalidKeyError):
        answer()


def test_without_a_free_connection_the_request_is_sent_when_its_answer_is_read(
    s3_endpoint: Any, s3_bucket: str
) -> None:
    store = s3_endpoint.lean_store(s3_bucket, "pfx/", max_connections=1)
    try:
        store.put("x/1", b"1")
        first = store.send_ahead(ListKeys("x/"))
        second = store.send_ahead(Get("x/missing"))  # no slot: not sent yet
        assert store._pool.busy == 1
        assert [o.key for o in first().objects] == ["x/1"]
        with pytest.raises(ObjectNotFoundError):
            second()
        assert store._pool.busy == 0
    finally:
        store.close()
