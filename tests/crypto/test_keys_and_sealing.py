"""Master keys, thread keys and sealed objects (docs/encryption.md, "Keys" and "Objects").

The building blocks of client-side encryption: each test fails if a key
opens what it must not, a sealed object can be moved or read as plaintext,
or equal plaintexts stop giving equal bytes (the increments).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import json
import os
import threading
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest

from objstore_saver.crypto.master_keys import (
    KmsMasterKey,
    LocalMasterKey,
    UnwrapError,
    master_keys_from_env,
    parse_master_key,
)
from objstore_saver.crypto.sealing import (
    is_sealed,
    opened_name,
    seal,
    sealed_name,
    unseal,
)
from objstore_saver.crypto.thread_keys import (
    ThreadKey,
    encode_key_object,
    new_thread_key,
    open_key_object,
    rewrapped,
)
from objstore_saver.errors import ConfigurationError, CorruptObjectError, ThreadKeyError

KEY_NAME = "keys/threads/t1"


def _local() -> LocalMasterKey:
    return LocalMasterKey(os.urandom(32))


# --- master keys ------------------------------------------------------------------------------


def test_a_local_key_unwraps_only_its_own_wrapping_for_its_thread() -> None:
    a, b = _local(), _local()
    data_key = os.urandom(32)
    wrapped = a.wrap("t1", data_key)
    assert data_key not in wrapped
    assert a.unwrap("t1", wrapped) == data_key
    with pytest.raises(UnwrapError):
        a.unwrap("t2", wrapped)  # bound to the thread
    with pytest.raises(UnwrapError):
        b.unwrap("t1", wrapped)
    altered = wrapped[:-1] + bytes([wrapped[-1] ^ 1])
    with pytest.raises(UnwrapError):
        a.unwrap("t1", altered)
    assert a.wrap("t1", data_key) != wrapped  # a random nonce each time
    assert a.name.startswith("local:") and a.name != b.name


def test_settings_parse_without_echoing_a_secret() -> None:
    raw = os.urandom(32)
    assert parse_master_key(base64.b64encode(raw).decode()) == LocalMasterKey(raw)
    secret = "not base64 !!" + "s3cr3t"
    with pytest.raises(ConfigurationError) as info:
        parse_master_key(secret)
    assert "s3cr3t" not in str(info.value)
    with pytest.raises(ConfigurationError, match="32 bytes, got 16"):
        parse_master_key(base64.b64encode(os.urandom(16)).decode())
    assert repr(LocalMasterKey(raw)) == "LocalMasterKey()"  # the key never in logs


def test_environment_lists_the_current_key_first() -> None:
    one, two = (base64.b64encode(os.urandom(32)).decode() for _ in range(2))
    assert master_keys_from_env({}) == []
    [single] = master_keys_from_env({"OBJSTORE_SAVER_ENCRYPTION_KEY": one})
    keys = master_keys_from_env(
        {"OBJSTORE_SAVER_ENCRYPTION_KEY": one, "OBJSTORE_SAVER_ENCRYPTION_KEYS": f"{two},{one}"}
    )
    assert [k.name for k in keys] == [parse_master_key(two).name, single.name]
    with pytest.raises(ConfigurationError, match="twice"):
        master_keys_from_env({"OBJSTORE_SAVER_ENCRYPTION_KEYS": f"{one}, {one}"})


def test_a_kms_key_wraps_with_the_thread_as_encryption_context(kms: Any) -> None:
    key_id = kms.create_key()["KeyMetadata"]["KeyId"]
    master = parse_master_key(f"kms:{key_id}", kms_client=kms)
    arn = kms.describe_key(KeyId=key_id)["KeyMetadata"]["Arn"]
    # Named by the ARN KMS returns, whether configured by id, ARN or alias.
    assert isinstance(master, KmsMasterKey) and master.name == f"kms:{arn}"
    data_key = os.urandom(32)
    wrapped = master.wrap("t1", data_key)
    assert data_key not in wrapped
    assert master.unwrap("t1", wrapped) == data_key
    with pytest.raises(UnwrapError):
        master.unwrap("t2", wrapped)


@contextlib.contextmanager
def _refusing_kms(error_type: str) -> Iterator[str]:
    """A KMS endpoint on loopback that refuses every request as KMS does a disabled key.

    Moto's KMS decrypts with disabled and deleted keys alike, so the refusal
    comes from this server: KMS's JSON error, the type in ``__type``.
    """
    answered: list[str] = []

    class Refuse(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            answered.append(self.headers.get("X-Amz-Target", ""))
            body = json.dumps({"__type": error_type, "message": "the key is not usable"})
            self.send_response(400)
            self.send_header("Content-Type", "application/x-amz-json-1.1")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert answered and all(t.endswith(".Decrypt") for t in answered), answered


def test_a_kms_refusal_names_the_thread_the_key_and_kms_error(kms: Any) -> None:
    import boto3

    key_id = kms.create_key()["KeyMetadata"]["KeyId"]
    thread = new_thread_key("t1")
    body = encode_key_object(thread, [KmsMasterKey(key_id, kms)])
    with _refusing_kms("DisabledException") as url:
        refusing = boto3.client(
            "kms",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        with pytest.raises(ThreadKeyError) as info:
            open_key_object(body, KEY_NAME, "t1", [KmsMasterKey(key_id, refusing)])
    message = str(info.value)
    assert info.value.thread_id == "t1" and info.value.key == KEY_NAME
    assert f"KMS refused to decrypt with {key_id!r}: DisabledException" in message
    assert thread.data_key.hex() not in message


# --- thread keys and key objects ----------------------------------------------------------------


def test_a_key_object_opens_with_any_configured_key_that_wrapped_it() -> None:
    old, new, stranger = _local(), _local(), _local()
    thread = new_thread_key("t1")
    body = encode_key_object(thread, [old])
    assert thread.data_key not in body
    assert open_key_object(body, KEY_NAME, "t1", [new, old]).data_key == thread.data_key
    with pytest.raises(ThreadKeyError) as info:
        open_key_object(body, KEY_NAME, "t1", [stranger])
    assert info.value.thread_id == "t1" and info.value.key == KEY_NAME
    assert old.name in str(info.value) and stranger.name in str(info.value)
    with pytest.raises(CorruptObjectError, match="thread 't1'"):
        open_key_object(body, KEY_NAME, "t2", [old])  # another thread's key object


def test_rewrapping_adds_the_current_key_and_keeps_the_data_key() -> None:
    old, new = _local(), _local()
    thread = new_thread_key("t1")
    body = encode_key_object(thread, [old])
    both = rewrapped(body, KEY_NAME, "t1", [new, old], drop_old=False)
    assert both is not None
    assert open_key_object(both, KEY_NAME, "t1", [new]).data_key == thread.data_key
    assert open_key_object(both, KEY_NAME, "t1", [old]).data_key == thread.data_key
    assert rewrapped(both, KEY_NAME, "t1", [new, old], drop_old=False) is None  # nothing to do
    only_new = rewrapped(both, KEY_NAME, "t1", [new, old], drop_old=True)
    assert only_new is not None
    assert open_key_object(only_new, KEY_NAME, "t1", [new]).data_key == thread.data_key
    with pytest.raises(ThreadKeyError):
        open_key_object(only_new, KEY_NAME, "t1", [old])


def test_derived_keys_differ_by_purpose_and_thread() -> None:
    data_key = os.urandom(32)
    a, b = ThreadKey("t1", data_key), ThreadKey("t2", data_key)
    assert len({a.name_key, a.object_key, a.keyed_key}) == 3
    assert a.name_key != b.name_key and a.object_key != b.object_key
    assert ThreadKey("t1", data_key).object_key == a.object_key  # deterministic


# --- sealed objects ---------------------------------------------------------------------------


def test_equal_plaintexts_give_equal_objects_within_a_thread_only() -> None:
    t1, t2 = new_thread_key("t1"), new_thread_key("t2")
    plain = msgpack.packb({"f": 1, "k": "value", "p": ["msgpack", "raw", b"hello world"]})
    d = hashlib.sha256(plain).digest()
    name = sealed_name(t1, d)
    assert sealed_name(t1, d) == name and sealed_name(t2, d) != name
    assert len(name) == 96 and d.hex() not in name
    sealed = seal(t1, d, plain)
    assert seal(t1, d, plain) == sealed  # deterministic: stored once
    assert seal(t2, d, plain) != sealed
    assert b"hello world" not in sealed and is_sealed(sealed) and not is_sealed(plain)
    assert unseal(t1, d, sealed, "objects/x") == plain


def test_a_sealed_name_opens_to_its_address_with_its_thread_key_only() -> None:
    t1, t2 = new_thread_key("t1"), new_thread_key("t1")
    d = hashlib.sha256(b"x").digest()
    name = sealed_name(t1, d)
    assert opened_name(t1, name) == d
    assert opened_name(t2, name) is None  # another key
    assert opened_name(t1, d.hex()) is None  # a name in clear is not a sealed one
    assert opened_name(t1, name[:-2] + ("00" if name[-2:] != "00" else "01")) is None
    assert opened_name(t1, "zz" * 48) is None


@pytest.mark.parametrize("attack", ["moved", "other thread", "altered", "plain", "truncated"])
def test_a_sealed_object_opens_only_where_and_as_it_was_sealed(attack: str) -> None:
    t1, t2 = new_thread_key("t1"), new_thread_key("t1")  # same id, another key
    plain = msgpack.packb({"f": 1, "k": "value", "p": ["msgpack", "raw", b"one"]})
    other = msgpack.packb({"f": 1, "k": "value", "p": ["msgpack", "raw", b"two"]})
    d = hashlib.sha256(plain).digest()
    sealed = seal(t1, d, plain)
    cases = {
        "moved": (t1, hashlib.sha256(other).digest(), sealed),
        "other thread": (t2, d, sealed),
        "altered": (t1, d, sealed[:-1] + bytes([sealed[-1] ^ 1])),
        "plain": (t1, d, plain),
        "truncated": (t1, d, sealed[:-5]),
    }
    thread, digest, data = cases[attack]
    with pytest.raises(CorruptObjectError) as info:
        unseal(thread, digest, data, "threads/_t1/objects/ab")
    assert info.value.key == "threads/_t1/objects/ab"


def test_a_keyed_object_is_bound_to_its_name() -> None:
    t = new_thread_key("t1")
    manifest = msgpack.packb({"f": 2, "k": "manifest", "thread_id": "t1"})
    sealed = seal(t, "checkpoints/_/a~.2", manifest)
    assert seal(t, "checkpoints/_/a~.2", manifest) == sealed  # a retried PUT matches
    assert unseal(t, "checkpoints/_/a~.2", sealed, "k") == manifest
    with pytest.raises(CorruptObjectError):
        unseal(t, "checkpoints/_/b~.2", sealed, "k")  # swapped to another checkpoint
    with pytest.raises(CorruptObjectError, match="plain object"):
        unseal(t, "checkpoints/_/a~.2", manifest, "k")


# --- the sealing layer's requests sent ahead ---------------------------------------------------


@pytest.mark.usefixtures("creds_env")
def test_requests_sent_ahead_through_the_sealing_layer_answer_as_the_blocking_ones(
    s3_endpoint: Any, s3_bucket: str
) -> None:
    from objstore_saver.crypto.sealed_store import sealing_store
    from objstore_saver.crypto.settings import ClientEncryption
    from objstore_saver.storage import LeanS3Store, PutMode
    from objstore_saver.storage.requests import Delete, Get, ListKeys, Put, SendsAhead

    raw = LeanS3Store(s3_bucket, "ahead/", endpoint_url=s3_endpoint.url, region_name="us-east-1")
    layer = sealing_store(raw, ClientEncryption.of(_local()))
    assert isinstance(layer, SendsAhead)
    body = b"a manifest's bytes"
    digest = hashlib.sha256(b"an object").digest()
    manifest, obj = "threads/t1/checkpoints/m", f"threads/t1/objects/{digest.hex()}"
    assert layer.send_ahead(Put(manifest, body, PutMode.CREATE))() is None
    assert layer.send_ahead(Put(obj, b"an object", PutMode.CREATE))() is None
    assert raw.get(manifest) != body  # stored sealed, under the thread's key
    assert obj not in [o.key for o in raw.list("threads/t1/objects/").objects]  # a sealed name
    assert layer.send_ahead(Get(manifest))() == layer.get(manifest) == body
    assert layer.send_ahead(Get(obj))() == b"an object"
    listed = layer.send_ahead(ListKeys("threads/t1/objects/"))()
    assert [o.key for o in listed.objects] == [obj]  # named by its address again
    layer.send_ahead(Delete((obj,)))()
    assert raw.list("threads/t1/objects/").objects == []
