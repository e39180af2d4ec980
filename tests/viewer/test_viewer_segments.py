"""The viewer over a list whose segments are embedded in manifests (format version 2).

A real saver grows a ``messages`` list by two messages a put over 28 puts
(one question large enough to be an object of its own): the checkpoint page
lists the list's segments and links the manifest embedding each, the object
page decodes an embedded segment (``<manifest key>#<hex>``), a manifest's
page lists what it embeds, the referrers of an object name the embedded
segment that refers to it, and the storage page's verify resolves them.
Then the same in Debian's Chromium, clicking the links.
"""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from browser_helpers import shoot
from segment_chat import THREAD, elsewhere, flip_embedded, grow, head, manifests, segments
from viewer_graphs import Server

from objstore_saver import ObjectStoreSaver
from objstore_saver.format.codec import decode_object, embedded_objects
from objstore_saver.storage import LocalStore


def _path(key: str) -> str:
    """The object page's path of a key (each segment quoted, as the pages link it)."""
    return "/objects/" + "/".join(quote(seg, safe="") for seg in key.split("/"))


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    st = LocalStore(tmp_path / "store")
    with ObjectStoreSaver(st) as saver:
        grow(saver, big_at=1)
    return st


def test_checkpoint_page_lists_segments_and_links_their_manifests(
    server: Server, store: LocalStore
) -> None:
    _, hm = head(store)
    api = server.get(f"/api/threads/{THREAD}/latest").json()
    listed = api["storage"]["messages"]["segments"]
    assert [(s["digest"], s["elements"], s["embedded_in"]) for s in listed] == [
        (g.digest.hex(), g.count, g.loc) for g in segments(hm)
    ]
    html = server.get(f"/threads/{THREAD}/latest").text
    items = re.findall(r'<li class="segment">(.*?)</li>', html)
    assert len(items) == len(segments(hm))
    for item, g in zip(items, segments(hm), strict=True):
        assert item.startswith(f"{g.count} elements: ")
        assert g.loc is not None
        links = [unescape(h) for h in re.findall(r'href="([^"]+)"', item)]
        assert links == [_path(f"{g.loc}#{g.digest.hex()}"), _path(g.loc)]
        for link in links:
            assert server.get(link).status_code == 200, link


def test_object_pages_of_an_embedded_segment_and_its_manifest(
    server: Server, store: LocalStore
) -> None:
    _, g = elsewhere(store)
    assert g.loc is not None
    address = f"{g.loc}#{g.digest.hex()}"
    api = server.get("/api" + _path(address)).json()
    assert api["kind"] == "segment" and api["sha256_ok"] is True
    assert api["embedded_in"] == g.loc and len(api["elements"]) == g.count
    page = server.get(_path(address)).text
    assert "kind <b><bdi>segment</bdi></b>" in page and "sha-256 verified" in page
    assert f'id="embedded-in" href="{_path(g.loc)}"' in page
    manifest = server.get(_path(g.loc)).text
    assert f'href="{_path(address)}"' in manifest  # under "Embedded objects"
    assert "Embedded objects" in manifest
    bad = server.get("/api" + _path(g.loc + "#" + "0" * 64))
    assert bad.status_code == 404 and "does not embed" in bad.json()["error"]
    assert server.get("/api" + _path(g.loc + "#zz")).status_code == 400


def test_referrers_of_an_element_name_the_embedded_segment(
    server: Server, store: LocalStore
) -> None:
    # The large question: a value embedded in the manifest of its put.
    [value] = [
        f"{key}#{d.hex()}"
        for key, m in manifests(store).items()
        for d, body in embedded_objects(m).items()
        if decode_object(body, key).__class__.__name__ == "ValueObj"
    ]
    r = server.get("/api" + _path(value), params={"referrers": 1, "limit": 200}).json()
    refs = r["referrers"]
    embedding = {
        f"{key}#{d.hex()}" for key, m in manifests(store).items() for d in embedded_objects(m)
    }
    found = {o["key"] for o in refs["objects"] if o["kind"] == "segment"}
    assert found and found <= embedding
    assert refs["scanned_embedded"] == sum(len(m.embedded) for m in manifests(store).values())
    assert all(o["embedded_in"] == o["key"].split("#")[0] for o in refs["objects"])


def test_storage_page_verifies_embedded_objects(server: Server, store: LocalStore) -> None:
    page = server.get(f"/storage/{THREAD}").text
    assert "verify: OK" in page and "embedded in manifests" in page
    _, g = elsewhere(store)
    assert g.loc is not None
    flip_embedded(store, g.loc, g.digest, -1)
    report = server.get(f"/api/storage/{THREAD}").json()["verify"]
    assert not report["ok"]
    assert [p["key"] for p in report["problems"]] == [g.loc]
    # The checkpoint still shows, naming the manifest that no longer embeds it.
    r = server.get(f"/threads/{THREAD}/latest")
    assert r.status_code == 200 and "does not embed object" in r.text and g.loc in r.text


def test_click_from_a_segment_to_its_manifest(
    browser: Any, server: Server, store: LocalStore, tmp_path: Path
) -> None:
    _, g = elsewhere(store)
    assert g.loc is not None
    context = browser.new_context(base_url=server.base, viewport={"width": 1100, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        page.goto(f"/threads/{THREAD}/latest")
        assert page.locator("li.segment").count() == len(segments(head(store)[1]))
        shoot(page, tmp_path, "segments")
        item = page.locator("li.segment", has_text=g.loc).first
        item.locator("a", has_text="segment").click()
        assert "kind segment" in page.locator("body").inner_text()
        shoot(page, tmp_path, "embedded-segment")
        page.click("#embedded-in")
        body = page.locator("body").inner_text()
        assert "kind manifest" in body and "Embedded objects" in body
        assert page.locator("#embedded a", has_text=g.digest.hex()).count() == 1
    finally:
        context.close()
