"""Test kits shipped with the package, for this project's tests and third-party backends.

* :mod:`~objstore_saver.testing.store_contract`: :class:`StoreContract`, the
  pytest suite every :class:`~objstore_saver.storage.base.ObjectStore` must pass
  (round trips, create-only puts and their races, byte ranges, listing order,
  prefixes and pages, deletes, key validation, timestamps), each test over the
  blocking methods and over the coroutines. A backend's tests subclass it.
* :mod:`~objstore_saver.testing.faults`: :class:`FaultyStore`, a store wrapper
  that injects faults (errors, lost responses, crashes at a chosen request)
  under a saver, fault plans choosing the requests, and botocore client hooks
  that fail chosen HTTP attempts.
* :mod:`~objstore_saver.testing.replication`: :class:`Replicator`, bucket
  replication between two stores as S3, MinIO and Ceph do it (one object at a
  time, in random order, with lag, deletes left behind unless asked for),
  stepped by the test or on a thread of its own; :class:`BothWays` for two
  regions writing, and partitions.

A third-party store runs the contract from its own test suite (pytest needed)::

    import pytest
    from objstore_saver.testing.store_contract import StoreContract

    from my_backend import MyStore


    class TestMyStoreContract(StoreContract):
        max_key_bytes = 1024 - len("prefix/")  # the longest key it accepts

        @pytest.fixture
        def empty_store(self, tmp_path):
            return MyStore(tmp_path / "objects", prefix="prefix/")

Add ``pytest.register_assert_rewrite("objstore_saver.testing")`` to its
``conftest.py`` for pytest's detailed assertion messages. Nothing in the
package imports this subpackage, so pytest is no runtime dependency.
"""
