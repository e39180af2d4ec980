"""Engine configuration: store URLs, the startup check, create_checkpointer, langgraph.json."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from objstore_saver import (
    AsyncObjectStoreSaver,
    ObjectStoreSaver,
    StoreUnavailableError,
    config as cfg,
)
from objstore_saver.config import (
    ConfigurationError,
    StoreURL,
    create_checkpointer,
    langgraph_checkpointer,
    parse_url,
    redact_url,
)
from objstore_saver.storage import Boto3S3Store, LeanS3Store, LocalStore


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, s3_endpoint: Any) -> Any:
    """boto3's credential chain pointed at the test endpoint's keys."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_endpoint.access_key or "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_endpoint.secret_key or "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    return s3_endpoint


def _s3_url(endpoint: Any, bucket: str, prefix: str = "app/") -> str:
    return f"s3://{bucket}/{prefix}?endpoint_url={endpoint.url}&region={endpoint.region}"


# --- parse_url --------------------------------------------------------------------------


def test_parse_s3_url_with_prefix_endpoint_and_region() -> None:
    spec = parse_url("s3://my-bucket/agents/prod?endpoint_url=http://127.0.0.1:9000&region=eu-1")
    assert spec == StoreURL(
        "s3",
        bucket="my-bucket",
        prefix="agents/prod",
        endpoint_url="http://127.0.0.1:9000",
        region_name="eu-1",
    )
    assert parse_url("s3://b").prefix == ""
    assert parse_url("s3://b/?region=us-east-2").region_name == "us-east-2"


def test_parse_file_url() -> None:
    assert parse_url("file:///var/lib/agent%20memory") == StoreURL(
        "file", path="/var/lib/agent memory"
    )


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("s3://AKIAXXXX:wJalrXUtnFEMI@bucket/p", ["carries credentials"]),
        ("s3://bucket/p?aws_secret_access_key=wJalrXUtnFEMI", ["secret parameter"]),
        ("s3://bucket/p?endpoint_url=http://u:wJalrXUtnFEMI@host:9000", ["credentials"]),
        ("s3://bucket/p?colour=blue", ["unknown parameter", "colour"]),
        ("s3:///prefix", ["names no bucket"]),
        ("gs://bucket/p", ["unknown scheme", "gs"]),
        ("file://relative/dir", ["file:///absolute/path"]),
        ("", ["empty"]),
        ("s3://bucket/p?endpoint_url=ftp://host", ["endpoint_url", "not an http:// or https://"]),
    ],
)
def test_bad_urls_are_refused_with_a_clear_error(url: str, words: list[str]) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_url(url)
    message = str(info.value)
    for word in words:
        assert word in message
    assert "wJalrXUtnFEMI" not in message


def test_redact_url_hides_passwords() -> None:
    assert redact_url("postgresql://u:pw@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redact_url("postgresql://h/db") == "postgresql://h/db"


# --- from_url and the startup check -----------------------------------------------------------


def test_from_url_file(tmp_path: Path) -> None:
    with ObjectStoreSaver.from_url(f"file://{tmp_path}/store") as saver:
        assert isinstance(saver.store, LocalStore)
        cp = empty_checkpoint()
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {}, {})
        assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is not None


@pytest.mark.parametrize(
    ("query", "kind"),
    [("", LeanS3Store), ("&transport=lean", LeanS3Store), ("&transport=boto3", Boto3S3Store)],
)
def test_from_url_s3_round_trip(aws_env: Any, s3_bucket: str, query: str, kind: type) -> None:
    with ObjectStoreSaver.from_url(_s3_url(aws_env, s3_bucket) + query) as saver:
        assert type(saver.store) is kind
        assert saver.store.prefix == "app/"
        cp = empty_checkpoint()
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {}, {})
    client = aws_env.client()
    listed = client.list_objects_v2(Bucket=s3_bucket, Prefix="app/threads/_t/")
    assert listed["KeyCount"] == 1


