"""Long-term memory: LangGraph's ``BaseStore`` on object storage (spec §8).

:class:`~objstore_saver.longterm.store.ObjectStoreStore` is the store;
:mod:`.records` encodes objects (their keys are
:mod:`~objstore_saver.format.store_keys`'s), :mod:`.plans` holds the pure
planners the sync and async drivers run (:mod:`.searches` the searches and
namespace listings, with what a replica leaves out; :mod:`.clear` the
namespace delete's), :mod:`.query` filters, scores and orders items in
memory, and :mod:`.verify` is ``verify``'s part for the store's objects (spec
§8.4.8). :mod:`objstore_saver.config` chooses an application's store
(``create_store``, ``langgraph.json``).
"""

from objstore_saver.longterm.records import InvalidStoreValueError
from objstore_saver.longterm.store import ObjectStoreStore

__all__ = ["InvalidStoreValueError", "ObjectStoreStore"]
