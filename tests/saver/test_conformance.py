"""LangGraph's checkpointer conformance suite, on a local directory and on S3."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

from backends import Backend
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import (
    CapabilityReport,
    CapabilityResult,
    ProgressCallbacks,
)

from objstore_saver import ObjectStoreSaver

#: The capabilities this saver is known to have. The suite must detect each of
#: them; it may detect more in a later release (see test_conformance).
KNOWN_CAPABILITIES = {
    "put",
    "put_writes",
    "get_tuple",
    "list",
    "delete_thread",
    "delete_for_runs",
    "copy_thread",
    "prune",
}


def test_known_capabilities_are_in_the_suite() -> None:
    """Each capability we claim is still one LangGraph's suite defines (none renamed or gone)."""
    suite = {c.value for c in ALL_CAPABILITIES}
    missing = sorted(KNOWN_CAPABILITIES - suite)
    assert not missing, f"capabilities no longer in the conformance suite: {missing}"


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


def _problems(report: CapabilityReport) -> list[str]:
    """What is wrong with a conformance report, one line per problem.

    Every known capability must be detected; every detected capability, known
    or added to the suite after this test was written, must pass with at least
    one test run. A new capability the suite does not detect on this saver is
    skipped by the suite and is not a problem.
    """
    detected = {n for n, r in report.results.items() if r.detected}
    problems = []
    undetected = sorted(KNOWN_CAPABILITIES - detected)
    if undetected:
        problems.append(f"known capabilities not detected: {undetected}")
    failing = sorted(
        n
        for n in detected
        if report.results[n].passed is not True
        or report.results[n].tests_failed
        or report.results[n].failures
    )
    if failing:
        problems.append(f"failing capabilities: {failing}")
    empty = sorted(n for n in detected if report.results[n].tests_passed <= 0)
    if empty:
        problems.append(f"detected capabilities that ran no test: {empty}")
    return problems


def _report(**results: CapabilityResult) -> CapabilityReport:
    known = {
        n: CapabilityResult(detected=True, passed=True, tests_passed=3) for n in KNOWN_CAPABILITIES
    }
    return CapabilityReport("fake", {**known, **results})


def test_the_check_accepts_a_new_capability_that_passes_or_is_not_detected() -> None:
    report = _report(
        new_passing=CapabilityResult(detected=True, passed=True, tests_passed=2),
        new_undetected=CapabilityResult(detected=False, passed=None, tests_skipped=1),
    )
    assert _problems(report) == []


def test_the_check_names_a_new_capability_that_fails_or_does_not_run() -> None:
    report = _report(
        new_failing=CapabilityResult(
            detected=True, passed=False, tests_passed=1, tests_failed=1, failures=["x"]
        ),
        new_unrun=CapabilityResult(detected=True, passed=None, tests_skipped=1),
    )
    assert _problems(report) == [
        "failing capabilities: ['new_failing', 'new_unrun']",
        "detected capabilities that ran no test: ['new_unrun']",
    ]


def test_the_check_names_a_known_capability_the_suite_no_longer_detects() -> None:
    report = _report(prune=CapabilityResult(detected=False, passed=None, tests_skipped=1))
    assert _problems(report) == ["known capabilities not detected: ['prune']"]


async def test_conformance(backend: Backend) -> None:
    created: list[ObjectStoreSaver] = []

    @checkpointer_test(name=f"ObjectStoreSaver[{backend.kind}]")
    async def factory() -> AsyncIterator[ObjectStoreSaver]:
        # A fresh prefix per capability suite: the suites never see each other.
        saver = ObjectStoreSaver(backend.store(f"conf-{uuid.uuid4().hex[:8]}/"))
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

    # One fresh saver per capability suite the suite ran, i.e. it really ran them.
    assert len(created) == len(report.results), message
    problems = _problems(report)
    assert not problems, "\n".join([*problems, message])
    assert report.passed_all() and report.conformance_level() == "FULL", message
