"""Encoding of item objects, index records and snapshots (spec §8.2-8.3)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import msgpack

from objstore_saver.errors import CorruptObjectError
from objstore_saver.format import codec

PUT = "put"
DEL = "del"
ITEM_KIND = "sitem"
RECORD_KIND = "srec"
SNAPSHOT_KIND = "ssnap"
CLEAR_KIND = "sclear"


class InvalidStoreValueError(ValueError):
    """A value the store cannot keep (not a dict, not JSON); names namespace and key."""


@dataclass(frozen=True, slots=True)
class Record:
    """One put or delete of an item, as stored in item objects, records and snapshots."""

    ns: tuple[str, ...]
    key: str
    v: str
    op: str
    value: dict[str, Any] | None
    ca: int
    ua: int
    cv: str
    ttl: float | None = None
    ea: int | None = None
    vec: dict[str, bytes] = field(default_factory=dict)

    def live(self, now_us: int) -> bool:
        """True for a put that has not expired at ``now_us``."""
        return self.op == PUT and (self.ea is None or self.ea > now_us)

    def refreshed(self, version: str, now_us: int) -> Record:
        """The same item with a new version and its TTL counted from ``now_us``."""
        assert self.ttl is not None
        return replace(self, v=version, ea=now_us + ttl_micros(self.ttl))


def ttl_micros(ttl_minutes: float) -> int:
    """A TTL in minutes as microseconds."""
    return int(ttl_minutes * 60_000_000)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(when: float) -> int:
    """Epoch seconds as integer microseconds."""
    return round(when * 1_000_000)


def to_datetime(micros: int) -> datetime:
    """Integer microseconds as an aware UTC datetime."""
    return _EPOCH + timedelta(microseconds=micros)


def _check_json(value: Any, where: str) -> None:
    """Refuse what JSON would not round-trip: non-string dict keys, NaN and non-JSON types."""
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"dict key {k!r} at {where} is not a string")
            _check_json(v, f"{where}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_json(v, f"{where}[{i}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise TypeError(f"{value!r} at {where} is not a finite number")
    elif value is not None and not isinstance(value, (str, int, float, bool)):
        raise TypeError(f"{type(value).__name__} at {where} is not JSON")


def encode_value(namespace: Sequence[str], key: str, value: Any) -> bytes:
    """JSON text of a value; InvalidStoreValueError naming namespace and key when the value
    is not a dict or not JSON-serializable."""
    if not isinstance(value, dict):
        raise InvalidStoreValueError(
            f"value of key {key!r} in namespace {tuple(namespace)!r} must be a dict, "
            f"got {type(value).__name__}"
        )
    try:
        _check_json(value, "value")
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidStoreValueError(
            f"value of key {key!r} in namespace {tuple(namespace)!r} is not "
            f"JSON-serializable: {exc}"
        ) from exc


def _record_map(rec: Record, with_op: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ns": list(rec.ns),
        "key": rec.key,
        "v": rec.v,
        "ca": rec.ca,
        "ua": rec.ua,
        "cv": rec.cv,
        "ttl": rec.ttl,
        "ea": rec.ea,
    }
    if with_op:
        out["op"] = rec.op
    if rec.value is not None:
        data = encode_value(rec.ns, rec.key, rec.value)
        out["val"] = codec.make_payload("json", data).to_msgpack()
    if rec.vec:
        out["vec"] = dict(rec.vec)
    return out


def encode_item(rec: Record) -> bytes:
    """Bytes of the item object of a put."""
    assert rec.op == PUT
    return codec.pack_object({"f": codec.FORMAT_VERSION, "k": ITEM_KIND, **_record_map(rec, False)})


def encode_record_and_item(rec: Record) -> tuple[bytes, bytes | None]:
    """Bytes of a record and, for a put, of its item object: the value encoded once."""
    fields = _record_map(rec, False)
    record = codec.pack_object(
        {"f": codec.FORMAT_VERSION, "k": RECORD_KIND, **fields, "op": rec.op}
    )
    if rec.op != PUT:
        return record, None
    return record, codec.pack_object({"f": codec.FORMAT_VERSION, "k": ITEM_KIND, **fields})


def encode_snapshot(ns: Sequence[str], covered: Sequence[str], records: Sequence[Record]) -> bytes:
    """Bytes of an index snapshot."""
    body = codec.pack_object({"r": [_record_map(r, True) for r in records]})
    payload = codec.make_payload("msgpack", body)
    return codec.pack_object(
        {
            "f": codec.FORMAT_VERSION,
            "k": SNAPSHOT_KIND,
            "ns": list(ns),
            "cov": list(covered),
            "z": payload.to_msgpack(),
        }
    )


def _opt(raw: dict[str, Any], name: str, types: tuple[type, ...], key: str) -> Any:
    value = raw.get(name)
    if value is not None and (not isinstance(value, types) or isinstance(value, bool)):
        raise CorruptObjectError(key, f"field {name!r} has the wrong type")
    return value


def _req(raw: dict[str, Any], name: str, types: tuple[type, ...], key: str) -> Any:
    value = _opt(raw, name, types, key)
    if value is None:
        raise CorruptObjectError(key, f"field {name!r} is missing")
    return value


def _labels(raw: dict[str, Any], key: str) -> tuple[str, ...]:
    ns = _req(raw, "ns", (list,), key)
    if not all(isinstance(label, str) for label in ns):
        raise CorruptObjectError(key, "field 'ns' is not an array of strings")
    return tuple(ns)


def _decode_map(raw: dict[str, Any], op: str | None, key: str) -> Record:
    ns = _labels(raw, key)
    op = op if op is not None else _req(raw, "op", (str,), key)
    if op not in (PUT, DEL):
        raise CorruptObjectError(key, f"unknown op {op!r}")
    value = None
    if op == PUT:
        payload = codec._payload(raw.get("val"), key)
        _, data = codec.payload_bytes(payload, key)
        try:
            value = json.loads(data)
        except ValueError as exc:
            raise CorruptObjectError(key, f"value is not JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise CorruptObjectError(key, "value is not a JSON object")
    vec = _opt(raw, "vec", (dict,), key) or {}
    if not all(isinstance(p, str) and isinstance(b, bytes) for p, b in vec.items()):
        raise CorruptObjectError(key, "field 'vec' is not a map of path to bytes")
    ttl = _opt(raw, "ttl", (int, float), key)
    return Record(
        ns=ns,
        key=_req(raw, "key", (str,), key),
        v=_req(raw, "v", (str,), key),
        op=op,
        value=value,
        ca=_req(raw, "ca", (int,), key),
        ua=_req(raw, "ua", (int,), key),
        cv=_req(raw, "cv", (str,), key),
        ttl=None if ttl is None else float(ttl),
        ea=_opt(raw, "ea", (int,), key),
        vec=vec,
    )


def decode_item(data: bytes, key: str) -> Record:
    """Decode an item object (spec §8.2)."""
    return _decode_map(codec.unpack_object(data, key, ITEM_KIND), PUT, key)


def decode_record(data: bytes, key: str) -> Record:
    """Decode an index record (spec §8.2)."""
    return _decode_map(codec.unpack_object(data, key, RECORD_KIND), None, key)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A decoded index snapshot."""

    ns: tuple[str, ...]
    covered: frozenset[str]
    records: list[Record]


