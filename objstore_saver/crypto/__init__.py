"""Client-side encryption that keeps the increments (docs/encryption.md).

* ``settings``: the settings (importable without the ``encryption`` extra); ``names``:
  the names of settings, scopes and key objects.
* ``master_keys``, ``thread_keys``: master keys wrap each scope's data key in its key object.
* ``scope_keys``: loads and makes the scopes' keys; ``key_versions``: destroys every
  version of a key object where the key store keeps versions.
* ``sealing``: envelopes and sealed names; ``sealed_store``: the sealing layer, put
  in front of a store by ``layer``.
"""

from __future__ import annotations

from objstore_saver.crypto.names import (
    KEY_ENV as KEY_ENV,
    KEYS_ENV as KEYS_ENV,
    KEYS_URL_ENV as KEYS_URL_ENV,
)
from objstore_saver.crypto.settings import ClientEncryption as ClientEncryption
