"""Client-side encryption that keeps the increments (docs/encryption.md).

Master keys wrap one data key per thread; keyed content addresses and
deterministic authenticated encryption (AES-256-SIV) seal every object, so
equal values in a thread are still stored once. Needs the ``encryption``
extra (``cryptography``).
"""

from __future__ import annotations

from objstore_saver.crypto.master_keys import (
    KEY_ENV as KEY_ENV,
    KEYS_ENV as KEYS_ENV,
    KmsMasterKey as KmsMasterKey,
    LocalMasterKey as LocalMasterKey,
    MasterKey as MasterKey,
    UnwrapError as UnwrapError,
    master_keys_from_env as master_keys_from_env,
    parse_master_key as parse_master_key,
)
from objstore_saver.crypto.sealing import (
    address as address,
    is_sealed as is_sealed,
    open_keyed as open_keyed,
    open_object as open_object,
    seal_keyed as seal_keyed,
    seal_object as seal_object,
)
from objstore_saver.crypto.thread_keys import (
    ThreadKey as ThreadKey,
    encode_key_object as encode_key_object,
    new_thread_key as new_thread_key,
    open_key_object as open_key_object,
    rewrapped as rewrapped,
)
