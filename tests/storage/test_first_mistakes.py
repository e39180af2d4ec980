"""The first mistakes with a bucket get a one-line answer naming the thing at fault and the fix.

* a bucket that does not exist (the check's ``HeadBucket`` 404, or a GET, PUT
  or LIST answering ``NoSuchBucket``) is named with its endpoint and how to
  create it, on both S3 transports;
* an endpoint where nothing listens fails the check after one attempt (a
  refused connection is not retried there), while later requests keep their
  retries;
* a proxy URL the lean transport cannot use names the variable as it is set,
  and the command line prints it on one line, with no traceback.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from repo_root import ROOT

from objstore_saver import ObjectStoreSaver, ObjectStoreStore
from objstore_saver.cli import EXIT_USAGE, main
from objstore_saver.errors import ConfigurationError
from objstore_saver.storage import (
    Boto3S3Store,
    LeanS3Store,
    ObjectNotFoundError,
    StoreUnavailableError,
)
from objstore_saver.storage.http.messages import HttpRequest
from objstore_saver.storage.s3.network import network_for
from objstore_saver.storage.s3.rules import answer_error

TRANSPORTS = ("lean", "boto3")
PROXY_VARIABLES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy")


def _missing() -> str:
    return f"missing-{uuid.uuid4().hex[:12]}"


def _assert_names_the_missing_bucket(message: str, bucket: str, endpoint: str, code: str) -> None:
    assert "\n" not in message
    assert f"S3 bucket {bucket!r} at {endpoint} is unavailable: it does not exist" in message
    assert code in message
    assert f"aws s3 mb s3://{bucket} --endpoint-url {endpoint}" in message
    assert "docs/configuration.md#create-a-bucket" in message


def test_the_create_bucket_section_the_errors_point_at_exists() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    assert re.search(r"^## Create a bucket$", text, re.MULTILINE)
    section = text.split("## Create a bucket", 1)[1].split("\n## ", 1)[0]
    for way in (".create_bucket(Bucket=", "aws s3 mb s3://", "--endpoint-url", "mc mb"):
        assert way in section, way


def _create_bucket_blocks() -> dict[str, list[str]]:
    """The fenced blocks of configuration.md's "Create a bucket" section, by language."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    section = text.split("\n## Create a bucket\n", 1)[1].split("\n## ", 1)[0]
    found: dict[str, list[str]] = {}
    for language, body in re.findall(r"^```(\w+)\n(.*?)^```$", section, re.M | re.S):
        found.setdefault(language, []).append(body)
    return found


@pytest.mark.usefixtures("creds_env")
def test_the_documented_ways_create_a_bucket_the_saver_opens(s3_endpoint: Any) -> None:
    blocks = _create_bucket_blocks()
    (program,) = blocks["python"]
    aws_line, mc_line = (block.strip() for block in blocks["sh"])
    assert aws_line == "aws s3 mb s3://agent-memory --endpoint-url http://127.0.0.1:9000"
    assert mc_line == "mc mb local/agent-memory"
    bucket = _missing()
    code = program.replace("http://127.0.0.1:9000", s3_endpoint.url)
    exec(code.replace('"agent-memory"', repr(bucket)), {})
    url = f"s3://{bucket}/p?endpoint_url={s3_endpoint.url}&region={s3_endpoint.region}"
    with ObjectStoreSaver.from_url(url) as saver:
        assert saver.store.bucket == bucket
    s3_endpoint.client().delete_bucket(Bucket=bucket)


# --- a missing bucket ---------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_from_url_on_a_missing_bucket_says_it_does_not_exist(
    s3_endpoint: Any, creds_env: None, transport: str
) -> None:
    bucket = _missing()
    url = f"s3://{bucket}/p?endpoint_url={s3_endpoint.url}&region={s3_endpoint.region}"
    with pytest.raises(StoreUnavailableError) as info:
        ObjectStoreSaver.from_url(f"{url}&transport={transport}")
    _assert_names_the_missing_bucket(str(info.value), bucket, s3_endpoint.url, "(check: HTTP 404)")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_from_bucket_checks_the_bucket_at_construction(
    s3_endpoint: Any, creds_env: None, transport: str
) -> None:
    bucket = _missing()
    options = {"endpoint_url": s3_endpoint.url, "region_name": s3_endpoint.region}
    for cls in (ObjectStoreSaver, ObjectStoreStore):
        with pytest.raises(StoreUnavailableError) as info:
            cls.from_bucket(bucket, "p/", transport=transport, **options)
        _assert_names_the_missing_bucket(str(info.value), bucket, s3_endpoint.url, "check")
    # check=False skips it: the bucket may be created later.
    with ObjectStoreSaver.from_bucket(
        bucket, "p/", transport=transport, check=False, **options
    ) as saver:
        assert saver.store.bucket == bucket


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_from_bucket_on_an_existing_bucket_opens(
    s3_endpoint: Any, s3_bucket: str, creds_env: None, transport: str
) -> None:
    with ObjectStoreSaver.from_bucket(
        s3_bucket,
        "p/",
        transport=transport,
        endpoint_url=s3_endpoint.url,
        region_name=s3_endpoint.region,
    ) as saver:
        assert saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}) is None


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_requests_answered_no_such_bucket_say_it_does_not_exist(
    s3_endpoint: Any, transport: str
) -> None:
    bucket = _missing()
    store = s3_endpoint.store(transport, bucket, "p/")
    for operation, call in (
        ("get of key 'k'", lambda: store.get("k")),
        ("put of key 'k'", lambda: store.put("k", b"v")),
        ("list of key ''", lambda: store.list("")),
    ):
        with pytest.raises(StoreUnavailableError) as info:
            call()
        _assert_names_the_missing_bucket(
            str(info.value), bucket, s3_endpoint.url, f"({operation}: NoSuchBucket, HTTP 404)"
        )


