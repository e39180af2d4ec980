"""Client-side encryption that keeps the increments (docs/encryption.md).

Master keys wrap one data key per thread; deterministic authenticated
encryption (AES-256-SIV) seals every object of the thread and the names of
its content objects, so equal values in a thread are still stored once. The
settings (:mod:`~objstore_saver.crypto.settings`) import without the
``encryption`` extra; the ciphers need ``cryptography``:
:mod:`~objstore_saver.crypto.master_keys`, :mod:`~objstore_saver.crypto.thread_keys`,
:mod:`~objstore_saver.crypto.sealing` (envelopes and sealed names) and
:mod:`~objstore_saver.crypto.sealed_store`, the sealing layer (which routes
each key to the scope whose key seals it), put in front of a store by
:mod:`~objstore_saver.crypto.layer`; :mod:`~objstore_saver.crypto.scope_keys`
loads and makes the scopes' keys. :mod:`~objstore_saver.crypto.names` names
the settings, scopes and key objects (an epoch's key: ``<T>%e<n>``,
``store/<P>%e<n>``; a replica's second key: ``<scope>%r<key id>``);
:mod:`~objstore_saver.crypto.key_versions` destroys every
version of a key object where the key store keeps versions.
"""

from __future__ import annotations

from objstore_saver.crypto.names import (
    KEY_ENV as KEY_ENV,
    KEYS_ENV as KEYS_ENV,
    KEYS_URL_ENV as KEYS_URL_ENV,
)
from objstore_saver.crypto.settings import ClientEncryption as ClientEncryption
