"""The targets for objstore-saver on S3: each met or not, with its figure.

A target is a row of the report's targets table: its label (with its
threshold), whether the run met it, the figure, and a note. A target not met
also names the reason paragraph of ``template.md`` that explains it
(``reason.<key>``) and the figures that paragraph quotes, taken from the same
run; they are computed only for a target not met.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.pricing import by_class
from bench.report import operations, replicas
from bench.report.results import ENCRYPTED, MIB, OURS, Results, ops

SAME_TRIP = "postgres-rtt"
"""PostgresSaver whose queries wait the S3 requests' injected round trip (workload 6)."""

Reason = tuple[str, dict[str, Any]] | None
"""A reason paragraph's key in the template and its figures; None: no paragraph."""

Add = Callable[..., None]
"""Adds a target row: name, met, figure, note and a :data:`Reason` maker (see :func:`targets`)."""

ENCRYPTED_BYTES_RATIO = 1.5
"""Encryption target: bytes written by workload 1's last turn, encrypted ÷ clear, at most this."""

CONTENTION = 1.2
"""Workload 6b: CPU per turn at 64 async conversations ÷ at one, at most this."""

PUT_OPERATIONS = frozenset({"PutObject", "put"})
"""A PUT in the meters' operation names (the proxy's, :class:`~objstore_saver.MeteredStore`'s)."""


def targets(d: Results) -> list[dict[str, Any]]:
    """Each target for objstore-saver on S3: met or not, with the figure.

    Every item has ``target``, ``met`` (None: not measurable in this run),
    ``figure`` and ``note``; one not met also has ``reason`` (a :data:`Reason`).
    """
    out: list[dict[str, Any]] = []

    def add(
        name: str,
        met: bool | None,
        figure: str,
        note: str = "",
        reason: Callable[[], Reason] | None = None,
    ) -> None:
        out.append({"target": name, "met": met, "figure": figure, "note": note})
        if met is False:
            out[-1]["reason"] = reason() if reason is not None else None

    w1 = d.ok("1", OURS)
    if w1:
        add("W1 total bytes ≤ 0.16 MiB", w1["total_mib"] <= 0.16, f"{w1['total_mib']:.4f} MiB")
        fl = w1.get("flatness")
        add(
            "W1 flatness ≤ 1.1",
            None if fl is None else fl <= 1.1,
            "-" if fl is None else f"{fl:.3f}",
            "needs 30 turns" if fl is None else "",
            reason=lambda: ("w1_flat", {}),
        )
    w1b = d.ok("1b", OURS)
    if w1b:
        add(
            "W1b bytes ≤ 4x raw new-message bytes",
            w1b["bytes_over_raw"] <= 4,
            f"{w1b['bytes_over_raw']:.2f}x",
            reason=lambda: _w1b_bytes(d),
        )
        fl = w1b.get("flatness")
        add(
            "W1b flat across turns (turns 25-29 / 5-9 ≤ 1.1)",
            None if fl is None else fl <= 1.1,
            "-" if fl is None else f"{fl:.3f}",
            reason=lambda: ("w1_flat", {}),
        )
    _long_targets(d, add)
    flat_thread_targets(d, add)
    w3 = d.ok("3", OURS)
    if w3:
        add(
            "W3 no body over 2 MiB",
            w3["largest_body"] <= 2 * MIB,
            f"largest {w3['largest_body'] / MIB:.2f} MiB",
        )
        add(
            "W3 peak memory < 3x the value",
            w3["peak_over_payload"] < 3,
            f"{w3['peak_over_payload']:.2f}x of {w3['payload_bytes'] / MIB:.0f} MiB",
            "tracemalloc peak of the turn",
            reason=lambda: _w3_peak(d),
        )
    for name, where in ((OURS, ""), ("objstore-local", " (local directory)")):
        w6b = d.ok("6b", name)
        if not (w6b and "1" in w6b and "64" in w6b):
            continue
        one, many = w6b["1"], w6b["64"]
        ratio = many["cpu_s_per_turn"] / one["cpu_s_per_turn"]
        rates = many["turns_per_s"] / one["turns_per_s"]
        add(
            f"W6 CPU per turn at 64 async conversations ≤ {CONTENTION}x one{where}",
            ratio <= CONTENTION,
            f"{ratio:.2f}x",
            "; ".join(n for n in (f"turns/s at 64 ÷ one: {rates:.1f}x", _repeats_note(w6b)) if n),
            reason=lambda w6b=w6b: _w6_contention(d, w6b),
        )
    for w, where in (("6a", "8 OS threads"), ("6b", "64 async")):
        us, same = cpu_per_turn(d, w, OURS), cpu_per_turn(d, w, SAME_TRIP)
        if not (us and same):
            continue
        pg = cpu_per_turn(d, w, "postgres")
        loopback = f"against PostgresSaver on loopback: {us / pg:.2f}x" if pg else ""
        rounds = _rounds_note(d.ok(w, OURS), d.ok(w, SAME_TRIP)) if w == "6a" else ""
        add(
            f"W6 CPU per turn ≤ 1.0x PostgresSaver with the same round trip ({where})",
            us / same <= 1.0,
            f"{us / same:.2f}x",
            "; ".join(n for n in (loopback, rounds) if n),
            reason=lambda w=w: _w6_cpu(d, w),
        )
    encryption_targets(d, add)
    operations.add_targets(d, add)
    replicas.add_targets(d, add)
    return out


