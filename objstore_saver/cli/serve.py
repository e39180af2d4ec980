"""``serve``: the read-only web viewer (the optional ``ui`` extra: starlette, uvicorn)."""

from __future__ import annotations

import argparse
import os

from objstore_saver.cli.common import EXIT_OK, Command, Outcome, ProgressBar, json_text
from objstore_saver.crypto.layer import sealed
from objstore_saver.errors import ConfigurationError
from objstore_saver.ops._common import OpsConfig
from objstore_saver.storage.urls import store_from_url


def _add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free)")
    parser.add_argument("--token", help="require this token (default $OBJSTORE_SAVER_VIEWER_TOKEN)")


def _run_serve(args: argparse.Namespace, config: OpsConfig, progress: ProgressBar) -> Outcome:
    # Imported here: the other commands must run without the ui extra installed.
    try:
        from objstore_saver.viewer.app import TOKEN_ENV, serve
    except ImportError as exc:
        raise ConfigurationError(
            f"serve needs the ui extra ({exc}): pip install 'objstore-saver[ui]'"
        ) from exc
    token = args.token or os.environ.get(TOKEN_ENV) or None
    try:
        store, _ = sealed(store_from_url(config.require_url()))
        serve(store, args.host, args.port, token, config.secrets())
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from exc
    return {"served": f"{args.host}:{args.port}"}, EXIT_OK


SERVE = Command(
    name="serve",
    help="read-only web viewer (extra: ui)",
    add_arguments=_add_serve_arguments,
    run=_run_serve,
    render=json_text,
)
