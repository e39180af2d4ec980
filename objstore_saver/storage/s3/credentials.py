"""The lean S3 transport's credentials: botocore's chain, refreshed off the event loop
(a role assumed, the metadata service) by :meth:`CredentialChain.ready`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any

from botocore.exceptions import BotoCoreError

from objstore_saver.storage.base import StoreUnavailableError
from objstore_saver.storage.s3.sigv4 import Credentials


class CredentialChain:
    """Frozen credentials from a botocore/boto3 session, resolved at first use: a call
    returns them, resolving or refreshing in the calling thread when due (coroutines
    await :meth:`ready` first)."""

    def __init__(self, session: Any, where: str) -> None:
        self._session = session
        self._where = where
        self._source: Any = None
        self._frozen: Credentials | None = None
        self._lock = threading.Lock()
        self._pending: concurrent.futures.Future[Credentials] | None = None

    def _unavailable(self, exc: BotoCoreError) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"{self._where} is unavailable: credentials could not be refreshed "
            f"({type(exc).__name__}: {exc})"
        )

    def _resolved_source(self) -> Any:
        source = self._source
        if source is None:
            try:
                source = self._session.get_credentials()
            except BotoCoreError as exc:
                raise self._unavailable(exc) from exc
            if source is None:
                raise StoreUnavailableError(
                    f"{self._where} is unavailable: no credentials found in boto3's chain "
                    "(environment, shared files, instance or container role)"
                )
            self._source = source
        return source

    def __call__(self) -> Credentials:
        """The credentials to sign the next request with (else StoreUnavailableError)."""
        source = self._resolved_source()
        try:
            current = source.get_frozen_credentials()
        except BotoCoreError as exc:
            raise self._unavailable(exc) from exc
        frozen = self._frozen
        if (
            frozen is None
            or frozen.access_key != current.access_key
            or frozen.secret_key != current.secret_key
            or frozen.token != current.token
        ):
            frozen = self._frozen = Credentials(
                current.access_key, current.secret_key, current.token
            )
        return frozen

    def refresh_due(self) -> bool:
        """Whether the next call would resolve or refresh (and so block)."""
        source = self._source
        if source is None:
            return True
        refresh_needed = getattr(source, "refresh_needed", None)
        return bool(refresh_needed is not None and refresh_needed())

    async def ready(self) -> None:
        """Resolve or refresh the credentials in a worker thread if it is due, one refresh
        at a time (a coroutine arriving meanwhile waits for it; cancelling it does not)."""
        if not self.refresh_due():
            return
        with self._lock:
            pending = self._pending
            if pending is None:
                pending = self._pending = concurrent.futures.Future()
                threading.Thread(
                    target=self._refresh_into,
                    args=(pending,),
                    name="objstore-s3-credentials",
                    daemon=True,
                ).start()
        await asyncio.shield(asyncio.wrap_future(pending))

    def _refresh_into(self, pending: concurrent.futures.Future[Credentials]) -> None:
        try:
            result = self()
        except BaseException as exc:  # noqa: BLE001  # handed to every waiting coroutine
            with self._lock:
                self._pending = None
            pending.set_exception(exc)
        else:
            with self._lock:
                self._pending = None
            pending.set_result(result)
