"""The viewer's long-term store pages: a real uvicorn server over ObjectStoreStore data
written on a directory and on moto S3."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from backends import Backend
from ops_helpers import chat
from store_viewer_data import HOSTILE_KEY, HOSTILE_NS, LONG_LABEL, RTL, SCRIPT, SLASH_NS, fill
from viewer_graphs import Server

from objstore_saver import ObjectStoreSaver
from objstore_saver.format import store_keys
from objstore_saver.longterm import ObjectStoreStore
from objstore_saver.longterm.plans import COMPACT_AFTER
from objstore_saver.storage import LocalStore
from objstore_saver.storage.base import ObjectStore, PutMode
from objstore_saver.storage.metered import MeteredStore

EVERY_NS = {
    ("docs",),
    HOSTILE_NS,
    SLASH_NS,
    ("users", "alice"),
    ("users", "bob"),
    (LONG_LABEL, "deep"),
}


def _params(labels: Any, **extra: Any) -> list[tuple[str, Any]]:
    return [("label", label) for label in labels] + list(extra.items())


pytestmark = pytest.mark.backends("local", "s3-boto3")


@pytest.fixture
def store(backend: Backend) -> ObjectStore:
    st = backend.store(fsync=False)
    fill(st)
    chat(ObjectStoreSaver(st), "t1", ["hello"])
    return st


@pytest.fixture
def logged(store: ObjectStore) -> MeteredStore:
    return MeteredStore(store, log=True)


@pytest.fixture
def server(logged: MeteredStore) -> Iterator[Server]:
    s = Server(logged)
    yield s
    s.close()


def test_namespaces_listed_searched_by_label_prefix_and_paged(server: Server) -> None:
    r = server.get("/api/store")
    assert r.status_code == 200
    rows = {tuple(n["namespace"]): n for n in r.json()["namespaces"]}
    assert set(rows) == EVERY_NS  # ("users", "gone") holds only a tombstone
    assert (rows[("users", "alice")]["items"], rows[("users", "alice")]["expired"]) == (2, 1)
    assert (rows[("users", "bob")]["items"], rows[("users", "bob")]["expired"]) == (1, 0)
    users = server.get("/api/store", params=_params(["users"])).json()["namespaces"]
    assert {tuple(n["namespace"]) for n in users} == {n for n in EVERY_NS if n[0] == "users"}
    # "a/b" is one label: searching by the label "a" must not find it
    assert server.get("/api/store", params=_params(["users", "a"])).json()["namespaces"] == []
    found = server.get("/api/store", params=_params(["users", "a/b"])).json()["namespaces"]
    assert [tuple(n["namespace"]) for n in found] == [SLASH_NS]
    seen, after = [], None
    while True:
        page = server.get("/api/store", params={"limit": 2, "after": after}).json()
        assert len(page["namespaces"]) <= 2
        seen += [tuple(n["namespace"]) for n in page["namespaces"]]
        after = page["next"]
        if after is None:
            break
    assert sorted(seen) == sorted(EVERY_NS) and len(seen) == len(EVERY_NS)
    html = server.get("/store", params=_params(["users"])).text
    assert 'href="/store/ns?label=users&amp;label=bob"' in html and "docs" not in html
    assert server.get("/api/store", params={"limit": "0"}).status_code == 400


def test_namespace_page_lists_items_from_the_index(server: Server) -> None:
    r = server.get("/api/store/ns", params=_params(["users", "alice"]))
    assert r.status_code == 200
    body = r.json()
    items = {i["key"]: i for i in body["items"]}
    assert list(items) == ["memo", "prefs", "stale"]  # by key
    assert (body["live"], body["expired"], body["next_offset"]) == (2, 1, None)
    assert items["stale"]["expired"] and items["stale"]["expires_at"]
    assert not items["prefs"]["expired"] and items["prefs"]["expires_at"] is None
    assert items["prefs"]["preview"] == '{"n": 3, "theme": "dark"}'
    assert all(i["size"] > 0 and i["created_at"] and i["updated_at"] for i in items.values())
    page = server.get("/api/store/ns", params=_params(["users", "alice"], limit=2, offset=2))
    assert [i["key"] for i in page.json()["items"]] == ["stale"]
    big = server.get("/api/store/ns", params=_params(["docs"])).json()["items"][0]
    assert len(big["preview"]) == 161 and big["size"] > 0  # stored compressed
    html = server.get("/store/ns", params=_params(["users", "alice"])).text
    assert 'href="/store/item?label=users&amp;label=alice&amp;key=prefs"' in html
    assert html.count('class="err">expired<') == 1


def test_item_page_shows_value_ttl_vectors_and_index(server: Server, store: ObjectStore) -> None:
    r = server.get("/api/store/item", params=_params(["users", "alice"], key="memo"))
    assert r.status_code == 200
    item = r.json()
    assert item["value"] == {"text": "likes green tea and long walks"}
    assert item["vectors"] == [{"field": "text", "dims": 16, "bytes": 64}]
    assert item["object"] == store_keys.item_key(("users", "alice"), "memo")
    data = store.get(item["object"])
    assert data is not None
    assert (item["bytes"], item["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
    assert [rec["op"] for rec in item["index_records"]] == ["p"]
    assert item["index_records"][0]["version"] == item["version"]
    stale = server.get("/api/store/item", params=_params(["users", "alice"], key="stale")).json()
    assert stale["expired"] and stale["ttl_minutes"] == 1 and stale["value"] == {"v": "stale"}
    big = server.get("/api/store/item", params=_params(["docs"], key="big")).json()
    assert big["value"]["truncated"] and len(big["value"]["start"]) == 100_000
    html = server.get("/store/item", params=_params(["users", "alice"], key="memo")).text
    assert "likes green tea" in html and "16 dimensions" in html and item["sha256"] in html


def test_reading_never_writes_nor_refreshes_and_lists_without_item_gets(
    server: Server, logged: MeteredStore
) -> None:
    # a refresh would re-put the item: no PUT at all proves none happened
    logged.log.clear()
    server.metered.reset()
    for path, params in [
        ("/store", []),
        ("/store/ns", _params(["users", "alice"])),
        ("/store/ns", _params(HOSTILE_NS)),
        ("/api/store/ns", _params([LONG_LABEL, "deep"])),
        ("/store/item", _params(["users", "alice"], key="stale")),
        ("/storage", []),
        ("/", []),
    ]:
        assert server.get(path, params=params).status_code == 200, path
    meter = server.metered.snapshot()
    assert meter.put_requests == 0 and meter.delete_requests == 0, meter
    item_gets = [e.key for e in logged.log if e.op == "get" and e.key.startswith(store_keys.ITEMS)]
    assert item_gets == [store_keys.item_key(("users", "alice"), "stale")]


def test_links_reach_every_namespace_and_item_and_hostile_text_is_escaped(
    server: Server,
) -> None:
    html = server.get("/store").text
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    links = [unescape(h) for h in re.findall(r'class="ns" href="([^"]+)"', html)]
    assert len(links) == len(EVERY_NS)
    reached = set()
    for link in links:
        page = server.get(link)
        assert page.status_code == 200, link
        api = server.get("/api" + link).json()
        reached.add(tuple(api["namespace"]))
        for item_link in re.findall(r'class="item" href="([^"]+)"', page.text):
            shown = server.get(unescape(item_link))
            assert shown.status_code == 200, item_link
            assert "<script>" not in shown.text and "<img" not in shown.text
    assert reached == EVERY_NS
    hostile = server.get("/store/item", params=_params(HOSTILE_NS, key=HOSTILE_KEY))
    text = hostile.text
    assert "&lt;script&gt;window.__pwned" in text and "<script>" not in text
    assert RTL in text and "<bdi>" in text
    assert server.get("/api/store/item", params=_params(HOSTILE_NS, key=HOSTILE_KEY)).json()[
        "value"
    ] == {"html": SCRIPT, "rtl": RTL}
    long_page = server.get("/store/ns", params=_params([LONG_LABEL, "deep"])).text
    shown_text = re.sub(r'href="[^"]*"', "", long_page)  # links carry the whole label
    assert LONG_LABEL not in shown_text and "L" * 120 in shown_text
    assert LONG_LABEL in unescape(long_page)  # ... so the item link still works


def test_unknown_namespace_or_key_is_404_naming_it(server: Server) -> None:
    r = server.get("/store/ns", params=_params(["users", "nobody"]))
    assert r.status_code == 404 and "nobody" in r.text
    r = server.get("/api/store/item", params=_params(["users", "alice"], key="<missing>"))
    assert r.status_code == 404 and "'<missing>'" in r.json()["error"]
    assert "alice" in r.json()["error"]
    page = server.get("/store/item", params=_params(["users", "alice"], key="<missing>"))
    assert (
        page.status_code == 404 and "&lt;missing&gt;" in page.text and "<missing>" not in page.text
    )
    assert server.get("/api/store/ns", params=_params(["users", "gone"])).status_code == 404
    assert server.get("/api/store/item", params=_params(["users"])).status_code == 400
    assert server.get("/api/store/ns").status_code == 400


def test_corrupt_item_object_is_422_naming_its_key(server: Server, store: ObjectStore) -> None:
    key = store_keys.item_key(("users", "bob"), "prefs")
    store.put(key, b"\x93not an item", PutMode.OVERWRITE)
    r = server.get("/api/store/item", params=_params(["users", "bob"], key="prefs"))
    assert r.status_code == 422 and r.json()["key"] == key and r.json()["error"]
    page = server.get("/store/item", params=_params(["users", "bob"], key="prefs"))
    assert page.status_code == 422 and unescape(key) in unescape(page.text)
    # the listing reads the index, not the item: it still shows the namespace
    assert server.get("/store/ns", params=_params(["users", "bob"])).status_code == 200


def test_nav_and_du_link_to_the_store(server: Server) -> None:
    assert 'href="/store">Long-term store</a>' in server.get("/").text
    du = server.get("/storage").text
    assert "store items" in du and "store index records" in du and 'href="/store">browse' in du


@pytest.mark.backends("local")
def test_token_protects_the_store_routes(store: ObjectStore) -> None:
    s = Server(store, token="s3cret-token")
    try:
        paths = ["/store", "/store/ns", "/store/item", "/api/store", "/api/store/ns"]
        paths += ["/api/store/item"]
        ns = _params(["users", "alice"], key="memo")
        for path in paths:
            assert s.get(path, params=ns).status_code == 401, path
            ok = s.get(path, params=ns, headers={"Authorization": "Bearer s3cret-token"})
            assert ok.status_code == 200, path
    finally:
        s.close()


def _namespace_of(st: ObjectStore, n: int) -> None:
    with ObjectStoreStore(st) as store:
        for i in range(n):
            store.put(("many",), f"k{i:04d}", {"i": i}, index=False)


@pytest.mark.parametrize("n", [30, 300])
def test_namespace_page_requests_do_not_grow_with_items(tmp_path: Path, n: int) -> None:
    st = MeteredStore(LocalStore(tmp_path / "s", fsync=False), log=True)
    _namespace_of(st, n)
    s = Server(st)
    try:
        st.log.clear()
        r, meter = s.requests_for("/store/ns?label=many&limit=50")
        assert r.status_code == 200 and r.text.count('class="item"') == min(n, 50)
        gets = [e.key for e in st.log if e.op == "get"]
        assert not [k for k in gets if k.startswith(store_keys.ITEMS)]  # never an item object
        # one LIST of the index and one of the items; GETs: a snapshot + uncovered records
        assert meter.list_requests == 2, meter
        assert meter.get_requests <= COMPACT_AFTER + 2, meter
        item, meter = s.requests_for("/store/item?label=many&key=k0007")
        assert item.status_code == 200 and meter.get_requests <= 2 and meter.list_requests == 1
        r, meter = s.requests_for("/store")
        assert r.status_code == 200 and meter.get_requests <= COMPACT_AFTER + 2, meter
        assert meter.list_requests == 1, meter  # the index is listed once, not per step
    finally:
        s.close()


def test_corrupt_index_record_is_422_naming_its_key(server: Server, store: ObjectStore) -> None:
    prefix = store_keys.index_prefix(("users", "bob"))
    record = next(k.key for k in store.list(prefix).objects if "/r/" in k.key)
    store.put(record, b"garbage", PutMode.OVERWRITE)
    r = server.get("/api/store/ns", params=_params(["users", "bob"]))
    assert r.status_code == 422 and r.json()["key"] == record
    page = server.get("/store", params=_params(["users"]))
    assert page.status_code == 422 and record in unescape(page.text)
    # other namespaces' pages do not read that record
    assert server.get("/store/ns", params=_params(["users", "alice"])).status_code == 200
