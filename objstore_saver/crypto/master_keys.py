"""Master keys that wrap thread data keys: local or KMS (docs/encryption.md, "Keys").

Key objects record each wrapping's master key name, so any configured key opens them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from objstore_saver.crypto.names import KEY_ENV, KEYS_ENV
from objstore_saver.errors import ConfigurationError

#: What local wrapping binds every wrapped key to, with the thread id and the key's name.
_WRAP_LABEL = b"objstore-saver thread key v1"
#: Encryption context key of KMS wrapping.
KMS_CONTEXT_KEY = "objstore-saver:thread"
#: A KMS key's ARN (not an alias's).
_KEY_ARN = re.compile(r"arn:[a-z-]+:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+")


class UnwrapError(Exception):
    """A wrapped key did not open with this master key (wrong key, or altered bytes)."""


class MasterKey(Protocol):
    """Wraps and unwraps a thread's data key, bound to the thread id."""

    @property
    def name(self) -> str:
        """``local:<16 hex digits>`` or ``kms:<key id>``, as key objects record it."""
        ...

    def wrap(self, thread_id: str, data_key: bytes) -> bytes:
        """The data key, encrypted and bound to ``thread_id``."""
        ...

    def unwrap(self, thread_id: str, wrapped: bytes) -> bytes:
        """The data key; :class:`UnwrapError` if ``wrapped`` is not this key's for the thread."""
        ...


@dataclass(frozen=True)
class LocalMasterKey:
    """A 32-byte key held by the application (AES-256-GCM wrapping, random nonce)."""

    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.key) != 32:
            raise ConfigurationError(
                f"a local master key is 32 bytes, got {len(self.key)} (base64 of 32 random bytes)"
            )

    @property
    def name(self) -> str:
        return "local:" + hashlib.sha256(b"objstore-saver master key" + self.key).hexdigest()[:16]

    def _aad(self, thread_id: str) -> bytes:
        return b"\0".join((_WRAP_LABEL, thread_id.encode(), self.name.encode()))

    def wrap(self, thread_id: str, data_key: bytes) -> bytes:
        nonce = os.urandom(12)
        return nonce + AESGCM(self.key).encrypt(nonce, data_key, self._aad(thread_id))

    def unwrap(self, thread_id: str, wrapped: bytes) -> bytes:
        if len(wrapped) < 12 + 16:
            raise UnwrapError("wrapped key too short")
        try:
            return AESGCM(self.key).decrypt(wrapped[:12], wrapped[12:], self._aad(thread_id))
        except InvalidTag as exc:
            raise UnwrapError("does not open with this key") from exc


@dataclass(frozen=True)
class KmsMasterKey:
    """A KMS key (id, ARN or alias): ``Encrypt``/``Decrypt`` with the thread as encryption context.

    Named by its ARN (one ``DescribeKey`` a process) however it is configured.
    """

    key_id: str
    client: Any = field(repr=False, compare=False)
    _arn: list[str] = field(default_factory=list, init=False, repr=False, compare=False)
    _lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )

    @property
    def arn(self) -> str:
        """The key's ARN (an alias or a bare key id resolved by ``DescribeKey``, once)."""
        if _KEY_ARN.fullmatch(self.key_id):
            return self.key_id
        with self._lock:
            if not self._arn:
                try:
                    reply = self.client.describe_key(KeyId=self.key_id)
                except self.client.exceptions.ClientError as exc:
                    code = exc.response.get("Error", {}).get("Code", "error")
                    raise ConfigurationError(
                        f"KMS master key {self.key_id!r} cannot be described ({code}): its "
                        "name is the ARN DescribeKey returns (IAM: kms:DescribeKey)"
                    ) from exc
                self._arn.append(str(reply["KeyMetadata"]["Arn"]))
            return self._arn[0]

    @property
    def name(self) -> str:
        return "kms:" + self.arn

    @property
    def label(self) -> str:
        """How messages name it: its ARN when known without a request, else as configured."""
        with self._lock:
            known = self._arn[0] if self._arn else None
        return "kms:" + (known or self.key_id)

    def answers_to(self, name: str) -> bool:
        """Whether a wrapping recorded under ``name`` (its ARN, or as configured: older
        key objects record the configured id or alias) is this key's."""
        if name == "kms:" + self.key_id:
            return True
        if _KEY_ARN.fullmatch(self.key_id) or not name.startswith("kms:arn:"):
            return name == self.name
        if not self.key_id.startswith(("alias/", "arn:")):
            # A bare key id: the ARN ends with it, no request needed.
            return name.endswith(":key/" + self.key_id)
        return name == self.name

    def wrap(self, thread_id: str, data_key: bytes) -> bytes:
        reply = self.client.encrypt(
            KeyId=self.key_id,
            Plaintext=data_key,
            EncryptionContext={KMS_CONTEXT_KEY: thread_id},
        )
        return bytes(reply["CiphertextBlob"])

    def unwrap(self, thread_id: str, wrapped: bytes) -> bytes:
        try:
            reply = self.client.decrypt(
                CiphertextBlob=wrapped,
                KeyId=self.key_id,
                EncryptionContext={KMS_CONTEXT_KEY: thread_id},
            )
        except self.client.exceptions.InvalidCiphertextException as exc:
            raise UnwrapError(f"KMS key {self.key_id!r} does not open it") from exc
        except self.client.exceptions.ClientError as exc:  # disabled, denied, deleted...
            code = exc.response.get("Error", {}).get("Code", "error")
            raise UnwrapError(f"KMS refused to decrypt with {self.key_id!r}: {code}") from exc
        return bytes(reply["Plaintext"])


