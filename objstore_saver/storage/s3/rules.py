"""What S3's answers mean, for both transports (so they cannot drift apart): error
codes, redirects, bucket names, and the errors built from them."""

from __future__ import annotations

import random
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from urllib.parse import urlsplit

from objstore_saver.errors import ConfigurationError, StorageError, StoreUnavailableError
from objstore_saver.storage.http.messages import HttpResponse, TransportFailure

_S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"

#: Error codes meaning the bucket as a whole cannot be used with these credentials.
UNAVAILABLE_CODES = frozenset(
    {
        "NoSuchBucket",
        "AccessDenied",
        "AllAccessDisabled",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
        "InvalidBucketName",
        "PermanentRedirect",
        "AuthorizationHeaderMalformed",
    }
)
UNAVAILABLE_STATUS = frozenset({301, 403})
#: GetObjectLockConfiguration's error codes for a bucket without Object Lock.
NO_OBJECT_LOCK_CODES = frozenset(
    {"ObjectLockConfigurationNotFoundError", "NoSuchObjectLockConfiguration"}
)

#: Where the ways to create a bucket are shown (an error naming a missing bucket points here).
CREATE_BUCKET_DOCS = "docs/configuration.md#create-a-bucket"

#: Retries of a create-only put that lost a race to another conditional write (HTTP 409).
CONFLICT_RETRIES = 5


def create_refused(status: int | None, code: str) -> bool:
    """A create-only put found the key taken (HTTP 412 ``PreconditionFailed``)."""
    return status == 412 or code == "PreconditionFailed"


def create_raced(status: int | None, code: str) -> bool:
    """A create-only put met another conditional write to the key in flight (HTTP 409):
    once it settles, another attempt gets 412 or succeeds, worth short waits."""
    return code == "ConditionalRequestConflict"


