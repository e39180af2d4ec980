"""The workloads of ``python -m bench``, each run against every saver.

- ``registry.py``: one declaration per workload (id, title, what it
  measures, which savers, its runner); ``python -m bench`` runs them from there.
- ``sizes.py``: the counts and caps of a run (``FULL``, and ``QUICK`` for ``--quick``).
- ``common.py``: what every workload shares (the run config, the injected
  round trip, measuring a call or a step, error rows).
- One module per family of workloads: ``chat.py`` (1, 1b), ``long_thread.py``
  (2 and 5), ``large_value.py`` (3), ``agent.py`` (4), ``concurrency.py`` (6a, 6b).

Each runner opens fresh saver instances through a
:class:`~bench.savers.SaverSpec` and returns JSON-serializable rows.
"""