def parse_master_key(spec: str, *, kms_client: Any = None) -> MasterKey:
    """One master key from its setting: base64 of 32 bytes, or ``kms:<key id>`` (the value
    is never echoed in errors)."""
    spec = spec.strip()
    if spec.startswith("kms:"):
        key_id = spec[4:]
        if not key_id:
            raise ConfigurationError("a KMS master key is 'kms:<key id, ARN or alias>'")
        if kms_client is None:
            import boto3

            kms_client = boto3.client("kms")
        return KmsMasterKey(key_id, kms_client)
    try:
        raw = base64.b64decode(spec, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConfigurationError(
            "a local master key is base64 of 32 random bytes (the value is not shown)"
        ) from exc
    return LocalMasterKey(raw)


def master_keys_from_env(
    environ: Mapping[str, str] | None = None, *, kms_client: Any = None
) -> list[MasterKey]:
    """The configured master keys, current first (``..._KEYS`` wins over ``..._KEY``)."""
    env = os.environ if environ is None else environ
    raw = env.get(KEYS_ENV) or env.get(KEY_ENV) or ""
    specs = [s for s in raw.split(",") if s.strip()]
    keys = [parse_master_key(s, kms_client=kms_client) for s in specs]
    names = [k.name for k in keys]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"{KEYS_ENV} names one master key twice: {names}")
    return keys


def unwrap_any(
    keys: Sequence[MasterKey], thread_id: str, wrappings: Sequence[tuple[str, bytes]]
) -> tuple[bytes | None, list[str]]:
    """The data key from the first wrapping a configured master key opens, else None,
    and why each key tried did not open its wrapping (``"<name>: <reason>"``)."""
    reasons: list[str] = []
    tried: set[tuple[int, int]] = set()
    for i, (name, wrapped) in enumerate(wrappings):
        key = next((k for k in keys if answers_to(k, name)), None)
        if key is None:
            continue
        tried.add((i, id(key)))
        try:
            return key.unwrap(thread_id, wrapped), reasons
        except UnwrapError as exc:
            reasons.append(f"{name}: {exc}")
    # A KMS wrapping named otherwise (another process named the key by an
    # alias this one does not use): KMS knows its key from the ciphertext.
    for i, (name, wrapped) in enumerate(wrappings):
        if not name.startswith("kms:"):
            continue
        for key in keys:
            if isinstance(key, KmsMasterKey) and (i, id(key)) not in tried:
                try:
                    return key.unwrap(thread_id, wrapped), reasons
                except UnwrapError as exc:
                    reasons.append(f"{name} with {label_of(key)}: {exc}")
    return None, reasons


def label_of(key: MasterKey) -> str:
    """How an error names a master key, without a request."""
    return key.label if isinstance(key, KmsMasterKey) else key.name


def answers_to(key: MasterKey, name: str) -> bool:
    """Whether a wrapping recorded under ``name`` is ``key``'s."""
    if isinstance(key, KmsMasterKey):
        return key.answers_to(name)
    return key.name == name
