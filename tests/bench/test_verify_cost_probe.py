"""bench/probes/verify_cost.py: verify's requests per thread at each depth."""

from __future__ import annotations

import pytest

from bench.probes import verify_cost


@pytest.mark.parametrize("store", ["local", "s3"])
def test_the_default_depth_reads_manifests_and_writes_and_no_content_object(store: str) -> None:
    r = verify_cost.run(threads=12, store=store, values_alone=1, rounds=1)
    depths = r["depths"]
    assert set(depths) == {"default", "read-data", "read-data-subset 1/4"}
    assert all(d["ok"] and d["threads"] == 12 for d in depths.values())
    # 4 manifests and 2 write groups a thread, and one listing of the store.
    default = depths["default"]
    assert default["requests_per_thread"]["get"] == 6
    assert default["content_object_gets_per_thread"] == 0
    assert default["total_requests_per_thread"] <= 6 + 2 / 12
    # The big value is a parts index over 2 parts: 3 content objects a thread.
    assert depths["read-data"]["content_object_gets_per_thread"] == 3
    assert depths["read-data"]["requests_per_thread"]["get"] == 9
    assert 0 < depths["read-data-subset 1/4"]["content_object_gets_per_thread"] < 3
    assert all(d["cpu_ms_per_thread"] > 0 for d in depths.values())
