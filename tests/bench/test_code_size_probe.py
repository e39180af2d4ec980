"""bench/probes/code_size.py: the functions one warm put runs, and the package's lines."""

from __future__ import annotations

from pathlib import Path

import objstore_saver
from bench.probes import code_size


def test_it_counts_the_functions_of_a_warm_put_and_the_lines_per_folder() -> None:
    r = code_size.run()
    plain, sealed = r["warm_put"], r["warm_put_encrypted"]
    # The plans, the drivers, the store, the codec: dozens of functions in a score of files;
    # encryption adds the sealing layer's.
    assert 50 < plain["functions"] < sealed["functions"]
    assert 10 < plain["files"] < sealed["files"]
    package = Path(objstore_saver.__file__).parent
    every = sum(len(p.read_bytes().splitlines()) for p in package.rglob("*.py"))
    assert r["package_lines"] == every == sum(r["lines_per_folder"].values())
    assert {"storage", "plans", "crypto", "(top)"} <= set(r["lines_per_folder"])
