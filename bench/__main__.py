"""Entry point: ``python -m bench [--quick]``."""

from bench.run import main

main()
