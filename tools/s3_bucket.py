#!/usr/bin/env python
"""Make sure an S3 bucket exists on the S3 server of the environment (BRIDGE_S3_ENDPOINT,
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION, AWS_CA_BUNDLE: the env file of
tools/s3.sh). bridge.hpc.stage never creates buckets, so `make hybrid` and the hybrid playbook's
integration test make theirs with this first.

    tools/s3_bucket.py BUCKET
"""

import os
import sys

import boto3
from botocore.exceptions import ClientError


def ensure_bucket(name, environ=None):
    environ = os.environ if environ is None else environ
    s3 = boto3.client("s3", endpoint_url=environ["BRIDGE_S3_ENDPOINT"], region_name=environ.get("AWS_DEFAULT_REGION"),
                      verify=environ.get("AWS_CA_BUNDLE") or True)
    try:
        s3.head_bucket(Bucket=name)
        return False
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket", "NotFound"):
            raise
    s3.create_bucket(Bucket=name)
    return True


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    created = ensure_bucket(sys.argv[1])
    print("s3_bucket: %s %s" % (sys.argv[1], "created" if created else "exists"))
