"""LangGraph's checkpointer conformance suite, on a local directory and on S3."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import CapabilityReport, ProgressCallbacks

from objstore_saver import LocalStore, ObjectStoreSaver, S3Store
from objstore_saver.storage import ObjectStore

EXPECTED_CAPABILITIES = {
    "put",
    "put_writes",
    "get_tuple",
    "list",
    "delete_thread",
    "delete_for_runs",
    "copy_thread",
    "prune",
}


def test_expected_capabilities_are_the_suites() -> None:
    """EXPECTED_CAPABILITIES is LangGraph's whole list: a new capability fails here first."""
    assert {c.value for c in ALL_CAPABILITIES} == EXPECTED_CAPABILITIES


def _local_stores(tmp_path: Path) -> Callable[[], ObjectStore]:
    def make() -> ObjectStore:
        return LocalStore(tmp_path / uuid.uuid4().hex)

    return make


def _s3_stores(request: pytest.FixtureRequest, lean: bool = False) -> Callable[[], ObjectStore]:
    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = request.getfixturevalue("s3_bucket")

    def make() -> ObjectStore:
        # A fresh prefix per capability suite: the suites never see each other.
        prefix = f"conf-{uuid.uuid4().hex[:8]}/"
        if lean:
            return endpoint.lean_store(bucket, prefix)
        return S3Store(bucket, prefix, client=endpoint.client())

    return make


def _describe(report: CapabilityReport, details: dict[str, list[str]]) -> str:
    lines = [f"conformance of {report.checkpointer_name}: {report.conformance_level()}"]
    for name, result in sorted(report.results.items()):
        lines.append(
            f"  {name}: detected={result.detected} passed={result.passed} "
            f"tests_passed={result.tests_passed} tests_failed={result.tests_failed} "
            f"tests_skipped={result.tests_skipped}"
        )
        lines.extend(f"    FAILED {failure}" for failure in result.failures)
        lines.extend(f"      {line}" for line in details.get(name, []))
    return "\n".join(lines)


@pytest.mark.parametrize("backend", ["local", "s3", "s3-lean"])
async def test_conformance(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    make_store = (
        _local_stores(tmp_path)
        if backend == "local"
        else _s3_stores(request, lean=backend == "s3-lean")
    )
    created: list[ObjectStoreSaver] = []

    @checkpointer_test(name=f"ObjectStoreSaver[{backend}]")
    async def factory() -> AsyncIterator[ObjectStoreSaver]:
        saver = ObjectStoreSaver(make_store())
        created.append(saver)
        try:
            yield saver
        finally:
            saver.close()

    details: dict[str, list[str]] = {}

    def on_result(capability: str, test_name: str, passed: bool, error: str | None) -> None:
        if not passed:
            tail = (error or "").rstrip().splitlines()[-12:]
            details.setdefault(capability, []).extend([f"{test_name}:", *tail])

    report = await validate(factory, progress=ProgressCallbacks(on_test_result=on_result))
    message = _describe(report, details)

    # One fresh saver per capability suite, i.e. the suite really ran them all.
    assert len(created) == len(EXPECTED_CAPABILITIES), message
    assert set(report.results) == EXPECTED_CAPABILITIES, message
    undetected = sorted(n for n, r in report.results.items() if not r.detected)
    assert not undetected, f"capabilities not detected: {undetected}\n{message}"
    failing = sorted(n for n, r in report.results.items() if r.passed is not True or r.tests_failed)
    assert not failing, f"failing capabilities: {failing}\n{message}"
    empty = sorted(n for n, r in report.results.items() if r.tests_passed <= 0)
    assert not empty, f"capabilities that ran no test: {empty}\n{message}"
    assert all(not r.failures for r in report.results.values()), message
    assert report.passed_all() and report.conformance_level() == "FULL", message
