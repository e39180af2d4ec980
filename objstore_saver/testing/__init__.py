"""Test kits shipped with the package, for this project's tests and third-party backends.

* :mod:`~objstore_saver.testing.faults`: a store wrapper that injects faults
  (errors, lost responses, crashes at a chosen request) and botocore hooks.
"""
