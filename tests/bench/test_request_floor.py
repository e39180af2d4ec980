"""The request floor of format version 2, as the benchmark probes count it.

Counts of requests, not timings: the same on every machine. Each probe
plays the seed chat (workload 1) on a local-directory store through
:class:`~objstore_saver.MeteredStore`.
"""

from __future__ import annotations

from bench import graphs, seed_chat
from bench.probes import cold_resume, replicas


def test_a_seed_chat_turn_is_one_put_per_write_call_and_one_list() -> None:
    report = seed_chat.run(30)
    # LangGraph calls put three times and put_writes twice a turn: five PUTs,
    # and one LIST finds the head and its writes. Seals and merges of the
    # messages list travel in the manifests, and so does the first turn's
    # input value (1.5 KB serialized), so no turn writes a sixth object.
    for row in report["turns"]:
        assert row["requests"]["put"] == 5, row
        assert row["requests"]["list"] == 1, row
        assert row["requests"]["get"] == 0, row
    assert report["total_mib"] <= 0.16


def test_long_messages_travel_in_the_manifests_too() -> None:
    report = seed_chat.run(30, graphs.realistic_script())
    # Workload 1b: every message is a value of its own (over 128 bytes
    # compressed), embedded in the manifest of the put that adds it.
    for row in report["turns"]:
        assert row["requests"] == {"put": 5, "get": 0, "list": 1, "delete": 0}, row
    assert report["total_mib"] <= 0.16
    assert report["flatness_25_29_over_5_9"] <= 1.1


def test_two_replicas_taking_turns_stay_at_the_floor() -> None:
    report = replicas.run(14)
    assert report["complete"]
    # Each turn starts on the replica that did not write the last one: the
    # head's manifest is read (class B), the writes stay at the floor.
    assert report["class_a_per_turn"] == 6.0, report["per_turn"]
    assert report["class_b_per_turn"] <= 2, report["per_turn"]


def test_a_cold_replica_resumes_sixty_turns_in_six_requests() -> None:
    report = cold_resume.run(60)
    assert report["complete"]
    # One LIST, the head manifest, and one manifest per segment of the 121
    # messages (64, 32, 16 and 8; the tail is in the head).
    assert report["requests"] == {"put": 0, "get": 5, "list": 1, "delete": 0}
