"""Long-term memory: LangGraph's ``BaseStore`` on object storage (spec §8).

:class:`~objstore_saver.longterm.store.ObjectStoreStore` is the store;
:mod:`.layout` builds keys, :mod:`.records` encodes objects, :mod:`.plans`
holds the pure planners the sync and async drivers run (:mod:`.clear` the
namespace delete's), :mod:`.query` filters, scores and orders items in memory.
"""

from objstore_saver.longterm.records import InvalidStoreValueError
from objstore_saver.longterm.store import ObjectStoreStore

__all__ = ["InvalidStoreValueError", "ObjectStoreStore"]
