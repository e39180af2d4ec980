"""Hostile and bad input, table-driven.

Every case ends in an exact round trip or in a specific error whose type and
message name the thing at fault. Round trips run on S3 under a key prefix
through a recording wrapper, and every key the store was asked for, and every
key in the bucket afterwards, is checked to stay inside that prefix.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import botocore.config
import msgpack
import pytest
from backends import S3_BACKENDS, Backend
from embedded_values import corrupt_embedded
from faultkit import all_keys, config
from langgraph.checkpoint.base import empty_checkpoint
from payloads import HOSTILE_IDS
from standalone_values import (
    ALONE_KINDS,
    Embedded,
    embedded_body,
    put_embedded,
    put_located,
    rewrite_embedded,
)

from objstore_saver import (
    CorruptObjectError,
    InvalidIdentifierError,
    MissingObjectError,
    ObjectStoreSaver,
    UnsupportedFormatError,
)
from objstore_saver.format import codec, keys as k
from objstore_saver.format.codec import Ref, ValueObj
from objstore_saver.plans import embedded_name
from objstore_saver.storage import (
    Boto3S3Store,
    MeteredStore,
    ObjectStore,
    PutMode,
    StoreUnavailableError,
)
from objstore_saver.storage.base import validate_key
from objstore_saver.testing.faults import error_response

pytestmark = pytest.mark.backends(*S3_BACKENDS)

PREFIX = "tenant-a/"
#: Cases tried in this session, for the report.
TRIED: list[str] = []


@dataclass
class Rig:
    bucket: str
    client: Any
    store: MeteredStore
    saver: ObjectStoreSaver


@pytest.fixture
def rig(backend: Backend) -> Iterator[Rig]:
    assert backend.endpoint is not None and backend.bucket is not None
    s3_bucket = backend.bucket
    client = backend.endpoint.client()
    store = MeteredStore(backend.store(PREFIX), log=True)
    with ObjectStoreSaver(store) as saver:
        yield Rig(s3_bucket, client, store, saver)
    # No key may escape the prefix, whatever the ids were.
    for key in rig_keys(store):
        validate_key(key)
        assert key.startswith(("threads/_", "threads/~", "runs/_", "runs/~")), key
    raw = client.list_objects_v2(Bucket=s3_bucket).get("Contents", [])
    assert all(o["Key"].startswith(PREFIX) for o in raw), [o["Key"] for o in raw]


def rig_keys(store: MeteredStore) -> list[str]:
    return [e.key for e in store.log if e.op != "list"]


def _put(saver: ObjectStoreSaver, thread: str, ns: str = "", **values: Any) -> dict:
    cp = empty_checkpoint()
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = {name: 1 for name in values}
    return saver.put(config(thread, ns), cp, {"step": 0}, dict(cp["channel_versions"]))


# --- identifiers that must round-trip ---------------------------------------------

NAMESPACES = [
    "/",
    "..",
    "a/../b",
    "50%",
    "nul\x00ns",
    "new\nline",
    "命名空間",
    "🦜|node:1",
    "n" * 2000,
]


@pytest.mark.parametrize("thread", HOSTILE_IDS, ids=[repr(t)[:30] for t in HOSTILE_IDS])
def test_thread_id_round_trips(rig: Rig, thread: str) -> None:
    TRIED.append(f"thread id {thread[:20]!r}")
    stored = _put(rig.saver, thread, v=thread)
    got = rig.saver.get_tuple(config(thread))
    assert got is not None
    assert got.config["configurable"]["thread_id"] == thread
    assert got.checkpoint["channel_values"] == {"v": thread}
    assert [t.config for t in rig.saver.list(config(thread))] == [stored]
    rig.saver.put_writes(stored, [("v", thread)], task_id=thread)
    assert rig.saver.get_tuple(stored).pending_writes == [(thread, "v", thread)]


@pytest.mark.parametrize("ns", NAMESPACES, ids=[repr(n)[:30] for n in NAMESPACES])
def test_namespace_round_trips(rig: Rig, ns: str) -> None:
    TRIED.append(f"namespace {ns[:20]!r}")
    stored = _put(rig.saver, "ns-thread", ns, v=ns)
    assert stored["configurable"]["checkpoint_ns"] == ns
    got = rig.saver.get_tuple(config("ns-thread", ns))
    assert got is not None and got.checkpoint["channel_values"] == {"v": ns}
    assert rig.saver.get_tuple(config("ns-thread", "")) is None
    assert [t.config for t in rig.saver.list({"configurable": {"thread_id": "ns-thread"}})] == [
        stored
    ]


PAIRS = [
    ("Case", "case"),
    ("a", "a/"),
    ("t1", "t10"),
    ("a", "a%2Fb"),
    ("a/b", "a%2Fb"),
    ("x" * 2000, "x" * 1999),
]


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a[:8]!r}-{b[:8]!r}" for a, b in PAIRS])
def test_neighbouring_thread_ids_stay_apart(rig: Rig, a: str, b: str) -> None:
    TRIED.append(f"pair {a[:10]!r}/{b[:10]!r}")
    _put(rig.saver, a, v="A")
    _put(rig.saver, b, v="B")
    assert rig.saver.get_tuple(config(a)).checkpoint["channel_values"] == {"v": "A"}
    assert rig.saver.get_tuple(config(b)).checkpoint["channel_values"] == {"v": "B"}
    rig.saver.delete_thread(a)  # a prefix sweep of a spares b, whichever is the key prefix
    assert rig.saver.get_tuple(config(a)) is None
    assert rig.saver.get_tuple(config(b)).checkpoint["channel_values"] == {"v": "B"}


# --- value sizes -------------------------------------------------------------------

KIB = 1024
#: size -> (objects stored alone, objects the manifest embeds) for one bytes value
#: of that size (incompressible).
SIZES = {
    0: (0, 0),
    KIB: (0, 0),  # inline
    KIB + 1: (0, 1),  # a value object, embedded in the manifest (spec §4.1)
    256 * KIB - 1: (0, 1),
    256 * KIB: (0, 1),
    256 * KIB + 1: (3, 0),  # a parts object and two parts, alone
    # The zstd frame of incompressible data is a few bytes longer than the data:
    # 80 full parts, one short part and the parts object.
    20 * KIB * KIB: (82, 0),
}


@pytest.mark.parametrize("size", list(SIZES))
def test_value_sizes_round_trip_exactly(rig: Rig, size: int) -> None:
    TRIED.append(f"value of {size} bytes")
    alone, embedded = SIZES[size]
    value = random.Random(size).randbytes(size)
    stored = _put(rig.saver, f"size-{size}", v=value)
    with ObjectStoreSaver(rig.store.inner) as fresh:
        got = fresh.get_tuple(stored)
    assert got is not None and got.checkpoint["channel_values"]["v"] == value
    objects = all_keys(rig.store.inner, k.objects_prefix(f"size-{size}"))
    assert len(objects) == alone
    mkey = _manifest_key(stored)
    manifest = codec.decode_manifest(rig.store.inner.get(mkey), mkey)
    assert len(manifest.embedded) == embedded
    if embedded:
        # Located in its own manifest, which carries the value object.
        entry = manifest.channels["v"]
        assert entry == Ref("b", entry.digest, stored["configurable"]["checkpoint_id"])
        body = codec.embedded_objects(manifest)[entry.digest]
        assert isinstance(codec.decode_object(body, mkey, "b"), ValueObj)
    assert rig.store.snapshot().largest_request_body <= 2 * KIB * KIB


# --- identifiers that must be refused ------------------------------------------------

BAD_CALLS: list[tuple[str, Callable[[ObjectStoreSaver], Any], str]] = [
    ("no thread_id", lambda s: s.get_tuple({"configurable": {}}), r"\['thread_id'\] is required"),
    (
        "int thread_id",
        lambda s: s.get_tuple({"configurable": {"thread_id": 7}}),
        "thread_id must be a string, got int 7",
    ),
    (
        "bytes namespace",
        lambda s: s.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": b"n"}}),
        "checkpoint_ns must be a string",
    ),
    (
        "checkpoint id of 121 bytes",
        lambda s: s.get_tuple(config("t", "", "c" * 121)),
        "checkpoint_id",
    ),
    (
        "writes without checkpoint",
        lambda s: s.put_writes(config("t"), [("c", 1)], "task"),
        "thread 't' names no checkpoint_id",
    ),
    (
        "int task_id",
        lambda s: s.put_writes(config("t", "", "1"), [("c", 1)], 5),  # type: ignore[arg-type]
        "task_id must be a string, got 5",
    ),
    (
        "unpaired surrogate thread id",
        lambda s: s.get_tuple(config("bad\udc80")),
        "thread",
    ),
    ("int run id", lambda s: s.delete_for_runs([3]), "run_id must be a string, got 3"),
    ("unknown prune strategy", lambda s: s.prune(["t"], strategy="all"), "unknown prune strategy"),
]


@pytest.mark.parametrize(("name", "call", "message"), BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_identifiers_are_refused_by_name(
    rig: Rig, name: str, call: Callable[[ObjectStoreSaver], Any], message: str
) -> None:
    TRIED.append(name)
    with pytest.raises(ValueError, match=message) as info:
        call(rig.saver)
    if name != "unknown prune strategy":
        assert isinstance(info.value, InvalidIdentifierError)
    assert rig.store.snapshot().total_requests == 0  # refused before any request


# --- stores that cannot be used ----------------------------------------------------


def test_missing_bucket_is_named(s3_endpoint: Any) -> None:
    TRIED.append("missing bucket")
    store = Boto3S3Store("no-such-bucket-objstore", client=s3_endpoint.client())
    with (
        ObjectStoreSaver(store) as saver,
        pytest.raises(StoreUnavailableError, match=r"'no-such-bucket-objstore'.*NoSuchBucket"),
    ):
        saver.get_tuple(config("t"))


def test_wrong_credentials_are_named_without_the_secret(s3_endpoint: Any, s3_bucket: str) -> None:
    TRIED.append("wrong credentials")
    secret = "wrong-secret-key-0123456789"
    client = s3_endpoint._session.client(
        "s3",
        endpoint_url=s3_endpoint.url,
        region_name=s3_endpoint.region,
        aws_access_key_id="AKIAWRONGWRONGWRONG",
        aws_secret_access_key=secret,
    )
    try:
        client.head_bucket(Bucket=s3_bucket)
        accepted = True
    except Exception:  # noqa: BLE001 - any refusal means the server checks credentials
        accepted = False
    if accepted:
        # moto does not check signatures: answer as S3 does to an unknown key id.
        client.meta.events.register(
            "before-send.s3",
            lambda request, **_: error_response(
                request.url, 403, "InvalidAccessKeyId", "The AWS Access Key Id does not exist"
            ),
        )
    store = Boto3S3Store(s3_bucket, client=client)
    with ObjectStoreSaver(store) as saver, pytest.raises(StoreUnavailableError) as info:
        saver.get_tuple(config("t"))
    assert s3_bucket in str(info.value)
    assert "InvalidAccessKeyId" in str(info.value) or "SignatureDoesNotMatch" in str(info.value)
    assert secret not in str(info.value) and secret not in repr(info.value.__cause__)


def test_endpoint_down_is_named(s3_endpoint: Any) -> None:
    TRIED.append("endpoint down")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    client = s3_endpoint._session.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="a",
        aws_secret_access_key="b",
        config=botocore.config.Config(retries={"total_max_attempts": 1}, connect_timeout=1),
    )
    store = Boto3S3Store("down", client=client)
    with ObjectStoreSaver(store) as saver, pytest.raises(StoreUnavailableError) as info:
        saver.get_tuple(config("t"))
    assert "'down'" in str(info.value) and f"127.0.0.1:{port}" in str(info.value)


# --- stored data that is wrong -------------------------------------------------------


def _flip(body: bytes) -> bytes:
    return body[:-5] + bytes(b ^ 0xFF for b in body[-5:])


def _newer(body: bytes) -> bytes:
    obj = msgpack.unpackb(body)
    obj["f"] = 3
    return msgpack.packb(obj)


def _manifest_key(stored: dict) -> str:
    c = stored["configurable"]
    return k.manifest_key(c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"])


def _write_key(store: ObjectStore, stored: dict) -> str:
    c = stored["configurable"]
    (key,) = all_keys(
        store, k.checkpoint_writes_prefix(c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"])
    )
    return key


#: name -> (which key to damage, how, error type, text the message must hold)
DAMAGE: dict[str, tuple[Callable[[ObjectStore, dict], str], Any, type[Exception], str]] = {
    "manifest corrupted": (
        lambda s, c: _manifest_key(c),
        lambda b: b"\xc1" + b[1:],
        CorruptObjectError,
        "corrupt object at key",
    ),
    "manifest truncated": (
        lambda s, c: _manifest_key(c),
        lambda b: b[: len(b) // 2],
        CorruptObjectError,
        "corrupt object at key",
    ),
    "manifest of a newer format": (
        lambda s, c: _manifest_key(c),
        _newer,
        UnsupportedFormatError,
        "format version 3",
    ),
    "manifest not msgpack": (
        lambda s, c: _manifest_key(c),
        lambda b: b"{json: no}",
        CorruptObjectError,
        "corrupt object at key",
    ),
    "write corrupted": (_write_key, lambda b: b[:3], CorruptObjectError, "corrupt object at key"),
    "write of a newer format": (_write_key, _newer, UnsupportedFormatError, "format version 3"),
}


@pytest.mark.parametrize("name", list(DAMAGE))
def test_damaged_data_raises_naming_the_key(rig: Rig, name: str) -> None:
    TRIED.append(name)
    which, how, error, text = DAMAGE[name]
    inner = rig.store.inner
    # The value is embedded in the manifest (spec §4.1): damage to it is damage to the manifest.
    stored = put_embedded(rig.saver, inner, "victim", 1).config
    rig.saver.put_writes(stored, [("v", "w")], "task")
    key = which(inner, stored)
    inner.put(key, how(inner.get(key)), PutMode.OVERWRITE)
    for call in (lambda s: s.get_tuple(stored), lambda s: s.get_tuple(config("victim"))):
        with ObjectStoreSaver(inner) as fresh, pytest.raises(error, match=text) as info:
            call(fresh)
        assert info.value.key == key, info.value


#: how an object alone is damaged -> (how, error type, text the message must hold)
OBJECT_DAMAGE: dict[str, tuple[Any, type[Exception], str]] = {
    "corrupted": (_flip, CorruptObjectError, "SHA-256"),
    "truncated": (lambda b: b[: len(b) // 2], CorruptObjectError, "SHA-256"),
    "replaced by another's bytes": ("swap", CorruptObjectError, "SHA-256"),
    "deleted": (None, MissingObjectError, "referenced by"),
}


@pytest.mark.parametrize("kind", list(ALONE_KINDS))
@pytest.mark.parametrize("damage", list(OBJECT_DAMAGE))
def test_damaged_object_alone_raises_naming_the_key(rig: Rig, damage: str, kind: str) -> None:
    """What still stands alone at objects/<H>: a value a manifest past 1 MiB moved out,
    the parts of data over 256 KiB, and a pending write's value over 1 KiB compressed."""
    TRIED.append(f"{kind} {damage}")
    how, error, text = OBJECT_DAMAGE[damage]
    inner = rig.store.inner
    victim = ALONE_KINDS[kind](rig.saver, inner, "victim", 1)
    if how is None:
        inner.delete([victim.key])
    elif how == "swap":
        other = ALONE_KINDS[kind](rig.saver, inner, "other", 2)
        inner.put(victim.key, inner.get(other.key), PutMode.OVERWRITE)
    else:
        inner.put(victim.key, how(inner.get(victim.key)), PutMode.OVERWRITE)
    for call in (lambda s: s.get_tuple(victim.config), lambda s: s.get_tuple(config("victim"))):
        with ObjectStoreSaver(inner) as fresh, pytest.raises(error, match=text) as info:
            call(fresh)
        assert info.value.key == victim.key, info.value
        if how is None:
            assert info.value.referenced_by in victim.referrers, info.value


