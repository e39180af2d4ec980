"""Operator jobs: the CLI's commands as plain library calls an engine can host.

Every job takes its store (and database) from an :class:`OpsConfig` built from
the environment (``OBJSTORE_SAVER_URL``, ``POSTGRES_URL``) or given by the
caller, never from a payload a UI would store; long jobs accept a
``progress(done, total, item)`` callback and a ``should_cancel()`` check that
stops cleanly between threads; every job returns a JSON-serializable dict;
errors name what is at fault and carry no secret. Jobs that write or delete
are dry runs unless ``apply=True``.

The rooms: :mod:`.views` and :mod:`.object_views` (``threads``, ``history``,
``show``, ``du``, ``cat``), with :mod:`.checkpoint_reading` and :mod:`.decode`
(values to JSON without unpickling); :mod:`.maintain` (``prune``, ``verify``,
``delete_thread``); :mod:`.migration` and :mod:`.migration_sources`
(``migrate``); :mod:`.upgrade`; :mod:`.rekey`; :mod:`.longterm` (``store ls``,
``get``, ``du``, ``store-sweep``) and :mod:`.longterm_delete`
(``store-delete``). What jobs share: :mod:`._common` (configuration,
progress, cancellation, redaction), :mod:`.fanout` (many threads at once),
:mod:`.sharding` (workers that split a bucket), :mod:`.job_cursor` (where a
job resumes, and the run that moves it) and :mod:`.delete_coalescing` (shared
DeleteObjects requests).

Example (a daily retention job in an application's own scheduler)::

    from objstore_saver import ops

    report = ops.prune(keep_last=20, min_age=60, idle_for=ops.parse_duration("30d"), apply=True)
"""

from objstore_saver.ops._common import JobError, OpsConfig, redact
from objstore_saver.ops.longterm import store_du, store_get, store_ls, store_sweep
from objstore_saver.ops.longterm_delete import astore_delete, store_delete
from objstore_saver.ops.maintain import (
    adelete_threads,
    aprune,
    averify,
    delete_thread,
    delete_threads,
    parse_duration,
    prune,
    verify,
)
from objstore_saver.ops.migration import migrate
from objstore_saver.ops.object_views import cat
from objstore_saver.ops.rekey import arekey, rekey
from objstore_saver.ops.sharding import Shard
from objstore_saver.ops.upgrade import aupgrade, upgrade
from objstore_saver.ops.views import athreads, du, history, show, threads

__all__ = [
    "JobError",
    "OpsConfig",
    "Shard",
    "adelete_threads",
    "aprune",
    "arekey",
    "astore_delete",
    "athreads",
    "aupgrade",
    "averify",
    "cat",
    "delete_thread",
    "delete_threads",
    "du",
    "history",
    "migrate",
    "parse_duration",
    "prune",
    "redact",
    "rekey",
    "show",
    "store_delete",
    "store_du",
    "store_get",
    "store_ls",
    "store_sweep",
    "threads",
    "upgrade",
    "verify",
]
