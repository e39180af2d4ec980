"""The compiled LangGraph graphs and the scripted conversations the workloads drive.

No model is called: a deterministic node returns the scripted reply, so every
saver stores exactly the same messages.
"""

from __future__ import annotations

import base64
import operator
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Send, interrupt

SEED_SYSTEM = "You are Chat. " + "rule " * 300


def seed_user(t: int) -> str:
    """Workload 1's user message of turn ``t``."""
    return f"question {t} " + "q" * 200


def seed_reply(t: int) -> str:
    """Workload 1's reply of turn ``t``."""
    return f"answer {t} " + "a" * 800


def vocabulary(size: int = 4000, seed: int = 7) -> list[str]:
    """``size`` distinct pseudo-words of 2 to 10 letters, from a seeded generator."""
    rng = random.Random(seed)
    words: set[str] = set()
    while len(words) < size:
        n = rng.randint(2, 10)
        words.add("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n)))
    return sorted(words)


def words_text(rng: random.Random, vocab: list[str], length: int) -> str:
    """Words drawn from ``vocab`` joined by spaces, cut to exactly ``length`` characters."""
    parts: list[str] = []
    total = 0  # length of the parts joined, plus one
    while total - 1 < length:
        w = rng.choice(vocab)
        parts.append(w)
        total += len(w) + 1
    return " ".join(parts)[:length]


@dataclass(frozen=True)
class Script:
    """A scripted conversation: the system prompt, and per turn the user text and reply."""

    system: str
    user: Callable[[int], str]
    reply: Callable[[int], str]

    def inputs(self, t: int) -> list[BaseMessage]:
        """Messages sent on turn ``t`` (the system prompt only on turn 0)."""
        new: list[BaseMessage] = [HumanMessage(self.user(t))]
        if t == 0:
            new.insert(0, SystemMessage(self.system))
        return new

    def new_message_bytes(self, t: int) -> int:
        """Raw UTF-8 bytes of the texts turn ``t`` adds (system prompt, user, reply)."""
        n = len(self.user(t).encode()) + len(self.reply(t).encode())
        return n + (len(self.system.encode()) if t == 0 else 0)


SEED = Script(SEED_SYSTEM, seed_user, seed_reply)


def realistic_script(seed: int = 11) -> Script:
    """Workload 1b: same lengths as :data:`SEED`, words from a seeded vocabulary."""
    vocab = vocabulary()

    def text(kind: int, t: int, length: int) -> str:
        return words_text(random.Random(seed * 1_000_003 + kind * 10_007 + t), vocab, length)

    return Script(
        system=text(0, 0, len(SEED_SYSTEM)),
        user=lambda t: text(1, t, len(seed_user(t))),
        reply=lambda t: text(2, t, len(seed_reply(t))),
    )


def _turn_of(state: MessagesState) -> int:
    return sum(1 for m in state["messages"] if m.type == "human") - 1


def chat_graph(checkpointer: Any, script: Script = SEED) -> Any:
    """``START -> bot``: the bot replies with the script's text for the current turn."""

    def bot(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(script.reply(_turn_of(state)))]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=checkpointer)


#: Every fourth answer of :func:`noisy_chat_graph` is this large: objects of its own.
NOISY_BIG_EVERY, NOISY_BIG_BYTES = 4, 48 * 1024


def noise(n: int, rng: random.Random) -> str:
    """``n`` characters that do not compress (base64 of random bytes)."""
    return base64.b64encode(rng.randbytes(n)).decode()[:n]