def test_missing_bucket_fails_at_construction_naming_bucket_and_endpoint(aws_env: Any) -> None:
    with pytest.raises(StoreUnavailableError) as info:
        ObjectStoreSaver.from_url(_s3_url(aws_env, "no-such-bucket-4711"))
    assert "no-such-bucket-4711" in str(info.value)
    assert aws_env.url in str(info.value)


def test_endpoint_down_fails_at_construction_naming_bucket_and_endpoint(aws_env: Any) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    url = f"s3://some-bucket/p?endpoint_url=http://127.0.0.1:{port}&region=us-east-1"
    with pytest.raises(StoreUnavailableError) as info:
        ObjectStoreSaver.from_url(url)
    assert "some-bucket" in str(info.value)
    assert f"127.0.0.1:{port}" in str(info.value)


def test_denied_access_fails_at_construction(aws_env: Any, s3_bucket: str) -> None:
    from botocore.client import BaseClient
    from botocore.exceptions import ClientError

    real = BaseClient._make_api_call

    def deny_head_bucket(self: Any, operation: str, params: Any) -> Any:
        # moto accepts any key: answer HeadBucket the way S3 does for a denied caller.
        if operation == "HeadBucket":
            raise ClientError(
                {
                    "Error": {"Code": "403", "Message": "Forbidden"},
                    "ResponseMetadata": {"HTTPStatusCode": 403},
                },
                operation,
            )
        return real(self, operation, params)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(BaseClient, "_make_api_call", deny_head_bucket)
        with pytest.raises(StoreUnavailableError) as info:
            ObjectStoreSaver.from_url(_s3_url(aws_env, s3_bucket) + "&transport=boto3")
    assert s3_bucket in str(info.value)
    assert aws_env.url in str(info.value)
    assert "403" in str(info.value)


def test_unknown_transport_is_refused_naming_it() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown transport 'aiohttp'.*lean, boto3"):
        ObjectStoreSaver.from_url("s3://b/p?transport=aiohttp")
    with pytest.raises(ValueError, match="unknown transport 'x'"):
        ObjectStoreSaver.from_bucket("b", transport="x")
    with pytest.raises(ValueError, match="retry_mode 'adaptive' needs transport='boto3'"):
        ObjectStoreSaver.from_bucket("b", retry_mode="adaptive")


# --- create_checkpointer -------------------------------------------------------------------


def _messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


