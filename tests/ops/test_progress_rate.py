"""The progress line's rate is the report's, and none is claimed for a blink."""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import AsyncGenerator

from objstore_saver.cli import ProgressBar
from objstore_saver.ops.fanout import MIN_RATE_SECONDS, Fanout, for_each, rate, shown_rate


def test_no_rate_for_a_job_done_within_a_second() -> None:
    """Three key objects rewrapped within microseconds, as rekey's small runs are."""
    now = [0.0]
    out = io.StringIO()
    bar = ProgressBar(out, "rekey", clock=lambda: now[0])
    for done, at in enumerate([0.05, 0.05003, 0.05006], start=1):
        now[0] = at
        bar(done, 3, f"t{done}")
    assert out.getvalue().splitlines() == [
        "rekey [##########....................] 1/3 t1",
        "rekey [##############################] 3/3 t3",
    ]
    assert "/s" not in out.getvalue()
    # The report gives the same formula's number, with the seconds that say how noisy.
    report = Fanout(done=3, seconds=0.05006).to_dict()
    assert report["threads_per_second"] == round(rate(3, 0.05006), 1)
    assert shown_rate(3, MIN_RATE_SECONDS - 0.001) is None


def test_the_rate_counts_from_the_start_of_the_job() -> None:
    """Not from the first thread done: a slow start (listing, first requests) counts."""
    now = [0.0]
    out = io.StringIO()
    bar = ProgressBar(out, "prune", clock=lambda: now[0])
    now[0] = 4.0  # the first thread finishes after 4 s
    bar(1, 9, "t1")
    now[0] = 14.0  # then one a second... or 0.9 a second since the start
    bar(10, 10, "t10")
    assert out.getvalue().splitlines()[-1].endswith("10/10 0.7/s t10")
    assert Fanout(done=10, seconds=14.0).to_dict()["threads_per_second"] == 0.7


def test_the_last_progress_line_and_the_report_give_the_same_rate() -> None:
    out = io.StringIO()
    bar = ProgressBar(out, "verify")

    async def items() -> AsyncGenerator[int, None]:
        await asyncio.sleep(0.4)  # a first listing
        for i in range(8):
            yield i

    async def work(i: int) -> None:
        await asyncio.sleep(0.2)

    stats = asyncio.run(
        for_each(items(), work, lambda i, r: None, concurrency=2, progress=bar, name=str)
    )
    reported = stats.to_dict()["threads_per_second"]
    assert stats.seconds >= MIN_RATE_SECONDS
    (shown,) = re.findall(r"8/8 ([0-9.]+)/s", out.getvalue().splitlines()[-1])
    # The same formula; the report's clock stops a moment after the last line, and
    # both are rounded to a tenth.
    assert abs(float(shown) - reported) < 0.2, (shown, reported)
    # 8 in 1.2 s; counted from the first thread done it would be 7 in 0.6 s (11.7/s).
    assert reported < 8
