"""How much package code one request path runs, and how large the package is.

``python -m bench.probes.code_size`` plays four turns of the seed chat on a
LeanS3Store over moto's server (in this process, on loopback), then counts
the distinct functions of ``objstore_saver`` (and the files they are in) that
one warm ``put`` of the next checkpoint calls, in clear and with client-side
encryption; the package's lines per folder and by kind (code, docstrings,
``#`` comments, blank); and the folders that import each
other. The counts are the code's,
not the machine's: they move only when the code does.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
from langgraph.checkpoint.base.id import uuid6

import objstore_saver
from bench.graphs import SEED, chat_graph
from bench.server import MotoBackend
from objstore_saver import ObjectStoreSaver
from objstore_saver.crypto import ClientEncryption
from objstore_saver.crypto.master_keys import LocalMasterKey

PACKAGE = Path(objstore_saver.__file__).resolve().parent


def lines_per_folder() -> dict[str, int]:
    """Lines of the package's modules by folder (``(top)``: the modules at its root)."""
    out: Counter[str] = Counter()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).parts
        out[parts[0] if len(parts) > 1 else "(top)"] += len(path.read_bytes().splitlines())
    return dict(out.most_common())


def line_kinds() -> dict[str, int]:
    """The package's lines by kind: docstrings, ``#`` comment lines, blank lines, and code.

    A line inside a docstring counts as docstring, blank or not.
    """
    out: Counter[str] = Counter()
    documented = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        lines = text.splitlines()
        doc: set[int] = set()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, documented) and ast.get_docstring(node, clean=False) is not None:
                first = node.body[0]
                doc.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
        rest = [line.strip() for n, line in enumerate(lines, 1) if n not in doc]
        out["total"] += len(lines)
        out["docstring"] += len(doc)
        out["blank"] += sum(1 for line in rest if not line)
        out["comment"] += sum(1 for line in rest if line.startswith("#"))
    out["code"] = out["total"] - out["blank"] - out["comment"] - out["docstring"]
    return dict(out)


def folder_loops() -> list[list[str]]:
    """Pairs of the package's folders that import each other (module-level imports).

    A folder is a subpackage; the modules at the package's root are not one
    (they are the layers that assemble the folders: the saver, its drivers).
    """

    def folder(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else None

    edges: set[tuple[str, str]] = set()
    for path in PACKAGE.rglob("*.py"):
        here = folder(".".join(("objstore_saver", *path.relative_to(PACKAGE).parts)))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            for there in (folder(t) for t in targets if t.startswith("objstore_saver.")):
                if here and there and here != there:
                    edges.add((here, there))
    return sorted([a, b] for a, b in edges if a < b and (b, a) in edges)


def _warm_put_calls(url: str, bucket: str, encrypted: bool) -> list[str]:
    """``module:line function`` of each package function one warm put calls, after four turns."""
    options: dict[str, Any] = {}
    if encrypted:
        options["client_encryption"] = ClientEncryption.of(LocalMasterKey(os.urandom(32)))
    store_url = f"s3://{bucket}/p?endpoint_url={url}&region=us-east-1"
    with ObjectStoreSaver.from_url(store_url, **options) as saver:
        config = {"configurable": {"thread_id": "t"}}
        graph = chat_graph(saver, SEED)
        for t in range(4):
            graph.invoke({"messages": SEED.inputs(t)}, config)
        head = saver.get_tuple(config)
        assert head is not None
        checkpoint = {**head.checkpoint, "id": str(uuid6())}
        called: set[tuple[str, int, str]] = set()
        root = str(PACKAGE)

        def hook(frame: Any, event: str, _arg: Any) -> None:
            code = frame.f_code
            if event == "call" and code.co_filename.startswith(root):
                called.add((code.co_filename, code.co_firstlineno, code.co_qualname))

        threading.setprofile(hook)  # the store's worker threads, too
        sys.setprofile(hook)
        try:
            saver.put(head.config, checkpoint, {"step": 9, "source": "loop"}, {})
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
    return sorted(f"{Path(f).relative_to(PACKAGE)}:{line} {name}" for f, line, name in called)


def run(list_functions: bool = False) -> dict[str, Any]:
    """The counts of both puts and the package's size (and the functions, when asked)."""
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    saved = {k: os.environ.get(k) for k in (*env, "OBJSTORE_SAVER_ENCRYPTION_KEY")}
    os.environ.update(env)
    os.environ.pop("OBJSTORE_SAVER_ENCRYPTION_KEY", None)
    server = MotoBackend()
    try:
        client = boto3.client(
            "s3",
            endpoint_url=server.url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        out: dict[str, Any] = {}
        for name, encrypted in (("warm_put", False), ("warm_put_encrypted", True)):
            bucket = f"code-size-{name.replace('_', '-')}"
            client.create_bucket(Bucket=bucket)
            called = _warm_put_calls(server.url, bucket, encrypted)
            files = {c.split(":", 1)[0] for c in called}
            out[name] = {"functions": len(called), "files": len(files)}
            if list_functions:
                out[name]["called"] = called
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    folders = lines_per_folder()
    out["package_lines"] = sum(folders.values())
    out["lines_per_folder"] = folders
    out["line_kinds"] = line_kinds()
    out["folder_loops"] = folder_loops()
    return out


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--list", action="store_true", help="also name every function each put calls"
    )
    print(json.dumps(run(parser.parse_args().list), indent=1))


if __name__ == "__main__":
    main()
