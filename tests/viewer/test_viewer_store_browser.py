"""The long-term store pages in a real browser (Debian's Chromium, driven by Playwright).

Over a directory and moto S3 holding ObjectStoreStore items (plain, slashed,
hostile and 2,000-character labels, an expired item, indexed fields) and one
chat thread, the browser clicks threads page → long-term store → namespace →
item, and reads what is shown. A stored value carrying script four ways is
shown as text: the page's globals, a dialog handler and a loopback listener
prove none of it ran. Screenshots go to ``$OBJSTORE_VIEWER_SCREENSHOTS`` (the
local run) when set, as in test_viewer_browser.py.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from backends import open_backend
from browser_helpers import SHOTS_ENV, Listener, script_payloads, shoot
from ops_helpers import chat
from store_viewer_data import HOSTILE_NS, fill
from viewer_graphs import Server

from objstore_saver import ObjectStoreSaver
from objstore_saver.longterm import ObjectStoreStore

ATTACK_NS = ("attack", "<img src=x onerror=alert(9)>")


@pytest.fixture(scope="module", params=["local", "s3-boto3"])
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, listener: Listener
) -> Iterator[tuple[Server, Path]]:
    """The viewer over a store with long-term items, and where its screenshots go."""
    with open_backend(request.param, tmp_path_factory.mktemp("store"), request) as backend:
        st = backend.store(fsync=False)
        fill(st)
        with ObjectStoreStore(st) as store:
            store.put(
                ATTACK_NS, "payload", {"attempts": script_payloads(listener.url)}, index=False
            )
        chat(ObjectStoreSaver(st), "memories", ["remember that I like tea"])
        shots = os.environ.get(SHOTS_ENV)
        local = shots and backend.kind == "local"
        out = Path(shots) if local else tmp_path_factory.mktemp("shots")
        out.mkdir(parents=True, exist_ok=True)
        server = Server(st)
        yield server, out
        server.close()


@pytest.fixture
def page(browser: Any, site: tuple[Server, Path]) -> Iterator[Any]:
    context = browser.new_context(base_url=site[0].base, viewport={"width": 1100, "height": 800})
    pg = context.new_page()
    pg.set_default_timeout(15_000)
    yield pg
    context.close()


def _link(page: Any, selector: str, exact: str) -> Any:
    """The one link matching ``selector`` whose whole text is ``exact``."""
    return page.locator(selector).filter(has_text=re.compile("^" + re.escape(exact) + "$"))


def test_click_threads_store_namespace_item(page: Any, site: tuple[Server, Path]) -> None:
    _, out = site
    page.goto("/")
    assert "memories" in page.locator("table").inner_text()
    page.click("#nav-store")
    assert page.locator("h1").inner_text() == "Long-term store"
    rows = page.locator("#namespaces tr").all_inner_texts()
    assert any(r.startswith("users / alice\t2\t1") for r in rows), rows
    assert any(r.startswith(" / ".join(HOSTILE_NS)) for r in rows), rows
    shoot(page, out, "store-namespaces")

    page.fill("#ns-search input[name=label] >> nth=0", "users")
    page.click("#ns-search button")
    shown = [r.split("\t")[0] for r in page.locator("#namespaces tr").all_inner_texts()[1:]]
    assert shown == ["users / a/b / %2F/c", "users / alice", "users / bob"]

    page.click("a.ns:has-text('alice')")
    assert page.locator("h1").inner_text() == "Namespace users / alice"
    keys = page.locator("#items a.item").all_inner_texts()
    assert keys == ["memo", "prefs", "stale"]
    assert page.locator("#items tr:has-text('stale') .err").inner_text() == "expired"
    shoot(page, out, "store-namespace")

    _link(page, "a.item", "memo").click()
    assert page.locator("h1").inner_text() == "Item memo"
    facts = page.locator("#facts").inner_text()
    assert "store/it/_users/_alice/i/_memo" in facts and "TTL\tnone" in facts
    assert "likes green tea and long walks" in page.locator("pre").inner_text()
    assert "text: 16 dimensions" in page.locator("body").inner_text()
    shoot(page, out, "store-item")
    page.click("#facts a")  # back to the namespace by its link
    assert page.locator("h1").inner_text() == "Namespace users / alice"


def test_a_script_in_a_stored_value_is_shown_not_run(
    page: Any, site: tuple[Server, Path], listener: Listener
) -> None:
    server, out = site
    dialogs: list[str] = []
    requests: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("request", lambda r: requests.append(r.url))
    listener.hits.clear()
    page.goto("/store")
    page.click("a.ns:has-text('attack')")
    page.wait_for_load_state("networkidle")
    assert page.locator("img, svg, iframe, script").count() == 0
    _link(page, "a.item", "payload").click()
    page.wait_for_load_state("networkidle")
    assert page.evaluate("window.__pwned") is None
    assert page.title() == "Item payload"
    assert page.locator("img, svg, iframe, script, #js-link").count() == 0
    value = page.locator("pre").inner_text()
    assert "<script>window.__pwned=1" in value and "onerror" in value  # shown as text
    assert "<img src=x onerror=alert(9)>" in page.locator("#facts").inner_text()
    shoot(page, out, "store-hostile")
    assert dialogs == [] and listener.hits == []
    assert {u.split("/")[2] for u in requests} == {server.base.split("/")[2]}
