"""The viewer in a real browser: Debian's Chromium driven by Playwright.

Over a local directory and moto S3 holding threads written by real compiled
graphs (a chat with a fork by time travel, supervisors with subgraphs, an
interrupt resumed by a human, hostile messages), a headless Chromium loads
every page, follows the links by clicking and reads what is shown. Hostile
messages try to run script four ways; a loopback listener, a dialog handler
and the page's own globals prove none of them ran (and a control page proves
the same payload does run when not escaped). Every page is screenshotted:
into ``$OBJSTORE_VIEWER_SCREENSHOTS`` (the local store's run; docs/viewer.md)
when set, else into a temporary directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from backends import open_backend
from browser_helpers import SHOTS_ENV, Listener, script_payloads, shoot
from embedded_values import corrupt_embedded
from ops_helpers import chat
from payloads import incompressible_text
from viewer_graphs import (
    ANSWER,
    HOSTILE,
    ODD,
    QUESTION,
    Server,
    approval,
    nested_subgraphs,
    noted_chat,
    populate,
)

from objstore_saver import ObjectStoreSaver
from objstore_saver.storage.base import ObjectStore, PutMode


@pytest.fixture(scope="module", params=["local", "s3-boto3"])
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, listener: Listener
) -> Iterator[tuple[Server, ObjectStore, Path]]:
    """The viewer over a store of real graphs' threads, and where its screenshots go."""
    with open_backend(request.param, tmp_path_factory.mktemp("store"), request) as backend:
        st = backend.store(fsync=False)
        saver = ObjectStoreSaver(st)
        populate(saver)
        approval(saver, "approval")
        nested_subgraphs(saver, "team")
        chat(saver, "attack", script_payloads(listener.url))
        # A message that does not compress: an object of its own, in the list.
        noted_chat(saver, "broken", [incompressible_text(4000, 3), "still"])
        shots = os.environ.get(SHOTS_ENV)
        local = shots and backend.kind == "local"
        out = Path(shots) if local else tmp_path_factory.mktemp("shots")
        out.mkdir(parents=True, exist_ok=True)
        server = Server(st)
        yield server, st, out
        server.close()


@pytest.fixture
def page(browser: Any, site: tuple[Server, ObjectStore, Path]) -> Iterator[Any]:
    context = browser.new_context(base_url=site[0].base, viewport={"width": 1100, "height": 800})
    pg = context.new_page()
    pg.set_default_timeout(15_000)
    yield pg
    context.close()


def said(page: Any, selector: str = ".msg") -> list[str]:
    """The messages of a transcript as ``role: content`` (without their ids)."""
    return [
        f"{m.locator('b').inner_text()}: {m.locator(':scope > span').inner_text()}"
        for m in page.locator(selector).all()
    ]


def test_click_through_threads_thread_checkpoint_diff_object_storage(
    page: Any, site: tuple[Server, ObjectStore, Path]
) -> None:
    server, _, out = site
    page.goto("/")
    rows = page.locator("table tr td:first-child").all_inner_texts()
    assert {"alice", "sup", "hostile", ODD, "approval", "team", "attack", "broken"} <= set(rows)
    shoot(page, out, "threads")
    page.fill("input[name=q]", "al")
    page.click("button")
    assert page.locator("table tr td:first-child").all_inner_texts() == ["alice"]

    page.click("text=alice")
    assert page.locator("h1").inner_text() == "Thread alice"
    assert "1 forks" in page.locator("body").inner_text()
    assert page.locator(".fork").count() == 1
    # the fork's two branches: the original second turn and the time-travel turn
    fork_item = page.locator("li:has(> .fork)")
    assert fork_item.locator(":scope > ul > li").count() == 2
    shoot(page, out, "thread-fork")

    latest = server.get("/api/threads/alice/latest").json()["checkpoint_id"]
    page.click(f"a:has-text('{latest}')")
    transcript = said(page)
    assert transcript[-2:] == ["human: the other way", "ai: forked answer"]
    assert page.locator(".msg.human").count() == 2 and page.locator(".msg.ai").count() == 2
    shoot(page, out, "checkpoint")

    page.click("text=diff with parent")
    body = page.locator("body").inner_text()
    assert "channels changed: messages" in body
    added = said(page, "h2:has-text('Messages added') + .msg")
    assert added == ["ai: forked answer"]
    shoot(page, out, "diff")

    page.goto("/?q=bob")
    page.click("table a")
    assert page.locator("h1").inner_text() == f"Thread {ODD}"
    odd_latest = server.get("/api/threads/" + quote(ODD, safe="") + "/latest").json()
    page.click(f"a:has-text('{odd_latest['checkpoint_id']}')")
    assert "a" * 2000 in page.locator(".msg.human").first.inner_text()
    # The hostile thread's messages list (inline in the manifest) refers to
    # the objects of its large elements.
    hostile = server.get("/api/threads/hostile/latest").json()["checkpoint_id"]
    page.goto(f"/threads/hostile/checkpoints/{hostile}")
    page.locator("h3:has-text('messages') a:has-text('object')").first.click()
    assert "sha-256 verified" in page.locator("body").inner_text()
    assert "kind value" in page.locator("body").inner_text()
    shoot(page, out, "object")
    page.click("#referrers-link")
    assert "Referenced by" in page.locator("h2").all_inner_texts()
    assert " found in " in page.locator("#referrers").inner_text()
    shoot(page, out, "object-referrers")
    page.click("ul a:has-text('checkpoints')")  # the manifest that references it
    assert "kind manifest" in page.locator("body").inner_text()

    page.click("nav >> text=Storage")
    assert page.locator("h1").inner_text() == "Storage"
    assert page.locator("table").nth(1).locator("tr").count() == 1 + 8  # header + 8 threads
    shoot(page, out, "storage")
    page.click("table >> text=alice")
    assert page.locator("h2").inner_text() == "verify: OK"
    shoot(page, out, "verify")


