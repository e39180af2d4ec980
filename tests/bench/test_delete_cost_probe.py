"""bench/probes/delete_cost.py: a listing pass, the tombstone's PUT and batched deletes."""

from __future__ import annotations

from deleted import the_tombstone

from bench.probes import delete_cost


def test_a_long_threads_delete_costs_a_listing_the_tombstone_and_batched_deletes() -> None:
    r = delete_cost.run(600)  # 1,200 keys: two pages, and manifests then writes in one round
    assert r["keys_before"] == 1200
    # Two LIST pages, the tombstone's PUT, then the manifests' DeleteObjects and
    # the writes' (each of at most 1,000 keys: 600 each).
    assert r["requests"] == {"put": 1, "get": 0, "list": 2, "delete": 2}
    the_tombstone(r["keys_left"], "long")
    assert r["reader_finds_a_checkpoint"] is False