def conflict_wait(conflict: int, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry ``conflict + 1`` of a raced create-only put (jittered)."""
    return (rng or random).uniform(0, 0.05 * 2**conflict)


def key_missing(status: int | None, code: str) -> bool:
    """The answer to a GET says no object is stored at the key (not: no bucket)."""
    return code == "NoSuchKey" or (status == 404 and code != "NoSuchBucket")


def range_past_end(status: int | None, code: str) -> bool:
    """A ranged GET started at or past the object's end (HTTP 416): an empty read."""
    return status == 416 or code == "InvalidRange"


def answer_error(
    *,
    bucket: str,
    endpoint: str,
    location: str,
    operation: str,
    key: str | None,
    status: int | None,
    code: str,
    message: str = "",
    note: str = "",
) -> StorageError:
    """The error of an S3 error answer no rule above turned into a result:
    StoreUnavailableError when the bucket cannot be used (or a ``check`` failed)."""
    after = f"; {note}" if note else ""
    subject = f" of key {key!r}" if key is not None else ""
    if code == "NoSuchBucket" or (operation == "check" and status == 404):
        shown = f"HTTP {status}" if code == str(status) else f"{code}, HTTP {status}"
        on_aws = (urlsplit(endpoint).hostname or "").endswith(
            (".amazonaws.com", ".amazonaws.com.cn")
        )
        flag = "" if on_aws else f" --endpoint-url {endpoint}"
        return StoreUnavailableError(
            f"S3 bucket {bucket!r} at {endpoint} is unavailable: it does not exist "
            f"({operation}{subject}: {shown}); create it (e.g. aws s3 mb s3://{bucket}{flag}; "
            f"boto3 and MinIO's mc: {CREATE_BUCKET_DOCS}){after}"
        )
    if code in UNAVAILABLE_CODES or status in UNAVAILABLE_STATUS or operation == "check":
        return StoreUnavailableError(
            f"S3 bucket {bucket!r} at {endpoint} is unavailable ({operation}{subject}): "
            f"{code} (HTTP {status}){after}"
        )
    return StorageError(
        f"S3 {operation}{subject} in {location} failed: {code} (HTTP {status})"
        + (f": {message}" if message else "")
        + after
    )


def delete_refused(location: str, prefix: str, errors: Sequence[tuple[str, ...]]) -> StorageError:
    """The error for the per-key errors ``(full key, [version id,] code, message)``."""
    key, *_, code, message = errors[0]
    key = key.removeprefix(prefix)
    more = f" (and {len(errors) - 1} more keys)" if len(errors) > 1 else ""
    return StorageError(f"S3 delete of key {key!r} in {location} failed: {code}: {message}{more}")


#: The note of a check that could not open a connection to the endpoint (not retried).
UNREACHED_NOTE = (
    "not retried: no connection could be opened; start the server, or fix the endpoint "
    "(endpoint_url, AWS_ENDPOINT_URL_S3...)"
)


def unreached_note(reply: HttpResponse | TransportFailure) -> str:
    """The note of a failed check of the lean transport: what to fix when nothing connected."""
    if not isinstance(reply, TransportFailure) or reply.sent:
        return ""
    if reply.error.startswith(("CertificateError", "ProxyError")):
        return "not retried"
    return UNREACHED_NOTE


def unreachable_error(
    *, bucket: str, endpoint: str, operation: str, key: str | None, error: str, note: str = ""
) -> StoreUnavailableError:
    """The error for a request that got no answer (connection, TLS, timeout, credentials)."""
    after = f"; {note}" if note else ""
    subject = f" of key {key!r}" if key is not None else ""
    return StoreUnavailableError(
        f"S3 bucket {bucket!r} at {endpoint} is unavailable ({operation}{subject}): {error}{after}"
    )


def error_code(response: HttpResponse) -> tuple[str, str]:
    """``(code, message)`` of an S3 error answer; the status when there is no XML body."""
    if response.body:
        try:
            root = ET.fromstring(response.body)
        except ET.ParseError:
            return str(response.status), ""
        code = root.findtext("Code") or root.findtext(_S3_NS + "Code")
        message = root.findtext("Message") or root.findtext(_S3_NS + "Message") or ""
        if code:
            return code, message
    return str(response.status), ""


#: Statuses of a redirect to the bucket's region (botocore's ``is_redirect_status``).
REDIRECT_STATUS = frozenset({301, 302, 307})
#: botocore's ``validate_region_name``: what a region named by an answer must look like.
_REGION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?")


def is_wrong_region(response: HttpResponse) -> bool:
    """Whether the answer says the bucket is not in the region the request was signed for."""
    if response.status in REDIRECT_STATUS:
        return True
    # Only a 400 can name the region in its body: everyday 404 and 412 are not parsed.
    return response.status == 400 and error_code(response)[0] == "AuthorizationHeaderMalformed"


def redirect_region(response: HttpResponse) -> str | None:
    """The valid region a wrong-region answer names (header, else error XML), or ``None``."""
    if not is_wrong_region(response):
        return None
    region = response.headers.get("x-amz-bucket-region") or _error_field(response, "Region")
    if region is None or _REGION.fullmatch(region) is None:
        return None
    return region


def _error_field(response: HttpResponse, name: str) -> str | None:
    if not response.body:
        return None
    try:
        root = ET.fromstring(response.body)
    except ET.ParseError:
        return None
    return root.findtext(name) or root.findtext(_S3_NS + name)


#: Suffix of an S3 Express One Zone directory bucket's name.
DIRECTORY_BUCKET_SUFFIX = "--x-s3"


def check_bucket(bucket: str) -> None:
    """Refuse (ConfigurationError) an empty bucket name or a directory bucket's, which
    lists keys in no particular order."""
    if not bucket:
        raise ConfigurationError("bucket must not be empty")
    if bucket.endswith(DIRECTORY_BUCKET_SUFFIX):
        raise ConfigurationError(
            f"bucket {bucket!r} is an S3 Express One Zone directory bucket (its name ends "
            f"with {DIRECTORY_BUCKET_SUFFIX!r}): directory buckets list keys in no "
            "particular order, and the saver's latest-checkpoint lookup relies on "
            "ListObjectsV2 returning keys in ascending order; use a general purpose bucket"
        )
