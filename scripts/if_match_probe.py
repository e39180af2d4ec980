"""How an S3 server answers a PutObject with If-Match (docs/s3-compatibility.md).

    python scripts/if_match_probe.py ENDPOINT_URL ACCESS_KEY SECRET_KEY

Creates a bucket of its own, stores one object, then PUTs it again with the
right ETag, a wrong one, and to a key that holds nothing, printing each answer.
"""

from __future__ import annotations

import sys
import uuid

import boto3
import botocore.exceptions


def main(url: str, access: str, secret: str) -> None:
    """Print how the server at ``url`` answers each conditional PUT."""
    client = boto3.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=access,
        aws_secret_access_key=secret,
    )
    bucket = "if-match-" + uuid.uuid4().hex[:8]
    client.create_bucket(Bucket=bucket)
    etag = client.put_object(Bucket=bucket, Key="k", Body=b"1")["ETag"]

    def put(key: str, if_match: str) -> str:
        try:
            client.put_object(Bucket=bucket, Key=key, Body=b"2", IfMatch=if_match)
        except botocore.exceptions.ClientError as exc:
            reply = exc.response
            return f"{reply['ResponseMetadata']['HTTPStatusCode']} {reply['Error']['Code']}"
        return "stored"

    print("right ETag:", put("k", etag))
    print("wrong ETag:", put("k", '"00000000000000000000000000000000"'))
    print("no object:", put("absent", etag))
    print("object now:", client.get_object(Bucket=bucket, Key="k")["Body"].read())


if __name__ == "__main__":
    main(*sys.argv[1:4])
