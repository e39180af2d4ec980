"""What a turn costs: request classes, list prices, and the durability runs of workload 1."""

from __future__ import annotations

import dataclasses

import pytest

from bench import graphs
from bench.pricing import PRICE_LISTS, by_class, per_million_turns, request_class
from bench.savers import Env, ObjstoreS3
from bench.workloads.chat import DURABILITY_MODES, run_chat
from bench.workloads.sizes import QUICK


@pytest.mark.parametrize(
    ("operation", "kind"),
    [
        ("PutObject", "A"),
        ("ListObjectsV2", "A"),
        ("DeleteObjects", "A"),
        ("PutBucketVersioning", "A"),
        ("GetObject", "B"),
        ("HeadObject", "B"),
        ("GetBucketLocation", "B"),
        ("DeleteObject", "free"),
        ("put", "A"),
        ("get", "B"),
    ],
)
def test_operations_fall_in_the_providers_classes(operation: str, kind: str) -> None:
    assert request_class(operation) == kind


def test_an_unclassified_operation_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="'SelectObjectContent' has no request class"):
        request_class("SelectObjectContent")


def test_dollars_per_million_turns_at_each_price_list() -> None:
    turn = {"PutObject": 5, "ListObjectsV2": 1, "GetObject": 2, "DeleteObject": 3}
    assert by_class(turn) == (6, 2)
    dollars = per_million_turns(turn, sent_per_turn=10_000, received_per_turn=5_000)
    assert [p.name for p in PRICE_LISTS] == list(dollars)
    assert dollars["S3 Standard"] == pytest.approx(6 * 5.00 + 2 * 0.40)
    assert dollars["R2 Standard"] == pytest.approx(6 * 4.50 + 2 * 0.36)
    # Express also bills the bytes: 10 GB sent and 5 GB received per million turns.
    assert dollars["S3 Express One Zone"] == pytest.approx(
        6 * 1.13 + 2 * 0.03 + 10 * 0.0032 + 5 * 0.0006
    )


def test_the_seed_chat_is_measured_in_each_durability_mode(env: Env) -> None:
    sizes = dataclasses.replace(QUICK, chat_turns=3, delay_ms=0.0)
    row = run_chat(ObjstoreS3(), env, sizes, graphs.SEED, durability=True)
    modes = row["durability"]
    assert list(modes) == list(DURABILITY_MODES)
    puts = {m: modes[m]["requests_per_turn"]["PutObject"] for m in DURABILITY_MODES}
    # "exit" stores the run once at its end: fewer objects than a put per step.
    assert puts["exit"] < puts["sync"]
    assert all(modes[m]["turns"] == 3 for m in DURABILITY_MODES)
    assert all(modes[m]["bytes_sent_per_turn"] > 0 for m in DURABILITY_MODES)
