"""The benchmark's encrypted saver: its seed chat rows and the encryption targets they feed.

Workload 1 runs as ``python -m bench`` runs it (the registry's runner), for
objstore-saver on S3 in clear and encrypted, on moto behind the metering
proxy with no injected delay; the rows then go to the report's targets.
Counts, not timings: the CPU ratio is only checked to be there.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import os
from typing import Any

import pytest

from bench.report.results import ENCRYPTED, OURS, Results
from bench.report.targets import ENCRYPTED_BYTES_RATIO, targets
from bench.savers import ALL_SAVERS, Env, ObjstoreLocal, ObjstoreS3, ObjstoreS3Encrypted
from bench.workloads.registry import BY_ID
from bench.workloads.sizes import QUICK
from objstore_saver.crypto import KEY_ENV, KEYS_ENV
from objstore_saver.crypto.master_keys import master_keys_from_env

TURNS = 6
BYTES = f"W1 encrypted bytes at turn {TURNS} ≤ {ENCRYPTED_BYTES_RATIO}x in clear"
REQUESTS = (
    "W1 encrypted: the same class A requests on every turn but the first, which has one PUT more"
)
CPU = "W1 encrypted CPU per turn ÷ in clear (no threshold)"


def _doc(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A results document holding workload 1's rows (what :class:`Results` reads)."""
    specs = {s.name: s for s in ALL_SAVERS}
    return {
        "sizes": dataclasses.asdict(QUICK),
        "machine": {"s3_server": "moto"},
        "savers": {
            n: {"label": specs[n].label, "storage": "s3", "package": "objstore-saver"} for n in rows
        },
        "results": {"1": rows},
    }


