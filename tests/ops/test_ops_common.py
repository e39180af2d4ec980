"""Job configuration and redaction, and the CLI's progress bar."""

from __future__ import annotations

import io

from objstore_saver.cli import ProgressBar
from objstore_saver.ops import OpsConfig, redact


def test_config_from_env_and_overrides() -> None:
    env = {"OBJSTORE_SAVER_URL": "file:///a", "POSTGRES_URL": "postgresql://u:pw1@h/db"}
    config = OpsConfig.from_env(env)
    assert config.url == "file:///a" and config.postgres_url == env["POSTGRES_URL"]
    assert OpsConfig.from_env(env, url="file:///b", postgres_url=None).url == "file:///b"
    assert "pw1" not in repr(config)
    assert "pw1" in config.secrets()


def test_redact_urls_conninfo_and_known_secrets() -> None:
    assert redact("failed: postgresql://u:hunter2@h:5432/db", []) == (
        "failed: postgresql://u:***@h:5432/db"
    )
    assert redact("host=h password=hunter2 dbname=x", []) == "host=h password=*** dbname=x"
    assert redact("the secret hunter2 leaked", ["hunter2"]) == "the secret *** leaked"
    encoded = OpsConfig(postgres_url="postgresql://u:p%40ss@h/db").secrets()
    assert "p@ss" in encoded and "p%40ss" in encoded


def test_progress_bar_plain_text_when_not_a_terminal() -> None:
    out = io.StringIO()
    times = iter([0.0, 0.5, 5.5, 15.0, 20.0])  # the first: the bar's creation
    bar = ProgressBar(out, "migrate", clock=lambda: next(times))
    bar(1, 4, "thread-a")  # within the first second: no rate
    bar(2, 4, "thread-b")  # 5 s after the last line: not written (one every 10 s)
    bar(3, 4, "thread-c")  # 3 threads in 15 s, 1 to go
    bar(4, 4, "thread-d")  # the last line is always written
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines == [
        "migrate [#######.......................] 1/4 thread-a",
        "migrate [######################........] 3/4 0.2/s ETA 5s thread-c",
        "migrate [##############################] 4/4 0.2/s thread-d",
    ]
    quiet = io.StringIO()
    ProgressBar(quiet, "x", enabled=False)(1, 2, "t")
    assert quiet.getvalue() == ""