def noisy_chat_graph(checkpointer: Any, seed: int, big: int = NOISY_BIG_BYTES) -> Any:
    """``START -> bot``: answers that do not compress, every fourth one ``big`` characters.

    Values travel as objects embedded in manifests or stored alone (a big
    answer: parts of its own), which is what a replica receives out of order.
    """
    rng = random.Random(seed)

    def bot(state: MessagesState) -> dict[str, Any]:
        n = len(state["messages"])
        size = big if n % (2 * NOISY_BIG_EVERY) == 1 else 600
        return {"messages": [AIMessage(noise(size, rng), id=f"ai-{n}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    return builder.compile(checkpointer=checkpointer)


#: :func:`noisy_agent_graph`'s workers a turn: one superstep, one ``put_writes`` each.
NOISY_WORKERS = 3


class NoisyAgentState(MessagesState):
    """:func:`noisy_agent_graph`'s state: the chat and the workers' notes (a reducer)."""

    notes: Annotated[list[str], operator.add]


class NoisyTask(MessagesState):
    """What a ``Send`` hands one of :func:`noisy_agent_graph`'s workers."""

    task: int


def noisy_agent_graph(checkpointer: Any, seed: int, big: int = NOISY_BIG_BYTES) -> Any:
    """A subgraph, an interrupt and parallel writes, with answers that do not compress.

    ``START -> plan -> Send to NOISY_WORKERS workers -> review -> answer``.
    The workers run in one superstep and each appends a note to the same
    reducer channel (several ``put_writes`` a step). ``review`` is a subgraph
    (its checkpoints in a namespace of their own) whose second node calls
    :func:`langgraph.types.interrupt`: every turn is two invocations, the
    input and then ``Command(resume=...)``. Every other turn's plan is
    ``big`` characters (parts of its own). Each text is drawn from a
    generator seeded by ``seed``, the turn and the node, so a node that
    runs again on resume writes the same.
    """

    def text(state: MessagesState, node: str, size: int) -> str:
        return noise(size, random.Random(f"{seed}/{_turn_of(state)}/{node}"))

    def draft(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(text(state, "draft", 500), id=f"draft-{_turn_of(state)}")]}

    def ask(state: MessagesState) -> dict[str, Any]:
        verdict = interrupt({"draft": state["messages"][-1].id})
        return {"messages": [AIMessage(f"review: {verdict}", id=f"review-{_turn_of(state)}")]}

    sub = StateGraph(MessagesState)
    sub.add_node("draft", draft)
    sub.add_node("ask", ask)
    sub.add_edge(START, "draft")
    sub.add_edge("draft", "ask")
    sub.add_edge("ask", END)

    def plan(state: NoisyAgentState) -> dict[str, Any]:
        size = big if _turn_of(state) % 2 == 1 else 600
        return {"messages": [AIMessage(text(state, "plan", size), id=f"plan-{_turn_of(state)}")]}

    def fan_out(state: NoisyAgentState) -> list[Send]:
        return [
            Send("worker", {"messages": state["messages"], "task": i}) for i in range(NOISY_WORKERS)
        ]

    def worker(state: NoisyTask) -> dict[str, Any]:
        return {"notes": [text(state, f"worker-{state['task']}", 300)]}

    def answer(state: NoisyAgentState) -> dict[str, Any]:
        return {"messages": [AIMessage(text(state, "answer", 600), id=f"answer-{_turn_of(state)}")]}

    builder = StateGraph(NoisyAgentState)
    builder.add_node("plan", plan)
    builder.add_node("worker", worker)
    builder.add_node("review", sub.compile())
    builder.add_node("answer", answer)
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", fan_out, ["worker"])
    builder.add_edge("worker", "review")
    builder.add_edge("review", "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=checkpointer)


def tool_turn_inputs(payload: str, call_id: str = "call-fetch-1") -> list[BaseMessage]:
    """A user request, the model's tool call and the tool's (large) result."""
    return [
        HumanMessage("fetch the report"),
        AIMessage("", tool_calls=[{"name": "fetch", "args": {"what": "report"}, "id": call_id}]),
        ToolMessage(payload, tool_call_id=call_id),
    ]


def large_payload(nbytes: int, seed: int = 3) -> str:
    """``nbytes`` of words from the seeded vocabulary (ASCII: characters are bytes)."""
    rng = random.Random(seed)
    vocab = vocabulary()
    chunk = words_text(rng, vocab, 1 << 20)
    reps = -(-nbytes // len(chunk))
    # Vary each MiB so no two chunks are equal.
    return "".join(f"{i:08d}" + chunk[8:] for i in range(reps))[:nbytes]


FANOUT = 8


class AgentState(MessagesState):
    """Supervisor state: the chat plus every worker result so far."""

    results: Annotated[list[str], operator.add]


class WorkerInput(MessagesState):
    """What a ``Send`` hands one worker."""

    task: int
    turn: int


def agent_graph(checkpointer: Any) -> Any:
    """Supervisor -> ``Send`` fan-out to 8 workers -> research subgraph -> answer."""

    def draft(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("draft: " + "d" * 300)]}

    def check(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("checked: " + "c" * 100)]}

    sub = StateGraph(MessagesState)
    sub.add_node("draft", draft)
    sub.add_node("check", check)
    sub.add_edge(START, "draft")
    sub.add_edge("draft", "check")
    sub.add_edge("check", END)
    research = sub.compile()

    def supervisor(state: AgentState) -> dict[str, Any]:
        turn = sum(1 for m in state["messages"] if m.type == "human") - 1
        return {"messages": [AIMessage(f"plan {turn}: split into {FANOUT} tasks")]}

    def fan_out(state: AgentState) -> list[Send]:
        turn = sum(1 for m in state["messages"] if m.type == "human") - 1
        return [Send("worker", {"messages": [], "task": i, "turn": turn}) for i in range(FANOUT)]

    def worker(state: WorkerInput) -> dict[str, Any]:
        return {"results": [f"result {state['turn']}-{state['task']} " + "r" * 200]}

    def answer(state: AgentState) -> dict[str, Any]:
        turn = sum(1 for m in state["messages"] if m.type == "human") - 1
        return {"messages": [AIMessage(f"answer {turn}: {len(state['results'])} results")]}

    builder = StateGraph(AgentState)
    builder.add_node("supervisor", supervisor)
    builder.add_node("worker", worker)
    builder.add_node("research", research)
    builder.add_node("answer", answer)
    builder.add_edge(START, "supervisor")
    builder.add_conditional_edges("supervisor", fan_out, ["worker"])
    builder.add_edge("worker", "research")
    builder.add_edge("research", "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=checkpointer)
