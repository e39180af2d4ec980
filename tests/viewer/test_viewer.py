"""The web viewer: a real uvicorn server on loopback over stores written by real graphs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from html import unescape as html_unescape
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import quote

import httpx
import pytest
from backends import Backend
from embedded_values import corrupt_embedded, in_url
from langgraph.graph import START, StateGraph
from layout import is_manifest
from ops_helpers import chat
from repo_root import ROOT
from viewer_graphs import ODD, Server, populate

from objstore_saver import ObjectStoreSaver, ObjectStoreStore
from objstore_saver.format import keys
from objstore_saver.storage import LocalStore
from objstore_saver.storage.base import ObjectStore, PutMode

#: Any reason: compared as equal to any string.
ANY_REASON: Any = type("AnyStr", (), {"__eq__": lambda self, o: isinstance(o, str)})()


pytestmark = pytest.mark.backends("local", "s3-boto3")


@pytest.fixture
def store(backend: Backend) -> ObjectStore:
    st = backend.store(fsync=False)
    populate(ObjectStoreSaver(st))
    return st


def _no_writes(meter: Any) -> None:
    assert meter.put_requests == 0 and meter.delete_requests == 0, meter


def test_threads_page_and_api_search_and_paging(server: Server) -> None:
    r = server.get("/api/threads")
    assert r.status_code == 200
    rows = {t["thread_id"]: t for t in r.json()["threads"]}
    assert set(rows) == {"alice", "sup", "hostile", ODD}
    assert rows["alice"]["checkpoints"] >= 8 and rows["alice"]["bytes"] > 0
    assert rows["alice"]["last_update"]
    page1 = server.get("/api/threads", params={"limit": 2}).json()
    assert [t["thread_id"] for t in page1["threads"]] == ["alice", ODD]
    page2 = server.get("/api/threads", params={"limit": 2, "after": page1["next"]}).json()
    assert [t["thread_id"] for t in page2["threads"]] == ["hostile", "sup"]
    assert page2["next"] is None
    found = server.get("/api/threads", params={"q": "ho"}).json()["threads"]
    assert [t["thread_id"] for t in found] == ["hostile"]
    html = server.get("/", params={"q": "al"}).text
    assert 'href="/threads/alice"' in html and "hostile" not in html.split("<table>")[1]
    assert server.get("/api/threads", params={"limit": "x"}).status_code == 400


def test_a_deleted_thread_has_no_row(store: ObjectStore) -> None:
    with ObjectStoreSaver(store) as saver:
        chat(saver, "gone", ["a question"])
        saver.delete_thread("gone")
    assert any(keys.is_tombstone_key(o.key) for o in store.list("threads/_gone/").objects)
    s = Server(store)
    try:
        rows = [t["thread_id"] for t in s.get("/api/threads").json()["threads"]]
        assert "gone" not in rows and "alice" in rows
        assert s.get("/api/threads", params={"q": "gon"}).json()["threads"] == []
    finally:
        s.close()


def test_thread_page_tree_fork_and_subgraph(server: Server) -> None:
    r = server.get("/api/threads/alice").json()
    assert r["forks"] == 1
    ids = {c["checkpoint_id"] for c in r["checkpoints"]}
    assert all(c["parent_checkpoint_id"] in ids or c["step"] == -1 for c in r["checkpoints"])
    assert len(r["tree"]) == 1  # one root: the first input
    html = server.get("/threads/alice").text
    assert html.count('class="fork"') == 1 and "diff with parent" in html
    sup = server.get("/api/threads/sup").json()
    namespaces = {c["checkpoint_ns"] for c in sup["checkpoints"]}
    assert "" in namespaces and any(ns.startswith("inner:") for ns in namespaces)
    # paging: three pages of 3 walk every checkpoint once
    seen, after = [], None
    while True:
        page = server.get("/api/threads/alice", params={"limit": 3, "after": after}).json()
        seen += [c["checkpoint_id"] for c in page["checkpoints"]]
        after = page["next"]
        if after is None:
            break
    assert sorted(seen) == sorted(ids)


def test_checkpoint_transcript_writes_metadata_and_diff(server: Server) -> None:
    latest = server.get("/api/threads/alice/latest").json()
    assert [m["role"] for m in latest["channel_values"]["messages"]][-2:] == ["human", "ai"]
    cid = latest["checkpoint_id"]
    html = server.get(f"/threads/alice/checkpoints/{cid}").text
    assert "the other way" in html and "forked answer" in html
    assert 'class="msg human"' in html and "<h2>Metadata</h2>" in html
    d = server.get(f"/api/threads/alice/diff/{cid}").json()
    assert d["channels_changed"] == ["messages"]
    assert [m["content"] for m in d["messages"]["added"]] == ["forked answer"]
    assert "forked answer" in server.get(f"/threads/alice/diff/{cid}").text


def test_interrupts_and_store_du(server: Server) -> None:
    sup = server.get("/api/threads/sup/latest").json()
    html = server.get(f"/threads/sup/checkpoints/{sup['checkpoint_id']}").text
    interrupts = html.split("<h2>Interrupts</h2>")[1].split("<h2>")[0]
    assert "ask the user" in interrupts
    du = server.get("/api/storage").json()
    assert {t["thread_id"] for t in du["by_thread"]} == {"alice", "sup", "hostile", ODD}
    assert du["total"]["bytes"] == sum(t["bytes"] for t in du["by_thread"])
    page = server.get("/storage").text
    assert 'href="/storage/alice"' in page and "manifests" in page


def test_hostile_content_is_escaped_and_bounded(server: Server) -> None:
    latest = server.get("/api/threads/hostile/latest").json()
    html = server.get(f"/threads/hostile/checkpoints/{latest['checkpoint_id']}").text
    assert "<script>window.pwned" not in html and "&lt;script&gt;window.pwned" in html
    assert "<b>bold</b>" not in html and "<bdi>" in html
    assert "more characters" in html and len(html) < 200_000
    assert any(w["channel"] == "blob" for w in latest["pending_writes"])
    assert "<script>x</script>" not in html


def test_object_page_verifies_hash_and_names_corrupt_keys(
    server: Server, store: ObjectStore
) -> None:
    # The 50 kB message is too large to be inline: the list (inline in the
    # manifest) references its value, embedded in the manifest of the put
    # that added it (addressed "<manifest key>#<hex>") or stored alone.
    latest = server.get("/api/threads/hostile/latest").json()
    objects = latest["storage"]["messages"]["objects"]
    address = max(objects, key=lambda k: server.get(f"/api/objects/{in_url(k)}").json()["bytes"])
    obj = server.get(f"/api/objects/{in_url(address)}").json()
    assert obj["sha256_ok"] is True and obj["kind"] in ("value", "parts", "split")
    assert "verified" in server.get(f"/objects/{in_url(address)}").text
    manifest, _, digest = address.rpartition("#")
    if manifest:  # embedded: the manifest no longer embeds it, nor is it stored alone
        assert obj["embedded_in"] == manifest
        corrupt_embedded(store, address)
        key = f"threads/_hostile/objects/{digest}"
        for path in (f"/api/objects/{in_url(address)}", f"/objects/{in_url(address)}"):
            r = server.get(path)
            assert r.status_code == 404 and "does not embed" in r.text and manifest in r.text
    else:  # stored alone (the saver knew it stored there): it no longer hashes to its key
        key = address
        body = store.get(key)
        assert body is not None
        store.put(key, body[:-3] + b"zzz", PutMode.OVERWRITE)
        for path in (f"/api/objects/{key}", f"/objects/{key}"):
            r = server.get(path)
            assert r.status_code == 422 and key in r.text, path
    # The checkpoint page still renders: the corrupt channel names the key it
    # was last looked for at and why, the other sections (pending writes,
    # metadata) are shown.
    r = server.get(f"/threads/hostile/checkpoints/{latest['checkpoint_id']}")
    assert r.status_code == 200 and key in r.text
    assert "&quot;step&quot;: 1" in r.text.split("<h2>Metadata</h2>")[1]
    api = server.get(f"/api/threads/hostile/checkpoints/{latest['checkpoint_id']}").json()
    assert api["errors"] == {"channel:messages": {"key": key, "reason": ANY_REASON}}
    assert api["channel_values"]["messages"] is None and api["metadata"]["step"] >= 1
    assert any(w["channel"] == "blob" for w in api["pending_writes"])
    d = server.get(f"/api/threads/hostile/diff/{latest['checkpoint_id']}").json()
    assert "messages" not in d["channels_changed"] and key in str(d["errors"])
    storage = server.get("/api/storage/hostile").json()
    assert storage["verify"]["ok"] is False
    named = {p["key"] for p in storage["verify"]["problems"]} & {key, manifest}
    assert named, storage["verify"]["problems"]
    assert named.pop() in server.get("/storage/hostile").text
    # the other threads still render
    assert server.get("/threads/alice").status_code == 200


def test_links_of_an_odd_thread_id_lead_to_its_pages(server: Server) -> None:
    found = server.get("/api/threads", params={"q": "bob/ü %2F"}).json()["threads"]
    assert [t["thread_id"] for t in found] == [ODD]
    home = server.get("/", params={"q": "bob"}).text
    link = re.search(r'href="(/threads/[^"]+)"', home)
    assert link is not None
    thread_page = server.get(html_unescape(link.group(1)))
    assert thread_page.status_code == 200 and "bob/ü %2F x" in thread_page.text
    cp_link = re.search(r'href="(/threads/[^"]+/checkpoints/[^"]+)"', thread_page.text)
    assert cp_link is not None
    cp_page = server.get(html_unescape(cp_link.group(1)))
    assert cp_page.status_code == 200 and "a" * 2000 in cp_page.text
    obj_link = re.search(r'href="(/objects/[^"]+)"', cp_page.text)
    assert obj_link is not None  # the 5,000-character message is stored as an object
    obj = server.get(html_unescape(obj_link.group(1)))
    assert obj.status_code == 200 and "verified" in obj.text
    storage = server.get("/storage/" + quote(ODD, safe=""))
    assert storage.status_code == 200 and "verify: OK" in storage.text


def test_unknown_things_are_404_naming_them(server: Server) -> None:
    for path, name in [
        ("/threads/nobody", "nobody"),
        ("/api/threads/nobody", "nobody"),
        ("/threads/alice/checkpoints/1ef-missing", "1ef-missing"),
        ("/api/objects/threads/_alice/objects/" + "0" * 64, "0" * 64),
        ("/objects/threads/_alice/objects/" + "0" * 64, "0" * 64),
        ("/api/storage/nobody", "nobody"),
    ]:
        r = server.get(path)
        assert r.status_code == 404, path
        assert name in r.text, path
    assert server.get("/api/objects/../etc/passwd").status_code in (400, 404)


def test_viewer_never_writes(server: Server) -> None:
    latest = server.get("/api/threads/alice/latest").json()
    cid = latest["checkpoint_id"]
    server.metered.reset()
    for path in [
        "/",
        "/threads/alice",
        "/threads/sup",
        f"/threads/alice/checkpoints/{cid}",
        f"/threads/alice/diff/{cid}",
        "/storage/alice",
        "/api/threads",
    ]:
        assert server.get(path).status_code == 200, path
    meter = server.metered.snapshot()
    assert meter.get_requests > 0 and meter.list_requests > 0
    _no_writes(meter)


@pytest.mark.backends("local")
def test_token_protects_every_route(store: ObjectStore) -> None:
    s = Server(store, token="s3cret-token")
    try:
        assert s.get("/").status_code == 401
        assert s.get("/api/threads").status_code == 401
        assert s.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert s.get("/", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
        r = s.get("/", params={"token": "s3cret-token"})
        assert r.status_code == 200 and "s3cret-token" not in r.text
        assert s.get("/api/threads").status_code == 200  # the cookie set by ?token=
        s.client.cookies.clear()
        assert s.get("/", params={"token": "tökén"}).status_code == 401
    finally:
        s.close()


# --- request counts: a page costs the same on 10,000 threads or 1,000 checkpoints ------


class Counter(TypedDict):
    n: int


def _long_thread(saver: ObjectStoreSaver, thread_id: str, turns: int) -> None:
    """A real graph run ``turns`` times: three checkpoints per turn."""
    builder = StateGraph(Counter)
    builder.add_node("inc", lambda s: {"n": s["n"] + 1})
    builder.add_edge(START, "inc")
    graph = builder.compile(checkpointer=saver)
    for i in range(turns):
        graph.invoke({"n": i}, {"configurable": {"thread_id": thread_id}})


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """10,000 threads and a thread of 1,002 checkpoints, in a local directory.

    The 10,000 threads hold a copy of one real manifest each (the threads page
    reads listings only); the long thread is written by a compiled graph.
    """
    st = LocalStore(tmp_path_factory.mktemp("big") / "store", fsync=False)
    saver = ObjectStoreSaver(st)
    _long_thread(saver, "long", 334)
    _long_thread(saver, "short", 20)
    page = st.list(keys.manifests_prefix("short"), limit=1)
    manifest = st.get(page.objects[0].key)
    assert manifest is not None
    seg = page.objects[0].key.rsplit("/", 1)[1]
    for i in range(10_000):
        st.put(f"{keys.thread_prefix(f't{i:05d}')}checkpoints/_/{seg}", manifest, PutMode.CREATE)
    s = Server(st)
    yield s
    s.close()


def test_threads_page_requests_do_not_grow_with_10000_threads(big: Server) -> None:
    r, first = big.requests_for("/?limit=50")
    assert r.status_code == 200 and r.text.count('href="/threads/') == 50
    # 51 one-key LISTs of the skip scan (the 51st tells there is a next page),
    # one LIST page per row, no GET.
    assert (first.list_requests, first.get_requests, first.put_requests) == (101, 0, 0), first
    # 100 pages in (the cursor is the prefix of the last thread shown): the same cost
    cursor = big.get("/api/threads", params={"after": keys.thread_prefix("t04999")}).json()
    assert cursor["threads"][0]["thread_id"] == "t05000"
    r, deep = big.requests_for(f"/?limit=50&after={keys.thread_prefix('t04999')}")
    assert r.status_code == 200 and "t05049" in r.text and "t05050" not in r.text
    assert deep.requests == first.requests, (deep, first)
    r, search = big.requests_for("/?q=t0999")
    assert r.text.count('href="/threads/') == 10
    assert search.list_requests == 21 and search.get_requests == 0, search
    api = big.get("/api/threads", params={"q": "long"}).json()["threads"]
    # a row reads one LIST page of the thread: past 1,000 keys (manifests and
    # the writes listed with them), a lower bound
    first_page = big.metered.inner.list(keys.thread_prefix("long")).objects
    manifests = [o.key for o in first_page if is_manifest(o.key)]
    assert len(first_page) == 1000 and 0 < len(manifests) < 1000
    assert api[0]["checkpoints"] == len(manifests) and api[0]["checkpoints_at_least"] is True


def test_thread_page_requests_do_not_grow_with_1000_checkpoints(big: Server) -> None:
    long_ = big.get("/api/threads/long").json()
    assert len(long_["checkpoints"]) == 50 and long_["next"]
    r, short = big.requests_for("/threads/short?limit=50")
    assert r.status_code == 200
    r, first = big.requests_for("/threads/long?limit=50")
    assert r.status_code == 200
    # one LIST page of manifest keys and one GET per manifest on the page
    assert (first.list_requests, first.get_requests) == (1, 50), first
    assert first.requests == short.requests
    cursor = long_["next"]
    for _ in range(15):
        cursor = big.get("/api/threads/long", params={"after": cursor}).json()["next"]
    r, deep = big.requests_for(f"/threads/long?limit=50&after={cursor}")
    assert r.status_code == 200 and deep.requests == first.requests


# --- the command ---------------------------------------------------------------------------


def test_serve_command_binds_loopback_and_checks_the_token(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/store"
    with ObjectStoreSaver.from_url(url) as saver:
        chat(saver, "alice", ["hello"])
    cmd = [sys.executable, "-m", "objstore_saver", "serve", "--url", url, "--port", "0"]
    refused = subprocess.run(
        [*cmd, "--host", "0.0.0.0"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 2 and "--token" in refused.stderr
    env = dict(os.environ, OBJSTORE_SAVER_VIEWER_TOKEN="tok-123")
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stderr is not None
        base = None
        deadline = time.monotonic() + 60
        while base is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            found = re.search(r"running on (http://127\.0\.0\.1:\d+)", line)
            base = found.group(1) if found else None
        assert base, "serve did not announce its address"
        assert httpx.get(base + "/api/threads", timeout=10).status_code == 401
        ok = httpx.get(
            base + "/api/threads", headers={"Authorization": "Bearer tok-123"}, timeout=10
        )
        assert [t["thread_id"] for t in ok.json()["threads"]] == ["alice"]
    finally:
        proc.terminate()
        proc.wait(20)


def test_an_encrypted_store_is_shown_with_its_key_and_refused_without(tmp_path: Path) -> None:
    from objstore_saver.crypto import ClientEncryption
    from objstore_saver.crypto.layer import sealed
    from objstore_saver.crypto.master_keys import LocalMasterKey

    raw = LocalStore(tmp_path / "s", fsync=False)
    settings = ClientEncryption.of(LocalMasterKey(os.urandom(32)))
    with ObjectStoreSaver(raw, client_encryption=settings) as saver:
        chat(saver, "alice", ["a sealed question"])
        with ObjectStoreStore(saver.store) as memories:
            memories.put(("users", "alice"), "prefs", {"note": "a sealed memory"})
    item = {"label": ["users", "alice"], "key": "prefs"}
    with_key = Server(sealed(raw, settings)[0])
    try:
        latest = with_key.get("/api/threads/alice/latest").json()
        assert latest["channel_values"]["messages"][0]["content"] == "a sealed question"
        shown = with_key.get("/api/store/item", params=item)
        assert shown.status_code == 200 and "a sealed memory" in shown.text
    finally:
        with_key.close()
    blind = Server(raw)
    try:
        answer = blind.get("/api/threads/alice/latest")
        assert answer.status_code >= 400
        assert "is encrypted" in answer.text and "a sealed question" not in answer.text
        refused = blind.get("/api/store/item", params=item)
        assert refused.status_code >= 400
        assert "is encrypted" in refused.text and "a sealed memory" not in refused.text
    finally:
        blind.close()
