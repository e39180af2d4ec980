"""Client-side encryption settings: the master keys and where thread keys live.

docs/encryption.md, "Keys". Importing this module needs no ``cryptography``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from objstore_saver.crypto.names import KEY_ENV, KEYS_ENV, KEYS_URL_ENV
from objstore_saver.errors import ConfigurationError

if TYPE_CHECKING:
    from objstore_saver.crypto.master_keys import MasterKey
    from objstore_saver.storage.base import ObjectStore


@dataclass(frozen=True)
class ClientEncryption:
    """How a saver encrypts: master keys (the first wraps new thread keys, each opens those it
    wrapped) and the key store (``None``: the data store; for crypto-shredding to reach
    backups, put it where versioning and replication do not, docs/encryption.md).
    """

    master_keys: tuple[MasterKey, ...]
    key_store: ObjectStore | None = None

    def __post_init__(self) -> None:
        if not self.master_keys:
            raise ConfigurationError("client encryption needs at least one master key")

    @classmethod
    def of(cls, *master_keys: MasterKey, key_store: ObjectStore | None = None) -> ClientEncryption:
        """Settings with these master keys, current first."""
        return cls(tuple(master_keys), key_store)

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, kms_client: Any = None
    ) -> ClientEncryption | None:
        """The settings of ``OBJSTORE_SAVER_ENCRYPTION_KEY(S)`` and ``OBJSTORE_SAVER_KEYS_URL``
        (a store for key objects), or None when they configure no master key."""
        env = os.environ if environ is None else environ
        if not (env.get(KEYS_ENV) or env.get(KEY_ENV) or "").strip(" ,"):
            if env.get(KEYS_URL_ENV):
                raise ConfigurationError(f"{KEYS_URL_ENV} is set but no master key is configured")
            return None
        try:
            from objstore_saver.crypto.master_keys import master_keys_from_env
        except ImportError as exc:  # cryptography is the extra's
            raise ConfigurationError(
                f"{KEY_ENV} is set: client encryption needs the 'encryption' extra "
                "(pip install 'objstore-saver[encryption]')"
            ) from exc
        keys = master_keys_from_env(env, kms_client=kms_client)
        key_store = None
        if url := env.get(KEYS_URL_ENV):
            from objstore_saver.storage.urls import store_from_url

            key_store = store_from_url(url)
        return cls(tuple(keys), key_store)


def resolve(setting: ClientEncryption | bool | None) -> ClientEncryption | None:
    """The settings a saver uses: given ones, the environment's (``None``, or ``True``: then
    required), or none (``False``)."""
    if isinstance(setting, ClientEncryption):
        return setting
    if setting is False:
        return None
    found = ClientEncryption.from_env()
    if setting is True and found is None:
        raise ConfigurationError(
            "client encryption was asked for but OBJSTORE_SAVER_ENCRYPTION_KEY(S) is not set"
        )
    return found
