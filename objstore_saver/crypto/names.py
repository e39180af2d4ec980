"""The names client-side encryption is configured by and stores its keys under.

No imports: every module of :mod:`objstore_saver.crypto` may use them.
"""

from __future__ import annotations

#: Environment variable holding one master key (``base64`` of 32 bytes, or ``kms:<key id>``).
KEY_ENV = "OBJSTORE_SAVER_ENCRYPTION_KEY"
#: Environment variable holding several, comma-separated; the first wraps new thread keys.
KEYS_ENV = "OBJSTORE_SAVER_ENCRYPTION_KEYS"
#: Environment variable naming the store of key objects (a URL), when not the data store.
KEYS_URL_ENV = "OBJSTORE_SAVER_KEYS_URL"
#: Prefix of key objects in their store.
KEY_PREFIX = "keys/"
#: Hex digits of an encrypted thread's content object name: a 32-byte address
#: and the 16-byte SIV tag (crypto.sealing).
SEALED_NAME_LEN = 96
#: Where threads' key objects live in the key store: ``keys/threads/<T>``.
THREAD_KEYS = KEY_PREFIX + "threads/"


def key_object_key(token: str) -> str:
    """Key of a thread's key object in the key store: ``keys/threads/<T>``."""
    return THREAD_KEYS + token


def token_of_key_object(key: str) -> str | None:
    """The thread token of a key object's key, else None (not ``keys/threads/<T>``)."""
    token = key[len(THREAD_KEYS) :]
    if not key.startswith(THREAD_KEYS) or not token or "/" in token:
        return None
    return token
