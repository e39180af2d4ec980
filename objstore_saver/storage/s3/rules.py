"""What S3's answers mean, for both transports: error codes and their vocabulary."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from objstore_saver.storage.http.messages import HttpResponse

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
