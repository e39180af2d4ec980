"""The names client-side encryption is configured by and stores its keys under.

Imports nothing of :mod:`objstore_saver.crypto`: every module of it may use them.
"""

from __future__ import annotations

from objstore_saver.format import store_keys
from objstore_saver.format.keys import THREADS, untoken

#: Environment variable holding one master key (``base64`` of 32 bytes, or ``kms:<key id>``).
KEY_ENV = "OBJSTORE_SAVER_ENCRYPTION_KEY"
#: Environment variable holding several, comma-separated; the first wraps new thread keys.
KEYS_ENV = "OBJSTORE_SAVER_ENCRYPTION_KEYS"
#: Environment variable naming the store of key objects (a URL), when not the data store.
KEYS_URL_ENV = "OBJSTORE_SAVER_KEYS_URL"
KEY_PREFIX = "keys/"
#: Where threads' key objects live in the key store: ``keys/threads/<T>``.
THREAD_KEYS = KEY_PREFIX + "threads/"
#: The scope of a long-term store namespace starts with this (a thread's
#: token never holds a ``/``); its key object is ``keys/store/<P>/k``.
STORE_SCOPE = "store/"
#: The last segment of a namespace's key object (path segments are tokens: never ``k``).
_STORE_KEY_LEAF = "/k"
#: Between a thread's token and its epoch (``<T>%e<n>``): a token holds ``%`` only
#: before two uppercase hex digits, so no thread's token is another's scope.
EPOCH_MARK = "%e"


def epoch_scope(token: str, epoch: int) -> str:
    """The scope whose key seals a thread's objects of ``epoch``: ``<T>`` or ``<T>%e<n>``
    (each epoch has a data key of its own, spec §4.10, §4.11)."""
    return token if epoch == 0 else f"{token}{EPOCH_MARK}{epoch}"


def split_scope(scope: str) -> tuple[str, int]:
    """(thread token, epoch) of a thread's scope; (scope, 0) for any other."""
    token, mark, epoch = scope.rpartition(EPOCH_MARK)
    if mark and token and epoch.isdigit() and epoch.isascii() and not epoch.startswith("0"):
        return token, int(epoch)
    return scope, 0


#: Between a scope and a data key's id (16 hex digits) in the name of a second
#: key object of the scope, ``<scope>%r<id>``: a replica writer's key (spec §6.16).
SECOND_MARK = "%r"
_KEY_ID_HEX = 16


def second_key_object_key(scope: str, key_id: bytes) -> str:
    """Key of a second key object: ``keys/threads/<T>%r<id>``, ``keys/store/<P>%r<id>/k``."""
    return key_object_key(f"{scope}{SECOND_MARK}{key_id.hex()}")


def key_stem(scope: str) -> str:
    """What the names of a scope's key objects start with (``keys/threads/<T>``...)."""
    return KEY_PREFIX + scope if scope.startswith(STORE_SCOPE) else key_object_key(scope)


def seconds_prefix(scope: str) -> str:
    """What the names of a scope's second key objects start with."""
    return key_stem(scope) + SECOND_MARK


def second_key_id(key: str, scope: str) -> bytes | None:
    """The data key id naming ``key`` when it is a second key object of ``scope``, else None."""
    prefix = seconds_prefix(scope)
    hex_id = key[len(prefix) : len(prefix) + _KEY_ID_HEX]
    if not key.startswith(prefix) or len(hex_id) != _KEY_ID_HEX:
        return None
    try:
        key_id = bytes.fromhex(hex_id)
    except ValueError:
        return None
    return key_id if key == second_key_object_key(scope, key_id) else None


def _without_second(scope: str) -> str:
    base, mark, key_id = scope.rpartition(SECOND_MARK)
    if mark and base and len(key_id) == _KEY_ID_HEX and not key_id.strip("0123456789abcdef"):
        return base
    return scope


def key_object_key(scope: str) -> str:
    """Key of a scope's key object: ``keys/threads/<T>``, or ``keys/store/<P>/k``."""
    if scope.startswith(STORE_SCOPE):
        return KEY_PREFIX + scope + _STORE_KEY_LEAF
    return THREAD_KEYS + scope


def scope_of_key_object(key: str) -> str | None:
    """The scope of a key object's key, or of a second key object's, else None."""
    token = token_of_key_object(key)
    if token is not None:
        return _without_second(token)
    if not key.startswith(KEY_PREFIX + STORE_SCOPE) or not key.endswith(_STORE_KEY_LEAF):
        return None
    scope = key[len(KEY_PREFIX) : -len(_STORE_KEY_LEAF)]
    return _without_second(scope) if len(scope) > len(STORE_SCOPE) else None


def token_of_key_object(key: str) -> str | None:
    """The thread token of a key object's key, else None (not ``keys/threads/<T>``)."""
    token = key[len(THREAD_KEYS) :]
    if not key.startswith(THREAD_KEYS) or not token or "/" in token:
        return None
    return token


def scope_owner(scope: str) -> str:
    """What a scope's key seals, for errors: ``thread 'T'`` or ``store namespace path 'P'``."""
    token, epoch = split_scope(scope)
    if token.startswith(STORE_SCOPE):
        name = f"long-term store namespace path {token[len(STORE_SCOPE) :]!r}"
    else:
        name = f"thread {untoken(token) or token!r}"
    return name if epoch == 0 else f"{name} (epoch {epoch})"


def namespace_scope(path: str) -> str:
    """The scope of the long-term store namespace whose path is ``path``."""
    return STORE_SCOPE + path


def scope_path(scope: str) -> str:
    """The namespace path ``<P>`` of a namespace scope ``store/<P>``."""
    return scope[len(STORE_SCOPE) :]


def marked_keys_prefix(scope: str) -> str:
    """What the key objects of a scope's epochs above 0 and its second ones start with."""
    return key_stem(scope) + "%"


def scope_of_prefix(prefix: str) -> str:
    """The thread token of ``threads/<T>/``, or the scope of ``store/ix/<P>/x/``."""
    path = store_keys.index_prefix_path(prefix)
    return namespace_scope(path) if path is not None else token_of_prefix(prefix)


def token_of_prefix(thread_prefix: str) -> str:
    """The token ``<T>`` of a thread prefix ``threads/<T>/``."""
    token = thread_prefix.removeprefix(THREADS)
    if token == thread_prefix or not token.endswith("/") or "/" in token[:-1] or token == "/":
        raise ValueError(f"not a thread prefix: {thread_prefix!r}")
    return token[:-1]
