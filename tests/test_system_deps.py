"""A program missing from the machine skips the tests needing it, unless OBJSTORE_TEST_REQUIRE
names it: then they fail (system_deps.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import system_deps
from system_deps import REQUIRE_ENV


@pytest.fixture(autouse=True)
def _no_requirement(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_ENV, raising=False)


@pytest.mark.parametrize(
    ("name", "install"),
    [
        ("browser", "apt-get install chromium"),
        ("postgres", "apt-get install postgresql"),
        ("openssl", "apt-get install openssl"),
        ("rclone", "apt-get install rclone"),
    ],
)
def test_missing_skips_naming_the_program_and_its_install_command(name: str, install: str) -> None:
    with pytest.raises(pytest.skip.Exception) as info:
        system_deps.missing(name)
    reason = str(info.value)
    assert system_deps.REQUIREMENTS[name].what in reason
    assert install in reason
    assert f"{REQUIRE_ENV}={name}" in reason


@pytest.mark.parametrize("value", ["browser", "postgres,browser", " browser , postgres ", "all"])
def test_missing_fails_when_required(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(REQUIRE_ENV, value)
    with pytest.raises(pytest.fail.Exception) as info:
        system_deps.missing("browser")
    assert "Debian's chromium is not installed (apt-get install chromium)" in str(info.value)
    assert REQUIRE_ENV in str(info.value)


def test_requiring_one_program_leaves_the_other_optional(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_ENV, "postgres")
    assert system_deps.required() == {"postgres"}
    with pytest.raises(pytest.skip.Exception):
        system_deps.missing("browser")


def test_an_unknown_requirement_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_ENV, "browser,chrome")
    known = r"browser, openssl, postgres, rclone or all"
    with pytest.raises(pytest.UsageError, match=r"\['chrome'\].*" + known):
        system_deps.required()


def test_lookups_find_nothing_on_a_machine_without_the_programs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    real_exists = system_deps.os.path.exists
    monkeypatch.setattr(
        system_deps.os.path, "exists", lambda p: p != "/usr/bin/chromium" and real_exists(p)
    )
    monkeypatch.setattr(system_deps.glob, "glob", lambda pattern: [])
    assert system_deps.chromium() is None
    assert system_deps.postgres_bin_dir() is None


def test_lookups_find_programs_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("chromium", "initdb", "pg_ctl"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert system_deps.chromium() == str(tmp_path / "chromium")
    assert system_deps.postgres_bin_dir() == str(tmp_path.resolve())


#: Each requirement: the lookup that finds it, and a fixture needing it with its module.
FIXTURES = {
    "browser": ("chromium", "browser_helpers", "browser"),
    "postgres": ("postgres_bin_dir", "pg_server", "postgres_url"),
}


@pytest.mark.parametrize("name", sorted(FIXTURES))
@pytest.mark.parametrize(
    ("require", "outcome"), [(None, "skipped"), ("browser,postgres", "errors"), ("all", "errors")]
)
def test_the_fixture_skips_or_fails_on_a_machine_without_the_program(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    require: str | None,
    outcome: str,
) -> None:
    lookup, module, fixture = FIXTURES[name]
    monkeypatch.setattr(system_deps, lookup, lambda: None)
    if require:
        monkeypatch.setenv(REQUIRE_ENV, require)
    pytester.makeconftest(f"from {module} import *  # noqa: F403")
    pytester.makepyfile(
        textwrap.dedent(
            f"""
            def test_needs_it({fixture}):
                raise AssertionError("ran without {name}")
            """
        )
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:asyncio", "-rs")
    result.assert_outcomes(**{outcome: 1})
    result.stdout.fnmatch_lines([f"*{system_deps.REQUIREMENTS[name].what} is not installed*"])
