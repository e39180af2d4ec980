"""Filtering, scoring and ordering of items in memory (spec §8.4.4 steps 4-5).

Pure functions over decoded records; the semantics are those of LangGraph's
``InMemoryStore``: ``$eq $ne $gt $gte $lt $lte`` operators, nested dicts
matched key by key, lists element by element, other values by equality.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from objstore_saver.longterm.records import Record

_COMPARISONS = {
    "$gt": lambda a, b: float(a) > float(b),
    "$gte": lambda a, b: float(a) >= float(b),
    "$lt": lambda a, b: float(a) < float(b),
    "$lte": lambda a, b: float(a) <= float(b),
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
}


def matches(value: Any, condition: Any) -> bool:
    """Whether ``value`` satisfies one filter condition (ValueError: an unknown operator)."""
    if isinstance(condition, Mapping):
        if any(str(k).startswith("$") for k in condition):
            for operator, operand in condition.items():
                compare = _COMPARISONS.get(operator)
                if compare is None:
                    raise ValueError(f"unsupported filter operator {operator!r}")
                if not compare(value, operand):
                    return False
            return True
        if not isinstance(value, Mapping):
            return False
        return all(matches(value.get(k), sub) for k, sub in condition.items())
    if isinstance(condition, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(value) != len(condition):
            return False
        return all(matches(v, c) for v, c in zip(value, condition, strict=True))
    return bool(value == condition)


def passes(record: Record, filter_: Mapping[str, Any] | None) -> bool:
    """Whether an item's value satisfies every top-level filter entry."""
    if not filter_:
        return True
    value = record.value or {}
    return all(matches(value.get(k), cond) for k, cond in filter_.items())


def pack_vector(vector: Sequence[float]) -> bytes:
    """An embedding as float32 little-endian bytes."""
    return struct.pack(f"<{len(vector)}f", *vector)


def unpack_vector(data: bytes) -> list[float]:
    """Inverse of :func:`pack_vector`."""
    return list(struct.unpack(f"<{len(data) // 4}f", data))


def cosine(query: Sequence[float], vector: Sequence[float]) -> float:
    """Cosine similarity; 0.0 when either vector is zero."""
    dot = math.fsum(a * b for a, b in zip(query, vector, strict=False))
    nq = math.sqrt(math.fsum(a * a for a in query))
    nv = math.sqrt(math.fsum(b * b for b in vector))
    return dot / (nq * nv) if nq > 0 and nv > 0 else 0.0


def scores(query_vector: Sequence[float], blobs: Sequence[bytes]) -> list[float]:
    """Cosine similarity of the query with each stored float32 vector.

    Uses NumPy when it is installed and the vectors have one size (a search over
    10,000 vectors of 1,536 dimensions is then one matrix product), else Python.
    """
    if not blobs:
        return []
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is optional
        np = None  # type: ignore[assignment]
    size = len(blobs[0])
    if np is None or any(len(b) != size for b in blobs) or size != 4 * len(query_vector):
        return [cosine(query_vector, unpack_vector(b)) for b in blobs]
    matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), -1)
    matrix = matrix.astype(np.float64)
    q = np.asarray(query_vector, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(q)
    dots = matrix @ q
    out = np.zeros(len(blobs), dtype=np.float64)
    np.divide(dots, norms, out=out, where=norms > 0)
    return [float(x) for x in out]


def page(
    candidates: Sequence[Record],
    query_vector: Sequence[float] | None,
    offset: int,
    limit: int,
) -> list[tuple[Record, float | None]]:
    """Offset and limit over candidates, ranked by score when a query vector is given.

    Candidates come in creation order. With a query vector, items with vectors
    are ranked by their best cosine score (ties keep creation order), and
    items without vectors follow up to ``limit`` results in all.
    """
    if query_vector is None:
        return [(r, None) for r in candidates[offset : offset + limit]]
    owners: list[int] = []
    blobs: list[bytes] = []
    scoreless: list[Record] = []
    for i, rec in enumerate(candidates):
        if rec.vec:
            for blob in rec.vec.values():
                owners.append(i)
                blobs.append(blob)
        else:
            scoreless.append(rec)
    best: dict[int, float] = {}
    for i, score in zip(owners, scores(query_vector, blobs), strict=True):
        if i not in best or score > best[i]:
            best[i] = score
    ranked = sorted(best.items(), key=lambda t: (-t[1], t[0]))
    kept: list[tuple[Record, float | None]] = [
        (candidates[i], score) for i, score in ranked[offset : offset + limit]
    ]
    if len(kept) < limit:
        kept.extend((rec, None) for rec in scoreless[: limit - len(kept)])
    return kept
