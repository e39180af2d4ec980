"""Pure plans of the spec's algorithms (§6), one module per concern.

Each plan is a generator: it yields :class:`~objstore_saver.plans.requests.Batch`
requests and receives their results, or yields
:class:`~objstore_saver.plans.requests.Emit` items for its caller. It never
performs I/O, so the blocking and the asyncio saver run the very same code
through :class:`~objstore_saver.driver.Driver`.

* :mod:`.context`: what plans share (memories, clocks, write sequence);
* :mod:`.requests`: the requests a plan asks for, and how one is carried out;
* :mod:`.scope`: identifiers of a config, channel versions;
* :mod:`.reading`, :mod:`.values`: objects, manifests, writes and tuples read back;
* :mod:`.lookup`: the latest lookup, get by id, listing (§6.2-6.4);
* :mod:`.checkpoint_put`: ``put`` and ``put_writes`` (§6.1, §6.5), with
  :mod:`.writing` (values encoded and stored) and :mod:`.placement` (where
  each content object goes);
* :mod:`.epochs`: a thread's lifecycle, which epochs a delete ended (§4.11);
* :mod:`.threads`: ``delete_thread``, ``copy_thread``, ``delete_for_runs`` (§6.6-6.8);
* :mod:`.prune`, :mod:`.prune_rules`, :mod:`.extraction`,
  :mod:`.tombstone_sweep`: retention, the two-phase sweep, and the tombstones
  a window has outlived (§6.9);
* :mod:`.verify`: the fsck of checkpoint threads (§6.11), with
  :mod:`.verify_walk` (each reference followed to its object),
  :mod:`.verify_objects` (what is kept of each object, keys read in batches)
  and :mod:`.verify_report` (the report and its problems); the long-term
  store's part is :mod:`objstore_saver.longterm.verify`, and
  :func:`objstore_saver.verify.verify` runs both;
* :mod:`.scan`: every thread of a store for the jobs (§6.12);
* :mod:`.history`: the delta channel history walk (§6.10).
"""

from objstore_saver.plans.checkpoint_put import put, put_writes
from objstore_saver.plans.context import (
    LIST_READ_AHEAD,
    PUT_ATTEMPTS,
    REUSE_WINDOW,
    Context,
    SeqSource,
    Step,
)
from objstore_saver.plans.history import delta_channel_history
from objstore_saver.plans.lookup import (
    find_checkpoint,
    get_tuple,
    latest_id,
    list_checkpoints,
    thread_prefixes,
)
from objstore_saver.plans.prune import prune, prune_thread
from objstore_saver.plans.prune_rules import (
    IDLE_ACTIONS,
    PRUNE_STRATEGIES,
    PRUNE_TOTALS,
    PruneStats,
    Rules,
    prune_report,
    prune_rules,
    prune_summary,
)
from objstore_saver.plans.reading import (
    checkpoint_manifests,
    child_refs,
    decode_checked_manifest,
    effective_writes,
    embedded_name,
    entry_locations,
    entry_refs,
    fetch_entries,
    fetch_objects,
    list_write_keys,
    materialize,
    read_checkpoint_manifest,
    read_manifest,
    read_tuples,
    remember_embedded,
)
from objstore_saver.plans.scan import scan_threads
from objstore_saver.plans.scope import Scope, checkpoint_config, next_version, scope_of
from objstore_saver.plans.threads import (
    ThreadListing,
    copy_thread,
    delete_for_runs,
    delete_listing,
    delete_thread,
    list_thread,
    list_thread_keys,
    thread_id_of,
)
from objstore_saver.plans.verify import verify_thread, verify_threads
from objstore_saver.plans.verify_report import Problem, VerifyReport
from objstore_saver.plans.writing import encode_value

__all__ = [
    "IDLE_ACTIONS",
    "LIST_READ_AHEAD",
    "PRUNE_STRATEGIES",
    "PRUNE_TOTALS",
    "PUT_ATTEMPTS",
    "REUSE_WINDOW",
    "Context",
    "Problem",
    "PruneStats",
    "Rules",
    "Scope",
    "SeqSource",
    "Step",
    "ThreadListing",
    "VerifyReport",
    "checkpoint_config",
    "checkpoint_manifests",
    "child_refs",
    "copy_thread",
    "decode_checked_manifest",
    "delete_for_runs",
    "delete_listing",
    "delete_thread",
    "delta_channel_history",
    "effective_writes",
    "embedded_name",
    "encode_value",
    "entry_locations",
    "entry_refs",
    "fetch_entries",
    "fetch_objects",
    "find_checkpoint",
    "get_tuple",
    "latest_id",
    "list_checkpoints",
    "list_thread",
    "list_thread_keys",
    "list_write_keys",
    "materialize",
    "next_version",
    "prune",
    "prune_report",
    "prune_rules",
    "prune_summary",
    "prune_thread",
    "put",
    "put_writes",
    "read_checkpoint_manifest",
    "read_manifest",
    "read_tuples",
    "remember_embedded",
    "scan_threads",
    "scope_of",
    "thread_id_of",
    "thread_prefixes",
    "verify_thread",
    "verify_threads",
]
