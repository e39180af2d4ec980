"""The drivers' one loop each: what run, iterate and their async twins give back and refuse."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from objstore_saver.driver import Driver
from objstore_saver.plans.requests import Batch, Emit, Get, Put
from objstore_saver.storage import LocalStore, PutMode


def _plan(closed: list[str], emit: bool) -> Generator[Any, Any, str]:
    """PUT then GET one object; emit what it read when asked; return it."""
    try:
        yield Batch((Put("k", b"v", PutMode.OVERWRITE),))
        got = yield Batch((Get("k"),))
        assert got is not None
        if emit:
            yield Emit(got[0])
        return got[0].decode()
    finally:
        closed.append("closed")


def _odd_plan() -> Generator[Any, Any, None]:
    yield "not a step"


@pytest.fixture
def driver(tmp_path: Path) -> Any:
    d = Driver(LocalStore(tmp_path))
    yield d
    d.close()


def test_run_returns_what_the_plan_returns(driver: Driver) -> None:
    closed: list[str] = []
    assert driver.run(_plan(closed, emit=False)) == "v"
    assert closed == ["closed"]


def test_iterate_yields_what_the_plan_emits(driver: Driver) -> None:
    closed: list[str] = []
    assert list(driver.iterate(_plan(closed, emit=True))) == [b"v"]
    assert closed == ["closed"]


def test_run_refuses_a_plan_that_emits_and_closes_it(driver: Driver) -> None:
    closed: list[str] = []
    with pytest.raises(TypeError, match="plan emitted an item"):
        driver.run(_plan(closed, emit=True))
    assert closed == ["closed"]


def test_a_step_of_no_known_kind_is_refused(driver: Driver) -> None:
    with pytest.raises(TypeError, match="not a plan step: 'not a step'"):
        driver.run(_odd_plan())


def test_the_async_twins_give_back_and_refuse_the_same(driver: Driver) -> None:
    async def main() -> tuple[str, list[Any], list[str]]:
        closed: list[str] = []
        value = await driver.arun(_plan(closed, emit=False))
        items = [item async for item in driver.aiterate(_plan(closed, emit=True))]
        with pytest.raises(TypeError, match="plan emitted an item"):
            await driver.arun(_plan(closed, emit=True))
        with pytest.raises(TypeError, match="not a plan step"):
            await driver.arun(_odd_plan())
        return value, items, closed

    value, items, closed = asyncio.run(main())
    assert value == "v"
    assert items == [b"v"]
    assert closed == ["closed"] * 3
