#!/bin/sh
# LocalStack ready hook: runs inside the container once S3 accepts requests.
set -eu
awslocal s3 mb s3://agent-memory
awslocal s3 ls