def encryption_targets(d: Results, add: Add) -> None:
    """The encryption targets: objstore-saver on S3 encrypted against in clear, one run.

    From workload 1 (when it has a row in clear): bytes written by the last
    turn at most :data:`ENCRYPTED_BYTES_RATIO` times those in clear; the
    same class A requests on every turn after the first, and the first
    exactly one PUT more (the thread's key object); CPU per turn, reported
    with no threshold, as for workloads 6a and 6b when both savers have rows
    there. Turns are counted from 1, as everywhere in the report.
    A run without the encrypted saver's row of workload 1 (an older results
    document, or one that ran without it) says "not measured".
    """
    clear = d.ok("1", OURS)
    if clear is None:
        return
    enc = d.ok("1", ENCRYPTED)
    last = len(clear["turns"])
    names = (
        f"W1 encrypted bytes at turn {last} ≤ {ENCRYPTED_BYTES_RATIO}x in clear",
        "W1 encrypted: the same class A requests on every turn but the first, "
        "which has one PUT more",
        "W1 encrypted CPU per turn ÷ in clear (no threshold)",
    )
    if enc is None:
        why = "failed, see Failures" if ENCRYPTED in d.rows("1") else f"no {ENCRYPTED} row"
        for name in names:
            add(name, None, "not measured", f"{why} in this run")
        return
    add(names[0], *_encrypted_bytes(clear, enc))
    add(names[1], *_encrypted_requests(clear, enc))
    c, e = clear.get("cpu_s_per_turn"), enc.get("cpu_s_per_turn")
    if c and e:
        add(
            names[2],
            None,
            f"{e / c:.2f}x",
            f"{e * 1000:.1f} ms vs {c * 1000:.1f} ms of process CPU per turn "
            "(the chat's and its durability runs' turns)",
        )
    else:
        add(names[2], None, "not measured", "workload 1's rows of this run have no CPU")
    threads = cpu_per_turn(d, "6a", ENCRYPTED), cpu_per_turn(d, "6a", OURS)
    if threads[0] and threads[1]:
        add(
            f"W6a encrypted CPU per turn ÷ in clear ({d.sizes['os_threads']} OS threads, "
            "no threshold)",
            None,
            f"{threads[0] / threads[1]:.2f}x",
            _rounds_note(d.ok("6a", ENCRYPTED) or {}, d.ok("6a", OURS) or {}),
        )
    n, ratio = _async_cpu_ratio(d.ok("6b", ENCRYPTED), d.ok("6b", OURS))
    if ratio is not None:
        add(
            f"W6b encrypted CPU per turn ÷ in clear ({n} async conversations, no threshold)",
            None,
            ratio,
        )


def _encrypted_bytes(clear: dict[str, Any], enc: dict[str, Any]) -> tuple[bool | None, str, str]:
    """Met, figure and note of the bytes target: the last turn's bytes, encrypted ÷ clear."""
    c, e = clear["turns"][-1], enc["turns"][-1]
    if c["turn"] != e["turn"] or not c["bytes_written"]:
        return None, "-", f"last turns differ: {e['turn'] + 1} vs {c['turn'] + 1}"
    ratio = e["bytes_written"] / c["bytes_written"]
    whole = enc["total_bytes_written"] / clear["total_bytes_written"]
    return (
        ratio <= ENCRYPTED_BYTES_RATIO,
        f"{ratio:.2f}x ({e['bytes_written']:,} vs {c['bytes_written']:,} bytes)",
        f"the whole chat {whole:.2f}x",
    )


