"""Viewer views over real graphs: subgraph runs nested under their step, an object's referrers."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from backends import Backend
from doc_blocks import ROOT, blocks
from embedded_values import corrupt_embedded, in_url
from ops_helpers import chat, subgraph_chat
from viewer_graphs import HOSTILE, Server, nested_subgraphs, tool_use

from objstore_saver import ObjectStoreSaver
from objstore_saver.driver import Driver
from objstore_saver.ops.checkpoint_reading import checkpoint_plan
from objstore_saver.storage import MeteredStore

pytestmark = pytest.mark.backends("local", "s3-boto3")


@pytest.fixture
def server(backend: Backend) -> Iterator[Server]:
    st = backend.store(fsync=False)
    saver = ObjectStoreSaver(st)
    nested_subgraphs(saver, "team")
    subgraph_chat(saver, "sup", ["one", "two"])
    chat(saver, "hostile", [HOSTILE, "and again"])
    chat(saver, "long", [f"question {i}" for i in range(25)])
    tool_use(saver, "tools")
    s = Server(st)
    yield s
    s.close()


def _walk(nodes: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for n in nodes:
        yield n
        yield from _walk(n["children"])
        yield from _walk(n["subgraphs"])


def _owner_ran_the_task(server: Server, thread: str, owner: dict[str, Any], ns: str) -> bool:
    """Whether a pending write of ``owner`` comes from the task named in ``ns``'s last segment."""
    task_id = ns.rsplit("|", 1)[-1].split(":", 1)[1]
    cp = server.get(
        f"/api/threads/{thread}/checkpoints/{owner['checkpoint_id']}",
        params={"ns": owner["checkpoint_ns"]},
    ).json()
    return any(w["task_id"] == task_id for w in cp["pending_writes"])


def test_subgraph_runs_nest_under_the_step_that_ran_them(server: Server) -> None:
    r = server.get("/api/threads/team").json()
    # one root, the supervisor's first checkpoint; every other checkpoint hangs below it
    assert [n["checkpoint_ns"] for n in r["tree"]] == [""]
    assert sum(1 for _ in _walk(r["tree"])) == len(r["checkpoints"]) == 9
    runs = [(owner, sub) for owner in _walk(r["tree"]) for sub in owner["subgraphs"]]
    assert len(runs) == 2
    by_depth = sorted(runs, key=lambda run: run[1]["checkpoint_ns"].count("|"))
    (sup_step, team_run), (team_step, worker_run) = by_depth
    assert sup_step["checkpoint_ns"] == "" and team_run["checkpoint_ns"].startswith("team:")
    assert team_step["checkpoint_ns"] == team_run["checkpoint_ns"]
    assert worker_run["checkpoint_ns"].startswith(team_run["checkpoint_ns"] + "|worker:")
    # the owner is the checkpoint whose pending writes come from the task the namespace names
    assert _owner_ran_the_task(server, "team", sup_step, team_run["checkpoint_ns"])
    assert _owner_ran_the_task(server, "team", team_step, worker_run["checkpoint_ns"])
    html = server.get("/threads/team").text
    assert html.count('<li class="subgraph">') == 2
    inner = html.split('<li class="subgraph">', 2)[2]
    assert "|worker:" in inner.split("</code>")[0]  # the worker run inside the team run

    # two turns, two subgraph runs, each under its own step of the parent
    sup = server.get("/api/threads/sup").json()
    assert [n["checkpoint_ns"] for n in sup["tree"]] == [""]
    owners = [o for o in _walk(sup["tree"]) if o["subgraphs"]]
    assert len(owners) == 2 and owners[0]["checkpoint_id"] != owners[1]["checkpoint_id"]
    for o in owners:
        assert _owner_ran_the_task(server, "sup", o, o["subgraphs"][0]["checkpoint_ns"])
    # a page that holds a subgraph run but not its step leaves the run a root
    first = server.get("/api/threads/sup", params={"limit": 6}).json()
    assert {c["checkpoint_ns"] for c in first["checkpoints"]} == {""}
    part = server.get("/api/threads/sup", params={"limit": 6, "after": first["next"]}).json()
    assert len(part["tree"]) == 2 and all(n["checkpoint_ns"] for n in part["tree"])
    assert {n["parents"][""] for n in part["tree"]} == {o["checkpoint_id"] for o in owners}


def test_referrers_of_an_object_and_what_the_scan_costs(server: Server) -> None:
    latest = server.get("/api/threads/hostile/latest").json()
    objects = latest["storage"]["messages"]["objects"]
    # embedded in a manifest (format version 2): "<manifest key>#<hex>"
    objects = [in_url(k) for k in objects]  # a value embedded in a manifest: "<key>#<hex>"
    big = max(objects, key=lambda k: server.get(f"/api/objects/{k}").json()["bytes"])
    r, meter = server.requests_for(f"/api/objects/{big}?referrers=1")
    refs = r.json()["referrers"]
    # the 50 kB message is an element of the messages list, inline in the
    # manifests of both turns' last checkpoints (format version 2)
    assert latest["key"] in {m["key"] for m in refs["manifests"]}
    assert {m["entry"] for m in refs["manifests"]} == {"messages"}
    # the object, one LIST of manifest keys, one GET per manifest and per container
    n_manifests = refs["scanned_manifests"]
    assert n_manifests == len(server.get("/api/threads/hostile").json()["checkpoints"])
    assert (meter.list_requests, meter.get_requests) == (
        1,
        1 + n_manifests + refs["scanned_objects"],
    )
    assert meter.put_requests == meter.delete_requests == 0
    page = server.get(f"/objects/{big}", params={"referrers": 1}).text
    assert "Referenced by" in page and latest["key"] in page
    assert 'id="referrers-link"' in server.get(f"/objects/{big}").text
    assert server.get(f"/api/objects/{latest['key']}?referrers=1").status_code == 400
    bad = server.get(f"/api/objects/{big}?referrers=1&after=threads/_alice/checkpoints/x")
    assert bad.status_code == 400 and "threads/_alice/checkpoints/x" in bad.json()["error"]


