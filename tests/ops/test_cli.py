"""The real ``objstore-saver`` entry point, in a subprocess, against moto and a directory."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_cli as run
from deleted import the_tombstone
from ops_helpers import add_pending_writes, chat
from pg_server import PG_PASSWORD
from repo_root import ROOT

from objstore_saver import ObjectStoreSaver, cli
from objstore_saver.storage import LocalStore, PutMode

#: The tests' helper modules (ops_helpers, ...): pyproject's pytest ``pythonpath``.
HELPERS = ROOT / "tests" / "helpers"


def run_json(args: list[str], env: dict[str, str] | None = None) -> Any:
    proc = run([*args, "--json"], env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def local_url(tmp_path: Path) -> str:
    url = f"file://{tmp_path}/store"
    with ObjectStoreSaver.from_url(url) as saver:
        chat(saver, "alice", ["hello", "second question"])
        chat(saver, "bob", ["hi"])
        add_pending_writes(saver, "alice")
    return url


@pytest.fixture
def s3_env(s3_endpoint: Any, s3_bucket: str) -> dict[str, str]:
    env = {
        "AWS_ACCESS_KEY_ID": s3_endpoint.access_key or "testing",
        "AWS_SECRET_ACCESS_KEY": s3_endpoint.secret_key or "testing",
        "OBJSTORE_SAVER_URL": f"s3://{s3_bucket}/cli?endpoint_url={s3_endpoint.url}"
        f"&region={s3_endpoint.region}",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with ObjectStoreSaver.from_url(env["OBJSTORE_SAVER_URL"]) as saver:
            chat(saver, "carol", ["on s3"])
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return env


def test_every_read_command_on_a_directory(local_url: str) -> None:
    threads = run_json(["threads", "--url", local_url])
    assert {t["thread_id"] for t in threads["threads"]} == {"alice", "bob"}

    history = run_json(["history", "alice", "--url", local_url])
    assert [c["step"] for c in history["checkpoints"]][:2] == [4, 3]

    text = run(["show", "alice", "--url", local_url])
    assert text.returncode == 0, text.stderr
    assert "human: hello" in text.stdout
    assert "ai: (turn 2) echo: second question" in text.stdout

    oldest = history["checkpoints"][-1]["checkpoint_id"]
    shown = run_json(["show", "alice", oldest, "--url", local_url])
    assert shown["checkpoint_id"] == oldest

    manifest = run_json(["cat", history["checkpoints"][0]["key"], "--url", local_url])
    assert manifest["kind"] == "manifest"

    du = run_json(["du", "--url", local_url])
    assert {r["thread_id"] for r in du["by_thread"]} == {"alice", "bob"}

    verify = run(["verify", "--url", local_url])
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "OK" in verify.stdout


def test_threads_on_s3_from_the_environment_with_progress(s3_env: dict[str, str]) -> None:
    proc = run(["threads"], s3_env)
    assert proc.returncode == 0, proc.stderr
    assert "carol" in proc.stdout
    assert "threads [" in proc.stderr and "1/1" in proc.stderr  # the progress bar
    shown = run_json(["show", "carol"], s3_env)
    assert shown["channel_values"]["messages"][0] == {
        "role": "human",
        "content": "on s3",
        "id": shown["channel_values"]["messages"][0]["id"],
    }
    assert run(["verify", "carol"], s3_env).returncode == 0


def test_verify_exits_non_zero_naming_the_corrupt_key(local_url: str, tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    page = store.list("threads/_alice/checkpoints/")
    key = page.objects[0].key
    store.put(key, store.get(key)[:-3], PutMode.OVERWRITE)  # truncated
    proc = run(["verify", "--url", local_url])
    assert proc.returncode == 1
    assert key in proc.stdout
    report = json.loads(run(["verify", "--url", local_url, "--json"]).stdout)
    assert report["ok"] is False
    assert any(p["key"] == key for p in report["problems"])


def test_verify_reads_content_objects_only_when_asked(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/depth"
    with ObjectStoreSaver.from_url(url) as saver:
        big = {f"v{i}": os.urandom(250_000) for i in range(6)}  # each a value object alone
        config = {"configurable": {"thread_id": "dora", "checkpoint_ns": ""}}
        checkpoint = {
            "v": 4,
            "id": "1ef00000-0000-6000-8000-000000000001",
            "ts": "2024-01-01T00:00:00+00:00",
            "channel_values": big,
            "channel_versions": dict.fromkeys(big, 1),
            "versions_seen": {},
            "updated_channels": None,
        }
        saver.put(config, checkpoint, {}, dict.fromkeys(big, 1))
    store = LocalStore(tmp_path / "depth")
    victim = store.list("threads/_dora/objects/").objects[0].key
    data = bytearray(store.get(victim))
    data[100] ^= 0xFF
    store.put(victim, bytes(data), PutMode.OVERWRITE)

    default = run(["verify", "--url", url])
    assert default.returncode == 0, default.stdout + default.stderr
    assert "OK (default)" in default.stdout
    report = run_json(["verify", "--url", url])
    assert (report["depth"], report["objects"], report["objects_not_read"]) == ("default", 0, 6)
    full = run(["verify", "--url", url, "--read-data"])
    assert full.returncode == 1 and victim in full.stdout and "(read-data)" in full.stdout
    shares = [run(["verify", "--url", url, "--read-data-subset", f"{i}/2"]) for i in (1, 2)]
    assert sorted(p.returncode for p in shares) == [0, 1]
    assert "(read-data-subset 1/2)" in shares[0].stdout
    bad = run(["verify", "--url", url, "--read-data-subset", "0/2"])
    assert bad.returncode == 2 and "K must be 1 to N" in bad.stderr
    both = run(["verify", "--url", url, "--read-data", "--read-data-subset", "1/2"])
    assert both.returncode == 2


def test_delete_thread_needs_apply(local_url: str) -> None:
    dry = run(["delete-thread", "bob", "--url", local_url])
    assert dry.returncode == 0 and "add --apply" in dry.stdout
    assert "bob" in run(["threads", "--url", local_url]).stdout
    done = run_json(["delete-thread", "bob", "--url", local_url, "--apply"])
    assert done["deleted"] is True
    names = {t["thread_id"] for t in run_json(["threads", "--url", local_url])["threads"]}
    assert names == {"alice"}


def test_prune_is_a_dry_run_by_default(local_url: str, tmp_path: Path) -> None:
    before = sorted(str(p) for p in (tmp_path / "store").rglob("*") if p.is_file())
    report = run_json(["prune", "--keep-last", "1", "--min-age", "0", "--url", local_url])
    assert report["apply"] is False
    assert sorted(str(p) for p in (tmp_path / "store").rglob("*") if p.is_file()) == before


def test_migrate_from_a_saver_factory(tmp_path: Path) -> None:
    (tmp_path / "mysource.py").write_text(
        textwrap.dedent(
            """
        from langgraph.checkpoint.memory import InMemorySaver
        from ops_helpers import chat

        def make():
            saver = InMemorySaver()
            chat(saver, "legacy-1", ["old question", "another"])
            chat(saver, "legacy-2", ["hi"])
            return saver
        """
        )
    )
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), str(HELPERS), str(tmp_path)])}
    url = f"file://{tmp_path}/target"
    dry = run(["migrate", "--from", "saver", "mysource:make", "--url", url], env)
    assert dry.returncode == 0, dry.stderr
    assert "dry run" in dry.stdout
    report = run_json(["migrate", "--from", "saver", "mysource:make", "--url", url, "--apply"], env)
    assert report["threads"]["done"] == 2
    assert report["checkpoints"]["copied"] == report["checkpoints"]["source"] == 9
    assert "old question" in run(["show", "legacy-1", "--url", url]).stdout


def test_migrate_from_postgres_never_prints_the_password(postgres_url: str, tmp_path: Path) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(postgres_url) as source:
        source.setup()
        chat(source, "pg-thread", ["from postgres"])
    url = f"file://{tmp_path}/target"
    proc = run(
        ["migrate", "--from", "postgres", "--url", url, "--apply"], {"POSTGRES_URL": postgres_url}
    )
    assert proc.returncode == 0, proc.stderr
    assert "3 copied" in proc.stdout
    assert PG_PASSWORD not in proc.stdout + proc.stderr
    bad = postgres_url.rsplit("/", 1)[0] + "/no_such_db"
    for args in (["--source-url", bad], ["--json", "--source-url", bad]):
        failed = run(["migrate", "--from", "postgres", "--url", url, *args])
        assert failed.returncode == 3
        assert "no_such_db" in failed.stderr
        assert PG_PASSWORD not in failed.stdout + failed.stderr


def test_configuration_errors_exit_2() -> None:
    missing = run(["threads"])
    assert missing.returncode == 2 and "OBJSTORE_SAVER_URL" in missing.stderr
    creds = run(["threads", "--url", "s3://AKIAX:topsecret@bucket/p"])
    assert creds.returncode == 2
    assert "carries credentials" in creds.stderr and "topsecret" not in creds.stderr


def test_missing_bucket_names_bucket_and_endpoint(s3_endpoint: Any) -> None:
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    url = f"s3://absent-bucket-123/p?endpoint_url={s3_endpoint.url}&region={s3_endpoint.region}"
    proc = run(["du", "--url", url], env)
    assert proc.returncode == 3
    assert "absent-bucket-123" in proc.stderr and s3_endpoint.url in proc.stderr


def test_prune_idle_for_is_a_dry_run_until_apply_with_progress(
    local_url: str, tmp_path: Path
) -> None:
    at = time.time() - 40 * 86400
    for p in (tmp_path / "store" / "threads" / "_bob").rglob("*"):
        if p.is_file():
            os.utime(p, (at, at))
    files = lambda: sorted(str(p) for p in (tmp_path / "store").rglob("*") if p.is_file())  # noqa: E731
    before = files()
    dry = run(["prune", "--idle-for", "30d", "--url", local_url])
    assert dry.returncode == 0, dry.stderr
    assert "idle threads: 1 ('bob')" in dry.stdout and "add --apply" in dry.stdout
    # Progress off a terminal: the first line, then the last; a run under a second claims
    # no rate (tests/ops/test_progress_rate.py).
    assert re.search(r"\] 1/2 alice\n.*\] 2/2 bob\n$", dry.stderr), dry.stderr
    assert files() == before
    report = run_json(["prune", "--idle-for", "30d", "--url", local_url, "--apply"])
    assert report["threads_idle"] == ["bob"] and report["keep_last"] is None
    names = {t["thread_id"] for t in run_json(["threads", "--url", local_url])["threads"]}
    assert names == {"alice"}
    assert [f for f in files() if "/_alice/" in f] == [f for f in before if "/_alice/" in f]


def test_prune_refuses_a_duration_without_unit(local_url: str) -> None:
    proc = run(["prune", "--idle-for", "30", "--url", local_url])
    assert proc.returncode == 2
    assert "--idle-for: invalid duration '30'" in proc.stderr


#: The commands of ``objstore-saver``, in the order its help lists them (README, "Operate it").
COMMAND_NAMES = [
    "threads",
    "history",
    "show",
    "cat",
    "du",
    "verify",
    "delete-thread",
    "prune",
    "migrate",
    "upgrade",
    "rekey",
    "serve",
    "store",
    "store-sweep",
    "store-delete",
]


def _command_paths() -> list[list[str]]:
    paths: list[list[str]] = [[]]
    for entry in cli.COMMANDS:
        paths.append([entry.name])
        if isinstance(entry, cli.CommandGroup):
            paths += [[entry.name, command.name] for command in entry.commands]
    return paths


def test_every_command_is_declared_once_in_the_order_of_the_help() -> None:
    assert [entry.name for entry in cli.COMMANDS] == COMMAND_NAMES
    (store,) = [e for e in cli.COMMANDS if isinstance(e, cli.CommandGroup)]
    assert [command.name for command in store.commands] == ["ls", "get", "du"]
    required = {"history": ["t"], "show": ["t"], "cat": ["k"], "delete-thread": ["t"]}
    required |= {"migrate": ["--from", "sqlite"], "get": ["k"], "store-delete": ["u"]}
    for path in _command_paths()[1:]:
        if path != ["store"]:
            args = cli.build_parser().parse_args([*path, *required.get(path[-1], [])])
            assert args.cli_command.name == path[-1]


@pytest.mark.parametrize("path", _command_paths(), ids=lambda p: " ".join(p) or "objstore-saver")
def test_every_help_text_prints(path: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main([*path, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {' '.join(['objstore-saver', *path])} ")
    if path and path != ["store"]:
        assert "--url URL" in out and "--json" in out and "--no-progress" in out


def test_the_cli_loads_without_the_ui_extra() -> None:
    code = (
        "import sys, objstore_saver.cli; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'starlette', 'uvicorn'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_shard_processes_handle_every_thread_exactly_once(tmp_path: Path) -> None:
    """Four workers started at once, each with --shard K/4, as an Indexed Job runs them."""
    url = f"file://{tmp_path}/store"
    threads = [f"thread-{i:02d}" for i in range(24)]
    with ObjectStoreSaver.from_url(url) as saver:
        for t in threads:
            chat(saver, t, ["hello"])
    env = {k: v for k, v in os.environ.items() if k not in ("OBJSTORE_SAVER_URL", "POSTGRES_URL")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HELPERS)])
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "objstore_saver",
                "prune",
                "--keep-last",
                "1",
                "--min-age",
                "0",
                "--shard",
                f"{k}/4",
                "--url",
                url,
                "--apply",
                "--json",
                "--no-progress",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for k in range(4)
    ]
    handled: list[str] = []
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
        report = json.loads(out)
        assert report["run"]["threads_found"] == len(threads)
        handled += [row["thread_id"] for row in report["threads"]]
    assert sorted(handled) == threads  # each thread once, by one worker
    with ObjectStoreSaver.from_url(url) as saver:
        for t in threads:
            assert len(list(saver.list({"configurable": {"thread_id": t}}))) == 1


def test_progress_shows_rate_and_eta_and_is_throttled_in_logs() -> None:
    from io import StringIO

    now = [0.0]
    log = StringIO()
    bar = cli.ProgressBar(log, "prune", clock=lambda: now[0])
    for done in range(1, 101):
        now[0] = done * 0.5  # two threads a second
        bar(done, 100, f"t{done}")
    lines = log.getvalue().splitlines()
    # Not a terminal: a line every ten seconds at most, and the last one.
    assert [line.split("] ")[1] for line in lines] == [
        "1/100 t1",
        "21/100 2.0/s ETA 40s t21",
        "41/100 2.0/s ETA 30s t41",
        "61/100 2.0/s ETA 20s t61",
        "81/100 2.0/s ETA 10s t81",
        "100/100 2.0/s t100",
    ]
    assert lines[-1] == "prune [" + "#" * 30 + "] 100/100 2.0/s t100"


def test_read_commands_open_an_encrypted_store_with_its_key_only(tmp_path: Path) -> None:
    key = base64.b64encode(os.urandom(32)).decode()
    url = f"file://{tmp_path}/store"
    env = {"OBJSTORE_SAVER_ENCRYPTION_KEY": key}
    writer = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                from objstore_saver import ObjectStoreSaver
                from ops_helpers import chat
                with ObjectStoreSaver.from_url({url!r}) as saver:
                    chat(saver, "alice", ["a secret hello", "second question"])
                """
            ),
        ],
        env={**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HELPERS)])},
        capture_output=True,
        text=True,
        check=False,
    )
    assert writer.returncode == 0, writer.stderr
    stored = [p.read_bytes() for p in (tmp_path / "store").rglob("*") if p.is_file()]
    assert stored and not any(b"secret" in data for data in stored)

    text = run(["show", "alice", "--url", url], env)
    assert text.returncode == 0, text.stderr
    assert "human: a secret hello" in text.stdout
    assert run(["verify", "--url", url], env).returncode == 0
    du = run_json(["du", "--url", url], env)
    assert [r["thread_id"] for r in du["by_thread"]] == ["alice"]
    assert du["by_kind"]["encryption keys"]["objects"] == 1 and "foreign" not in du["by_kind"]

    blind = run(["show", "alice", "--url", url])  # no key configured
    assert blind.returncode != 0
    assert "is encrypted" in blind.stderr and "OBJSTORE_SAVER_ENCRYPTION_KEY" in blind.stderr
    assert "secret" not in blind.stdout + blind.stderr

    done = run_json(["delete-thread", "alice", "--url", url, "--apply"], env)
    assert done["deleted"] is True
    # The key object went too: the thread's tombstone alone is left (spec §4.11).
    left = [p for p in (tmp_path / "store").rglob("*") if p.is_file()]
    the_tombstone([p.relative_to(tmp_path / "store").as_posix() for p in left], "alice")
