"""A chat whose long messages of random words are values embedded in manifests (format 2).

Each put adds a question of 80 random words (over 128 bytes compressed: a
``value`` object, embedded in the manifest of the put that adds it and
located there by the later ones) and an answer, long every third put; a
``notes`` channel over 1 KiB changes every sixth put, and the metadata of one
put is long too. 21 puts: 42 messages in segments of 32 and 8 and a tail of 2.
"""

from __future__ import annotations

import random
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from objstore_saver import ObjectStoreSaver

THREAD = "words"
TURNS = 21
#: The put whose metadata is long enough to be a value of its own.
LONG_METADATA_AT = 19


def grow(saver: ObjectStoreSaver, thread: str = THREAD, turns: int = TURNS) -> list[BaseMessage]:
    """``turns`` puts; returns every message."""
    rng = random.Random(3)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = ["".join(rng.choices(letters, k=rng.randint(2, 9))) for _ in range(3000)]

    def words(n: int) -> str:
        return " ".join(rng.choices(vocabulary, k=n))

    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    messages: list[BaseMessage] = []
    notes = ""
    for turn in range(turns):
        answer = words(60) if turn % 3 == 0 else f"ok {turn}"
        messages += [HumanMessage(words(80), id=f"h{turn}"), AIMessage(answer, id=f"a{turn}")]
        notes = words(400) if turn % 6 == 0 else notes
        metadata = {"step": turn, "summary": words(300) if turn == LONG_METADATA_AT else ""}
        versions = {"messages": turn + 1, "notes": turn // 6 + 1}
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": list(messages), "notes": notes}
        cp["channel_versions"] = dict(versions)
        config = saver.put(config, cp, metadata, versions)
    return messages