def _rewrite(store: ObjectStore, key: str, how: Callable[[bytes], bytes]) -> None:
    store.put(key, how(store.get(key)), PutMode.OVERWRITE)


def _embedded_bytes_of_another(store: ObjectStore, saver: ObjectStoreSaver) -> bytes:
    other = put_embedded(saver, store, "other", 2)
    return embedded_body(store, other.holder, other.digest)


#: name -> (builder, damage to the manifest that embeds the value, error type, which key
#: the error names: the manifest's, the embedded object's in it when that does not
#: decode, or objects/<H> when the manifest no longer embeds the value).
EMBEDDED_DAMAGE: dict[
    str,
    tuple[
        Callable[..., Embedded],
        Callable[[ObjectStore, ObjectStoreSaver, Embedded], None],
        type[Exception],
        str,
    ],
] = {
    "embedded value corrupted": (
        put_embedded,
        lambda s, _, e: corrupt_embedded(s, e.address),
        MissingObjectError,
        "objects",
    ),
    "embedded value truncated": (
        put_embedded,
        lambda s, _, e: rewrite_embedded(
            s, e.holder, e.digest, (b := embedded_body(s, e.holder, e.digest))[: len(b) // 2]
        ),
        CorruptObjectError,  # no longer MessagePack: the manifest is corrupt
        "embedded",
    ),
    "embedded value replaced by another's bytes": (
        put_embedded,
        lambda s, saver, e: rewrite_embedded(
            s, e.holder, e.digest, _embedded_bytes_of_another(s, saver)
        ),
        MissingObjectError,
        "objects",
    ),
    "embedded value dropped from its manifest": (
        put_embedded,
        lambda s, _, e: rewrite_embedded(s, e.holder, e.digest, None),
        MissingObjectError,
        "objects",
    ),
    "located value's manifest deleted": (
        put_located,
        lambda s, _, e: s.delete([e.holder]),
        MissingObjectError,
        "objects",
    ),
    "located value dropped from its manifest": (
        put_located,
        lambda s, _, e: rewrite_embedded(s, e.holder, e.digest, None),
        MissingObjectError,
        "objects",
    ),
    "located value's manifest corrupted": (
        put_located,
        lambda s, _, e: _rewrite(s, e.holder, lambda b: b"\xc1" + b[1:]),
        CorruptObjectError,
        "manifest",
    ),
    "located value's manifest truncated": (
        put_located,
        lambda s, _, e: _rewrite(s, e.holder, lambda b: b[: len(b) // 2]),
        CorruptObjectError,
        "manifest",
    ),
    "located value's manifest of a newer format": (
        put_located,
        lambda s, _, e: _rewrite(s, e.holder, _newer),
        UnsupportedFormatError,
        "manifest",
    ),
}


@pytest.mark.parametrize("name", list(EMBEDDED_DAMAGE))
def test_damaged_embedded_value_raises_naming_the_key(rig: Rig, name: str) -> None:
    """A value embedded in a manifest (spec §4.0, "located value"): found there, else alone.

    A manifest that does not decode is named, and so is an embedded object in
    it that does not (by the manifest's key and the object's address). A
    manifest that decodes but does not embed the value (or is gone) sends the
    reader to objects/<H>, and that missing too is an error naming it, the
    manifest whose entry led there and the manifest the entry located it in.
    """
    TRIED.append(name)
    build, damage, error, named = EMBEDDED_DAMAGE[name]
    inner = rig.store.inner
    victim = build(rig.saver, inner, "victim", 1)
    damage(inner, rig.saver, victim)
    assert all_keys(inner, k.objects_prefix("victim")) == []  # embedded: nowhere else
    for call in (lambda s: s.get_tuple(victim.config), lambda s: s.get_tuple(config("victim"))):
        with ObjectStoreSaver(inner) as fresh, pytest.raises(error) as info:
            call(fresh)
        if named == "manifest":
            assert info.value.key == victim.holder, info.value
        elif named == "embedded":
            (damaged,) = codec.decode_manifest(inner.get(victim.holder), victim.holder).embedded
            assert info.value.key == embedded_name(victim.holder, codec.digest_of(damaged))
        else:
            # objects/<H>, the manifest whose entry led there, and where it was located.
            assert info.value.key == victim.key, info.value
            assert info.value.referenced_by.startswith(victim.referenced_by), info.value
            assert victim.holder in str(info.value), info.value


def test_unknown_key_under_a_thread_is_an_error(rig: Rig) -> None:
    TRIED.append("unknown key under thread")
    _put(rig.saver, "stray", v=1)
    stray = k.thread_prefix("stray") + "notes/readme"
    rig.store.inner.put(stray, b"hello", PutMode.CREATE)
    with pytest.raises(CorruptObjectError, match="unknown key") as info:
        rig.saver.delete_thread("stray")
    assert info.value.key == stray