async def _acheck(store: LeanS3Store) -> None:
    """The coroutine check of ``store``, its connections closed after."""
    try:
        await store.acheck()
    finally:
        await store.aclose()


def test_the_async_check_of_a_missing_bucket_says_it_does_not_exist(s3_endpoint: Any) -> None:
    bucket = _missing()
    store = s3_endpoint.lean_store(bucket)

    with pytest.raises(StoreUnavailableError) as info:
        asyncio.run(_acheck(store))
    _assert_names_the_missing_bucket(str(info.value), bucket, s3_endpoint.url, "(check: HTTP 404)")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_missing_key_in_an_existing_bucket_is_still_a_missing_key(
    s3_endpoint: Any, s3_bucket: str, transport: str
) -> None:
    store = s3_endpoint.store(transport, s3_bucket, "p/")
    with pytest.raises(ObjectNotFoundError):
        store.get("absent")


def test_on_aws_the_hint_needs_no_endpoint() -> None:
    error = answer_error(
        bucket="b",
        endpoint="https://s3.eu-west-1.amazonaws.com",
        location="s3://b/",
        operation="check",
        key=None,
        status=404,
        code="404",
    )
    assert isinstance(error, StoreUnavailableError)
    assert "aws s3 mb s3://b;" in str(error)
    assert "--endpoint-url" not in str(error)


# --- an endpoint that is down ---------------------------------------------------------------


