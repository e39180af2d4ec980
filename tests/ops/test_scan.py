"""Finding the threads of a large store with several key ranges listed at once (spec §6.4)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Generator
from typing import Any

import pytest
from backends import Backend

from objstore_saver.driver import Driver
from objstore_saver.errors import CorruptObjectError
from objstore_saver.plans.requests import Batch, Emit, ListKeys
from objstore_saver.plans.scan import TOKEN_CHARS, scan_threads, scan_threads_ranged
from objstore_saver.plans.threads import ThreadListing
from objstore_saver.storage.base import ListPage, ObjectInfo

KINDS = ("checkpoints/~/r0", "checkpoints/~/r1", "writes/r1/t/a.0", "objects/h1", "runs/x")


def _bucket(thread_ids: list[str]) -> list[str]:
    return sorted(f"threads/{t}/{kind}" for t in thread_ids for kind in KINDS)


class _Lister:
    """Answers a scan's LISTs from a sorted key list; counts LISTs and round trips."""

    def __init__(self, all_keys: list[str]) -> None:
        self.keys = all_keys
        self.lists = 0
        self.rounds = 0
        self.largest_round = 0

    def page(self, op: ListKeys) -> ListPage:
        self.lists += 1
        after = [
            k
            for k in self.keys
            if k.startswith(op.prefix) and (not op.start_after or k > op.start_after)
        ]
        got = after[: op.limit]
        return ListPage([ObjectInfo(k, 1, 0) for k in got], truncated=len(after) > op.limit)

    def run(self, plan: Generator[Any, Any, int]) -> tuple[list[ThreadListing], int]:
        out: list[ThreadListing] = []
        reply = None
        while True:
            try:
                step = plan.send(reply)
            except StopIteration as stop:
                return out, stop.value
            if isinstance(step, Emit):
                out.append(step.item)
                reply = None
            else:
                assert isinstance(step, Batch)
                self.rounds += 1
                self.largest_round = max(self.largest_round, len(step.ops))
                reply = [self.page(op) for op in step.ops]


def _by_thread(listings: list[ThreadListing]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for listing in listings:
        assert listing.pfx not in found, f"{listing.pfx} emitted twice"
        found[listing.pfx] = sorted(o.key for o in listing.every())
    return found


@pytest.mark.parametrize(
    "ids",
    [
        pytest.param(
            [str(uuid.UUID(int=random.Random(i).getrandbits(128))) for i in range(400)], id="uuids"
        ),
        pytest.param([f"user-{i:04d}" for i in range(300)], id="one-first-character"),
        pytest.param(
            [random.Random(i).choice(TOKEN_CHARS) + f"{i}" for i in range(500)],
            id="every-character",
        ),
    ],
)
def test_ranges_emit_every_thread_once_and_whole(ids: list[str]) -> None:
    all_keys = _bucket(ids)
    flat = _Lister(all_keys)
    flat_found, _ = flat.run(scan_threads(page_size=100))
    ranged = _Lister(all_keys)
    found, lists = ranged.run(scan_threads_ranged(page_size=100, max_ranges=8))
    assert _by_thread(found) == _by_thread(flat_found)
    assert len(found) == len(set(ids)) and lists == ranged.lists
    assert ranged.largest_round <= max(8, len(TOKEN_CHARS))  # the probes' round is the widest


def test_another_shards_threads_come_out_once_with_no_keys() -> None:
    ids = [str(uuid.UUID(int=random.Random(i).getrandbits(128))) for i in range(300)]
    all_keys = _bucket(ids)
    whole = _by_thread(_Lister(all_keys).run(scan_threads_ranged(page_size=100))[0])
    mine = {p for i, p in enumerate(sorted(whole)) if i % 3 == 0}
    found, _ = _Lister(all_keys).run(
        scan_threads_ranged(page_size=100, max_ranges=8, owns=mine.__contains__)
    )
    got = _by_thread(found)
    assert set(got) == set(whole)  # each thread emitted once: the fan-out counts and skips
    assert {p: k for p, k in got.items() if p in mine} == {p: whole[p] for p in mine}
    assert all(k == [] for p, k in got.items() if p not in mine)


def test_uuid_threads_are_listed_in_far_fewer_round_trips() -> None:
    rng = random.Random(1)
    ids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(800)]
    all_keys = _bucket(ids)
    flat = _Lister(all_keys)
    flat.run(scan_threads(page_size=100))
    ranged = _Lister(all_keys)
    ranged.run(scan_threads_ranged(page_size=100, max_ranges=16))
    # 4,000 keys: 40 pages one after the other; 16 ranges side by side need about a sixth.
    assert flat.rounds == 40
    assert ranged.rounds <= flat.rounds // 4


def test_a_store_of_one_page_costs_one_list_as_before() -> None:
    lister = _Lister(_bucket([f"t{i}" for i in range(10)]))
    found, lists = lister.run(scan_threads_ranged())
    assert len(found) == 10 and lists == 1 and lister.rounds == 1


def test_one_range_is_the_flat_listing() -> None:
    all_keys = _bucket([str(uuid.UUID(int=i * 10**30)) for i in range(200)])
    flat, ranged = _Lister(all_keys), _Lister(all_keys)
    flat.run(scan_threads(page_size=100))
    ranged.run(scan_threads_ranged(page_size=100, max_ranges=1))
    assert ranged.lists == flat.lists and ranged.rounds == flat.rounds


def test_a_key_outside_the_format_is_named() -> None:
    lister = _Lister([*_bucket([f"a{i}" for i in range(30)]), "threads/zzz"])
    with pytest.raises(CorruptObjectError, match="threads/zzz"):
        lister.run(scan_threads_ranged(page_size=20))


@pytest.mark.backends("local", "s3-lean")
async def test_ranges_on_a_real_store(backend: Backend) -> None:
    store = backend.store("")
    ids = [str(uuid.UUID(int=random.Random(3).getrandbits(128) + i * 2**120)) for i in range(60)]
    for key in _bucket(ids):
        await store.aput(key, b"x")
    driver = Driver(store)
    try:
        found = [listing async for listing in driver.aiterate(scan_threads_ranged(page_size=40))]
    finally:
        driver.close()
    assert _by_thread(found) == {
        f"threads/{t}/": sorted(f"threads/{t}/{kind}" for kind in KINDS) for t in ids
    }
