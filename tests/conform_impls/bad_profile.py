"""Answers the hello with a profile that contradicts itself (ready_order any with a limit)."""

import json
import sys

hello = json.loads(sys.stdin.readline())
sys.stdout.write(json.dumps({"id": hello["id"], "ok": {
    "name": "bad-profile", "protocol": 1, "profile": {"ready_order": "any"}}}) + "\n")
sys.stdout.flush()
sys.stdin.read()
