"""Embedded objects stored alone before the manifest that carries them is deleted.

A format-version-2 manifest may carry content objects (field ``e``, spec
§4.4) that later manifests locate in it. A plan that deletes such a manifest
without deleting its whole thread first stores every object it embeds at
``objects/<H>``, where readers look once the manifest is gone (spec §6.9
step 4). Every one is stored, reached or not: from then on they are ordinary
content objects, which a later prune marks and sweeps when nothing reaches
them.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping
from typing import Any

from objstore_saver.format import codec, keys
from objstore_saver.format.codec import Manifest
from objstore_saver.plans.context import Context
from objstore_saver.plans.requests import Batch, Put
from objstore_saver.plans.writing import put_objects


def embedded_in(manifests: Iterable[Manifest]) -> dict[bytes, bytes]:
    """The objects the manifests embed, by address."""
    out: dict[bytes, bytes] = {}
    for m in manifests:
        out.update(codec.embedded_objects(m))
    return out


def store_embedded(
    ctx: Context, pfx: str, objects: Mapping[bytes, bytes]
) -> Generator[Batch, list[Any] | None, None]:
    """Sub-plan: store embedded objects alone at ``objects/<H>``, as a writer stores objects.

    Create-only; one found stored already is PUT again to renew its
    ``LastModified``, as a sweep mark may name it (spec §6.9). Returns once
    every PUT succeeded: only then may their manifests be deleted.
    """
    puts = {d: Put(keys.object_key_in(pfx, d), objects[d]) for d in sorted(objects)}
    yield from put_objects(ctx, pfx, puts)
