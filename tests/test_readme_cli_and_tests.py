"""What README.md says of the CLI's exit status and of the tests that ``--long`` runs."""

from __future__ import annotations

import importlib.util
import io
import re
import sys
from pathlib import Path

import pytest
from ops_helpers import chat

from objstore_saver import ObjectStoreSaver, cli

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_the_count_of_tests_skipped_without_long(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location(
        "crash_suite", ROOT / "tests" / "saver" / "test_crash.py"
    )
    assert spec is not None and spec.loader is not None
    crash = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, crash)  # its dataclasses look themselves up
    spec.loader.exec_module(crash)
    skipped_ops = [op for op in crash.OPS if op != "prune_sweep" and op not in crash.S3_CI_OPS]
    count = len(skipped_ops) * len(crash.S3_BACKENDS)
    said = re.search(r"Without `--long`, (\d+) tests are skipped", README)
    assert said is not None and int(said.group(1)) == count
    assert (
        f"the {('one', 'two', 'three', 'four', 'five')[len(skipped_ops) - 1]} operations" in README
    )
    assert "python -m pytest -n 2 --long" in README


def _code(*args: str) -> int:
    try:
        return cli.main([*args, "--no-progress"], stdout=io.StringIO(), stderr=io.StringIO())
    except SystemExit as exc:  # argparse
        return int(exc.code or 0)


def test_the_exit_status_is_as_documented(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/store"
    with ObjectStoreSaver.from_url(url) as saver:
        chat(saver, "alice", ["hello"])
    status = re.search(r"Exit status: (.*?)\. Jobs", README, flags=re.S)
    assert status is not None
    said = " ".join(status.group(1).split())
    assert said.startswith("0 done (`verify`: no problem); 1 done, and something found")
    assert _code("verify", "--url", url) == 0
    assert "a thread that holds nothing among several given (`delete-thread`)" in said
    assert _code("delete-thread", "alice", "nobody", "--url", url) == 1
    assert "; 2 bad arguments or configuration;" in said
    assert _code("delete-thread", "--url", url) == 2
    assert _code("prune", "--concurrency", "0", "--url", url) == 2
    assert "3 an error:" in said and "(`history`, `show`, `cat`, `delete-thread`)" in said
    for args in (["history", "nobody"], ["show", "nobody"], ["cat", "threads/_x/objects/00"]):
        assert _code(*args, "--url", url) == 3, args
    assert _code("delete-thread", "nobody", "--url", url) == 3


@pytest.mark.parametrize("code", [cli.EXIT_OK, cli.EXIT_FOUND, cli.EXIT_USAGE, cli.EXIT_ERROR])
def test_every_exit_code_is_described(code: int) -> None:
    status = re.search(r"Exit status: (.*?)\. Jobs", README, flags=re.S)
    assert status is not None and re.search(rf"(?:^|; ){code} ", status.group(1))
