"""The store benchmark's workload on real stores (a directory, moto through MeteredStore,
InMemoryStore): its answers are checked, its request counts are what spec §8.4 says,
and its report section replaces itself in docs."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from bench import store_bench
from bench.store_bench import Opened, Sizes
from objstore_saver import LocalStore

TINY = Sizes(items=50, gets=10, searches=4)  # 10 of each kind


def _objstore(inner: Any) -> contextlib.AbstractContextManager[Opened]:
    return store_bench._objstore(inner)


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_objstore_rows_count_requests(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "local":
        inner: Any = LocalStore(tmp_path)
    else:
        endpoint = request.getfixturevalue("s3_endpoint")
        inner = endpoint.lean_store(request.getfixturevalue("s3_bucket"), "bench/")
    with _objstore(inner) as opened:
        r = store_bench.run_store(opened, TINY)
    assert r["get"]["requests_per_op"] == 1.0 and r["get"]["get_per_op"] == 1.0
    # put: 1 GET + 2 PUT + 1 LIST, plus one compaction in 50 puts (N = 32) and,
    # once per namespace and process, the LIST of its clear markers
    assert r["put"]["list_per_op"] == (TINY.items + 1) / TINY.items
    assert 4.0 <= r["put"]["requests_per_op"] <= 5.5
    for op in ("search_filter", "search_query"):
        # 1 LIST + 1 snapshot GET + the records past it (50 - 33 = 17)
        assert r[op]["list_per_op"] == 1.0, r[op]
        assert r[op]["get_per_op"] <= 1 + 17, r[op]
        assert r[op]["put_per_op"] == 0.0
    assert r["put"]["p50_ms"] > 0 and r["search_query"]["ops"] == TINY.searches


class _WrongGet(InMemoryStore):
    """An InMemoryStore whose get answers with another value."""

    def get(self, namespace: Any, key: str, **kw: Any) -> Any:
        item = super().get(namespace, key, **kw)
        item.value["n"] = -1
        return item


def test_inmemory_row_and_a_wrong_answer_is_an_error() -> None:
    with store_bench.open_memory({}) as opened:
        r = store_bench.run_store(opened, TINY)
    assert "requests_per_op" not in r["get"] and r["search_query"]["ops"] == TINY.searches
    with pytest.raises(AssertionError, match="get returned another"):
        store_bench.run_store(Opened(_WrongGet(), semantic=False), TINY)


def test_report_section_replaces_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stores = {"objstore-local": ("ObjectStoreStore (directory)", store_bench.open_local),
              "inmemory": ("InMemoryStore", store_bench.open_memory)}  # fmt: skip
    monkeypatch.setattr(store_bench, "STORES", stores)
    doc = store_bench.run(TINY, list(stores), lambda m: None)
    doc["s3_server_name"] = "moto"
    assert json.loads(json.dumps(doc))["results"]["objstore-local"]["get"]["get_per_op"] == 1.0
    page = tmp_path / "store.md"
    page.write_text("# Store\n\n## Operating\n\ntext\n")
    store_bench.write_doc(doc, page)
    store_bench.write_doc(doc, page)
    text = page.read_text()
    assert text.count(store_bench.BEGIN) == 1 and text.count("## Benchmark") == 1
    assert "| ObjectStoreStore (directory) | " in text and "/ 1 req |" in text
    assert "Not run: redis:" in text and text.startswith("# Store\n\n## Operating\n\ntext\n")
