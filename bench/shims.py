"""Compatibility shims for peers written against older LangGraph APIs."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer


class LegacySerdeShim(JsonPlusSerializer):
    """LangGraph's serializer plus the untyped ``dumps``/``loads`` pair.

    ``langgraph-checkpoint-s3`` 0.1.3 stores checkpoint metadata with
    ``serde.dumps(metadata)`` and reads it with ``serde.loads(data)``; current
    LangGraph serializers only offer ``dumps_typed``/``loads_typed``. This shim
    frames the typed pair as ``type NUL payload`` so the peer runs unchanged.
    """

    def dumps(self, obj: Any) -> bytes:
        """Serialize ``obj`` as ``type_name + NUL + payload``."""
        type_, data = self.dumps_typed(obj)
        return type_.encode() + b"\0" + data

    def loads(self, data: bytes) -> Any:
        """Inverse of :meth:`dumps`."""
        type_, sep, payload = data.partition(b"\0")
        if not sep:
            raise ValueError("not a LegacySerdeShim payload: no type separator")
        return self.loads_typed((type_.decode(), payload))
