"""What requests cost: the request classes of S3 operations and three providers' list prices.

The prices are data, in one place, with the day they were read; the report
turns requests (and, for S3 Express One Zone, bytes) per turn into dollars
per million turns with them. Storage per GB-month is left out on purpose: a
30-turn chat stores well under 1 MiB, whose monthly storage costs about a
hundredth of the requests that wrote it.

Request classes follow the providers' own split: **class A** are the writes
and listings (``PutObject``, ``CopyObject``, ``ListObjects``, ``POST``
requests such as ``DeleteObjects``), **class B** the reads (``GetObject``,
``HeadObject``, ``HeadBucket``); ``DeleteObject`` is free on all three. AWS
bills ``DeleteObjects`` as a ``POST`` (class A); Cloudflare's R2 page does
not name it, so it is counted as class A there too (an upper bound).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: The day the prices below were read from the providers' pages.
PRICES_AS_OF = "2026-12-05"

#: Operations by class, in the names of the metering proxy (``bench/proxy.py``)
#: and of :class:`~objstore_saver.MeteredStore` (``put``, ``get``, ...).
CLASS_A = frozenset(
    {
        "PutObject",
        "CopyObject",
        "ListObjects",
        "ListObjectsV2",
        "ListBuckets",
        "ListMultipartUploads",
        "DeleteObjects",
        "PostObject",
        "CreateMultipartUpload",
        "UploadPart",
        "UploadPartCopy",
        "CompleteMultipartUpload",
        "ListParts",
        "CreateBucket",
        "PutBucketConfig",
        "put",
        "list",
        "delete",
    }
)
CLASS_B = frozenset({"GetObject", "HeadObject", "HeadBucket", "get"})
FREE = frozenset({"DeleteObject", "DeleteBucket", "AbortMultipartUpload"})


@dataclass(frozen=True)
class PriceList:
    """One provider's request prices in US dollars.

    Args:
        name: How the report names it.
        class_a_per_million: Dollars per million class A requests.
        class_b_per_million: Dollars per million class B requests.
        upload_per_gb: Dollars per GB sent in requests (S3 Express One Zone).
        retrieval_per_gb: Dollars per GB received in answers (S3 Express One Zone).
        source: Where the prices were read.
    """

    name: str
    class_a_per_million: float
    class_b_per_million: float
    upload_per_gb: float = 0.0
    retrieval_per_gb: float = 0.0
    source: str = ""

    def dollars(self, class_a: float, class_b: float, sent: float, received: float) -> float:
        """Dollars for that many requests of each class and bytes each way."""
        return (
            class_a * self.class_a_per_million / 1e6
            + class_b * self.class_b_per_million / 1e6
            + sent / 1e9 * self.upload_per_gb
            + received / 1e9 * self.retrieval_per_gb
        )


PRICE_LISTS: tuple[PriceList, ...] = (
    PriceList(
        "S3 Standard",
        5.00,
        0.40,
        source="aws.amazon.com/s3/pricing, us-east-1: $0.005 per 1,000 PUT, COPY, POST, "
        "LIST; $0.0004 per 1,000 GET and others",
    ),
    PriceList(
        "S3 Express One Zone",
        1.13,
        0.03,
        upload_per_gb=0.0032,
        retrieval_per_gb=0.0006,
        source="aws.amazon.com/s3/pricing and the S3 FAQ, us-east-1: $0.00113 per 1,000 "
        "PUT, $0.00003 per 1,000 GET, $0.0032 per GB uploaded, $0.0006 per GB retrieved",
    ),
    PriceList(
        "R2 Standard",
        4.50,
        0.36,
        source="developers.cloudflare.com/r2/pricing: $4.50 per million class A, "
        "$0.36 per million class B, no egress charge",
    ),
)


def request_class(operation: str) -> str:
    """``"A"``, ``"B"`` or ``"free"`` for an operation name.

    Raises:
        ValueError: the operation is not in any class (a new request kind
            must be classified here before it is reported).
    """
    if operation in CLASS_A or operation.startswith("PutBucket"):
        return "A"
    if operation in CLASS_B or operation.startswith("GetBucket"):
        return "B"
    if operation in FREE:
        return "free"
    raise ValueError(f"operation {operation!r} has no request class in bench/pricing.py")


def by_class(requests: Mapping[str, float]) -> tuple[float, float]:
    """Class A and class B requests among ``requests`` (operation -> count)."""
    a = b = 0.0
    for operation, count in requests.items():
        kind = request_class(operation)
        if kind == "A":
            a += count
        elif kind == "B":
            b += count
    return a, b


def per_million_turns(
    requests_per_turn: Mapping[str, float], sent_per_turn: float, received_per_turn: float
) -> dict[str, float]:
    """Dollars per million turns under each price list (requests and billed bytes)."""
    a, b = by_class(requests_per_turn)
    m = 1e6
    return {
        p.name: p.dollars(a * m, b * m, sent_per_turn * m, received_per_turn * m)
        for p in PRICE_LISTS
    }
