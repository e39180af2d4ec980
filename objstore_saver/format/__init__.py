"""The on-storage format (spec §3-§4) as pure encodings: no I/O, no LangGraph state.

* :mod:`~objstore_saver.format.keys`: the key layout and identifier tokens (§3),
  a config's identifiers checked, and where a list's segment or a value is,
  relative to the manifest holding its reference (§4.0, §4.4).
* :mod:`~objstore_saver.format.store_keys`: the long-term store's key layout
  (§8.1): namespace paths, items, index records, snapshots, clear markers.
* :mod:`~objstore_saver.format.bounded_fifo`: a thread-safe map with a byte
  budget (decompressed payloads here, the caches above).
* :mod:`~objstore_saver.format.compression`: payload byte encodings and the
  frozen zstd dictionary D1 in ``zdict/`` (§4.0).
* :mod:`~objstore_saver.format.codec`: payloads, entries and the objects that
  hold them (§4).
* :mod:`~objstore_saver.format.value_encoding`: one serialized value inline, as
  a value object or as parts (§4.2-§4.3).
* :mod:`~objstore_saver.format.list_encoding`: lists element by element, in
  chunks and nodes (§4.4).
* :mod:`~objstore_saver.format.split_values`: large message texts stored apart
  from their value (§4.4a).
* :mod:`~objstore_saver.format.model`: the decoded forms of stored objects and
  the format's limits.
"""
