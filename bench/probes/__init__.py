"""Measurements run by hand, each a command answering one question.

``python -m bench.probes.NAME --help`` says what each measures; bench/README.md
lists them. They use the suite's parts (the S3 server process, the metering
proxy, the savers, the graphs, the workloads' helpers) and write nothing but
their output. The suite (``python -m bench``) never imports them.
"""
