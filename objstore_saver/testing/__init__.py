"""Test kits shipped with the package, for this project's tests and third-party backends.

* :mod:`~objstore_saver.testing.store_contract`: :class:`StoreContract`, the
  pytest suite every :class:`~objstore_saver.storage.base.ObjectStore` must pass,
  over the blocking methods and over the coroutines.
* :mod:`~objstore_saver.testing.faults`: :class:`FaultyStore`, a store wrapper
  that injects faults at chosen requests, and botocore client hooks that fail
  chosen HTTP attempts.
* :mod:`~objstore_saver.testing.replication`: :class:`Replicator`, bucket
  replication between two stores as S3, MinIO and Ceph do it, and
  :class:`BothWays` for two regions writing.

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
