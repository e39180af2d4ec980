"""Test values whose stored size does not depend on compression."""

from __future__ import annotations

import base64
import random


def incompressible_text(n: int, seed: int) -> str:
    """``n`` ASCII characters of seeded random base64, which zstd cannot shrink much.

    A pending write's value made of 1,100 or more of them is an object of its
    own, not inline in the write (spec §6.5 step 2).
    """
    return base64.b64encode(random.Random(seed).randbytes(n))[:n].decode()
