"""When the lean transport tries a request again, and how long it waits first."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from objstore_saver.storage.http.messages import Reply, TransportFailure
from objstore_saver.storage.s3.rules import error_code

#: Answers worth another attempt (the set botocore's standard mode retries).
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
RETRY_CODES = frozenset(
    {
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "RequestThrottled",
        "SlowDown",
        "InternalError",
    }
)
#: Retries of a create-only put that lost a race to another conditional write (HTTP 409).
CONFLICT_RETRIES = 5


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded attempts with capped, fully jittered exponential backoff.

    Args:
        max_attempts: Attempts per request, the first included.
        backoff_base: Largest wait before the second attempt, in seconds; it
            doubles per attempt.
        backoff_cap: Largest wait between two attempts, in seconds.
    """

    max_attempts: int = 5
    backoff_base: float = 0.5
    backoff_cap: float = 20.0
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        return self.rng.uniform(0, min(self.backoff_cap, self.backoff_base * 2 ** (attempt - 1)))


def is_retryable(reply: Reply) -> bool:
    """Whether another attempt may get a different answer."""
    if isinstance(reply, TransportFailure):
        return True
    if reply.status in RETRY_STATUS:
        return True
    return reply.status == 400 and error_code(reply)[0] in RETRY_CODES