def test_subgraphs_nest_and_interrupts_show(
    page: Any, site: tuple[Server, ObjectStore, Path]
) -> None:
    server, _, out = site
    page.goto("/threads/team")
    assert page.locator("li.subgraph").count() == 2
    nested = page.locator("li.subgraph li.subgraph code").first.inner_text()
    assert nested.startswith("team:") and "|worker:" in nested
    shoot(page, out, "thread-subgraphs")

    page.goto("/threads/approval")
    with_interrupt = [
        c["checkpoint_id"]
        for c in server.get("/api/threads/approval").json()["checkpoints"]
        if any(
            w["channel"] == "__interrupt__"
            for w in server.get(f"/api/threads/approval/checkpoints/{c['checkpoint_id']}").json()[
                "pending_writes"
            ]
        )
    ]
    assert len(with_interrupt) == 1
    page.click(f"a:has-text('{with_interrupt[0]}')")
    interrupts = page.locator("h2:has-text('Interrupts') + pre").inner_text()
    assert QUESTION in interrupts
    assert ANSWER in page.locator("h2:has-text('Pending writes') + pre").inner_text()
    shoot(page, out, "interrupt")
    page.goto("/threads/approval/latest")
    assert said(page, ".msg.ai") == [f"ai: refund: {ANSWER}"]


def test_hostile_messages_are_shown_not_run(
    browser: Any, page: Any, site: tuple[Server, ObjectStore, Path], listener: Listener
) -> None:
    server, _, out = site
    dialogs: list[str] = []
    requests: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("request", lambda r: requests.append(r.url))
    listener.hits.clear()
    for path in ["/threads/attack/latest", "/threads/hostile/latest"]:
        page.goto(path)
        page.wait_for_load_state("networkidle")
        assert page.evaluate("window.__pwned") is None, path
        assert page.title().startswith("Checkpoint "), path
        assert page.locator("img, svg, iframe, script, #js-link").count() == 0, path
    shown = page.locator("body").inner_text()
    assert "<b>bold</b>" in shown and "more characters" in shown
    page.goto("/threads/attack/latest")
    shown = said(page, ".msg.human")
    for text, payload in zip(shown, script_payloads(listener.url), strict=True):
        assert text == "human: " + payload  # the markup is there, as text
    shoot(page, out, "hostile")
    assert dialogs == [] and listener.hits == []
    assert not [u for u in requests if u.startswith(listener.url)]
    assert {u.split("/")[2] for u in requests} == {server.base.split("/")[2]}
    raw = page.goto("/threads/hostile/latest")
    assert raw is not None and HOSTILE[:30] not in raw.text()  # sent escaped...
    assert HOSTILE[:30] in page.locator(".msg.human").first.inner_text()  # ...shown as text

    # Control: the same payloads, not escaped, do run in this browser and are seen.
    control = browser.new_page()
    try:
        control.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        control.set_content("".join(script_payloads(listener.url)), wait_until="networkidle")
        control.wait_for_function("window.__pwned !== undefined")
        assert control.title() == "pwned" and dialogs
    finally:
        control.close()
    assert {"/script", "/img", "/iframe"} <= set(listener.hits)


def test_a_corrupt_object_leaves_the_rest_of_the_page(
    page: Any, site: tuple[Server, ObjectStore, Path]
) -> None:
    server, store, out = site
    latest = server.get("/api/threads/broken/latest").json()
    where = latest["storage"]["messages"]
    key = ([s["key"] for s in where["sealed"]] + where["objects"])[0]
    holder = key.rpartition("#")[0] or key  # the manifest embedding it, if it is embedded
    if "#" in key:  # embedded in a manifest: it no longer is, nor is it stored alone
        corrupt_embedded(store, key)
        key, why = "threads/_broken/objects/" + key.rpartition("#")[2], "missing"
    else:  # stored alone: it no longer hashes to its key
        body = store.get(key)
        assert body is not None
        store.put(key, body[:-3] + b"zzz", PutMode.OVERWRITE)
        why = "SHA-256"
    resp = page.goto("/threads/broken/latest")
    assert resp is not None and resp.status == 200
    err = page.locator(".err").all_inner_texts()
    assert any(key in e and why in e for e in err), err
    assert "step" in page.locator("h2:has-text('Metadata') + pre").inner_text()
    assert page.locator("h3:has-text('summary') + pre").inner_text() == '"5 characters"'

    assert page.locator("h2").all_inner_texts()[:1] == ["Channels"]
    shoot(page, out, "corrupt")
    page.goto(f"/storage/{'broken'}")
    assert page.locator("h2").inner_text() == "verify: CORRUPT"
    named = page.locator("li.err").first.inner_text()
    assert key in named or holder in named, named