@pytest.fixture
def refused_url() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` where connections are refused: bound, never listening."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{holder.getsockname()[1]}"


@pytest.fixture
def silent_url() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` whose handshakes never complete: a full accept queue.

    The listener never accepts and its queue is filled first, so the kernel
    drops every later SYN: a connect waits out its timeout, as it does
    against a host that is down or a firewall that drops packets.
    """
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        try:
            for _ in range(4):
                filler = socket.socket()
                filler.setblocking(False)
                filler.connect_ex(("127.0.0.1", port))
                fillers.append(filler)
            yield f"http://127.0.0.1:{port}"
        finally:
            for filler in fillers:
                filler.close()


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _count_lean_sends(store: LeanS3Store) -> list[HttpRequest]:
    sent: list[HttpRequest] = []
    send, asend = store._send, store._asend

    def counted(request: HttpRequest) -> Any:
        sent.append(request)
        return send(request)

    async def acounted(request: HttpRequest) -> Any:
        sent.append(request)
        return await asend(request)

    store._send = counted  # type: ignore[method-assign]
    store._asend = acounted  # type: ignore[method-assign]
    return sent


def _count_boto3_sends(store: Boto3S3Store) -> list[str]:
    sent: list[str] = []
    store.client.meta.events.register(
        "before-send.s3.*", lambda event_name, **_: sent.append(event_name.rsplit(".", 1)[1])
    )
    return sent


def _assert_names_the_refused_endpoint(message: str, url: str) -> None:
    assert "\n" not in message
    assert f"S3 bucket 'b' at {url} is unavailable (check)" in message
    assert "not retried: no connection could be opened" in message


@pytest.mark.usefixtures("creds", "no_proxy")
def test_the_lean_check_of_a_refused_endpoint_is_one_attempt(refused_url: str) -> None:
    store = LeanS3Store("b", endpoint_url=refused_url, max_attempts=3, backoff_base=0)
    sent = _count_lean_sends(store)
    with pytest.raises(StoreUnavailableError) as info:
        store.check()
    assert "ConnectionRefusedError" in str(info.value)
    _assert_names_the_refused_endpoint(str(info.value), refused_url)
    assert len(sent) == 1
    # Later requests keep their retries: the endpoint may be back soon.
    with pytest.raises(StoreUnavailableError, match="ConnectionRefusedError") as later:
        store.get("k")
    assert "not retried" not in str(later.value)
    assert len(sent) == 1 + 3


@pytest.mark.usefixtures("creds", "no_proxy")
def test_the_lean_async_check_of_a_refused_endpoint_is_one_attempt(refused_url: str) -> None:
    store = LeanS3Store("b", endpoint_url=refused_url, max_attempts=3, backoff_base=0)
    sent = _count_lean_sends(store)

    with pytest.raises(StoreUnavailableError) as info:
        asyncio.run(_acheck(store))
    _assert_names_the_refused_endpoint(str(info.value), refused_url)
    assert len(sent) == 1


@pytest.mark.usefixtures("creds", "no_proxy")
def test_the_boto3_check_of_a_refused_endpoint_is_one_attempt(refused_url: str) -> None:
    store = Boto3S3Store("b", endpoint_url=refused_url, region_name="us-east-1", max_attempts=2)
    sent = _count_boto3_sends(store)
    with pytest.raises(StoreUnavailableError) as info:
        store.check()
    assert "EndpointConnectionError" in str(info.value)
    _assert_names_the_refused_endpoint(str(info.value), refused_url)
    assert sent == ["HeadBucket"]
    # Later requests keep botocore's retries.
    with pytest.raises(StoreUnavailableError, match="EndpointConnectionError") as later:
        store.get("k")
    assert "not retried" not in str(later.value)
    assert sent == ["HeadBucket", "GetObject", "GetObject"]


@pytest.mark.usefixtures("creds", "no_proxy")
def test_the_check_of_a_host_that_never_answers_is_one_connect_timeout(silent_url: str) -> None:
    lean = LeanS3Store("b", endpoint_url=silent_url, max_attempts=3, connect_timeout=0.5)
    sent = _count_lean_sends(lean)
    with pytest.raises(StoreUnavailableError) as info:
        lean.check()
    assert f"no connection to {silent_url.removeprefix('http://')} within 0.5 s" in str(info.value)
    _assert_names_the_refused_endpoint(str(info.value), silent_url)
    assert len(sent) == 1
    boto3_store = Boto3S3Store(
        "b", endpoint_url=silent_url, region_name="us-east-1", max_attempts=3, connect_timeout=0.5
    )
    boto3_sent = _count_boto3_sends(boto3_store)
    with pytest.raises(StoreUnavailableError) as info:
        boto3_store.check()
    assert "ConnectTimeoutError" in str(info.value)
    _assert_names_the_refused_endpoint(str(info.value), silent_url)
    assert boto3_sent == ["HeadBucket"]


@pytest.mark.usefixtures("creds", "no_proxy")
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_from_url_and_from_bucket_on_a_refused_endpoint_name_it(
    refused_url: str, transport: str
) -> None:
    with pytest.raises(StoreUnavailableError) as info:
        ObjectStoreSaver.from_url(f"s3://b/p?endpoint_url={refused_url}&transport={transport}")
    _assert_names_the_refused_endpoint(str(info.value), refused_url)
    with pytest.raises(StoreUnavailableError) as info:
        ObjectStoreSaver.from_bucket("b", "p/", endpoint_url=refused_url, transport=transport)
    _assert_names_the_refused_endpoint(str(info.value), refused_url)


# --- an unsupported proxy -------------------------------------------------------------------


@pytest.mark.usefixtures("no_proxy")
@pytest.mark.parametrize(
    ("variable", "proxy", "endpoint"),
    [
        ("HTTP_PROXY", "https://user:hunter2@proxy.example:3128", "http://127.0.0.1:9000"),
        ("http_proxy", "https://proxy.example:3128", "http://127.0.0.1:9000"),
        ("HTTPS_PROXY", "socks5://user:hunter2@proxy.example:1080", "https://minio.example"),
        ("https_proxy", "socks5://proxy.example:1080", "https://minio.example"),
    ],
)
def test_an_unusable_proxy_names_the_variable_as_it_is_set(
    monkeypatch: pytest.MonkeyPatch, variable: str, proxy: str, endpoint: str
) -> None:
    monkeypatch.setenv(variable, proxy)
    with pytest.raises(ConfigurationError) as info:
        LeanS3Store("b", endpoint_url=endpoint)
    message = str(info.value)
    assert f"(from {variable})" in message
    assert f"set {variable} to http://host:port" in message
    assert "NO_PROXY" in message
    other = variable.swapcase()
    assert f"from {other}" not in message
    assert "hunter2" not in message


def test_an_unusable_proxies_option_names_the_option() -> None:
    with pytest.raises(ConfigurationError, match=r"\(from proxies\['https'\]\)") as info:
        network_for("https", "minio.example", proxies={"https": "https://proxy.example:3128"})
    assert "NO_PROXY" not in str(info.value)


@pytest.mark.usefixtures("creds", "no_proxy")
def test_the_cli_prints_an_unusable_proxy_on_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "socks5://proxy.example:1080")
    code = main(["threads", "--url", "s3://b/p?endpoint_url=https://minio.example"])
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("objstore-saver: error: proxy socks5://proxy.example:1080")
    assert "(from HTTPS_PROXY)" in err
    assert err.count("\n") == 1


def test_the_cli_process_exits_without_a_traceback_on_an_unusable_proxy() -> None:
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARIABLES}
    env.update(
        PYTHONPATH=str(ROOT),
        HTTP_PROXY="https://proxy.example:3128",
        AWS_ACCESS_KEY_ID="a",
        AWS_SECRET_ACCESS_KEY="b",
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "objstore_saver",
            "threads",
            "--url",
            "s3://b/p?endpoint_url=http://127.0.0.1:9",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == EXIT_USAGE, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("objstore-saver: error: proxy https://proxy.example:3128")
    assert "(from HTTP_PROXY)" in lines[0]
