"""The operator docs say true things: their code runs, their JSON and YAML parse,
their policies are scoped, and the local compose files are well formed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _blocks(doc: str, lang: str) -> list[str]:
    text = (DOCS / doc).read_text()
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_index_links_every_doc() -> None:
    index = (DOCS / "index.md").read_text()
    for name in (
        "quickstart.md",
        "configuration.md",
        "minio.md",
        "auditing.md",
        "runbooks.md",
        "scheduling.md",
        "iam.md",
        "spec.md",
    ):
        assert f"]({name})" in index, name
        assert (DOCS / name).is_file(), name
    for target in re.findall(r"\]\((\.\./[^)]+)\)", index):
        assert (DOCS / target).resolve().is_file(), target


def test_quickstart_runs_as_written_and_the_audit_script_reads_its_output(
    tmp_path: Path,
) -> None:
    (chat,) = _blocks("quickstart.md", "python")[:1]
    (tmp_path / "chat.py").write_text(chat)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    console = _blocks("quickstart.md", "console")[0]
    expected = [line for line in console.splitlines() if not line.startswith("$ ")]
    got = []
    for said in ("my name is Alice", "I like tea"):
        run = subprocess.run(
            [sys.executable, "chat.py", said],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        got.append(run.stdout.strip())
    assert got == expected

    (audit,) = [b for b in _blocks("auditing.md", "python") if "msgpack.unpackb" in b]
    (tmp_path / "audit.py").write_text(audit)
    folder = tmp_path / "agent-memory/threads/_alice/checkpoints/_"
    manifests = sorted(p for p in folder.iterdir() if p.name.endswith(".2"))
    run = subprocess.run(
        [sys.executable, "audit.py", str(manifests[0])],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.startswith("kind: manifest  format: 2\nthread_id: 'alice'\n")
    assert "channel messages: inline msgpack" in run.stdout


def test_the_audit_script_follows_a_long_chat_into_its_segments(tmp_path: Path) -> None:
    """The script of auditing.md, on a thread whose messages sealed and merged segments."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.base import empty_checkpoint

    from objstore_saver import LocalStore, ObjectStoreSaver

    (audit,) = [b for b in _blocks("auditing.md", "python") if "msgpack.unpackb" in b]
    (tmp_path / "audit.py").write_text(audit)
    cfg: dict[str, Any] = {"configurable": {"thread_id": "long", "checkpoint_ns": ""}}
    messages: list[Any] = []
    with ObjectStoreSaver(LocalStore(tmp_path / "store")) as saver:
        for turn in range(20):  # 40 messages: a segment of 32, one of 8
            messages = [*messages, HumanMessage(f"q{turn} " + "x" * 300, id=f"h{turn}")]
            messages = [*messages, AIMessage(f"a{turn} " + "y" * 300, id=f"a{turn}")]
            cp = empty_checkpoint()
            cp["channel_values"] = {"messages": messages}
            cp["channel_versions"] = {"messages": turn + 1}
            cfg = saver.put(cfg, cp, {}, {"messages": turn + 1})
    folder = tmp_path / "store/threads/_long/checkpoints/_"
    outputs = [
        subprocess.run(
            [sys.executable, "audit.py", str(p)], cwd=tmp_path, capture_output=True, text=True
        ).stdout
        for p in sorted(folder.iterdir())
    ]
    head = outputs[0]  # the newest manifest lists first: it sealed the last 8
    assert "channel messages: list of 40: segments ['32 embedded in checkpoint" in head
    assert "'8 embedded here'], tail of 0" in head
    assert len(re.findall(r"embeds [0-9a-f]{64} segment", head)) == 1
    # The manifest that merged the first 32 embeds them, under their SHA-256.
    (merged,) = [o for o in outputs if "segments ['32 embedded here'" in o]
    assert len(re.findall(r"embeds [0-9a-f]{64} segment", merged)) == 1


