"""Answers the hello, then reads requests and never answers; it also ignores SIGTERM."""

import json
import signal
import sys

signal.signal(signal.SIGTERM, signal.SIG_IGN)
hello = json.loads(sys.stdin.readline())
sys.stdout.write(json.dumps({"id": hello["id"], "ok": {"name": "hang", "protocol": 1}}) + "\n")
sys.stdout.flush()
for _line in sys.stdin:
    pass