def _encrypted_requests(clear: dict[str, Any], enc: dict[str, Any]) -> tuple[bool | None, str, str]:
    """Met, figure and note of the requests target, turn by turn of workload 1.

    Met when the first turn encrypted has exactly one PUT more than in
    clear (every other class A operation alike), and every later turn the
    same class A requests. The figure names the turns that differ; the note,
    the class B (GET) requests when they differ.
    """
    c_turns = {t["turn"]: t["requests"] for t in clear["turns"]}
    e_turns = {t["turn"]: t["requests"] for t in enc["turns"]}
    if set(c_turns) != set(e_turns) or 0 not in c_turns:
        return None, "-", f"turns differ: {len(e_turns)} encrypted vs {len(c_turns)} in clear"
    later = sorted(t for t in c_turns if t)
    c_a = {t: by_class(c_turns[t])[0] for t in later}
    e_a = {t: by_class(e_turns[t])[0] for t in later}
    differ = [t for t in later if e_a[t] != c_a[t]]
    # The first turn's class A requests by operation (GETs are class B: noted below).
    extra = {
        op: k
        for op in set(c_turns[0]) | set(e_turns[0])
        if by_class({op: 1})[0] and (k := e_turns[0].get(op, 0) - c_turns[0].get(op, 0))
    }
    first_ok = len(extra) == 1 and any(extra.get(op) == 1 for op in PUT_OPERATIONS)
    c0, e0 = by_class(c_turns[0])[0], by_class(e_turns[0])[0]
    if differ:
        shown = ", ".join(f"turn {t + 1}: {e_a[t]:g} vs {c_a[t]:g}" for t in differ[:5])
        more = f" and {len(differ) - 5} more" if len(differ) > 5 else ""
        figure = f"class A differs on {len(differ)} of {len(later)} turns ({shown}{more})"
    else:
        per_turn = "/".join(f"{a:g}" for a in sorted(set(c_a.values())))
        figure = f"{per_turn} class A per turn on turns 2-{len(c_turns)}"
    figure += f"; turn 1: {e0:g} vs {c0:g}"
    notes = []
    if not first_ok:
        notes.append(f"turn 1 encrypted minus clear: {_ops(extra)}")
    c_b = sum(by_class(c_turns[t])[1] for t in later) / max(len(later), 1)
    e_b = sum(by_class(e_turns[t])[1] for t in later) / max(len(later), 1)
    if c_b != e_b:
        notes.append(f"class B per turn after turn 1: {e_b:.2f} vs {c_b:.2f}")
    c0_b, e0_b = by_class(c_turns[0])[1], by_class(e_turns[0])[1]
    if c0_b != e0_b:
        notes.append(f"class B on turn 1: {e0_b:g} vs {c0_b:g}")
    return first_ok and not differ, figure, "; ".join(notes)


def _ops(requests: dict[str, int]) -> str:
    """Requests by operation, ``"PutObject +1"``; ``none`` when there are none."""
    return ", ".join(f"{op} {n:+d}" for op, n in sorted(requests.items())) or "none"


def _async_cpu_ratio(
    enc: dict[str, Any] | None, clear: dict[str, Any] | None
) -> tuple[str, str | None]:
    """Workload 6b's CPU per turn, encrypted ÷ clear, at the most conversations both ran.

    Returns the conversation count and the ratio (None when not measurable).
    """
    if not (enc and clear):
        return "", None
    common = [k for k in enc if k.isdigit() and k in clear]
    for n in sorted(common, key=int, reverse=True):
        e, c = enc[n].get("cpu_s_per_turn"), clear[n].get("cpu_s_per_turn")
        if e and c:
            return n, f"{e / c:.2f}x"
    return "", None


def cpu_per_turn(d: Results, w: str, name: str) -> float | None:
    """CPU seconds per turn of a saver in workload 6a, or in 6b at 64 conversations."""
    row = d.ok(w, name)
    if row is not None and w == "6b":
        row = row.get("64")
    return row.get("cpu_s_per_turn") if row else None


def _ratios_note(over: list[Any], under: list[Any], what: str, each: str) -> str:
    """``what`` then each pair's ratio (formatted by ``each``), when there are two or more."""
    ratios = [x / y for x, y in zip(over, under, strict=False) if x and y]
    if len(ratios) < 2:
        return ""
    return what.format(n=len(ratios)) + ", ".join(each.format(x) for x in ratios)


