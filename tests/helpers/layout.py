"""What a stored key is, in the saver's key layout (spec §3), for tests that watch requests."""

from __future__ import annotations

from objstore_saver.format import keys


def _kind(key: str) -> str | None:
    try:
        return keys.parse_checkpoint_key(key).kind
    except ValueError:
        return None


def is_manifest(key: str) -> bool:
    """A manifest key, of either format version."""
    return _kind(key) == "manifest"


def is_write(key: str) -> bool:
    """A pending write's key, of either format version."""
    return _kind(key) == "write"
