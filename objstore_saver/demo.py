"""A short demo: a LangGraph chat persisted in a local directory, then audited.

Run ``python -m objstore_saver.demo [DIRECTORY]``. The chat bot is a
deterministic stand-in for a model, so the demo needs no API key and no server.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from objstore_saver.saver import ObjectStoreSaver
from objstore_saver.storage.local import LocalStore


def _build_graph(saver: ObjectStoreSaver):  # type: ignore[no-untyped-def]
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    def bot(state: MessagesState) -> dict:
        question = state["messages"][-1].content
        turn = sum(1 for m in state["messages"] if m.type == "human")
        return {"messages": [AIMessage(f"(turn {turn}) You said: {question!s}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=saver)


def _kind(key: str) -> str:
    parts = key.split("/")
    return parts[2] if parts[0] == "threads" and len(parts) > 2 else parts[0]


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("directory", nargs="?", default="demo-store")
    parser.add_argument("--thread", default="demo-thread")
    args = parser.parse_args(argv)
    root = Path(args.directory).resolve()
    config = {"configurable": {"thread_id": args.thread}}

    questions = [
        "What is objstore-saver?",
        "Where are my checkpoints?",
        "Can I read them without this library?",
    ]
    with ObjectStoreSaver.from_directory(root) as saver:
        graph = _build_graph(saver)
        for q in questions:
            graph.invoke({"messages": [("user", q)]}, config)

    # A new saver instance, as after a restart: everything comes from disk.
    with ObjectStoreSaver.from_directory(root) as saver:
        state = _build_graph(saver).get_state(config)
        print(f"Conversation {args.thread!r} read back from {root}:")
        for message in state.values["messages"]:
            print(f"  {message.type:>5}: {message.content}")
        history = list(saver.list(config))
        print(f"\n{len(history)} checkpoints, newest first (step, source):")
        print("  " + ", ".join(f"{t.metadata['step']}/{t.metadata['source']}" for t in history))

    store = LocalStore(root)
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    after = None
    while True:
        page = store.list("", start_after=after)
        for info in page.objects:
            counts[_kind(info.key)] += 1
            sizes[_kind(info.key)] += info.size
        if not page.truncated or not page.objects:
            break
        after = page.objects[-1].key
    print(f"\nStored objects under {root} (see docs/spec.md for the layout):")
    for kind in sorted(counts):
        print(f"  {kind:<12} {counts[kind]:>4} objects {sizes[kind]:>8} bytes")
    print(f"\nList them yourself: find {root} -type f | sort")
    return 0


if __name__ == "__main__":
    sys.exit(main())
