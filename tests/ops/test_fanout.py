"""The operator jobs' fan-out: a bounded window, a lazy source, shards (spec §6.12)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest
from ops_helpers import chat

from objstore_saver import ObjectStoreSaver
from objstore_saver.driver import Driver
from objstore_saver.errors import ConfigurationError
from objstore_saver.format import keys
from objstore_saver.ops import OpsConfig, Shard, prune, threads, verify
from objstore_saver.ops.fanout import Fanout, check_concurrency, for_each, for_each_thread, run_sync
from objstore_saver.storage import LocalStore, MeteredStore


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("3", "use K/N"),
        ("a/4", "use K/N"),
        ("-1/4", "use K/N"),
        ("4/4", "0 to 3"),
        ("0/0", "1 or more"),
    ],
)
def test_a_bad_shard_is_refused_naming_the_flag(spec: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match="--shard") as info:
        Shard.parse(spec)
    assert message in str(info.value)


@pytest.mark.parametrize("value", [0, -3, True, 2.5, "8"])
def test_a_bad_concurrency_is_refused_naming_the_flag(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="--concurrency"):
        check_concurrency(value)


def test_shards_partition_the_threads() -> None:
    tokens = [keys.thread_prefix(f"thread-{i}")[len(keys.THREADS) : -1] for i in range(2000)]
    for count in (1, 2, 3, 8):
        owners = [[k for k in range(count) if Shard(k, count).owns(t)] for t in tokens]
        assert all(len(o) == 1 for o in owners)  # exactly one shard per thread
        sizes = [sum(o == [k] for o in owners) for k in range(count)]
        # SHA-256 spreads them: no shard is far from its share.
        assert min(sizes) > 0.8 * len(tokens) / count, sizes
    assert str(Shard.parse(" 2/5 ")) == "2/5"


async def _numbers(n: int, pulled: list[int]) -> AsyncGenerator[int, None]:
    for i in range(n):
        pulled.append(i)
        yield i


async def test_the_window_bounds_work_in_flight_and_the_source_is_read_lazily() -> None:
    pulled: list[int] = []
    in_flight = 0
    most = 0
    done: list[int] = []

    async def work(i: int) -> int:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        # The source is read only as fast as the window frees.
        assert len(pulled) <= len(done) + 5 + 1
        await asyncio.sleep(0.001 * (i % 3))
        in_flight -= 1
        return i * i

    stats = await for_each(
        _numbers(100, pulled), work, lambda i, sq: done.append(sq), concurrency=5
    )
    assert most == 5
    assert sorted(done) == [i * i for i in range(100)]
    assert (stats.found, stats.done, stats.skipped, stats.cancelled) == (100, 100, 0, False)


async def test_the_first_error_stops_new_work_and_is_raised_once_the_rest_settle() -> None:
    pulled: list[int] = []
    finished: list[int] = []

    async def work(i: int) -> None:
        if i == 3:
            raise ValueError("item 3 is bad")
        await asyncio.sleep(0.01)

    with pytest.raises(ValueError, match="item 3 is bad"):
        await for_each(_numbers(1000, pulled), work, lambda i, _: finished.append(i), concurrency=4)
    # The items in flight finished and were reported; nothing after the window started.
    assert set(finished) <= set(range(8)) and 3 not in finished
    assert len(pulled) < 12


async def test_cancel_and_ownership() -> None:
    polls = iter([False] * 6 + [True])
    seen: list[int] = []
    stats = await for_each(
        _numbers(100, []),
        lambda i: asyncio.sleep(0, result=i),
        lambda i, _: seen.append(i),
        owns=lambda i: i % 2 == 0,
        should_cancel=lambda: next(polls),
    )
    assert stats.cancelled and sorted(seen) == [0, 2, 4, 6, 8, 10]
    assert stats.skipped == 6  # the odd ones met on the way


def _store(tmp_path: Path, n: int) -> str:
    url = f"file://{tmp_path}/store"
    with ObjectStoreSaver.from_url(url) as saver:
        for i in range(n):
            chat(saver, f"t{i:02d}", ["hello"])
    return url


def test_threads_are_found_by_one_flat_listing_and_sharded_exactly_once(tmp_path: Path) -> None:
    _store(tmp_path, 30)
    meter = MeteredStore(LocalStore(tmp_path / "store"))
    driver = Driver(meter)
    n_keys = len(meter.list("threads/").objects)  # under a page: one LIST finds them all
    meter.reset()
    seen: dict[str, list[str]] = {}

    async def each_shard() -> list[Fanout]:
        runs = []
        for k in range(3):

            async def work(target: Any, k: int = k) -> str:
                assert target.listing is not None and target.listing.manifests
                return f"shard {k}"

            runs.append(
                await for_each_thread(
                    driver,
                    work,
                    lambda target, who: seen.setdefault(target.name, []).append(who),
                    shard=Shard(k, 3),
                )
            )
        return runs

    runs = run_sync(each_shard)
    driver.close()
    assert n_keys < 1000
    assert meter.snapshot().requests == {"put": 0, "get": 0, "list": 3, "delete": 0}
    assert sorted(seen) == [f"t{i:02d}" for i in range(30)]
    assert all(len(who) == 1 for who in seen.values())  # each thread handled exactly once
    assert [r.found for r in runs] == [30, 30, 30]
    assert sum(r.done for r in runs) == 30 and all(r.lists == 1 for r in runs)


def test_jobs_take_a_shard_and_a_concurrency(tmp_path: Path) -> None:
    url = _store(tmp_path, 12)
    config = OpsConfig(url=url)
    listed = [
        {t["thread_id"] for t in threads(config, shard=Shard(k, 4), concurrency=2)["threads"]}
        for k in range(4)
    ]
    assert sorted(set().union(*listed)) == [f"t{i:02d}" for i in range(12)]
    assert sum(map(len, listed)) == 12
    checked = [verify(config=config, shard=Shard(k, 4))["threads"] for k in range(4)]
    assert checked == [len(x) for x in listed]
    pruned = [prune(config=config, keep_last=1, min_age=0, shard=Shard(k, 4)) for k in range(4)]
    assert [len(r["threads"]) for r in pruned] == [len(x) for x in listed]
    assert all(r["run"]["threads_found"] == 12 for r in pruned)


def test_run_sync_works_inside_a_running_loop(tmp_path: Path) -> None:
    url = _store(tmp_path, 2)

    async def inside() -> int:
        return threads(OpsConfig(url=url))["count"]

    assert asyncio.run(inside()) == 2


def test_verify_reads_a_small_thread_in_one_round(tmp_path: Path) -> None:
    """Its manifests, writes and objects are named by the listing: one round of GETs."""
    from objstore_saver import plans
    from objstore_saver.plans.requests import Batch, Get, KeyState
    from objstore_saver.plans.verify import verify_thread
    from objstore_saver.plans.verify_report import VerifyReport

    _store(tmp_path, 1)
    store = LocalStore(tmp_path / "store")
    driver = Driver(store)
    listing = driver.run(plans.list_thread(keys.thread_prefix("t00")))
    rounds: list[int] = []

    def counted(plan: Any) -> Any:
        reply = None
        while True:
            try:
                step = plan.send(reply)
            except StopIteration as stop:
                return stop.value
            # A thread key check sends nothing on a store that does not encrypt.
            if isinstance(step, Batch) and not all(isinstance(op, KeyState) for op in step.ops):
                rounds.append(sum(isinstance(op, Get) for op in step.ops))
            reply = yield step

    report = VerifyReport()
    driver.run(counted(verify_thread(listing.pfx, report, listing)))
    driver.close()
    n = len(listing.manifests) + len(listing.writes) + len(listing.objects)
    assert report.ok and 1 < n <= 64
    assert rounds == [n]
