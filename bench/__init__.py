"""The benchmark of objstore-saver against other LangGraph savers (bench/README.md).

``python -m bench`` runs the workloads of ``bench/workloads/`` against every
saver of ``bench/savers.py`` and writes ``docs/benchmarks.md`` through
``bench/report/``; ``bench/probes/`` holds the one-question measurements.
"""