def decode_snapshot(data: bytes, key: str) -> Snapshot:
    """Decode an index snapshot (spec §8.3)."""
    raw = codec.unpack_object(data, key, SNAPSHOT_KIND)
    ns = _req(raw, "ns", (list,), key)
    cov = _req(raw, "cov", (list,), key)
    _, body = codec.payload_bytes(codec._payload(raw.get("z"), key), key)
    try:
        inner = msgpack.unpackb(body, raw=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise CorruptObjectError(key, f"snapshot body is not MessagePack ({exc})") from exc
    if not isinstance(inner, dict) or not isinstance(inner.get("r"), list):
        raise CorruptObjectError(key, "snapshot body has no record array")
    records = [_decode_map(r, None, key) for r in inner["r"] if isinstance(r, dict)]
    if len(records) != len(inner["r"]):
        raise CorruptObjectError(key, "a snapshot record is not a map")
    return Snapshot(tuple(ns), frozenset(str(c) for c in cov), records)


def encode_clear(ns: Sequence[str], version: str) -> bytes:
    """Bytes of a clear marker (spec §8.4.9): the namespace and the clear's version."""
    return codec.pack_object(
        {"f": codec.FORMAT_VERSION, "k": CLEAR_KIND, "ns": list(ns), "v": version}
    )


def decode_clear(data: bytes, key: str) -> tuple[tuple[str, ...], str]:
    """(namespace labels, version) of a clear marker."""
    raw = codec.unpack_object(data, key, CLEAR_KIND)
    return _labels(raw, key), _req(raw, "v", (str,), key)
