"""In-process caches: bounded, thread-safe, holding only facts about immutable things.

* :mod:`~objstore_saver.format.bounded_fifo` (in the lower ``format`` folder,
  whose decompressed payloads use it too): the map with a byte budget, oldest
  out first, under the caches here.
* :mod:`~objstore_saver.caches.facts`: what a saver knows is stored (objects,
  checkpoints' entries, heads) and what it already encoded (list elements,
  segments, serialized messages), with the reuse window of spec §6.9.
* :mod:`~objstore_saver.caches.message_keys`: the state keys under which a
  LangChain message's serialized bytes are cached.

Nothing here is the long-term memory of LangGraph's ``BaseStore``
(:mod:`objstore_saver.longterm`).
"""
