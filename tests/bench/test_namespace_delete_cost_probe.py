"""bench/probes/namespace_delete_cost.py: the marker, three listing passes, batched deletes."""

from __future__ import annotations

import pytest

from bench.probes import namespace_delete_cost


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_a_namespace_delete_costs_three_listings_the_marker_and_batched_deletes(
    encrypted: bool,
) -> None:
    r = namespace_delete_cost.run(40, encrypted)  # compacted once (N = 32)
    assert r["items_deleted"] == 40 and r["index_objects_deleted"] == 41
    # LIST of the index, PUT of the marker, LIST and DeleteObjects of the items,
    # LIST of the index, DeleteObjects of what the marker ended; encrypted, the
    # LIST of the key's later epochs and the DELETE of its key object.
    assert r["requests"] == {
        "put": 1,
        "get": 0,
        "list": 3 + encrypted,
        "delete": 2 + encrypted,
    }
    assert len(r["keys_left"]) == 1 and "/x/c/" in r["keys_left"][0]
    assert r["reader_finds_an_item"] is False
