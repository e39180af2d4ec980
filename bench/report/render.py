"""Fill ``template.md`` with the figures of :func:`bench.report.figures.figures`.

:func:`render` decides which blocks of the template the document uses, in
which order, and formats the tables; the words are the template's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

TEMPLATE = Path(__file__).with_name("template.md")

_BLOCK = re.compile(r"^<!-- block: ([\w.]+) -->$", re.MULTILINE)


class Template:
    """The named blocks of a template file (see its opening paragraph)."""

    def __init__(self, text: str) -> None:
        parts = _BLOCK.split(text)
        names, bodies = parts[1::2], parts[2::2]
        self.blocks = {name: body.strip("\n") for name, body in zip(names, bodies, strict=True)}
        if len(self.blocks) < len(names):
            raise ValueError(f"a block name appears twice in the template: {sorted(names)}")

    @classmethod
    def load(cls, path: Path = TEMPLATE) -> Template:
        """The template at ``path`` (by default ``template.md`` beside this module)."""
        return cls(path.read_text())

    def fill(self, name: str, **figures: Any) -> str:
        """Block ``name`` with its placeholders replaced by ``figures``."""
        return self.blocks[name].format(**figures)


def fmt(x: Any, digits: int = 3) -> str:
    """A table cell: 3 significant digits, thousands separated, yes/**no**, ``-`` for none."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "**no**"
    if isinstance(x, float):
        if math.isnan(x):
            return "-"
        return f"{x:.{digits}g}" if abs(x) < 1000 else f"{x:,.0f}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x)


def table(header: list[str], rows: Iterable[list[Any]]) -> str:
    """A Markdown table, every cell through :func:`fmt`."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        out.append("| " + " | ".join(fmt(c) for c in r) + " |")
    return "\n".join(out)


def render(f: dict[str, Any], t: Template | None = None) -> str:
    """The text of ``docs/benchmarks.md`` from the report's figures."""
    t = t or Template.load()
    out: list[str] = []
    intro = f["intro"]
    reruns = "".join("\n" + t.fill("intro.rerun", **r) for r in intro["reruns"])
    out.append(t.fill("intro", **(intro | {"reruns": reruns})))
    if intro["flag"] == "seaweedfs":
        out.append(t.fill("intro.seaweedfs"))
    out.append(t.fill("intro.reproduce", flag=intro["flag"]))
    out += _headlines(f["headlines"], t)
    out += _targets(f["targets"], t)

    costs = f["costs"]
    if costs is not None:
        out += [t.fill("costs", **costs), table(*costs["table"])]
        if costs["durability"] is not None:
            out += [t.fill("costs.durability"), table(*costs["durability"])]
        out += [t.fill("costs.prices"), table(*costs["prices"])]

    for w, chat in f["chat"].items():
        if chat is None:
            continue
        out += [t.fill(f"chat.{w}", chat_turns=chat["chat_turns"]), table(*chat["table"])]
        if chat["ours_turn"]:
            out.append(t.fill("chat.ours_turn", **chat["ours_turn"]))
        out.append(t.fill(f"chat.{w}.plots"))

    long = f["long_thread"]
    if long is not None:
        out += [t.fill("long_thread", **long), table(*long["table"]), t.fill("long_thread.plot")]

    large = f["large_value"]
    if large is not None:
        out += [t.fill("large_value", **large), table(*large["table"])]

    agent = f["agent"]
    if agent is not None:
        out += [t.fill("agent", **agent), table(*agent["table"])]
        if agent["ours_by_op"]:
            out.append(t.fill("agent.ours", by_op=agent["ours_by_op"]))

    delete = f["delete"]
    if delete is not None:
        out.append(t.fill("delete", **delete))
        for v in delete["verified"]:
            verdict = t.fill("delete.verify.ok" if v["ok"] else "delete.verify.failed")
            out.append(t.fill("delete.verify", **(v | {"verdict": verdict})))
        out.append(table(*delete["table"]))

    conc = f["concurrency"]
    if conc is not None:
        each = ", ".join(t.fill("concurrency.turns_each", turns=n) for n in conc["turns_each"])
        out += [t.fill("concurrency", **(conc | {"turns_each": each})), table(*conc["table"])]

    ops = f["operations"]
    if ops is not None:
        out += [t.fill("operations", **ops), table(*ops["jobs"])]
        if ops["migrate"] is not None:
            out += [t.fill("operations.migrate", **ops["migrate"]), table(*ops["migrate"]["table"])]
        out += [t.fill("operations.shards"), table(*ops["shards"]["table"])]
        out += [t.fill("operations.memory", **ops["memory"]), table(*ops["memory"]["table"])]

    rep = f["replicas"]
    if rep is not None:
        out += [t.fill("replicas", **rep), table(*rep["readers"])]
        if rep["agent"] is not None:
            out += [t.fill("replicas.agent", **rep["agent"]), table(*rep["agent"]["table"])]
        out += [t.fill("replicas.failover"), table(*rep["failovers"])]

    if f["failures"][1]:
        out += [t.fill("failures"), table(*f["failures"])]

    versions = f["versions"]
    out += [t.fill("versions"), table(*versions["table"])]
    out += [t.fill("versions.machine", **versions), t.fill("versions.shim")]
    return "\n\n".join(out) + "\n"


def _headlines(h: dict[str, Any], t: Template) -> list[str]:
    items = []
    if h["w1"]:
        items.append(t.fill("headline.w1", **h["w1"]))
    if h["w1b"]:
        items.append(t.fill("headline.w1b", **h["w1b"]))
    if h["w2"]:
        reached = "; ".join(t.fill("headline.w2.reached", **c) for c in h["w2"]["capped"])
        capped = t.fill("headline.w2.capped", reached=reached) if reached else ""
        items.append(t.fill("headline.w2", **(h["w2"] | {"capped": capped})))
    if h["w3"]:
        items.append(t.fill("headline.w3", **h["w3"]))
    if h["w5"]:
        w5 = h["w5"]
        neighbours = t.fill("headline.w5.untouched" if w5["untouched"] else "headline.w5.changed")
        items.append(t.fill("headline.w5", **w5, neighbours=neighbours))
    if h["w7"]:
        items.append(t.fill("headline.w7", **h["w7"]))
    return [t.fill("headlines", items="\n".join(items))] if items else []


def _targets(targets: list[dict[str, Any]], t: Template) -> list[str]:
    rows = [
        [
            x["target"],
            "-" if x["met"] is None else ("met" if x["met"] else "**not met**"),
            x["figure"],
            x["note"],
        ]
        for x in targets
    ]
    out = [t.fill("targets"), table(["target", "met", "figure", "note"], rows)]
    notes = [
        t.fill(
            "target.not_met", target=x["target"], figure=x["figure"], reason=_reason(x, t)
        ).rstrip()
        for x in targets
        if x["met"] is False
    ]
    return [*out, "\n".join(notes)] if notes else out


def _reason(target: dict[str, Any], t: Template) -> str:
    """The paragraph that explains a target not met, or "" when there is none."""
    if target.get("reason") is None:
        return ""
    key, f = target["reason"]
    name = f"reason.{key}"
    if key == "w3_peak":
        peak = f["postgres_peak"]
        return t.fill(name) + ("" if peak is None else " " + t.fill(f"{name}.postgres", peak=peak))
    if key == "w7_requests":
        control = f["control"]
        extra = "" if control is None else " " + t.fill(f"{name}.control", **control)
        return t.fill(name, **(f | {"control": extra}))
    if key == "w6_cpu":
        same = f.get("same_trip")
        same_trip = " " + t.fill(f"{name}.same_trip", **same) if same else ""
        costs = (
            t.fill(f"{name}.costs", **(f["costs"] | {"same_trip": same_trip})) + " "
            if f["costs"]
            else ""
        )
        per_turn = f["requests_per_turn"]
        return costs + t.fill(name, requests_per_turn=10 if per_turn is None else per_turn)
    return t.fill(name, **f)