def test_referrers_scan_is_bounded_and_pages_on(server: Server) -> None:
    latest = server.get("/api/threads/long/latest").json()
    key = in_url(latest["storage"]["messages"]["key"])  # embedded in a manifest
    r, meter = server.requests_for(f"/api/objects/{key}?referrers=1&limit=20")
    refs = r.json()["referrers"]
    assert refs["scanned_manifests"] == 20 and refs["next"]
    assert refs["scanned_objects"] <= 20
    assert (meter.list_requests, meter.get_requests) == (1, 1 + 20 + refs["scanned_objects"])
    found = {m["key"] for m in refs["manifests"]}
    after, pages = refs["next"], 1
    while after:
        more = server.get(
            f"/api/objects/{key}", params={"referrers": 1, "limit": 20, "after": after}
        ).json()["referrers"]
        found |= {m["key"] for m in more["manifests"]}
        after, pages = more["next"], pages + 1
    assert pages == 4 and latest["key"] in found  # 76 checkpoints, 20 a page
    html = server.get(f"/objects/{key}", params={"referrers": 1, "limit": 20}).text
    assert 'id="more-referrers"' in html
    bad = server.get(f"/api/objects/{key}", params={"referrers": 1, "after": "threads/_x/"})
    assert bad.status_code == 400 and "cursor" in bad.json()["error"]


def test_checkpoint_page_costs_what_show_costs_until_an_object_is_corrupt(
    server: Server,
) -> None:
    latest = server.get("/api/threads/hostile/latest").json()
    cid = latest["checkpoint_id"]
    # what ``show`` (the CLI's plan) sends for this checkpoint, through its own meter
    metered = MeteredStore(server.metered.inner)
    driver = Driver(metered)
    try:
        assert driver.run(checkpoint_plan("hostile", cid, "")) is not None
    finally:
        driver.close()
    show_cost = metered.snapshot()
    r, page = server.requests_for(f"/threads/hostile/checkpoints/{cid}")
    assert r.status_code == 200
    assert (page.list_requests, page.get_requests) == (
        show_cost.list_requests,
        show_cost.get_requests,
    )
    objects = latest["storage"]["messages"]["objects"]
    key = next(k for k in objects if "#" in k)  # a message embedded in a manifest
    corrupt_embedded(server.metered.inner, key)
    alone = "threads/_hostile/objects/" + key.rpartition("#")[2]
    r, corrupt = server.requests_for(f"/threads/hostile/checkpoints/{cid}")
    assert r.status_code == 200 and alone in r.text and "missing" in r.text
    # Bounded: the manifest that no longer embeds the message sends the read
    # to objects/<H> (one more GET), and the entry that failed (the messages
    # list) is resolved once more alone to tell which is corrupt: that
    # manifest and objects/<H> again, nothing else.
    assert corrupt.list_requests == show_cost.list_requests
    assert corrupt.get_requests == show_cost.get_requests + 3, corrupt


def test_transcript_shows_tool_calls_and_links_each_result_to_its_call(server: Server) -> None:
    newest = server.get("/api/threads/tools").json()["checkpoints"][0]["checkpoint_id"]
    page = server.get(f"/threads/tools/checkpoints/{newest}")
    assert page.status_code == 200
    html = page.text
    # the AI message's call: tool name, escaped arguments, and an anchor its result links to
    assert '<li class="call" id="call-call_7">calls <b><bdi>lookup_order</bdi></b>' in html
    assert "A-17&lt;img src=x&gt;" in html and "<img src=x>" not in html
    # the ToolNode's result names the call it answers and links to it
    assert 'result of <a href="#call-call_7"><bdi>lookup_order</bdi></a>' in html
    assert "order A-17&lt;img src=x&gt;: shipped" in html
    assert html.index('id="call-call_7"') < html.index('href="#call-call_7"')


def test_the_documented_api_example_answers_in_the_documented_shape(backend: Backend) -> None:
    """docs/viewer.md's curl example, run against a viewer on its own port: the answer
    has exactly the fields the doc's JSON shows, for the thread the doc searches."""
    doc = ROOT / "docs" / "viewer.md"
    command = next(b for b in blocks(doc) if "curl -s 'http://127.0.0.1:8765/api/" in b.text)
    after = doc.read_text().split(command.text, 1)[1]
    documented = json.loads(after.split("```json\n", 1)[1].split("```", 1)[0])
    st = backend.store(fsync=False)
    chat(ObjectStoreSaver(st), documented["threads"][0]["thread_id"], ["hi", "again"])
    chat(ObjectStoreSaver(st), "user-42/chat-2", ["hi"])  # a second match: a next page
    chat(ObjectStoreSaver(st), "someone-else", ["hi"])
    viewer = Server(st)
    try:
        script = command.text.replace("http://127.0.0.1:8765", viewer.base)
        done = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", script],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    finally:
        viewer.close()
    got = json.loads(done.stdout)
    assert set(got) == set(documented)
    assert [t["thread_id"] for t in got["threads"]] == [documented["threads"][0]["thread_id"]]
    assert set(got["threads"][0]) == set(documented["threads"][0])
    assert got["next"] == documented["next"] == got["threads"][0]["prefix"]
