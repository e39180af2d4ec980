"""When the lean transport tries a request again, and how long it waits first: botocore's
``standard`` mode with two differences (docs/transport.md, "Retries")."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

from objstore_saver.storage.http.messages import Reply, TransportFailure
from objstore_saver.storage.s3.rules import error_code

#: Default largest wait before the second attempt, in seconds (botocore's base).
DEFAULT_BACKOFF_BASE = 1.0
#: Largest wait between two attempts, in seconds (botocore's ``_MAX_BACKOFF``).
DEFAULT_BACKOFF_CAP = 20.0

#: Statuses retried whatever the error code: botocore's transient ones, plus 429.
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
#: botocore's ``TransientRetryableChecker`` codes.
TRANSIENT_CODES = frozenset(
    {"RequestTimeout", "RequestTimeoutException", "PriorRequestNotComplete"}
)
#: botocore's ``ThrottledRetryableChecker`` codes.
THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
    }
)
RETRY_CODES = TRANSIENT_CODES | THROTTLING_CODES

#: Capacity of a store's retry quota (botocore ``RetryQuota.INITIAL_CAPACITY``).
QUOTA_CAPACITY = 500
#: Quota a retry takes (botocore ``RetryQuotaChecker._RETRY_COST``).
RETRY_COST = 5
#: Quota a retry after a connect or read timeout takes (``_TIMEOUT_RETRY_REQUEST``).
TIMEOUT_RETRY_COST = 10
#: Quota a success that needed no retry gives back (``_NO_RETRY_INCREMENT``).
NO_RETRY_REFUND = 1
#: How the HTTP pools name a connect or read timeout at the start of a failure.
TIMEOUT_FAILURES = ("ConnectTimeoutError:", "ReadTimeoutError:", "WriteTimeoutError:")
#: Texts of a TLS certificate failure: retrying cannot make it pass.
CERTIFICATE_FAILURES = ("CertificateError", "SSLCertVerificationError", "CERTIFICATE_VERIFY_FAILED")

#: Answers that are outcomes of the operation (missing key, key exists, empty range),
#: never throttling: their body is not parsed for a retryable code.
_PLAIN_OUTCOMES = frozenset({304, 404, 412, 416})


class RetryQuota:
    """The retry budget of one store, shared by every thread and event loop using it
    (a change holds a lock for a few instructions, never waiting)."""

    def __init__(self, capacity: int = QUOTA_CAPACITY) -> None:
        self.capacity = capacity
        #: Units left (read without the lock; changed only under it).
        self.available = capacity
        self._lock = threading.Lock()

    def acquire(self, amount: int) -> bool:
        """Take ``amount`` units for a retry; False (nothing taken) when they are not there."""
        with self._lock:
            if amount > self.available:
                return False
            self.available -= amount
            return True

    def release(self, amount: int) -> None:
        """Give back ``amount`` units, never beyond the capacity."""
        with self._lock:
            self.available = min(self.capacity, self.available + amount)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded attempts, capped fully jittered exponential backoff and a retry quota
    (one per policy, so one per store); ``backoff_base`` doubles per attempt."""

    max_attempts: int = 5
    backoff_base: float = DEFAULT_BACKOFF_BASE
    backoff_cap: float = DEFAULT_BACKOFF_CAP
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)
    quota: RetryQuota = field(default_factory=RetryQuota, compare=False, repr=False)

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        return self.rng.random() * min(self.backoff_base * 2 ** (attempt - 1), self.backoff_cap)


def is_retryable(reply: Reply) -> bool:
    """Whether another attempt may get a different answer."""
    if isinstance(reply, TransportFailure):  # a refused certificate stays refused
        return not any(text in reply.error for text in CERTIFICATE_FAILURES)
    if reply.status in RETRY_STATUS:
        return True
    if reply.status < 300 or reply.status in _PLAIN_OUTCOMES:
        return False
    return error_code(reply)[0] in RETRY_CODES


def retry_cost(reply: Reply) -> int:
    """Quota units a retry after ``reply`` takes."""
    if isinstance(reply, TransportFailure) and reply.error.startswith(TIMEOUT_FAILURES):
        return TIMEOUT_RETRY_COST
    return RETRY_COST
