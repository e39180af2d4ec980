"""``python -m objstore_saver``: the ``objstore-saver`` command line."""

from objstore_saver.cli import entry_point

entry_point()