def _repeats_note(w6b: dict[str, Any]) -> str:
    """The 64-against-1 ratio of each repetition of workload 6b, when it was repeated."""
    return _ratios_note(
        w6b["64"].get("turns_per_s_repeats") or [],
        w6b["1"].get("turns_per_s_repeats") or [],
        "repeated {n} times, savers interleaved; each: ",
        "{:.1f}x",
    )


def _rounds_note(us: dict[str, Any], pg: dict[str, Any]) -> str:
    """The ratio of each round of workload 6a (savers interleaved), when it ran in rounds."""
    return _ratios_note(
        us.get("cpu_s_per_turn_rounds") or [],
        pg.get("cpu_s_per_turn_rounds") or [],
        "savers interleaved in {n} rounds; the rounds' ratios ",
        "{:.2f}",
    )


def _long_targets(d: Results, add: Add) -> None:
    w2 = d.ok("2", OURS)
    if w2 and len(w2["points"]) == 1:
        only = next(iter(w2["points"]))
        add(
            "W2 lookup requests and latency flat over the thread",
            None,
            "-",
            f"only turn {only} reached within the time cap ({w2['turns_done']} turns)",
        )
    if w2 and len(w2["points"]) >= 2:
        pts = {int(k): v for k, v in w2["points"].items()}
        first, last = min(pts), max(pts)
        la, lb = pts[first]["lookup"]["total_requests"], pts[last]["lookup"]["total_requests"]
        reached = f"turn {last}" + ("" if last >= 1000 else " (largest turn reached)")
        add(
            f"W2 lookup requests equal at turn {first} and {last}",
            la == lb,
            f"{la} vs {lb} at {reached}",
        )
        if "invoke" in pts[first] and "invoke" in pts[last]:
            ia, ib = pts[first]["invoke"]["wall_s"], pts[last]["invoke"]["wall_s"]
            sa, sb = pts[first]["invoke"]["server_s"], pts[last]["invoke"]["server_s"]
            memory = (d.ok("2", "inmemory") or {}).get("points", {})
            beside = [memory.get(str(n), {}).get("invoke", {}).get("wall_s") for n in (first, last)]
            langgraph = (
                f"InMemorySaver's turn on the same thread: {beside[1] * 1000:.0f} vs "
                f"{beside[0] * 1000:.0f} ms (LangGraph's own work over the history); "
                if None not in beside
                else ""
            )
            add(
                f"W2 turn latency at {last} ÷ turn {first} (no threshold: the CPU row below is the "
                "target)",
                None,
                f"{ib * 1000:.0f} ms vs {ia * 1000:.0f} ms ({ib / ia:.2f}x)",
                f"{langgraph}the S3 server's time in the turn {sb * 1000:.0f} vs "
                f"{sa * 1000:.0f} ms",
            )


LONG_BYTES_RATIO = 1.1
"""Workload 2: mean bytes a turn over turns 951-1000 ÷ over turns 11-60, at most this."""
LARGEST_TURN = 256_000
"""Workload 2: bytes written by any one turn, at most this (256 KB)."""
LONG_CPU_RATIO = 1.2
"""Workload 2: (CPU a turn ÷ InMemorySaver's) at turn 1000 ÷ the same at turn 10, at most this."""


def flat_thread_targets(d: Results, add: Add) -> None:
    """Workload 2's long thread stays flat: bytes a turn, the largest turn, CPU over LangGraph's.

    Bytes and CPU come from the first objstore-saver row that played all
    1,000 turns (S3 first; the local directory writes the same bodies).
    """
    full = [s for s in (OURS, "objstore-local") if (r := d.ok("2", s)) and r["turns_done"] >= 1000]
    if not full:
        _cold_resume_target(d, add)
        return
    w2, where = d.ok("2", full[0]), "" if full[0] == OURS else ", local directory"
    written = w2["bytes_per_turn"]
    early, late = sum(written[10:60]) / 50, sum(written[950:1000]) / 50
    add(
        f"W2 bytes a turn over turns 951-1000 ≤ {LONG_BYTES_RATIO}x turns 11-60",
        late <= LONG_BYTES_RATIO * early,
        f"{late / early:.3f}x ({late:,.0f} vs {early:,.0f} bytes)",
        f"merges included{where}",
        reason=lambda: ("w2_bytes", {"largest": _largest_turns(written)}),
    )
    top = max(written)
    add(
        "W2 no turn writes more than 256 KB",
        top <= LARGEST_TURN,
        f"largest {top / 1000:.1f} KB (turn {written.index(top) + 1})",
        f"1,000 turns{where}",
    )
    ratio = _cpu_over_memory(w2, d.ok("2", "inmemory"))
    if ratio is not None:
        growth = ratio["1000"] / ratio["10"]
        add(
            f"W2 CPU a turn over InMemorySaver's at turn 1000 ≤ {LONG_CPU_RATIO}x at turn 10",
            growth <= LONG_CPU_RATIO,
            f"{growth:.2f}x ({ratio['1000']:.2f}x vs {ratio['10']:.2f}x)",
            "this process's CPU for the whole turn; LangGraph itself handles the whole "
            f"history{where}",
        )
    _cold_resume_target(d, add)


