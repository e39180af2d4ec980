"""Nothing is lost under injected faults.

Where retries live: an S3 request is retried by botocore (its ``standard`` or
``adaptive`` mode, bounded attempts) inside :class:`Boto3S3Store`, which also tells
a create-only put whose response was lost from someone else's object. The
saver does not retry: when the store gives up, the error reaches LangGraph,
and the user re-runs the graph. These tests inject faults at both places —
under the saver (:class:`FaultyStore`, errors surface) and under botocore
(client hooks, retries absorb them) — re-drive failed calls like a user would,
and compare everything stored with ``InMemorySaver`` fed the same sequence.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from backends import Backend
from faultkit import (
    Model,
    Redrive,
    Workload,
    all_keys,
    assert_agree,
    check_integrity,
    run_workload,
)

from objstore_saver import ObjectStoreSaver
from objstore_saver.storage import (
    Boto3S3Store,
    LocalStore,
    ObjectExistsError,
    ObjectStore,
    PutMode,
    StorageError,
)
from objstore_saver.testing.faults import (
    NOT_CARRIED_OUT,
    FailAt,
    FailWhere,
    Fault,
    FaultyStore,
    InjectedFaultError,
    RandomFaults,
    install_client_faults,
)

#: Totals over the session, printed at the end of the mix tests for the report.
TOTALS: dict[str, int] = {"faults_injected": 0, "checkpoints_verified": 0}


@pytest.fixture
def base_store(backend: Backend) -> ObjectStore:
    return backend.store("faults/", fsync=False)


@pytest.fixture
def s3_client(s3_endpoint: Any) -> Iterator[Any]:
    yield s3_endpoint.client()


# --- the wrappers themselves ------------------------------------------------------


@pytest.mark.parametrize("fault", list(Fault))
def test_faulty_store_carries_out_only_lost_responses(
    base_store: ObjectStore, fault: Fault
) -> None:
    store = FaultyStore(base_store, FailAt({0}, fault))
    with pytest.raises(InjectedFaultError, match=r"put of key 'a/b'") as err:
        store.put("a/b", b"x", PutMode.CREATE)
    assert err.value.fault is fault
    stored = [k for k in all_keys(base_store) if k == "a/b"]
    assert stored == ([] if fault in NOT_CARRIED_OUT else ["a/b"])
    # Request 1 is clean: a re-driven create-only put tells what happened.
    if fault in NOT_CARRIED_OUT:
        store.put("a/b", b"x", PutMode.CREATE)
    else:
        with pytest.raises(ObjectExistsError):
            store.put("a/b", b"x", PutMode.CREATE)
    assert base_store.get("a/b") == b"x"
    assert store.requests == 2 and len(store.injected) == 1


def test_lost_response_is_an_error_whatever_the_store_answered(tmp_path: Path) -> None:
    inner = LocalStore(tmp_path, fsync=False)
    inner.put("k/1", b"1")
    store = FaultyStore(inner, FailWhere(lambda r: True, Fault.LOST_RESPONSE))
    with pytest.raises(InjectedFaultError, match="lost_response on put"):
        store.put("k/1", b"2", PutMode.CREATE)  # the store said "exists"; the caller never heard
    with pytest.raises(InjectedFaultError, match="lost_response on get"):
        store.get("k/2")  # "not found" is lost too
    assert inner.get("k/1") == b"1"


def test_faulty_store_fails_reads_lists_and_deletes_by_predicate(tmp_path: Path) -> None:
    inner = LocalStore(tmp_path)
    inner.put("k/1", b"1")
    store = FaultyStore(inner, FailWhere(lambda r: r.op != "put", Fault.ERROR, times=3))
    with pytest.raises(InjectedFaultError, match="get of key 'k/1'"):
        store.get("k/1")
    with pytest.raises(InjectedFaultError, match="list of key 'k/'"):
        store.list("k/")
    with pytest.raises(InjectedFaultError, match="delete of key 'k/1'"):
        store.delete(["k/1"])
    assert inner.get("k/1") == b"1"  # the failed delete deleted nothing
    assert store.get("k/1") == b"1"  # times=3 used up
    assert [f for _, f in store.injected] == [Fault.ERROR] * 3


def test_random_faults_are_seeded_and_near_their_rate() -> None:
    from objstore_saver.testing.faults import Request

    plan = RandomFaults(0.05, seed=7)
    draws = [plan(Request(i, "put", "k")) for i in range(20_000)]
    assert draws == [RandomFaults(0.05, seed=7)(Request(i, "put", "k")) for i in range(20_000)]
    hits = sum(d is not None for d in draws)
    assert 800 < hits < 1200
    assert {d for d in draws if d is not None} == set(Fault)


# --- botocore hooks against the S3 server ----------------------------------------


@pytest.mark.parametrize("fault", list(Fault))
def test_client_fault_is_retried_by_botocore(s3_client: Any, s3_bucket: str, fault: Fault) -> None:
    store = Boto3S3Store(s3_bucket, "hooks/", client=s3_client)
    # Fail the first attempt of every request once.
    faults = install_client_faults(s3_client, FailWhere(lambda r: r.index % 2 == 0, fault, times=4))
    try:
        store.put("obj/a", b"payload", PutMode.CREATE)
        assert store.get("obj/a") == b"payload"
        assert [o.key for o in store.list("obj/").objects] == ["obj/a"]
        store.delete(["obj/a"])
    finally:
        faults.remove()
    assert [f for _, f in faults.injected] == [fault] * 4
    # Each request took two attempts; a create-only PUT whose response was
    # lost also reads the key back once (its retry got 412), and after the
    # four faults are used up the DELETE goes through at once.
    assert faults.attempts == (9 if fault is Fault.LOST_RESPONSE else 8)
    assert all_keys(store) == []


def test_lost_response_of_create_only_put_is_ours_not_a_conflict(
    s3_client: Any, s3_bucket: str
) -> None:
    store = Boto3S3Store(s3_bucket, "lost/", client=s3_client)
    faults = install_client_faults(s3_client, FailAt({0}, Fault.LOST_RESPONSE))
    try:
        store.put("m/1", b"mine", PutMode.CREATE)  # retry got 412, stored bytes are ours
    finally:
        faults.remove()
    assert store.get("m/1") == b"mine"
    assert faults.attempts == 3  # PUT (lost), PUT retried (412), GET comparing
    # Someone else's object under the key is still a conflict.
    faults = install_client_faults(s3_client, FailAt({0}, Fault.LOST_RESPONSE))
    try:
        with pytest.raises(ObjectExistsError, match="m/1"):
            store.put("m/1", b"other", PutMode.CREATE)
    finally:
        faults.remove()


def test_client_gives_up_after_bounded_attempts_with_a_clear_error(
    s3_endpoint: Any, s3_bucket: str
) -> None:
    client = s3_endpoint.client(retries={"mode": "standard", "total_max_attempts": 3})
    store = Boto3S3Store(s3_bucket, "giveup/", client=client)
    faults = install_client_faults(client, FailWhere(lambda r: True, Fault.SLOW_DOWN))
    try:
        with pytest.raises(StorageError, match=r"put of key 'x/y'.*SlowDown \(HTTP 503\)"):
            store.put("x/y", b"1", PutMode.CREATE)
    finally:
        faults.remove()
    assert faults.attempts == 3
    assert all_keys(store) == []


# --- the saver under faults ----------------------------------------------------------


def _run(
    store: ObjectStore, faulty: FaultyStore, steps: int, threads: int = 3, api: str = "sync"
) -> tuple[int, int]:
    """Run the workload through ``faulty``; compare with the model from a fresh saver."""
    work = Workload([f"thread-{t}" for t in range(threads)])
    model = Model()
    stats = Redrive()
    with ObjectStoreSaver(faulty) as ours:
        run_workload(ours, model, work, steps, stats, api=api)
    with ObjectStoreSaver(store) as fresh:
        verified = assert_agree(fresh, model, work.threads)
    assert verified == steps
    assert check_integrity(store) == steps
    TOTALS["faults_injected"] += len(faulty.injected)
    TOTALS["checkpoints_verified"] += verified
    return len(faulty.injected), stats.failures


@pytest.mark.parametrize("fault", list(Fault))
def test_saver_loses_nothing_under_each_fault(base_store: ObjectStore, fault: Fault) -> None:
    faulty = FaultyStore(
        base_store, RandomFaults(0.05, seed=list(Fault).index(fault), faults=[fault])
    )
    injected, failures = _run(base_store, faulty, steps=40)
    assert injected > 0 and failures > 0


def test_saver_loses_nothing_under_a_random_mix(base_store: ObjectStore, long_run: bool) -> None:
    steps = 2000 if long_run else (200 if isinstance(base_store, LocalStore) else 80)
    faulty = FaultyStore(base_store, RandomFaults(0.05, seed=5))
    injected, _ = _run(base_store, faulty, steps, threads=4)
    assert injected >= steps // 10
    print(f"\nrandom mix: {steps} checkpoints, {injected} faults injected, totals {TOTALS}")


def test_async_saver_loses_nothing_under_a_random_mix(
    base_store: ObjectStore, long_run: bool
) -> None:
    """The same mix through aput/aput_writes: faults raised by the store's coroutines."""
    steps = 1000 if long_run else (120 if isinstance(base_store, LocalStore) else 60)
    faulty = FaultyStore(base_store, RandomFaults(0.05, seed=6))
    injected, failures = _run(base_store, faulty, steps, threads=3, api="async")
    assert injected >= steps // 10 and failures > 0
    assert all(r.op in {"put", "get", "list", "delete"} for r in faulty.seen)


def test_saver_loses_nothing_under_client_faults_and_store_faults(
    s3_endpoint: Any, s3_bucket: str, long_run: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Faults at both layers: botocore absorbs its own, the saver surfaces the store's."""
    from botocore.retries.standard import ExponentialBackoff

    # Retry without sleeping (SlowDown backs off by up to seconds): same
    # attempts and retry quota, no waiting.
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0.0)
    steps = 2000 if long_run else 60
    client = s3_endpoint.client()
    base = Boto3S3Store(s3_bucket, "both/", client=client)
    hooks = install_client_faults(client, RandomFaults(0.05, seed=11))
    faulty = FaultyStore(base, RandomFaults(0.05, seed=12))
    try:
        injected, _ = _run(base, faulty, steps, threads=2)
    finally:
        hooks.remove()
    assert len(hooks.injected) > 0 and injected > 0
    TOTALS["faults_injected"] += len(hooks.injected)
    print(
        f"\nclient+store mix: {steps} checkpoints, "
        f"{len(hooks.injected)} client faults, totals {TOTALS}"
    )
