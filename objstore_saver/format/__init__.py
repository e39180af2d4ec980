"""The on-storage format (spec §3-§4) as pure encodings: no I/O, no LangGraph state.

* ``keys``: the key layout and identifier tokens (§3), a config's identifiers, and
  locations relative to a manifest (§4.0, §4.4); ``store_keys``: the long-term
  store's key layout (§8.1).
* ``model``: the decoded forms of stored objects and the format's limits; ``codec``:
  payloads, entries and the objects that hold them (§4).
* ``compression``: payload byte encodings and the frozen zstd dictionary D1 in
  ``zdict/`` (§4.0); ``bounded_fifo``: a thread-safe map with a byte budget.
* ``value_encoding``: one serialized value inline, as a value object or as parts
  (§4.2-§4.3); ``list_encoding``: lists in segments and indexes (§4.4);
  ``split_values``: large message texts stored apart from their value (§4.4a).
"""