def _cold_resume_target(d: Results, add: Add) -> None:
    """The cold resume of workload 2's thread on S3, reported without a threshold."""
    ours = d.ok("2", OURS)
    cold = ours.get("cold_resume") if ours else None
    if cold:
        add(
            f"W2 cold resume at turn {ours['turns_done']:,} (no threshold)",
            None,
            f"{cold['total_requests']} requests ({ops(cold['requests'])}), "
            f"{cold['bytes_received'] / 1024:.0f} KiB read, {cold['wall_s'] * 1000:.0f} ms",
            f"a fresh saver's latest read, {d.sizes['delay_ms']} ms a request",
        )


def _cpu_over_memory(
    row: dict[str, Any] | None, memory: dict[str, Any] | None
) -> dict[str, float] | None:
    """A saver's CPU a turn ÷ InMemorySaver's at turns 10 and 1000 (None: not both reached)."""
    if not (row and memory):
        return None
    ratio = {}
    for n in ("10", "1000"):
        turns = [r["points"].get(n, {}).get("invoke", {}).get("cpu_s") for r in (row, memory)]
        if None in turns:
            return None
        ratio[n] = turns[0] / turns[1]
    return ratio


def _largest_turns(written: list[int]) -> str:
    """The five largest turns of a long thread, as "turn: KB" items."""
    top = sorted(range(len(written)), key=lambda i: -written[i])[:5]
    return ", ".join(f"{i + 1}: {written[i] / 1000:.1f} KB" for i in sorted(top))


def _w1b_bytes(d: Results) -> Reason:
    a, b = d.ok("1", OURS), d.ok("1b", OURS)
    if not (a and b):
        return None
    return (
        "w1b_bytes",
        {
            "kib_per_turn": b["total_bytes_written"] / len(b["turns"]) / 1024,
            "raw_kib_per_turn": b["raw_new_message_bytes"] / len(b["turns"]) / 1024,
            "seed_kib_per_turn": a["total_bytes_written"] / len(a["turns"]) / 1024,
        },
    )


def _w3_peak(d: Results) -> Reason:
    pg = d.ok("3", "postgres")
    return ("w3_peak", {"postgres_peak": pg["peak_over_payload"] if pg else None})


def _w6_contention(d: Results, w6b: dict[str, Any]) -> Reason:
    one, many = w6b["1"], w6b["64"]
    return (
        "w6_contention",
        {
            "cpu_ms_1": one["cpu_s_per_turn"] * 1000,
            "cpu_ms_64": many["cpu_s_per_turn"] * 1000,
            "cores": many["cpu_s_per_turn"] * many["turns_per_s"],
            "rate_1": one["turns_per_s"],
            "rate_64": many["turns_per_s"],
            "cpus": d.doc["machine"]["cpus"],
        },
    )


def _w6_cpu(d: Results, w: str) -> Reason:
    w1 = d.ok("1", OURS)
    us, pg, mem = (cpu_per_turn(d, w, name) for name in (OURS, "postgres", "inmemory"))
    same = cpu_per_turn(d, w, SAME_TRIP)
    return (
        "w6_cpu",
        {
            "requests_per_turn": w1["total_requests"] / len(w1["turns"]) if w1 else None,
            "costs": (
                {"ours_ms": us * 1000, "postgres_ms": pg * 1000, "inmemory_ms": mem * 1000}
                if us and pg and mem
                else None
            ),
            "same_trip": {"same_ms": same * 1000} if same else None,
        },
    )
