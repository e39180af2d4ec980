"""The LangGraph server's checkpointer settings, read and checked as the server reads them."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from objstore_saver.config import ConfigurationError, langgraph_checkpointer
from objstore_saver.server_settings import ThreadTTL, checkpointer_block, describe_ttl, thread_ttl


def _block_env(ttl: object) -> dict[str, str]:
    block = {"path": "objstore_saver.config.langgraph_checkpointer", "ttl": ttl}
    return {"LANGGRAPH_CHECKPOINTER": json.dumps(block)}


def test_ttl_from_the_checkpointer_block() -> None:
    env = _block_env({"strategy": "keep_latest", "default_ttl": 60, "sweep_interval_minutes": 10})
    assert thread_ttl(environ=env) == ThreadTTL(
        strategy="keep_latest",
        default_ttl=60.0,
        sweep_interval_minutes=10.0,
        sweep_limit=None,
        source="checkpointer.ttl",
    )


def test_no_block_or_no_ttl_is_no_ttl() -> None:
    assert checkpointer_block({}) == {}
    assert thread_ttl(environ={}) is None
    assert thread_ttl(environ={"LANGGRAPH_CHECKPOINTER": '{"path": "x.y"}'}) is None


def test_langgraph_thread_ttl_wins_over_the_block_as_the_server_does() -> None:
    env = {**_block_env({"strategy": "keep_latest", "default_ttl": 60})}
    minutes = thread_ttl(environ={**env, "LANGGRAPH_THREAD_TTL": "30"})
    assert minutes == ThreadTTL("delete", 30.0, 5.1, None, "LANGGRAPH_THREAD_TTL")
    obj = thread_ttl(
        environ={**env, "LANGGRAPH_THREAD_TTL": '{"strategy": "keep_latest", "ttl": 5}'}
    )
    assert obj == ThreadTTL("keep_latest", 5.0, None, None, "LANGGRAPH_THREAD_TTL")


def test_numbers_in_strings_are_read_as_the_server_reads_them() -> None:
    ttl = thread_ttl({"ttl": {"default_ttl": "60", "sweep_limit": "100"}}, environ={})
    assert ttl == ThreadTTL("delete", 60.0, None, 100, "checkpointer.ttl")


def test_a_passed_block_is_used_instead_of_the_environment() -> None:
    ttl = thread_ttl({"ttl": {"strategy": "delete", "default_ttl": 1.5}}, environ={})
    assert ttl is not None and ttl.default_ttl == 1.5


@pytest.mark.parametrize(
    ("ttl", "message"),
    [
        ({"strategy": "keep_last"}, r"checkpointer\.ttl\.strategy must be one of delete, keep_"),
        ({"strategy": "delete_all"}, r"checkpointer\.ttl\.strategy .* not 'delete_all'"),
        ({"default_ttl": 0}, r"checkpointer\.ttl\.default_ttl must be a positive number"),
        ({"default_ttl": "soon"}, r"checkpointer\.ttl\.default_ttl .* not 'soon'"),
        ({"sweep_interval_minutes": -5}, r"checkpointer\.ttl\.sweep_interval_minutes"),
        ({"sweep_limit": 2.5}, r"checkpointer\.ttl\.sweep_limit must be a positive integer"),
        ({"default_ttl": True}, r"checkpointer\.ttl\.default_ttl"),
        (60, r"checkpointer\.ttl must be an object"),
    ],
)
def test_invalid_ttl_settings_are_refused_by_name(ttl: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        thread_ttl(environ=_block_env(ttl))


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LANGGRAPH_CHECKPOINTER": "{not json"}, "LANGGRAPH_CHECKPOINTER is not JSON"),
        ({"LANGGRAPH_CHECKPOINTER": "[1]"}, "LANGGRAPH_CHECKPOINTER is not a JSON object"),
        ({"LANGGRAPH_THREAD_TTL": "soon"}, "LANGGRAPH_THREAD_TTL must be minutes"),
        ({"LANGGRAPH_THREAD_TTL": "-1"}, r"LANGGRAPH_THREAD_TTL\.default_ttl must be a positive"),
        ({"LANGGRAPH_THREAD_TTL": "{x"}, "LANGGRAPH_THREAD_TTL is not JSON"),
    ],
)
def test_invalid_server_variables_are_refused_by_name(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        thread_ttl(environ=env)


def test_unknown_ttl_keys_are_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="objstore_saver.config"):
        ttl = thread_ttl(environ=_block_env({"strategy": "delete", "default_tll": 60}))
    assert ttl is not None and ttl.default_ttl is None
    assert "checkpointer.ttl has settings this version does not know: default_tll" in caplog.text


def test_what_the_server_does_with_the_ttl_depends_on_its_runtime() -> None:
    keep = ThreadTTL("keep_latest", 60.0, 10.0, None, "checkpointer.ttl")
    level, message = describe_ttl(keep, {"LANGGRAPH_RUNTIME_EDITION": "inmem"})
    assert level == logging.WARNING and "never sweeps expired threads" in message
    level, message = describe_ttl(keep, {"LANGGRAPH_RUNTIME_EDITION": "postgres"})
    assert level == logging.INFO and "aprune(strategy='keep_latest')" in message
    level, message = describe_ttl(ThreadTTL("delete", 1.0, None, None, "checkpointer.ttl"), {})
    assert level == logging.INFO and "delete the thread (adelete_thread)" in message


async def test_the_factory_refuses_a_bad_ttl_before_it_opens_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OBJSTORE_SAVER_URL", (tmp_path / "never").as_uri())
    monkeypatch.delenv("LANGGRAPH_THREAD_TTL", raising=False)
    for name, value in _block_env({"strategy": "sometimes"}).items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=r"checkpointer\.ttl\.strategy"):
        async with langgraph_checkpointer():
            pass
    assert not (tmp_path / "never").exists()


async def test_the_factory_takes_the_block_as_an_argument_and_logs_the_ttl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OBJSTORE_SAVER_URL", (tmp_path / "memory").as_uri())
    monkeypatch.setenv("LANGGRAPH_RUNTIME_EDITION", "postgres")
    monkeypatch.delenv("LANGGRAPH_THREAD_TTL", raising=False)
    monkeypatch.delenv("LANGGRAPH_CHECKPOINTER", raising=False)
    block = {"ttl": {"strategy": "delete", "default_ttl": 30, "sweep_interval_minutes": 5}}
    with caplog.at_level(logging.INFO, logger="objstore_saver.config"):
        async with langgraph_checkpointer(block) as saver:
            assert saver.store.location.startswith("file://")
    assert (
        "thread TTL checkpointer.ttl: strategy=delete, default_ttl=30.0 min, "
        "sweep_interval_minutes=5.0; the server's sweeper will delete the thread"
    ) in caplog.text