def test_explicit_saver_wins(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    mine = InMemorySaver()
    env = {"OBJSTORE_SAVER_URL": f"file://{tmp_path}", "POSTGRES_URL": "postgresql://x/y"}
    with caplog.at_level(logging.INFO, logger="objstore_saver.config"):
        assert create_checkpointer(mine, environ=env) is mine
    infos = _messages(caplog, logging.INFO)
    assert infos == ["checkpointer: using the saver passed in (InMemorySaver)"]


def test_objstore_url_comes_next(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    env = {"OBJSTORE_SAVER_URL": f"file://{tmp_path}/s", "POSTGRES_URL": "postgresql://x/y"}
    with caplog.at_level(logging.INFO, logger="objstore_saver.config"):
        saver = create_checkpointer(environ=env)
    assert isinstance(saver, ObjectStoreSaver)
    saver.close()
    infos = _messages(caplog, logging.INFO)
    assert len(infos) == 2
    assert "OBJSTORE_SAVER_URL" in infos[0] and "no saver passed in" in infos[0]
    assert f"file://{tmp_path}/s" in infos[1]


def test_postgres_when_objstore_unset(caplog: pytest.LogCaptureFixture, postgres_url: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver
    from pg_server import PG_PASSWORD

    with caplog.at_level(logging.INFO, logger="objstore_saver.config"):
        saver = create_checkpointer(environ={"POSTGRES_URL": postgres_url})
    try:
        assert isinstance(saver, PostgresSaver)
        cp = empty_checkpoint()
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {}, {})
        assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is not None
    finally:
        saver.conn.close()  # type: ignore[attr-defined]
    infos = _messages(caplog, logging.INFO)
    assert "OBJSTORE_SAVER_URL is not set" in infos[1]
    assert "PostgresSaver" in infos[2]
    assert PG_PASSWORD not in caplog.text


def test_postgres_url_without_the_package_falls_to_memory(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cfg, "postgres_installed", lambda: False)
    with caplog.at_level(logging.INFO, logger="objstore_saver.config"):
        saver = create_checkpointer(environ={"POSTGRES_URL": "postgresql://u:pw@h/db"})
    assert isinstance(saver, InMemorySaver)
    assert any("not installed" in m for m in _messages(caplog, logging.INFO))
    assert "pw@" not in caplog.text


def test_memory_last_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="objstore_saver.config"):
        saver = create_checkpointer(environ={})
    assert isinstance(saver, InMemorySaver)
    warnings = _messages(caplog, logging.WARNING)
    assert len(warnings) == 1 and "lost" in warnings[0]
    assert [m for m in _messages(caplog, logging.INFO) if "POSTGRES_URL is not set" in m]


def test_invalid_objstore_url_is_an_error_not_a_fallback() -> None:
    with pytest.raises(ConfigurationError):
        create_checkpointer(environ={"OBJSTORE_SAVER_URL": "s3://u:p@b/x"})


# --- the LangGraph server factory -----------------------------------------------------------


async def test_langgraph_checkpointer_yields_an_async_saver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    monkeypatch.setenv("OBJSTORE_SAVER_URL", f"file://{tmp_path}/lg")

    def bot(state: MessagesState) -> dict:
        return {"messages": [AIMessage(f"echo {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    config = {"configurable": {"thread_id": "server-thread"}}
    async with langgraph_checkpointer() as saver:
        assert isinstance(saver, AsyncObjectStoreSaver)
        graph = builder.compile(checkpointer=saver)
        await graph.ainvoke({"messages": [("user", "hi")]}, config)
    async with langgraph_checkpointer() as saver:
        state = await builder.compile(checkpointer=saver).aget_state(config)
    assert [m.content for m in state.values["messages"]] == ["hi", "echo hi"]


async def test_langgraph_json_marks_the_bucket_a_replica(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OBJSTORE_SAVER_URL", f"file://{tmp_path}/lg")
    monkeypatch.setenv("LANGGRAPH_CHECKPOINTER", '{"replica_lag": 900}')
    async with langgraph_checkpointer() as saver:
        assert saver.plan_context.replica_lag == 900.0
    monkeypatch.delenv("LANGGRAPH_CHECKPOINTER")
    async with langgraph_checkpointer() as saver:
        assert saver.plan_context.replica_lag is None
    for bad in ("0", "-1", '"15m"', "true"):
        monkeypatch.setenv("LANGGRAPH_CHECKPOINTER", f'{{"replica_lag": {bad}}}')
        with pytest.raises(ConfigurationError, match=r"checkpointer\.replica_lag"):
            async with langgraph_checkpointer():
                pass


async def test_langgraph_checkpointer_needs_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OBJSTORE_SAVER_URL", raising=False)
    with pytest.raises(ConfigurationError, match="OBJSTORE_SAVER_URL"):
        async with langgraph_checkpointer():
            pass


def test_from_url_honours_aws_endpoint_url(
    aws_env: Any, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = aws_env.url.replace("127.0.0.1", "localhost")
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", aws_env.region)
    with ObjectStoreSaver.from_url(f"s3://{s3_bucket}/via-env") as saver:
        assert endpoint in saver.store.location
        cp = empty_checkpoint()
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {}, {})
    listed = aws_env.client().list_objects_v2(Bucket=s3_bucket, Prefix="via-env/")
    assert listed["KeyCount"] == 1
