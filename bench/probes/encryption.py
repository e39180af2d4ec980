"""What client-side encryption costs a chat: requests, bytes and CPU per turn, sealed vs clear.

``python -m bench.probes.encryption --turns 40 [--store local|s3] [--json PATH]``
plays workload 1's chat (the seed chat of ``python -m bench.seed_chat``) twice,
each time on a fresh store counted by :class:`~objstore_saver.MeteredStore`:
once in clear (``client_encryption=False``) and once encrypted
(``ClientEncryption.of(LocalMasterKey(<32 random bytes>))``), so the
environment's ``OBJSTORE_SAVER_ENCRYPTION_KEY`` plays no part. The store is a
temporary local directory, or with ``--store s3`` a bucket of its own on a moto
server started in a child process (its CPU is not counted here).

It prints, per turn and mode, class A requests (PUT, LIST, DELETE, as in
``bench/pricing.py``), GET requests (class B) and bytes written (PUT bodies);
then a markdown table of the two modes and their ratio (encrypted / clear):
requests per turn after turn 0 and of turn 0 alone, bytes written by the last
turn, bytes stored after it (every object listed from the raw store, the
thread's key object included), and CPU per turn (``time.process_time`` over the
turns after a warm-up of 5; noisy, unlike the counts, which are the same on
every machine). Last, the two targets and whether they hold: bytes at the last
turn at most 1.5 times those in clear (written and stored), and the same
requests on every turn; an encrypted thread's turn 0 has exactly one more
PUT, the create-only write of its key object ``keys/threads/<T>``.
``--json PATH`` also writes the full report there (``-`` for standard output).
The exit status is 1 when a target does not hold.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langgraph.checkpoint.base import SerializerProtocol

from bench.graphs import SEED, Script, chat_graph
from bench.pricing import by_class
from bench.probes import stored_objects, write_json
from bench.savers import ObjstoreS3, ObjstoreS3Encrypted
from objstore_saver import Boto3S3Store, LocalStore, MeteredStore, ObjectStoreSaver
from objstore_saver.crypto.names import KEY_PREFIX
from objstore_saver.storage import ObjectStore

#: Turns played before the CPU clock starts.
WARMUP_TURNS = 5
#: Target: bytes of the last turn, encrypted over clear, at most this.
BYTES_RATIO_TARGET = 1.5
MODES = ("clear", "encrypted", "serializer")


@contextmanager
def _stores(kind: str) -> Iterator[dict[str, ObjectStore]]:
    """A fresh, empty raw store per mode: local directories, or buckets on one moto server."""
    if kind == "local":
        with tempfile.TemporaryDirectory(prefix="encryption-probe-") as root:
            yield {m: LocalStore(os.path.join(root, m), fsync=False) for m in MODES}
        return
    import boto3

    from bench.probes.profile_turn import moto_server

    with moto_server() as url:
        client = boto3.client(
            "s3",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        stores: dict[str, ObjectStore] = {}
        for m in MODES:
            client.create_bucket(Bucket=f"encryption-{m}")
            stores[m] = Boto3S3Store.from_client(client, f"encryption-{m}")
        yield stores


def _stored(raw: ObjectStore) -> dict[str, int]:
    """Objects and bytes in the raw store, and those of key objects among them."""
    listed = stored_objects(raw)
    keys_ = [o for o in listed if o.key.startswith(KEY_PREFIX)]
    return {
        "objects": len(listed),
        "bytes": sum(o.size for o in listed),
        "key_objects": len(keys_),
        "key_bytes": sum(o.size for o in keys_),
    }


def play(
    raw: ObjectStore,
    turns: int,
    encrypted: bool,
    script: Script = SEED,
    serde: SerializerProtocol | None = None,
) -> dict[str, Any]:
    """``turns`` turns of ``script``'s chat on ``raw`` in one mode; counts of each turn.

    ``serde`` replaces the saver's serializer (LangGraph's ``EncryptedSerializer``
    for the comparison row).
    """
    store = MeteredStore(raw)
    settings = (ObjstoreS3Encrypted if encrypted else ObjstoreS3)().client_encryption()
    config = {"configurable": {"thread_id": "seed-chat"}}
    rows: list[dict[str, Any]] = []
    cpu_start = None
    with ObjectStoreSaver(store, client_encryption=settings, serde=serde) as saver:
        graph = chat_graph(saver, script)
        for t in range(turns):
            if t == WARMUP_TURNS:
                cpu_start = time.process_time()
            store.reset()
            graph.invoke({"messages": script.inputs(t)}, config)
            m = store.snapshot()
            class_a, _ = by_class(m.requests)
            rows.append(
                {
                    "turn": t,
                    "class_a": int(class_a),
                    "get": m.get_requests,
                    "bytes_written": m.bytes_sent,
                    "requests": m.requests,
                }
            )
        cpu = time.process_time() - cpu_start if cpu_start is not None else None
        messages = graph.get_state(config).values["messages"]
    later = rows[1:]
    return {
        "mode": "serializer" if serde is not None else "encrypted" if encrypted else "clear",
        "turns": rows,
        "complete": len(messages) == 2 * turns + 1,
        "stored": _stored(raw),
        "bytes_written_last_turn": rows[-1]["bytes_written"],
        "bytes_written_total": sum(r["bytes_written"] for r in rows),
        "turn0_requests": rows[0]["requests"],
        "class_a_per_turn": round(sum(r["class_a"] for r in later) / len(later), 3)
        if later
        else None,
        "get_per_turn": round(sum(r["get"] for r in later) / len(later), 3) if later else None,
        "cpu_ms_per_turn": round(cpu * 1000 / (turns - WARMUP_TURNS), 3)
        if cpu is not None
        else None,
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(b / a, 3) if a and b is not None else None


def compare(clear: dict[str, Any], enc: dict[str, Any]) -> dict[str, Any]:
    """Ratios (encrypted / clear) and the two targets."""
    differing = [
        {"turn": c["turn"], "clear": c["requests"], "encrypted": e["requests"]}
        for c, e in zip(clear["turns"][1:], enc["turns"][1:], strict=True)
        if c["requests"] != e["requests"]
    ]
    c0, e0 = clear["turn0_requests"], enc["turn0_requests"]
    turn0_extra = {op: e0[op] - c0[op] for op in c0 if e0[op] != c0[op]}
    written = _ratio(clear["bytes_written_last_turn"], enc["bytes_written_last_turn"])
    stored = _ratio(clear["stored"]["bytes"], enc["stored"]["bytes"])
    return {
        "bytes_written_last_turn_ratio": written,
        "bytes_stored_ratio": stored,
        "bytes_written_total_ratio": _ratio(
            clear["bytes_written_total"], enc["bytes_written_total"]
        ),
        "cpu_per_turn_ratio": _ratio(clear["cpu_ms_per_turn"], enc["cpu_ms_per_turn"]),
        "turn0_extra_requests": turn0_extra,
        "turns_with_other_requests": differing,
        "target_bytes_met": written is not None
        and stored is not None
        and written <= BYTES_RATIO_TARGET
        and stored <= BYTES_RATIO_TARGET,
        "target_requests_met": not differing and turn0_extra == {"put": 1},
    }


def run(turns: int, store: str = "local") -> dict[str, Any]:
    """Play the seed chat in clear and encrypted on fresh stores; the report of both."""
    if turns < 2:
        raise ValueError("--turns must be at least 2 (turn 0 is reported apart)")
    with _stores(store) as raws:
        clear = play(raws["clear"], turns, encrypted=False)
        enc = play(raws["encrypted"], turns, encrypted=True)
        serde = _serializer()
        serializer = (
            play(raws["serializer"], turns, encrypted=False, serde=serde) if serde else None
        )
    return {
        "turns": turns,
        "store": store,
        "warmup_turns": WARMUP_TURNS,
        "clear": clear,
        "encrypted": enc,
        "serializer": serializer,
        "comparison": compare(clear, enc),
    }


def _serializer() -> SerializerProtocol | None:
    """LangGraph's ``EncryptedSerializer`` (AES-EAX, a random nonce per value), a fresh key.

    None when ``pycryptodome`` is not installed: the report says the row is not measured.
    """
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    try:
        return EncryptedSerializer.from_pycryptodome_aes(key=os.urandom(32))
    except ImportError:
        return None


def _ops(requests: dict[str, int]) -> str:
    return ", ".join(f"{n} {op.upper()}" for op, n in requests.items() if n) or "none"


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:g}"


def render(report: dict[str, Any]) -> str:
    """The per-turn table, the comparison table and the targets, as markdown."""
    c, e, cmp = report["clear"], report["encrypted"], report["comparison"]
    n, last = report["turns"], report["turns"] - 1
    lines = [
        f"Seed chat, {n} turns (0-{last}), {report['store']} store.",
        "",
        "| turn | clear A | clear GET | clear bytes | enc. A | enc. GET | enc. bytes "
        "| bytes ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for rc, re_ in zip(c["turns"], e["turns"], strict=True):
        lines.append(
            f"| {rc['turn']} | {rc['class_a']} | {rc['get']} | {rc['bytes_written']} "
            f"| {re_['class_a']} | {re_['get']} | {re_['bytes_written']} "
            f"| {_fmt(_ratio(rc['bytes_written'], re_['bytes_written']))} |"
        )
    sc, se = c["stored"], e["stored"]
    lines += [
        "",
        "| | clear | encrypted | encrypted / clear |",
        "|---|---:|---:|---:|",
        f"| class A requests per turn, turns 1-{last} | {_fmt(c['class_a_per_turn'])} "
        f"| {_fmt(e['class_a_per_turn'])} "
        f"| {_fmt(_ratio(c['class_a_per_turn'], e['class_a_per_turn']))} |",
        f"| GET requests per turn, turns 1-{last} | {_fmt(c['get_per_turn'])} "
        f"| {_fmt(e['get_per_turn'])} | {_fmt(_ratio(c['get_per_turn'], e['get_per_turn']))} |",
        f"| requests of turn 0 | {_ops(c['turn0_requests'])} | {_ops(e['turn0_requests'])} | |",
        f"| bytes written by turn {last} (the last) | {c['bytes_written_last_turn']} "
        f"| {e['bytes_written_last_turn']} | {_fmt(cmp['bytes_written_last_turn_ratio'])} |",
        f"| bytes stored after turn {last} (objects) | {sc['bytes']} ({sc['objects']}) "
        f"| {se['bytes']} ({se['objects']}, {se['key_objects']} key object of "
        f"{se['key_bytes']} B) | {_fmt(cmp['bytes_stored_ratio'])} |",
        f"| bytes written, all turns | {c['bytes_written_total']} | {e['bytes_written_total']} "
        f"| {_fmt(cmp['bytes_written_total_ratio'])} |",
        f"| CPU ms per turn, turns {WARMUP_TURNS}-{last} (noisy) | {_fmt(c['cpu_ms_per_turn'])} "
        f"| {_fmt(e['cpu_ms_per_turn'])} | {_fmt(cmp['cpu_per_turn_ratio'])} |",
        f"| history complete | {c['complete']} | {e['complete']} | |",
        "",
        _serializer_line(report["serializer"], c, last),
        "",
    ]
    ok = {True: "met", False: "NOT MET"}
    lines.append(
        f"Target: bytes at turn {n} <= {BYTES_RATIO_TARGET}x in clear: "
        f"{ok[cmp['target_bytes_met']]} (written by the last turn "
        f"{_fmt(cmp['bytes_written_last_turn_ratio'])}x, stored "
        f"{_fmt(cmp['bytes_stored_ratio'])}x)."
    )
    differing = cmp["turns_with_other_requests"]
    lines.append(
        f"Target: the same requests per turn: {ok[cmp['target_requests_met']]} "
        f"(turns 1-{last}: {'the same on every turn' if not differing else 'differ'}; "
        f"turn 0: encrypted has {_ops(cmp['turn0_extra_requests'])} more, expected exactly "
        "1 PUT: the thread's key object keys/threads/<T>)."
    )
    for d in differing:
        lines.append(
            f"  turn {d['turn']}: clear {_ops(d['clear'])}; encrypted {_ops(d['encrypted'])}"
        )
    return "\n".join(lines)


def _serializer_line(s: dict[str, Any] | None, clear: dict[str, Any], last: int) -> str:
    """The comparison with LangGraph's ``EncryptedSerializer`` (or why it is missing)."""
    if s is None:
        return "LangGraph's EncryptedSerializer: not measured (pycryptodome is not installed)."
    written = s["bytes_written_last_turn"]
    ratio = _fmt(_ratio(clear["bytes_written_last_turn"], written))
    return (
        f"For comparison, LangGraph's EncryptedSerializer: turn {last} writes {written} bytes "
        f"({ratio}x in clear), {_fmt(s['class_a_per_turn'])} class A requests a turn."
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (1 when a target is not met)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.probes.encryption", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument(
        "--store",
        choices=("local", "s3"),
        default="local",
        help="a temporary directory, or buckets on a moto server in a child process",
    )
    parser.add_argument(
        "--json", metavar="PATH", help="also write the full report here (- for stdout)"
    )
    args = parser.parse_args(argv)
    report = run(args.turns, args.store)
    print(render(report))
    write_json(report, args.json)
    cmp = report["comparison"]
    return 0 if cmp["target_bytes_met"] and cmp["target_requests_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
