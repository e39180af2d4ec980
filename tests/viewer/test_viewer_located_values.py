"""The viewer over values embedded in manifests (format version 2), before and after prune.

Long chat messages and a long channel value are ``value`` objects embedded
in the manifest of the put that added them: the checkpoint page links each
to its address ``<manifest key>#<hex>``, the object page decodes it and
finds what references it, and after a prune the links lead to the copies
stored alone at ``objects/<H>``.
"""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest
from embedded_values import in_url
from long_messages import THREAD, grow
from viewer_graphs import Server

from objstore_saver import ObjectStoreSaver
from objstore_saver.storage import LocalStore
from objstore_saver.viewer.pages import object_href


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    st = LocalStore(tmp_path / "store")
    with ObjectStoreSaver(st) as saver:
        grow(saver)
    return st


def _object_links(html: str) -> list[str]:
    return [unescape(h) for h in re.findall(r'href="(/objects/[^"]+)"', html)]


def test_checkpoint_page_links_embedded_values_to_pages_that_decode_them(
    server: Server,
) -> None:
    api = server.get(f"/api/threads/{THREAD}/latest").json()
    notes = api["storage"]["notes"]
    assert notes["embedded_in"] and "#" in notes["key"]
    html = server.get(f"/threads/{THREAD}/latest").text
    links = _object_links(html)
    assert unescape(object_href(notes["key"])) in links  # "#" quoted: not a URL fragment
    for address in api["storage"]["messages"]["objects"]:  # the tail's, embedded here
        assert address.startswith(api["key"] + "#")
        assert unescape(object_href(address)) in links
    for link in links:
        r = server.get(link)
        assert r.status_code == 200, link
    page = server.get("/objects/" + in_url(notes["key"])).text
    assert 'id="embedded-in"' in page and "verified" in page
    obj = server.get("/api/objects/" + in_url(notes["key"])).json()
    assert obj["kind"] == "value" and obj["value"] == api["channel_values"]["notes"]
    # What references it: the manifests that keep the channel, found by its digest.
    assert 'id="referrers-link"' in page
    refs = server.get("/api/objects/" + in_url(notes["key"]), params={"referrers": 1}).json()
    found = {m["key"] for m in refs["referrers"]["manifests"]}
    assert api["key"] in found and notes["embedded_in"] in found


def test_links_lead_to_the_values_stored_alone_after_prune(
    server: Server, store: LocalStore
) -> None:
    before = server.get(f"/api/threads/{THREAD}/latest").json()
    with ObjectStoreSaver(store) as saver:
        saver.prune([THREAD], keep_last=2)
    api = server.get(f"/api/threads/{THREAD}/latest").json()
    assert api["channel_values"] == before["channel_values"]
    notes = api["storage"]["notes"]
    assert notes["embedded_in"] is None and "/objects/" in notes["key"]
    html = server.get(f"/threads/{THREAD}/latest").text
    for link in _object_links(html):
        assert server.get(link).status_code == 200, link
    gone = server.get("/objects/" + in_url(before["storage"]["notes"]["key"]))
    assert gone.status_code == 200 and "is gone" in gone.text
