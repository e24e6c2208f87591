#!/usr/bin/env python3
# s3tool.py: the test's own S3 client (botocore, independent of d9's libcurl code), against
# ENDPOINT with the peer's credentials (S3RVER/S3RVER).
#   s3tool.py ENDPOINT keys BUCKET            every key and its size, one "key size" a line
#   s3tool.py ENDPOINT get BUCKET KEY OUT     the object's bytes into OUT
#   s3tool.py ENDPOINT put BUCKET KEY FILE    FILE stored under KEY
import sys

import botocore.session

endpoint, cmd, bucket = sys.argv[1:4]
c = botocore.session.get_session().create_client(
    "s3", endpoint_url=endpoint, aws_access_key_id="S3RVER", aws_secret_access_key="S3RVER",
    region_name="us-east-1")
if cmd == "keys":
    token = None
    while True:
        kw = {"Bucket": bucket}
        if token:
            kw["ContinuationToken"] = token
        r = c.list_objects_v2(**kw)
        for o in r.get("Contents", []):
            print(o["Key"], o["Size"])
        token = r.get("NextContinuationToken")
        if not r.get("IsTruncated"):
            break
elif cmd == "get":
    with open(sys.argv[5], "wb") as f:
        f.write(c.get_object(Bucket=bucket, Key=sys.argv[4])["Body"].read())
elif cmd == "put":
    with open(sys.argv[5], "rb") as f:
        c.put_object(Bucket=bucket, Key=sys.argv[4], Body=f.read())
