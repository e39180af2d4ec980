"""Server-rendered HTML of the views; every stored string goes through :func:`text`.

Stored content is hostile until shown otherwise: it is escaped with
:func:`html.escape`, cut to a bound, and isolated for bidirectional text
(``<bdi>``), so a message cannot inject markup, run script, or flip the page.
"""

from __future__ import annotations

import html
import json
from typing import Any
from urllib.parse import quote, urlencode

#: Longest stored string shown in full on a page.
MAX_TEXT = 2000
#: Longest JSON block shown on a page.
MAX_JSON = 20000

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;max-width:70em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}
pre{background:#f6f6f6;padding:.5em;overflow:auto;white-space:pre-wrap;word-break:break-all}
.msg{border-left:4px solid #999;margin:.4em 0;padding:.2em .6em;overflow-wrap:anywhere}
.human{border-color:#36c}.ai{border-color:#3a3}.tool{border-color:#c80}
.err{background:#fee;border:1px solid #c00;padding:.5em}.fork{color:#a0a;font-weight:bold}
.subgraph{color:#555}.subgraphs{border-left:2px dashed #a0a;margin-left:.5em}
"""


def text(value: Any, limit: int = MAX_TEXT) -> str:
    """Escaped, bounded, direction-isolated text of any value."""
    s = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    cut = ""
    if len(s) > limit:
        cut = f" … ({len(s) - limit} more characters)"
        s = s[:limit]
    return f"<bdi>{html.escape(s)}</bdi>{html.escape(cut)}"


def block(value: Any) -> str:
    """A JSON value as an escaped, bounded ``<pre>``."""
    s = json.dumps(value, indent=2, default=str, ensure_ascii=False)
    return f'<pre dir="ltr">{text(s, MAX_JSON)}</pre>'


def href(path: str, *pairs: tuple[str, Any], **params: Any) -> str:
    """An escaped link target: parameters (``pairs``, then ``params`` but None) encoded."""
    query = urlencode([*pairs, *((k, v) for k, v in params.items() if v is not None)])
    return html.escape(path + ("?" + query if query else ""), quote=True)


def q(segment: str) -> str:
    """One URL path segment."""
    return quote(segment, safe="")


def object_href(key: str) -> str:
    """The link to an object's page, each key segment quoted (tokens hold "%")."""
    return href("/objects/" + "/".join(q(seg) for seg in key.split("/")))


def next_link(url: str | None, label: str) -> str:
    """The link to the next page of a listing, or nothing on its last page."""
    return f'<p><a id="next" href="{url}">{label}</a></p>' if url else ""


def page(title: str, body: str, status_note: str = "") -> str:
    """A whole HTML document."""
    nav = (
        f'<nav><a href="{href("/")}">Threads</a> · <a href="{href("/storage")}">Storage</a>'
        f' · <a id="nav-store" href="{href("/store")}">Long-term store</a></nav>'
    )
    return (
        '<!doctype html><html><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body>{nav}<h1>{text(title, 200)}</h1>{status_note}{body}</body></html>"
    )


def error_page(status: int, message: str, key: str | None = None) -> str:
    """A page naming what is missing or corrupt (404, 400, 422)."""
    where = f"<p>key: <code>{text(key, 500)}</code></p>" if key else ""
    return page(f"{status}", f'<div class="err"><p>{text(message)}</p>{where}</div>')


def table(heads: list[str], rows: list[str], attrs: str = "") -> str:
    """A ``<table>``: a header row of ``heads`` (HTML), then ``rows`` (``<tr>`` HTML)."""
    cells = "".join(f"<th>{h}</th>" for h in heads)
    return f"<table{attrs}><tr>{cells}</tr>{''.join(rows)}</table>"


def _size(n: int, at_least: bool = False) -> str:
    return ("≥ " if at_least else "") + f"{n:,} B"


def threads_page(r: dict[str, Any]) -> str:
    """The threads page: a search box, one page of rows, a link to the next page."""
    rows = []
    for t in r["threads"]:
        tid = t["thread_id"]
        name = text(tid, 200) if tid is not None else text(t["prefix"]) + " (hashed id)"
        link = f'<a href="{href("/threads/" + q(tid))}">{name}</a>' if tid is not None else name
        count = ("≥ " if t["checkpoints_at_least"] else "") + str(t["checkpoints"])
        rows.append(
            f"<tr><td>{link}</td><td>{count}</td><td>{_size(t['bytes'], t['bytes_at_least'])}"
            f"</td><td>{text(t['last_update'] or '-')}</td></tr>"
        )
    nxt = next_link(r["next"] and href("/", q=r["search"] or None, after=r["next"]), "next page")
    form = (
        f'<form action="/"><input name="q" value="{html.escape(r["search"], quote=True)}" '
        'placeholder="thread id prefix"><button>search</button></form>'
    )
    rows_table = table(["thread", "checkpoints", "size", "last update"], rows)
    return page("Threads", form + rows_table + nxt)


def _node(thread_id: str, n: dict[str, Any]) -> str:
    if n.get("error"):
        return corrupt(n["error"], "li")
    cid, ns = n["checkpoint_id"], n["checkpoint_ns"]
    link = href(f"/threads/{q(thread_id)}/checkpoints/{q(cid)}", ns=ns or None)
    diff = href(f"/threads/{q(thread_id)}/diff/{q(cid)}", ns=ns or None)
    fork = ' <span class="fork">fork</span>' if len(n["children"]) > 1 else ""
    writes = f" writes: {text(n['writes'], 300)}" if n.get("writes") else ""
    ns_note = f" ns {text(ns, 200)}" if ns else ""
    parent = f' · <a href="{diff}">diff with parent</a>' if n["parent_checkpoint_id"] else ""
    kids = "".join(_node(thread_id, c) for c in n["children"])
    subs = "".join(
        f'<li class="subgraph">subgraph <code>{text(c["checkpoint_ns"], 200)}</code>'
        f"<ul>{_node(thread_id, c)}</ul></li>"
        for c in n.get("subgraphs", [])
    )
    return (
        f'<li><a href="{link}"><code>{text(cid, 200)}</code></a>{ns_note} step {text(n["step"])}'
        f" {text(n['source'])}{writes}{parent}{fork}"
        + (f'<ul class="subgraphs">{subs}</ul>' if subs else "")
        + (f"<ul>{kids}</ul>" if kids else "")
        + "</li>"
    )


def thread_page(r: dict[str, Any]) -> str:
    """The thread page: this page of checkpoints as a tree by parent link."""
    tid = r["thread_id"]
    tree = "".join(_node(tid, n) for n in r["tree"])
    nxt = next_link(r["next"] and href("/threads/" + q(tid), after=r["next"]), "older checkpoints")
    storage = f'<p><a href="{href("/storage/" + q(tid))}">storage and verify</a></p>'
    head = f"<p>{len(r['checkpoints'])} checkpoints on this page, {r['forks']} forks</p>"
    return page(f"Thread {tid}", head + storage + f"<ul>{tree}</ul>" + nxt)


def _tool_calls(calls: Any) -> str:
    """An AI message's tool calls: name, arguments and the id their result answers."""
    if not isinstance(calls, list):
        return f"<div>tool calls: {text(calls, 500)}</div>"
    items = []
    for c in calls:
        if not isinstance(c, dict):
            items.append(f"<li>{text(c, 500)}</li>")
            continue
        call_id = str(c.get("id") or "")
        anchor = f' id="call-{html.escape(call_id, quote=True)}"' if call_id else ""
        items.append(
            f'<li class="call"{anchor}>calls <b>{text(c.get("name"), 200)}</b>'
            f"(<code>{text(c.get('args'), 2_000)}</code>) <small>{text(call_id, 200)}</small></li>"
        )
    return f'<ul class="calls">{"".join(items)}</ul>'


def _transcript(messages: list[Any]) -> str:
    out = []
    for m in messages:
        if not isinstance(m, dict):
            out.append(f'<div class="msg">{text(m)}</div>')
            continue
        role = str(m.get("role", "?"))
        head = f"<b>{text(role, 40)}</b>"
        answers = m.get("tool_call_id")
        if answers:
            # a tool's result names the call it answers; the link jumps to that call
            link = "#call-" + html.escape(str(answers), quote=True)
            head += f' result of <a href="{link}">{text(m.get("name") or answers, 200)}</a>'
        shown = {"role", "content", "tool_calls", "tool_call_id"} | ({"name"} if answers else set())
        rest = {k: v for k, v in m.items() if k not in shown}
        calls = _tool_calls(m["tool_calls"]) if m.get("tool_calls") else ""
        extra = f"<div>{text(rest, 500)}</div>" if rest else ""
        out.append(
            f'<div class="msg {html.escape(role, quote=True)}">{head}: '
            f'<span dir="auto">{text(m.get("content"))}</span>{calls}{extra}</div>'
        )
    return "".join(out)


def corrupt(e: dict[str, str], tag: str = "div") -> str:
    """A box naming a corrupt object's key and why it does not decode."""
    why = f"corrupt: <code>{text(e['key'], 500)}</code>: {text(e['reason'])}"
    return f'<{tag} class="err">{why}</{tag}>'


#: Segments listed on a checkpoint page per list; the rest are counted.
MAX_SEGMENTS = 50


def _segments(segments: list[dict[str, Any]]) -> str:
    """A list's segments (a root index first, when it has full ones): elements, and the
    manifest embedding each (linked) or its object."""
    items = []
    for g in segments[:MAX_SEGMENTS]:
        kind = "index" if g.get("kind") == "index" else "segment"
        if g.get("embedded_in"):
            seg = object_href(g["key"] + "#" + g["digest"])
            where = (
                f'<a href="{seg}">{kind}</a> embedded in manifest '
                f'<a class="manifest" href="{object_href(g["embedded_in"])}">'
                f"<code>{text(g['embedded_in'], 500)}</code></a>"
            )
        else:
            where = (
                f'<a href="{object_href(g["key"])}">{kind}</a> stored alone at '
                f"<code>{text(g['key'], 500)}</code>"
            )
        items.append(f'<li class="{kind}">{g["elements"]} elements: {where}</li>')
    more = len(segments) - MAX_SEGMENTS
    if more > 0:
        items.append(f"<li>… {more} more segments</li>")
    return f'<ul class="segments">{"".join(items)}</ul>'


def _is_messages(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, dict) and "role" in v for v in value)


def checkpoint_page(r: dict[str, Any]) -> str:
    """The checkpoint page: transcript, every channel as JSON, pending writes, metadata."""
    tid, cid = r["thread_id"], r["checkpoint_id"]
    parts = [
        f"<p>manifest <code>{text(r['key'], 500)}</code>, "
        f"parent {text(r['parent_checkpoint_id'])}</p>"
    ]
    ns = r["checkpoint_ns"] or None
    if r["parent_checkpoint_id"]:
        link = href(f"/threads/{q(tid)}/diff/{q(cid)}", ns=ns)
        parts.append(f'<p><a href="{link}">diff with parent</a></p>')
    errors = r.get("errors", {})
    if errors:
        parts.append(f'<p class="err">{len(errors)} part(s) of this checkpoint are corrupt</p>')
    parts.append("<h2>Channels</h2>")
    for name, value in r["channel_values"].items():
        where = r["storage"][name]
        # An object, or the objects of a list inline in the manifest.
        links = [s["key"] for s in where.get("sealed", [])] + where.get("objects", [])
        links = [where["key"]] if "key" in where else links
        obj = ", ".join(f'<a href="{object_href(k)}">object</a>' for k in links[:20])
        obj = f" ({obj}{'…' if len(links) > 20 else ''})" if links else ""
        parts.append(f"<h3>{text(name, 200)} <small>{text(where['stored'])}{obj}</small></h3>")
        if where.get("segments"):
            parts.append(_segments(where["segments"]))
        if "channel:" + name in errors:
            parts.append(corrupt(errors["channel:" + name]))
        else:
            parts.append(_transcript(value) if value and _is_messages(value) else block(value))
    interrupts = [w for w in r["pending_writes"] if w["channel"] == "__interrupt__"]
    others = [w for w in r["pending_writes"] if w["channel"] != "__interrupt__"]
    if interrupts:
        parts.append("<h2>Interrupts</h2>" + block([w["value"] for w in interrupts]))
    parts.append("<h2>Pending writes</h2>" + block(others))
    parts += [corrupt(e) for name, e in errors.items() if name.startswith("write ")]
    meta = corrupt(errors["metadata"]) if "metadata" in errors else block(r["metadata"])
    parts.append("<h2>Metadata</h2>" + meta)
    if "checkpoint" in errors:
        parts.append("<h2>Checkpoint</h2>" + corrupt(errors["checkpoint"]))
    return page(f"Checkpoint {cid}", "".join(parts))


def diff_page(thread_id: str, r: dict[str, Any]) -> str:
    """The diff page: channels and metadata changed, messages added and removed."""
    parts = [
        f"<p>from <code>{text(r['from'])}</code> to <code>{text(r['to'])}</code></p>",
        f"<p>channels changed: {text(', '.join(r['channels_changed']) or '-')}</p>",
        f"<p>channels added: {text(', '.join(r['channels_added']) or '-')}</p>",
        f"<p>channels removed: {text(', '.join(r['channels_removed']) or '-')}</p>",
    ]
    if r["messages"] is not None:
        parts.append("<h2>Messages added</h2>" + _transcript(r["messages"]["added"]))
        parts.append("<h2>Messages removed</h2>" + _transcript(r["messages"]["removed"]))
    parts.append("<h2>Metadata changed</h2>" + block(r["metadata_changed"]))
    if r.get("errors"):
        parts.append("<h2>Not compared (corrupt)</h2>")
        parts += [corrupt(e) for e in r["errors"].values()]
    return page(f"Diff in thread {thread_id}", "".join(parts))


def object_page(r: dict[str, Any]) -> str:
    """The object page: kind, size, hash check, decoded content."""
    ok = {True: "verified", None: "not content-addressed"}.get(r.get("sha256_ok"), "?")
    head = f"<p>kind <b>{text(r.get('kind'))}</b>, {_size(r['bytes'])}, sha-256 {ok}</p>"
    refs = r.get("referrers")
    key = r["key"]
    if refs is not None:
        found = [
            f'<li>manifest <a href="{object_href(m["key"])}"><code>{text(m["key"], 500)}</code></a>'
            f" (entry {text(m['entry'], 200)})</li>"
            for m in refs["manifests"]
        ] + [
            f'<li>{text(o["kind"])} <a href="{object_href(o["key"])}">'
            f"<code>{text(o['key'], 500)}</code></a></li>"
            for o in refs["objects"]
        ]
        more = ""
        if refs["next"]:
            link = (
                object_href(key)
                + "?"
                + html.escape(urlencode({"referrers": 1, "after": refs["next"]}))
            )
            more = f'<p><a id="more-referrers" href="{link}">scan more manifests</a></p>'
        head += (
            f'<h2>Referenced by</h2><p id="referrers">{len(found)} found in '
            f"{refs['scanned_manifests']} manifests and {refs['scanned_objects']} list or parts "
            f"objects of the thread</p><ul>{''.join(found)}</ul>{more}"
            + "".join(corrupt(e) for e in refs["problems"])
        )
        body = {k: v for k, v in r.items() if k != "referrers"}
    else:
        body = r
        if key.startswith("threads/") and ("/objects/" in key or r.get("embedded_in")):
            link = object_href(key) + "?referrers=1"
            head += f'<p><a id="referrers-link" href="{link}">find what references it</a></p>'
    if r.get("embedded_in"):
        head += (
            f'<p>embedded in manifest <a id="embedded-in" href="{object_href(r["embedded_in"])}">'
            f"<code>{text(r['embedded_in'], 500)}</code></a></p>"
        )
    if r.get("found_alone"):
        head += f"<p>{text(r['found_alone'], 600)}</p>"
    embedded = r.get("embedded") if r.get("kind") == "manifest" else None
    if embedded:
        rows = "".join(
            f'<li><a href="{object_href(key + "#" + str(e["digest"]))}">'
            f"<code>{text(e['digest'], 100)}</code></a> {text(e.get('kind', '?'), 40)}, "
            f"{_size(int(e['bytes']))}</li>"
            for e in embedded
        )
        head += f'<h2>Embedded objects</h2><ul id="embedded">{rows}</ul>'
    return page(f"Object {key}", head + block(body))


def storage_page(r: dict[str, Any]) -> str:
    """The storage page of a thread: objects by kind and the verify findings."""
    rows = [
        f"<tr><td>{text(k)}</td><td>{v['objects']}</td><td>{_size(v['bytes'])}</td></tr>"
        for k, v in r["by_kind"].items()
    ]
    v = r["verify"]
    if v.get("embedded_objects"):
        rows.append(
            f"<tr><td>embedded in manifests</td><td>{v['embedded_objects']}</td>"
            f"<td>{_size(v['embedded_bytes'])} (within the manifests' size)</td></tr>"
        )
    status = "OK" if v["ok"] else "CORRUPT"
    problems = "".join(
        f'<li class="err"><code>{text(p.get("key"), 500)}</code>: {text(p.get("detail"))}</li>'
        for p in v.get("problems", [])
    )
    verify = f"<h2>verify: {status}</h2><ul>{problems}</ul>"
    return page(
        f"Storage of thread {r['thread_id']}", table(["kind", "objects", "size"], rows) + verify
    )


def _bar(n: int, most: int) -> str:
    width = 0 if most <= 0 else max(1, round(300 * n / most))
    return f'<span style="display:inline-block;background:#69c;height:.8em;width:{width}px"></span>'


def _bar_rows(named: list[tuple[str, dict[str, Any]]], most: int) -> list[str]:
    """Rows of name (HTML), objects, size, and a bar of the size against ``most``."""
    return [
        f"<tr><td>{name}</td><td>{v['objects']}</td><td>{_size(v['bytes'])}</td>"
        f"<td>{_bar(v['bytes'], most)}</td></tr>"
        for name, v in named
    ]


def du_page(r: dict[str, Any]) -> str:
    """The store's objects and bytes by kind and by thread, with bars."""
    total = r["total"]
    store_link = f' (<a href="{href("/store")}">browse</a>)'
    kinds = [
        (text(k) + (store_link if k.startswith("store ") else ""), v)
        for k, v in sorted(r["by_kind"].items())
    ]
    threads = []
    for t in r["by_thread"][:200]:
        tid = t["thread_id"]
        name = text(tid if tid is not None else t["prefix"], 200)
        if tid is not None:
            name = f'<a href="{href("/storage/" + q(tid))}">{name}</a>'
        threads.append((name, t))
    most_kind = max((v["bytes"] for v in r["by_kind"].values()), default=0)
    most_thread = max((t["bytes"] for t in r["by_thread"]), default=0)
    shown = f"<p>the {len(threads)} largest of {len(r['by_thread'])} threads</p>"
    return page(
        "Storage",
        f"<p>{total['objects']} objects, {_size(total['bytes'])}</p><h2>By kind</h2>"
        + table(["kind", "objects", "size", ""], _bar_rows(kinds, most_kind))
        + f"<h2>By thread</h2>{shown}"
        + table(["thread", "objects", "size", ""], _bar_rows(threads, most_thread)),
    )
