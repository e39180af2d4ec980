"""Build the zstd raw-content dictionary D1 of spec §4.0 (run once; the output is frozen).

D1 holds what LangChain's and LangGraph's serializations of typical checkpoint
values share: class paths, field names, metadata keys. Compressing a small
value against it saves the ~100 bytes of framing each message would otherwise
pay. The file it writes is part of the on-storage format: once released it is
never regenerated, whatever later versions of LangChain serialize. Readers
check its SHA-256 (``objstore_saver.format.compression.D1_SHA256``).

Usage: ``python scripts/make_zstd_dictionary.py objstore_saver/format/zdict/d1.bin``
"""

from __future__ import annotations

import sys
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Interrupt, Send

ID = "00000000-0000-0000-0000-000000000000"


def samples() -> list[object]:
    usage = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    meta = {"model_name": "", "finish_reason": "stop", "system_fingerprint": "", "id": ""}
    call = {"name": "", "args": {}, "id": "call_", "type": "tool_call"}
    checkpoint = {
        "v": 4,
        "ts": "2026-01-01T00:00:00.000000+00:00",
        "channel_versions": {
            "__start__": "00000000000000000000000000000001.0.1234567890123456",
            "messages": "00000000000000000000000000000002.0.1234567890123456",
            "branch:to:agent": 1,
        },
        "versions_seen": {"__input__": {}, "__start__": {"__start__": 1}},
        "updated_channels": ["messages"],
    }
    return [
        Interrupt(value="", id=ID),
        Send("tools", {}),
        {"source": "input", "step": -1, "parents": {}},
        {"source": "update", "step": 1, "parents": {}, "writes": {}},
        ToolMessage("", tool_call_id="call_", name="", id=ID, status="success"),
        AIMessage("", id=f"run--{ID}-0", tool_calls=[call], usage_metadata=usage),
        AIMessage("", id=f"run--{ID}-0", response_metadata=meta, usage_metadata=usage),
        SystemMessage("", id=ID),
        {"messages": [HumanMessage("")]},
        [AIMessage("")],
        checkpoint,
        {"source": "loop", "step": 1, "parents": {}},
        HumanMessage("", id=ID),
        AIMessage("", id=ID),
    ]


def main() -> None:
    serde = JsonPlusSerializer()
    data = b"".join(serde.dumps_typed(s)[1] for s in samples())
    Path(sys.argv[1]).write_bytes(data)
    print(f"{len(data)} bytes written to {sys.argv[1]}")


if __name__ == "__main__":
    main()