def _encryption_targets(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The encryption targets of a results document, by target name."""
    return {t["target"]: t for t in targets(Results(doc)) if "encrypted" in t["target"]}


def test_the_encrypted_seed_chat_meets_the_encryption_targets(env: Env) -> None:
    sizes = dataclasses.replace(QUICK, chat_turns=TURNS, delay_ms=0.0)
    seed_chat = BY_ID["1"]
    assert [s.name for s in seed_chat.runs_on(ALL_SAVERS)][:2] == [OURS, ENCRYPTED]
    assert seed_chat.each_saver is not None
    specs = (ObjstoreS3(), ObjstoreS3Encrypted())
    rows = {s.name: seed_chat.each_saver(s, env, sizes, None) for s in specs}
    clear, enc = rows[OURS], rows[ENCRYPTED]
    assert enc["messages_stored"] == enc["messages_expected"] == 2 * TURNS + 1

    # Turn by turn: the same billed writes and listings by operation, but the
    # first turn's one PUT more (the key object keys/threads/<T>), and no GET
    # more. (GETs are compared as "no more": a clear run's turn 0 has been seen
    # to make one GET more than the encrypted run's, never the reverse.)
    def writes(requests: dict[str, int]) -> dict[str, int]:
        return {op: n for op, n in requests.items() if op != "GetObject" and n}

    def gets(turn: dict[str, Any]) -> int:
        return int(turn["requests"].get("GetObject", 0))

    for c, e in zip(clear["turns"][1:], enc["turns"][1:], strict=True):
        assert writes(e["requests"]) == writes(c["requests"]), (c["turn"], c, e)
        assert gets(e) <= gets(c), (c["turn"], c["requests"], e["requests"])
    first = writes(clear["turns"][0]["requests"])
    first["PutObject"] += 1
    assert writes(enc["turns"][0]["requests"]) == first
    assert gets(enc["turns"][0]) <= gets(clear["turns"][0])

    found = _encryption_targets(_doc(rows))
    assert list(found) == [BYTES, REQUESTS, CPU]
    assert found[BYTES]["met"] is True, found[BYTES]
    ratio = enc["turns"][-1]["bytes_written"] / clear["turns"][-1]["bytes_written"]
    assert 1 < ratio <= ENCRYPTED_BYTES_RATIO  # sealing adds a tag and an envelope
    assert found[BYTES]["figure"].startswith(f"{ratio:.2f}x")
    assert found[REQUESTS]["met"] is True, found[REQUESTS]
    assert found[REQUESTS]["figure"] == f"6 class A per turn on turns 2-{TURNS}; turn 1: 7 vs 6"
    assert found[CPU]["met"] is None and found[CPU]["figure"].endswith("x")

    # The targets catch a saver that sends more: one PUT more on a later
    # turn, or a first turn without (or with another) extra request.
    more = copy.deepcopy(rows)
    more[ENCRYPTED]["turns"][3]["requests"]["PutObject"] += 1
    missed = _encryption_targets(_doc(more))[REQUESTS]
    assert missed["met"] is False and "turn 4: 7 vs 6" in missed["figure"]
    for op, k in (("PutObject", 1), ("ListObjectsV2", 1), ("PutObject", -1)):
        other = copy.deepcopy(rows)
        first_turn = other[ENCRYPTED]["turns"][0]["requests"]
        first_turn[op] = first_turn.get(op, 0) + k
        assert _encryption_targets(_doc(other))[REQUESTS]["met"] is False, (op, k)
    # A GET (class B) more is not the target's, but the note says so.
    other = copy.deepcopy(rows)
    first_turn = other[ENCRYPTED]["turns"][0]["requests"]
    first_turn["GetObject"] = rows[OURS]["turns"][0]["requests"].get("GetObject", 0) + 1
    noted = _encryption_targets(_doc(other))[REQUESTS]
    assert noted["met"] is True and "class B on turn 1" in noted["note"], noted


def test_the_encrypted_saver_runs_where_encryption_may_change_a_figure() -> None:
    runs = {w: ENCRYPTED in [s.name for s in BY_ID[w].runs_on(ALL_SAVERS)] for w in BY_ID}
    assert runs == {
        "1": True,
        "1b": True,
        "2": False,  # and so its delete, workload 5
        "3": True,
        "4": True,
        "6a": True,
        "6b": True,
        "7": False,
        "8": False,  # encrypts within its own row (its clear and encrypted probes)
    }


def test_a_run_without_the_encrypted_saver_says_not_measured() -> None:
    rows = {
        OURS: {
            "turns": [{"turn": 0, "requests": {"PutObject": 5}, "bytes_written": 10}],
            "total_mib": 0.01,
            "total_bytes_written": 10,
        }
    }
    found = _encryption_targets(_doc(rows))
    assert list(found) == [
        f"W1 encrypted bytes at turn 1 ≤ {ENCRYPTED_BYTES_RATIO}x in clear",
        REQUESTS,
        CPU,
    ]
    for t in found.values():
        assert (t["met"], t["figure"]) == (None, "not measured")
        assert t["note"] == f"no {ENCRYPTED} row in this run"
    rows[ENCRYPTED] = {"error": "RuntimeError: boom"}
    failed = _encryption_targets(_doc(rows))
    assert {t["note"] for t in failed.values()} == {"failed, see Failures in this run"}


@pytest.mark.parametrize("spec", [ObjstoreS3(), ObjstoreLocal()], ids=lambda s: s.name)
def test_clear_rows_stay_clear_with_a_key_in_the_environment(
    spec: Any, env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A random local master key, base64 of 32 bytes, as an operator would set it.
    monkeypatch.delenv(KEYS_ENV, raising=False)
    monkeypatch.setenv(KEY_ENV, base64.b64encode(os.urandom(32)).decode())
    assert master_keys_from_env()  # the environment would encrypt a default saver
    with spec.open_sync(env) as handle:
        assert handle.saver.client_encryption is None
    with ObjstoreS3Encrypted().open_sync(env) as handle:
        assert handle.saver.client_encryption is not None
