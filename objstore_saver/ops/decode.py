"""Decode stored values to JSON without unpickling or importing user classes.

LangGraph's serializer writes ``msgpack`` payloads whose objects (pydantic
models, LangChain messages, dataclasses, UUIDs...) are MessagePack extension
types holding ``(module, class name, arguments...)``. Here they are read
structurally with msgpack's ``ext_hook``: the class is named, never imported.
LangChain messages become ``{"role": ..., "content": ...}``. ``pickle``
payloads are described, never loaded; encrypted payloads are described too.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
from typing import Any

import msgpack

from objstore_saver.format.codec import Payload, payload_bytes
from objstore_saver.format.split_values import TEXT_TYPE

# Extension codes of LangGraph's JsonPlusSerializer (langgraph.checkpoint.serde.jsonplus)
# read apart from the others, which all hold (module, class name, arguments...).
_EXT_CONSTRUCTOR_POS_ARGS = 1
_EXT_NUMPY_ARRAY = 6
_EXT_DELTA_SNAPSHOT = 7

_MESSAGE_ROLES = {
    f"{kind}Message{chunk}": kind.lower()
    for kind in ("Human", "AI", "System", "Tool")
    for chunk in ("", "Chunk")
} | {"FunctionMessage": "function", "ChatMessage": "chat", "RemoveMessage": "remove"}


def _message(name: str, fields: Any) -> dict[str, Any] | None:
    """A LangChain message as role + content (plus tool calls and ids when set)."""
    if name not in _MESSAGE_ROLES or not isinstance(fields, dict):
        return None
    role = fields.get("role") if name == "ChatMessage" else None
    out: dict[str, Any] = {"role": role or fields.get("type") or _MESSAGE_ROLES[name]}
    out["content"] = fields.get("content")
    for extra in ("tool_calls", "tool_call_id", "name", "id"):
        if fields.get(extra):
            out[extra] = fields[extra]
    return out


def _object(module: Any, name: Any, value: Any) -> Any:
    if isinstance(module, str) and module.startswith("langchain_core.messages"):
        msg = _message(str(name), value)
        if msg is not None:
            return msg
    if module == "uuid" and name == "UUID" and isinstance(value, str) and len(value) == 32:
        return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}"
    if module == "datetime" and isinstance(value, str):
        return value
    return {"__type__": f"{module}.{name}", "value": value}


def _ext_hook(code: int, data: bytes) -> Any:
    inner = _unpack(data)
    if code == _EXT_DELTA_SNAPSHOT:
        return {"__type__": "delta_snapshot", "value": inner}
    if code == _EXT_NUMPY_ARRAY:
        return {"__type__": "numpy.ndarray", "value": inner}
    if not isinstance(inner, list) or len(inner) < 3:
        return {"__ext__": code, "value": inner}
    module, name, args = inner[0], inner[1], inner[2]
    if code == _EXT_CONSTRUCTOR_POS_ARGS and isinstance(args, list) and len(args) == 1:
        args = args[0]
    return _object(module, name, args)


def _unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=_ext_hook)


def jsonable(value: Any) -> Any:
    """Make a decoded structure JSON-serializable (bytes as base64, keys as strings)."""
    if isinstance(value, dict):
        return {
            k if isinstance(k, str) else json.dumps(jsonable(k)): jsonable(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return {"__bytes__": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, msgpack.Timestamp):
        return value.to_datetime().isoformat()
    if isinstance(value, _dt.datetime | _dt.date):
        return value.isoformat()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


def decode_serialized(type_: str, data: bytes) -> Any:
    """Decode one serializer payload (``dumps_typed`` output) structurally."""
    if type_ == "null":
        return None
    if type_ in ("bytes", "bytearray"):
        return jsonable(data)
    if type_ == "json":
        return json.loads(data)
    if type_ == "msgpack":
        return jsonable(_unpack(data))
    if type_ == "pickle":
        return {"__unreadable__": "pickle payload (never unpickled here)", "bytes": len(data)}
    if type_ == TEXT_TYPE:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return {"__unreadable__": f"text that is not UTF-8 ({exc.reason})", "bytes": len(data)}
    return {"__unreadable__": f"payload of serializer type {type_!r}", "bytes": len(data)}


def decode_payload(payload: Payload, key: str) -> Any:
    """Decode a stored payload (decompressing it) structurally."""
    type_, data = payload_bytes(payload, key)
    return decode_serialized(type_, data)


class StructuralSerde:
    """A LangGraph serializer that only reads, structurally: given to ``plans.materialize``
    so values come back as JSON-ready data instead of user objects."""

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, raw = data
        return decode_serialized(type_, raw)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        raise TypeError("StructuralSerde only reads: it cannot serialize")

    def dumps(self, obj: Any) -> bytes:
        raise TypeError("StructuralSerde only reads: it cannot serialize")

    def loads(self, data: bytes) -> Any:
        return json.loads(data)


STRUCTURAL = StructuralSerde()
