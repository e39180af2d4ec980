"""Pure plans of the spec's algorithms (§6), one module per concern.

A plan is a generator: it yields :class:`~objstore_saver.plans.requests.Batch`
requests and receives their results, or yields ``Emit`` items for its caller.
It never performs I/O: both savers run it through :class:`~objstore_saver.driver.Driver`.

* :mod:`.context` (what plans share), :mod:`.requests` (what they ask for);
* :mod:`.reading`, :mod:`.values`: objects, manifests, writes and tuples read back;
* :mod:`.lookup`: the latest lookup, get by id, listing (§6.2-6.4);
* :mod:`.checkpoint_put`: ``put`` and ``put_writes`` (§6.1, §6.5), with :mod:`.writing`
  (values encoded, objects stored) and :mod:`.placement` (where each object goes);
* :mod:`.epochs`: a thread's lifecycle (§4.11); :mod:`.threads`: ``delete_thread``,
  ``copy_thread``, ``delete_for_runs`` (§6.6-6.8);
* :mod:`.prune`, :mod:`.prune_rules`: retention and its rules and report (§6.9);
* :mod:`.verify` with :mod:`.verify_walk`, :mod:`.verify_objects` and
  :mod:`.verify_report`: the fsck of checkpoint threads (§6.11);
* :mod:`.scan`: every thread of a store for the jobs (§6.12);
  :mod:`.history`: the delta channel history walk (§6.10).

Re-exported below: the names the saver, ``ops`` and the viewer use.
"""

from objstore_saver.format.keys import Scope as Scope, next_version as next_version
from objstore_saver.plans.checkpoint_put import put as put, put_writes as put_writes
from objstore_saver.plans.context import (
    REUSE_WINDOW as REUSE_WINDOW,
    Context as Context,
    Step as Step,
)
from objstore_saver.plans.history import delta_channel_history as delta_channel_history
from objstore_saver.plans.lookup import (
    find_checkpoint as find_checkpoint,
    get_tuple as get_tuple,
    latest_id as latest_id,
    list_checkpoints as list_checkpoints,
)
from objstore_saver.plans.prune import prune as prune, prune_thread as prune_thread
from objstore_saver.plans.prune_rules import (
    IDLE_ACTIONS as IDLE_ACTIONS,
    prune_rules as prune_rules,
)
from objstore_saver.plans.reading import (
    checkpoint_manifests as checkpoint_manifests,
    child_refs as child_refs,
    decode_checked_manifest as decode_checked_manifest,
    effective_writes as effective_writes,
    embedded_name as embedded_name,
    fetch_entries as fetch_entries,
    materialize as materialize,
    read_checkpoint_manifest as read_checkpoint_manifest,
    read_tuples as read_tuples,
    remember_embedded as remember_embedded,
)
from objstore_saver.plans.scan import scan_threads as scan_threads
from objstore_saver.plans.threads import (
    ThreadListing as ThreadListing,
    copy_thread as copy_thread,
    delete_for_runs as delete_for_runs,
    delete_listing as delete_listing,
    delete_thread as delete_thread,
    list_thread as list_thread,
    thread_id_of as thread_id_of,
)
