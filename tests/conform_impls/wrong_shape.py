"""Answers like a scheduler would, except that ready answers a string instead of a list."""

import json
import sys

for line in sys.stdin:
    request = json.loads(line)
    op = request["op"]
    if op == "hello":
        result = {"name": "wrong-shape", "protocol": 1}
    elif op == "ready":
        result = "every one of them"
    elif op == "submit":
        result = 1
    else:
        result = None
    sys.stdout.write(json.dumps({"id": request["id"], "ok": result}) + "\n")
    sys.stdout.flush()
    if op == "bye":
        break
