#!/usr/bin/env python3
# sigcheck.py: verifies the SigV4 signature of every request the S3 peer logged (tests/s3/peer.js,
# one JSON line per request) independently of libcurl and s3rver, with botocore computing the
# signature expected from the same credentials (the test's own botocore requests are skipped).
# Prints one line per problem and, at the end, "checked N requests"; exits 1 on any problem.
# usage: sigcheck.py LOG KEY_ID SECRET [TOKEN] [REGION]
import json
import sys

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

log, key_id, secret = sys.argv[1:4]
token = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] else None
region = sys.argv[5] if len(sys.argv) > 5 else "us-east-1"
creds = Credentials(key_id, secret, token)
bad = n = 0
for line in open(log):
    r = json.loads(line)
    h = r["headers"]
    if h.get("user-agent", "").startswith("Botocore"):
        continue  # the test's own client (s3tool.py), not d9
    auth = h.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        print("unsigned request: %s %s" % (r["method"], r["url"]))
        bad += 1
        continue
    parts = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    signed = parts["SignedHeaders"].split(";")
    missing = [k for k in signed if k not in h]
    if missing:
        print("%s %s: signed headers not sent: %s" % (r["method"], r["url"], missing))
        bad += 1
    req = AWSRequest(method=r["method"], url="http://" + h["host"] + r["url"],
                     headers={k: h.get(k, "") for k in signed})
    req.context["timestamp"] = h["x-amz-date"]
    a = S3SigV4Auth(creds, "s3", region)
    canonical = a.canonical_request(req)
    want = a.signature(a.string_to_sign(req, canonical), req)
    n += 1
    if want != parts["Signature"]:
        print("%s %s: signature %s, botocore expects %s\ncanonical request:\n%s" % (
            r["method"], r["url"], parts["Signature"], want, canonical))
        bad += 1
    if token and h.get("x-amz-security-token") != token:
        print("%s %s: no session token sent" % (r["method"], r["url"]))
        bad += 1
print("checked %d requests" % n)
sys.exit(1 if bad else 0)
