"""The sealing layer in front of a store, when client-side encryption is on.

Importing this module needs no ``cryptography``; a store is sealed only when settings name a key.
"""

from __future__ import annotations

from objstore_saver.crypto.settings import ClientEncryption, resolve
from objstore_saver.storage.base import ObjectStore, sealing_layer


def sealed(
    store: ObjectStore, setting: ClientEncryption | bool | None = None
) -> tuple[ObjectStore, ClientEncryption | None]:
    """``store`` sealing every thread when encryption is on (:func:`resolve`), and the settings.

    A store that seals already is returned as it is, with its own settings: never sealed twice.
    """
    layer = sealing_layer(store)
    if layer is not None:
        return store, layer.settings
    settings = resolve(setting)
    if settings is None:
        return store, None
    from objstore_saver.crypto.sealed_store import sealing_store

    return sealing_store(store, settings), settings
