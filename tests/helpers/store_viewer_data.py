"""Long-term store contents shared by the viewer's store tests (API and browser)."""

from __future__ import annotations

import time

from longterm_helpers import DIMS, HashEmbeddings

from objstore_saver.longterm import ObjectStoreStore
from objstore_saver.storage.base import ObjectStore

#: A value whose text would run script if a page did not escape it.
SCRIPT = "<script>window.__pwned=1;document.title='pwned'</script><img src=x onerror=alert(1)>"
#: Right-to-left override, Hebrew text, pop directional formatting.
RTL = "\u202e\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd\u202c"
LONG_LABEL = "L" * 2000
SLASH_NS = ("users", "a/b", "%2F/c")
HOSTILE_NS = ("hostile", "<b>bold</b>", RTL)
HOSTILE_KEY = "k/<script>alert(2)</script>"


def fill(st: ObjectStore) -> None:
    """Namespaces with plain, slashed, hostile and 2,000-character labels, an expired item
    and an item with indexed fields."""
    index = {"dims": DIMS, "embed": HashEmbeddings(), "fields": ["text"]}
    with ObjectStoreStore(st, index=index) as store:  # type: ignore[arg-type]
        store.put(("users", "alice"), "prefs", {"theme": "dark", "n": 3}, index=False)
        store.put(("users", "alice"), "memo", {"text": "likes green tea and long walks"})
        store.put(("users", "bob"), "prefs", {"theme": "light"}, index=False)
        store.put(SLASH_NS, "x/y", {"v": 1}, index=False)
        store.put(HOSTILE_NS, HOSTILE_KEY, {"html": SCRIPT, "rtl": RTL}, index=False)
        store.put(("docs",), "big", {"blob": "x" * 300_000}, index=False)
        store.put((LONG_LABEL, "deep"), "k", {"v": "long"}, index=False)
        store.put(("users", "gone"), "old", {"v": 0}, index=False)
        store.delete(("users", "gone"), "old")
    # written an hour ago with a one-minute TTL: expired now, not swept
    past = time.time() - 3600
    with ObjectStoreStore(st, clock=lambda: past) as old:
        old.put(("users", "alice"), "stale", {"v": "stale"}, index=False, ttl=1)