def _audit(tmp_path: Path, manifest: Path) -> str:
    """The output of auditing.md's script on ``manifest``, given the dictionary D1."""
    d1 = ROOT / "objstore_saver/format/zdict/d1.bin"
    run = subprocess.run(
        [sys.executable, "audit.py", str(manifest), str(d1)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    return run.stdout


def test_the_audit_script_reads_embedded_values_as_the_saver_does(tmp_path: Path) -> None:
    """Long messages of random words are values embedded in manifests; the script follows
    their located references (tail, segments, channel and metadata entries) to the bytes
    the saver reads, before and after prune deletes the manifests that embed them."""
    import hashlib
    import random

    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.base import empty_checkpoint

    from objstore_saver import LocalStore, ObjectStoreSaver

    (audit,) = [b for b in _blocks("auditing.md", "python") if "msgpack.unpackb" in b]
    (tmp_path / "audit.py").write_text(audit)
    rng = random.Random(3)
    vocabulary = [
        "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(3000)
    ]

    def words(n: int) -> str:
        return " ".join(rng.choices(vocabulary, k=n))

    store = LocalStore(tmp_path / "store")
    cfg: dict[str, Any] = {"configurable": {"thread_id": "long", "checkpoint_ns": ""}}
    messages: list[Any] = []
    notes = ""
    with ObjectStoreSaver(store) as saver:
        for turn in range(21):  # 42 messages: segments of 32 and 8, a tail of 2
            answer = words(60) if turn % 3 == 0 else f"ok {turn}"
            messages = [*messages, HumanMessage(words(80), id=f"h{turn}")]
            messages = [*messages, AIMessage(answer, id=f"a{turn}")]
            notes = words(400) if turn % 6 == 0 else notes  # a value later puts keep
            metadata = {"step": turn, "summary": words(300) if turn == 19 else ""}
            cp = empty_checkpoint()
            cp["channel_values"] = {"messages": messages, "notes": notes}
            versions = {"messages": turn + 1, "notes": turn // 6 + 1}
            cp["channel_versions"] = dict(versions)
            cfg = saver.put(cfg, cp, metadata, versions)
    folder = tmp_path / "store/threads/_long/checkpoints/_"

    def sha(value: Any) -> str:
        return hashlib.sha256(saver.serde.dumps_typed(value)[1]).hexdigest()[:16]

    def check(reads: str) -> None:
        """Every manifest's output names the bytes the saver reads from that checkpoint."""
        with ObjectStoreSaver(store) as fresh:
            tuples = list(fresh.list({"configurable": {"thread_id": "long"}}))
        assert tuples
        outputs = [_audit(tmp_path, p) for p in folder.glob("*.2")]
        for t in tuples:
            cid = t.config["configurable"]["checkpoint_id"]
            (out,) = [o for o in outputs if f"\ncheckpoint_id: '{cid}'" in o]
            shown = dict(
                re.findall(r"^(channel \S+|metadata|  \d+): .*? sha256 ([0-9a-f]{16})…", out, re.M)
            )
            values = t.checkpoint["channel_values"]
            want = {f"  {i}": sha(m) for i, m in enumerate(values["messages"])}
            want |= {"channel notes": sha(values["notes"]), "metadata": sha(t.metadata)}
            assert {k: shown.get(k) for k in want} == want, out
            assert reads in out or cid != tuples[0].config["configurable"]["checkpoint_id"], out

    head = _audit(tmp_path, sorted(folder.glob("*.2"))[0])
    assert re.search(
        r"^  0: value embedded in checkpoint [0-9a-f-]{36}: ", head, re.M
    )  # a segment's
    assert re.search(r"^  40: value embedded here: ", head, re.M)  # the tail's
    assert re.search(r"^channel notes: value embedded in checkpoint ", head, re.M)
    assert "metadata: inline" in head
    embedded_metadata = [
        p for p in folder.glob("*.2") if "metadata: value embedded here" in _audit(tmp_path, p)
    ]
    assert len(embedded_metadata) == 1
    check("value embedded in checkpoint")
    with ObjectStoreSaver(store) as saver:
        saver.prune(["long"], keep_last=2)
    assert len(list(folder.glob("*.2"))) == 2
    check(", read in objects/")


def _policies() -> list[dict[str, Any]]:
    return [json.loads(b) for b in _blocks("iam.md", "json")]


def test_iam_policies_parse_and_grant_only_the_four_actions_under_the_prefix() -> None:
    policies = _policies()
    assert len(policies) == 3
    allowed = {"s3:ListBucket", "s3:GetObject", "s3:PutObject", "s3:DeleteObject"}
    for policy in policies:
        assert policy["Version"] == "2012-10-17"
        for st in policy["Statement"]:
            assert st["Effect"] == "Allow"
            actions = {st["Action"]} if isinstance(st["Action"], str) else set(st["Action"])
            assert actions <= allowed, st
            if actions == {"s3:ListBucket"}:
                assert st["Resource"] == "arn:aws:s3:::agent-memory"
                assert st["Condition"]["StringLikeIfExists"]["s3:prefix"] == ["prod/*"]
            else:
                resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
                for resource in resources:
                    assert resource.startswith("arn:aws:s3:::agent-memory/prod/"), st


def test_the_prune_policy_writes_only_sweep_marks_and_content_objects() -> None:
    _, prune, bucket = _policies()
    for policy, sid in ((prune, "WriteMarksAndObjectsOnly"), (bucket, "PruneMarksAndObjects")):
        puts = [s for s in policy["Statement"] if "s3:PutObject" in s["Action"]]
        puts = [s for s in puts if s["Sid"] == sid]
        assert [s["Resource"] for s in puts] == [
            [
                "arn:aws:s3:::agent-memory/prod/threads/*/marks/*",
                "arn:aws:s3:::agent-memory/prod/threads/*/objects/*",
            ]
        ]
    deletes = [s for s in prune["Statement"] if "s3:DeleteObject" in s["Action"]]
    assert deletes, "the prune job must be able to delete"


def test_scheduling_cron_line_and_cronjob_manifest() -> None:
    (cron,) = _blocks("scheduling.md", "cron")
    line = next(ln for ln in cron.splitlines() if ln and not ln.startswith("CRON_TZ"))
    assert "CRON_TZ=UTC" in cron
    assert line.startswith("0 3 * * * ")
    assert "--idle-for 30d --keep-last 20 --min-age 60 --apply" in line
    manifest = yaml.safe_load(_blocks("scheduling.md", "yaml")[0])
    assert manifest["apiVersion"] == "batch/v1" and manifest["kind"] == "CronJob"
    spec = manifest["spec"]
    assert spec["schedule"] == "0 3 * * *" and spec["timeZone"] == "Etc/UTC"
    assert spec["concurrencyPolicy"] == "Forbid"
    (container,) = spec["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    cmd = container["command"]
    assert cmd[:2] == ["objstore-saver", "prune"] and "--apply" in cmd
    assert cmd[cmd.index("--keep-last") + 1] == "20" and cmd[cmd.index("--min-age") + 1] == "60"
    assert cmd[cmd.index("--idle-for") + 1] == "30d"
    # The CLI's own parser accepts the job's arguments as written.
    from objstore_saver.cli import build_parser

    for argv in (line.split("objstore-saver ", 1)[1].split(" >>")[0].split(), cmd[1:]):
        args = build_parser().parse_args(argv)
        assert args.idle_for == 30 * 86400 and args.keep_last == 20 and args.apply
    assert {e["name"] for e in container["env"]} == {"OBJSTORE_SAVER_URL"}


def test_scheduling_indexed_job_shards_parse_with_the_cli() -> None:
    """Each shard of the Indexed Job's prune, verify and migrate commands, as Kubernetes
    expands $(JOB_COMPLETION_INDEX), parses to its own shard; one past the last is refused."""
    from objstore_saver.cli import build_parser
    from objstore_saver.ops import Shard

    _cronjob, job, verify, migrate = [yaml.safe_load(b) for b in _blocks("scheduling.md", "yaml")]
    assert job["kind"] == "Job" and job["spec"]["completionMode"] == "Indexed"
    n = job["spec"]["completions"]
    assert job["spec"]["parallelism"] == n > 1
    (container,) = job["spec"]["template"]["spec"]["containers"]
    commands = [container["command"], verify["command"], migrate["command"]]
    assert [c[1] for c in commands] == ["prune", "verify", "migrate"]
    for command in commands:
        assert command[0] == "objstore-saver"
        assert "$(JOB_COMPLETION_INDEX)" in command[command.index("--shard") + 1]
        for k in range(n + 1):
            argv = [a.replace("$(JOB_COMPLETION_INDEX)", str(k)) for a in command[1:]]
            if k == n:
                with pytest.raises(SystemExit):
                    build_parser().parse_args(argv)
                continue
            args = build_parser().parse_args(argv)
            assert args.shard == Shard(k, n)
    assert {e["name"] for e in migrate["env"]} == {"POSTGRES_URL"}


@pytest.mark.parametrize("name", ["minio", "localstack"])
def test_compose_files_are_pinned_and_healthchecked(name: str) -> None:
    compose = yaml.safe_load((ROOT / "localstack" / name / "docker-compose.yml").read_text())
    services = compose["services"]
    for service in services.values():
        image = service["image"]
        repo, _, tag = image.rpartition(":")
        assert repo and tag and tag != "latest", image
    server = services["minio" if name == "minio" else "localstack"]
    assert server["healthcheck"]["test"]
    readme = (ROOT / "localstack" / name / "README.md").read_text()
    for var in (
        "OBJSTORE_SAVER_URL",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "OBJSTORE_TEST_ENDPOINT",
        "OBJSTORE_TEST_ACCESS_KEY",
        "OBJSTORE_TEST_SECRET_KEY",
        "OBJSTORE_TEST_REGION",
    ):
        assert f"export {var}=" in readme, var
    if name == "minio":
        init = services["create-bucket"]
        assert init["depends_on"]["minio"]["condition"] == "service_healthy"
        assert "mc mb --ignore-existing local/agent-memory" in init["command"][0]
    else:
        (volume,) = server["volumes"]
        hook = volume.split(":")[0]
        assert volume.split(":")[1].startswith("/etc/localstack/init/ready.d/")
        script = (ROOT / "localstack" / name / hook).read_text()
        assert "awslocal s3 mb s3://agent-memory" in script


def test_the_lifecycle_example_never_expires_a_current_object(
    s3_endpoint: Any, s3_bucket: str
) -> None:
    (lifecycle,) = [json.loads(b) for b in _blocks("runbooks.md", "json")]
    for rule in lifecycle["Rules"]:
        assert rule["Status"] == "Enabled" and rule["Filter"] == {"Prefix": "prod/"}
        # Only incomplete uploads, noncurrent versions and delete markers: no
        # rule may expire (or transition) a current object by its age.
        assert set(rule.get("Expiration", {})) <= {"ExpiredObjectDeleteMarker"}, rule
        assert "Transitions" not in rule and "Transition" not in rule
    # An S3 API accepts it as written.
    client = s3_endpoint.client()
    client.put_bucket_lifecycle_configuration(Bucket=s3_bucket, LifecycleConfiguration=lifecycle)
    stored = client.get_bucket_lifecycle_configuration(Bucket=s3_bucket)["Rules"]
    assert sorted(r["ID"] for r in stored) == sorted(r["ID"] for r in lifecycle["Rules"])
