"""In-process caches: bounded, thread-safe, holding only facts about immutable things.

* :mod:`~objstore_saver.caches.facts`: what a saver knows is stored (objects,
  checkpoints' entries, heads) and what it already encoded (list elements,
  segments, serialized messages), with the reuse window of spec §6.9; the
  byte-budget map under them is :mod:`~objstore_saver.format.bounded_fifo`.
* :mod:`~objstore_saver.caches.message_keys`: the state keys under which a
  LangChain message's serialized bytes are cached.
"""
