"""The PNG plots of ``docs/benchmarks.md`` (``docs/img/``), drawn with matplotlib."""

from __future__ import annotations

from pathlib import Path

from bench.report.results import ENCRYPTED, OURS, Results


def plots(d: Results, img: Path) -> list[Path]:
    """Draw the PNG plots; return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []
    styles = {
        OURS: {"linewidth": 2.6, "color": "black"},
        # Drawn over OURS, which it follows turn for turn: dotted, so both show.
        ENCRYPTED: {"linewidth": 1.8, "linestyle": ":", "color": "tab:red"},
        "objstore-local": {"linewidth": 1.6, "linestyle": "--", "color": "tab:cyan"},
    }

    def per_turn(
        workload: str,
        field: str,
        scale: float,
        ylabel: str,
        title: str,
        name: str,
        log: bool = False,
        savers: list[str] | None = None,
    ) -> None:
        if not any(d.ok(workload, s) for s in savers or d.savers):
            return
        fig, ax = plt.subplots(figsize=(9, 5.2), dpi=110)
        for s in savers or d.savers:
            r = d.ok(workload, s)
            if not r:
                continue
            xs = [t["turn"] + 1 for t in r["turns"]]
            ys = [t[field] * scale for t in r["turns"]]
            ax.plot(xs, ys, marker=".", label=d.labels[s], **styles.get(s, {"linewidth": 1.3}))
        ax.set_xlabel("turn")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        if log:
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        fig.tight_layout()
        path = img / name
        fig.savefig(path)
        plt.close(fig)
        made.append(path)

    per_turn(
        "1",
        "bytes_written",
        1 / 1024,
        "bytes written per turn (KiB, log scale)",
        "Workload 1 (seed chat): bytes written per turn",
        "w1_bytes_per_turn.png",
        log=True,
    )
    per_turn(
        "1b",
        "bytes_written",
        1 / 1024,
        "bytes written per turn (KiB, log scale)",
        "Workload 1b (realistic words): bytes written per turn",
        "w1b_bytes_per_turn.png",
        log=True,
    )
    s3 = [s for s in d.savers if d.doc["savers"][s]["storage"] == "s3"]
    per_turn(
        "1",
        "total_requests",
        1,
        "S3 requests per turn",
        "Workload 1: S3 requests per turn (HTTP requests at the proxy)",
        "w1_requests_per_turn.png",
        savers=s3,
    )
    per_turn(
        "1",
        "wall_s",
        1000,
        "simulated latency per turn (ms)",
        f"Workload 1: turn latency with {d.doc['sizes']['delay_ms']:.0f} ms injected "
        "per S3 request",
        "w1_latency_per_turn.png",
        savers=s3,
    )

    fig, ax = plt.subplots(figsize=(9, 5.2), dpi=110)
    for s in d.savers:
        r = d.ok("2", s)
        if not r or not r["bytes_per_turn"]:
            continue
        ys = [b / 1024 for b in r["bytes_per_turn"]]
        ax.plot(
            range(1, len(ys) + 1),
            ys,
            label=f"{d.labels[s]} ({len(ys)} turns)",
            **styles.get(s, {"linewidth": 1.3}),
        )
    ax.set_xlabel("turn")
    ax.set_ylabel("bytes written per turn (KiB, log scale)")
    ax.set_yscale("log")
    ax.set_title("Workload 2 (long thread): bytes written per turn")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    path = img / "w2_bytes_per_turn.png"
    fig.savefig(path)
    plt.close(fig)
    made.append(path)
    return made
