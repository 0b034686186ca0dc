"""Answers the hello, then answers every request with the id of the one after it."""

import json
import sys

hello = json.loads(sys.stdin.readline())
sys.stdout.write(json.dumps({"id": hello["id"], "ok": {"name": "out-of-order",
                                                        "protocol": 1}}) + "\n")
sys.stdout.flush()
for line in sys.stdin:
    request = json.loads(line)
    sys.stdout.write(json.dumps({"id": request["id"] + 1, "ok": None}) + "\n")
    sys.stdout.flush()
