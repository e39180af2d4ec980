"""Test values: identifiers that try to escape their key, text that zstd cannot shrink."""

from __future__ import annotations

import base64
import random


def incompressible_text(n: int, seed: int) -> str:
    """``n`` ASCII characters of seeded random base64, which zstd cannot shrink much.

    A pending write's value made of 1,300 or more of them (about 1,040 bytes
    compressed) is an object of its own, not inline in the write (spec §6.5
    step 2).
    """
    return base64.b64encode(random.Random(seed).randbytes(n))[:n].decode()


#: Thread ids, namespaces and other identifiers that must each stay in their own key segment.
HOSTILE_IDS = [
    "",
    "t1",
    "t10",
    "a",
    "a/b",
    "a/",
    "/",
    "..",
    ".",
    "../../etc/passwd",
    "with space",
    "per%cent",
    "tilde~",
    "under_score",
    "pipe|child:1|grand:2",
    "línea ñ",
    "emoji 🦜",
    "nul\x00byte",
    "new\nline",
    "Case",
    "case",
    "x" * 2000,
    "y" * 2000,
    "é" * 100,
]
