"""HTML of the long-term store pages: namespaces, one namespace's items, one item.

Every stored string (labels, keys, values) goes through :func:`pages.text` or
:func:`pages.block` (escaped, bounded, direction-isolated); links carry the
namespace as repeated ``label`` parameters.
"""

from __future__ import annotations

import html
from typing import Any

from objstore_saver.viewer.pages import block, href, next_link, page, table, text

#: Characters of one label shown before it is cut.
LABEL_CHARS = 120
#: Record name op letters (spec §8.3) as shown.
OPS = {"p": "put", "t": "put with TTL", "d": "delete"}


def store_href(path: str, labels: list[str], **params: Any) -> str:
    """An escaped link to a store page: the namespace as one ``label`` per label."""
    return href(path, *(("label", label) for label in labels), **params)


def labels_text(labels: list[str] | None) -> str:
    """A namespace shown as its escaped labels, each in a box, ``/`` between them."""
    if labels is None:
        return "(unreadable)"
    return " / ".join(f'<code class="label">{text(label, LABEL_CHARS)}</code>' for label in labels)


def _search_form(prefix: list[str]) -> str:
    boxes = "".join(
        f'<input name="label" value="{html.escape(label, quote=True)}" size="12">'
        for label in prefix
    )
    return (
        f'<form action="/store" id="ns-search">{boxes}'
        '<input name="label" placeholder="namespace label" size="12">'
        "<button>search</button> <small>namespaces starting with these labels</small></form>"
    )


def store_page(r: dict[str, Any]) -> str:
    """The namespaces page: a prefix search, one page of namespaces with item counts."""
    rows = []
    for ns in r["namespaces"]:
        link = store_href("/store/ns", ns["namespace"])
        rows.append(
            f'<tr><td><a class="ns" href="{link}">{labels_text(ns["namespace"])}</a></td>'
            f"<td>{ns['items']}</td><td>{ns['expired']}</td></tr>"
        )
    nxt = next_link(r["next"] and store_href("/store", r["prefix"], after=r["next"]), "next page")
    under = f"<p>under {labels_text(r['prefix'])}</p>" if r["prefix"] else ""
    heads = ["namespace", "live items", "expired (not swept)"]
    found = table(heads, rows, ' id="namespaces"') if rows else "<p>no namespace here</p>"
    return page("Long-term store", _search_form(r["prefix"]) + under + found + nxt)


def namespace_page(r: dict[str, Any]) -> str:
    """One namespace: a page of its items (key, size, times, expiry, value preview)."""
    labels = r["namespace"]
    rows = []
    for it in r["items"]:
        link = store_href("/store/item", labels, key=it["key"])
        size = "-" if it["size"] is None else f"{it['size']:,} B"
        expired = ' <span class="err">expired</span>' if it["expired"] else ""
        rows.append(
            f'<tr><td><a class="item" href="{link}">{text(it["key"], 200)}</a>{expired}</td>'
            f"<td>{size}</td><td>{text(it['created_at'])}</td><td>{text(it['updated_at'])}</td>"
            f"<td>{text(it['expires_at'] or '-')}</td>"
            f'<td><code dir="auto">{text(it["preview"], 200)}</code></td></tr>'
        )
    more = r["next_offset"] is not None
    nxt = next_link(
        store_href("/store/ns", labels, offset=r["next_offset"]) if more else None, "more items"
    )
    head = (
        f"<p>namespace {labels_text(labels)}: {r['live']} live items, "
        f"{r['expired']} expired (not swept yet)</p>"
    )
    heads = ["key", "size", "created", "updated", "expires", "value"]
    title = "Namespace " + " / ".join(label[:LABEL_CHARS] for label in labels)
    return page(title, head + table(heads, rows, ' id="items"') + nxt)


def item_page(r: dict[str, Any]) -> str:
    """One item: value as JSON, version, times, TTL, indexed fields, object and index records."""
    labels = r["namespace"]
    ns_link = store_href("/store/ns", labels)
    ttl = "none" if r["ttl_minutes"] is None else f"{r['ttl_minutes']:g} minutes"
    state = '<span class="err">expired (hidden from readers, not swept yet)</span>'
    facts = [
        ("namespace", f'<a href="{ns_link}">{labels_text(labels)}</a>'),
        ("key", text(r["key"], 500)),
        ("version", text(r["version"])),
        ("created", text(r["created_at"])),
        ("updated", text(r["updated_at"])),
        ("TTL", text(ttl)),
        ("expires", text(r["expires_at"] or "never") + (" " + state if r["expired"] else "")),
        ("object", f"<code>{text(r['object'], 500)}</code>"),
        ("size", f"{r['bytes']:,} B, sha-256 <code>{text(r['sha256'])}</code>"),
    ]
    table = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in facts)
    vectors = "".join(
        f"<li><code>{text(v['field'], 200)}</code>: {v['dims']} dimensions</li>"
        for v in r["vectors"]
    )
    records = "".join(
        f"<li><code>{text(rec['key'], 500)}</code> {text(OPS.get(rec['op'], rec['op']))}"
        + (" (in the snapshot)" if rec["covered_by_snapshot"] else "")
        + "</li>"
        for rec in r["index_records"]
    )
    snap = r["snapshot"]
    snap_note = "<p>no index snapshot yet</p>"
    if snap is not None:
        held = "holds this key" if snap["holds_key"] else "does not hold this key"
        snap_note = f"<p>newest snapshot <code>{text(snap['key'], 500)}</code> {held}</p>"
    body = (
        f'<table id="facts">{table}</table><h2>Value</h2>{block(r["value"])}'
        f"<h2>Indexed fields</h2><ul>{vectors or '<li>none</li>'}</ul>"
        f"<h2>Index</h2>{snap_note}<ul>{records or '<li>no record listed</li>'}</ul>"
    )
    return page(f"Item {r['key'][:200]}", body)
