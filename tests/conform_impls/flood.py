"""Answers the hello, then floods its stdout on the first request.

``flood.py`` writes one endless line without a newline; ``flood.py lines`` writes endless
newline-terminated lines that answer nothing that was asked.
"""

import json
import sys

hello = json.loads(sys.stdin.readline())
sys.stdout.write(json.dumps({"id": hello["id"], "ok": {"name": "flood", "protocol": 1}}) + "\n")
sys.stdout.flush()
sys.stdin.readline()
lines = sys.argv[1:] == ["lines"]
chunk = ("x" * 65535 + "\n") if lines else "x" * 65536
out = sys.stdout.buffer
data = chunk.encode()
while True:
    out.write(data)
    out.flush()
